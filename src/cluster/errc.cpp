#include <skiff/cluster/errc.hpp>

namespace skiff::cluster {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::unavailable: return "unavailable";
    case errc::already_live: return "already_live";
    case errc::lost: return "lost";
    case errc::lease_lost: return "lease_lost";
    case errc::bad_record: return "bad_record";
    case errc::cancelled: return "cancelled";
    }
    return "unknown";
}

namespace {
class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.cluster"; }
    std::string message(int c) const override { return to_string(static_cast<errc>(c)); }
};
} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::cluster
