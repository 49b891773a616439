#include <skiff/etcd/errc.hpp>

#include <fmt/format.h>

#include <string>

namespace skiff::etcd {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::unavailable: return "unavailable";
    case errc::timeout: return "timeout";
    case errc::cancelled: return "cancelled";
    case errc::bad_response: return "bad_response";
    case errc::lease_not_found: return "lease_not_found";
    case errc::compacted: return "compacted";
    case errc::invalid_argument: return "invalid_argument";
    }
    return "unknown";
}

namespace {

class etcd_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.etcd"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::unavailable: return "no etcd endpoint is available";
        case errc::timeout: return "etcd request timed out";
        case errc::cancelled: return "etcd request cancelled";
        case errc::bad_response: return "etcd answer could not be understood";
        case errc::lease_not_found: return "etcd lease expired or was revoked";
        case errc::compacted: return "etcd revision was compacted";
        case errc::invalid_argument: return "etcd refused the request as malformed";
        }
        return fmt::format("unknown skiff.etcd error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const etcd_category category;
    return category;
}

} // namespace skiff::etcd
