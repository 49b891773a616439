// acl::errc as a std::error_category.
#include <skiff/acl/errc.hpp>

#include <fmt/format.h>

namespace skiff::acl {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::invalid_binding: return "invalid_binding";
    case errc::invalid_filter: return "invalid_filter";
    }
    return "unknown";
}

std::int16_t kafka_error_code(errc e) noexcept {
    // AclControlManager.validateNewAcl / validateFilter and AclApis throw
    // InvalidRequestException for every one of these.
    (void)e;
    return invalid_request_code;
}

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.acl"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::invalid_binding: return "invalid ACL binding";
        case errc::invalid_filter: return "invalid ACL binding filter";
        }
        return fmt::format("unknown skiff.acl error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::acl
