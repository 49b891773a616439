// CreateAcls validation: AclApis.handleCreateAcls + AclControlManager.validateNewAcl, plus
// the principal and host checks skiff adds (include/skiff/acl/validate.hpp says why).
#include <skiff/acl/validate.hpp>

#include <skiff/core/printable.hpp>

#include <fmt/format.h>

#include <arpa/inet.h>

#include <string>

namespace skiff::acl {

namespace {

failure<acl_error> refuse(std::string message) {
    return failure{acl_error{errc::invalid_binding, std::move(message)}};
}

} // namespace

bool valid_host(std::string_view host) noexcept {
    if (host == wildcard_host) return true;
    // inet_pton needs a NUL-terminated string; the longest IPv6 text is 45 characters.
    char buf[64];
    // An embedded NUL would end the string early for inet_pton ("1.2.3.4\0junk").
    if (host.empty() || host.size() >= sizeof buf || host.find('\0') != std::string_view::npos) return false;
    host.copy(buf, host.size());
    buf[host.size()] = '\0';
    unsigned char addr[16];
    return inet_pton(AF_INET, buf, addr) == 1 || inet_pton(AF_INET6, buf, addr) == 1;
}

result<void, acl_error> validate_new_binding(const acl_binding& b) {
    const auto& p = b.pattern;
    const auto& e = b.entry;
    // AclControlManager.validateNewAcl (and CreateAclsRequest.validate for UNKNOWN).
    if (p.type == resource_type::unknown || p.type == resource_type::any)
        return refuse(fmt::format("Invalid resourceType {}", enum_name(p.type)));
    if (p.pattern != pattern_type::literal && p.pattern != pattern_type::prefixed)
        return refuse(fmt::format("Invalid patternType {}", enum_name(p.pattern)));
    if (e.op == operation::unknown || e.op == operation::any)
        return refuse(fmt::format("Invalid operation {}", enum_name(e.op)));
    if (e.perm != permission::deny && e.perm != permission::allow)
        return refuse(fmt::format("Invalid permissionType {}", enum_name(e.perm)));
    // AclApis.handleCreateAcls.
    if (p.name.empty()) return refuse("Invalid empty resource name");
    if (p.type == resource_type::cluster && p.name != cluster_name)
        return refuse(fmt::format("The only valid name for the CLUSTER resource is {}", cluster_name));
    // skiff's own: an ACL that could never match is refused instead of silently stored.
    if (!parse_principal(e.principal))
        return refuse(fmt::format("Invalid principal '{}': expected principalType:principalName",
                                  printable(e.principal, 128)));
    if (!valid_host(e.host))
        return refuse(fmt::format("Invalid host '{}': expected * or an IP address", printable(e.host, 128)));
    return ok();
}

} // namespace skiff::acl
