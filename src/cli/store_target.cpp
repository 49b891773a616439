#include "store_target.hpp"

#include <skiff/storage/local_store.hpp>
#include <skiff/storage/s3_store.hpp>

#include <utility>

namespace skiff::cli {

result<store_target, store_target_error> open_store_target(const std::string& target, const std::string& default_ns,
                                                           const s3_flags& flags) {
    store_target t;
    t.ns = default_ns;
    if (target.rfind("s3://", 0) == 0) {
        auto rest = target.substr(5);
        auto slash = rest.find('/');
        std::string bucket = rest.substr(0, slash);
        if (slash != std::string::npos && slash + 1 < rest.size()) t.ns = rest.substr(slash + 1);
        while (!t.ns.empty() && t.ns.back() == '/') t.ns.pop_back();
        auto cfg = make_s3_config(flags);
        if (!cfg) return failure{store_target_error{1, cfg.error()}};
        auto c = s3::client::create(std::move(*cfg));
        if (!c) return failure{store_target_error{1, c.error()}};
        t.client = std::move(*c);
        auto s = storage::s3_store::create(*t.client, "s3://" + bucket);
        if (!s) return failure{store_target_error{2, s.error().message}};
        t.store = std::move(*s);
    } else {
        auto s = storage::local_store::create(target);
        if (!s) return failure{store_target_error{1, s.error().message}};
        t.store = std::move(*s);
    }
    if (t.ns.empty()) t.ns = "default";
    return t;
}

} // namespace skiff::cli
