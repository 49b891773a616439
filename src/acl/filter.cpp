// Kafka's ResourcePatternFilter / AccessControlEntryFilter / AclBindingFilter semantics.
#include <skiff/acl/filter.hpp>

namespace skiff::acl {

bool resource_pattern_filter::matches(const resource_pattern& p) const noexcept {
    // ResourcePatternFilter.matches, step by step.
    if (type != resource_type::any && type != p.type) return false;
    if (pattern != pattern_type::any && pattern != pattern_type::match && pattern != p.pattern) return false;
    if (!name) return true;
    // ANY, or the very pattern type asked for: the name is compared exactly ("*" and prefixes
    // are not expanded), so DeleteAcls with a LITERAL filter for "foo" leaves "*" alone.
    if (pattern == pattern_type::any || pattern == p.pattern) return *name == p.name;
    // MATCH: the stored patterns that would apply to the literal name.
    switch (p.pattern) {
    case pattern_type::literal: return *name == p.name || p.name == wildcard_resource;
    case pattern_type::prefixed: return std::string_view(*name).starts_with(p.name);
    default: return false; // Kafka throws; a stored binding is never of another type
    }
}

std::optional<std::string_view> resource_pattern_filter::find_indefinite_field() const noexcept {
    if (type == resource_type::any) return "Resource type is ANY.";
    if (type == resource_type::unknown) return "Resource type is UNKNOWN.";
    if (!name) return "Resource name is NULL.";
    if (pattern == pattern_type::match) return "Resource pattern type is MATCH.";
    if (pattern == pattern_type::unknown) return "Resource pattern type is UNKNOWN.";
    return std::nullopt;
}

bool access_control_entry_filter::matches(const access_control_entry& e) const noexcept {
    // AccessControlEntryFilter.matches: plain equality, no wildcard expansion ("User:*" in a
    // filter selects the wildcard bindings, not every principal).
    if (principal && *principal != e.principal) return false;
    if (host && *host != e.host) return false;
    if (op != operation::any && op != e.op) return false;
    return perm == permission::any || perm == e.perm;
}

std::optional<std::string_view> access_control_entry_filter::find_indefinite_field() const noexcept {
    if (!principal) return "Principal is NULL";
    if (!host) return "Host is NULL";
    if (op == operation::any) return "Operation is ANY";
    if (op == operation::unknown) return "Operation is UNKNOWN";
    if (perm == permission::any) return "Permission type is ANY";
    if (perm == permission::unknown) return "Permission type is UNKNOWN";
    return std::nullopt;
}

std::optional<std::string_view> acl_binding_filter::find_indefinite_field() const noexcept {
    auto f = pattern.find_indefinite_field();
    if (f) return f;
    return entry.find_indefinite_field();
}

acl_binding_filter acl_binding_filter::exactly(const acl_binding& b) {
    return acl_binding_filter{resource_pattern_filter{b.pattern.type, b.pattern.name, b.pattern.pattern},
                              access_control_entry_filter{b.entry.principal, b.entry.host, b.entry.op, b.entry.perm}};
}

result<void, acl_error> validate_filter(const acl_binding_filter& f) {
    // AclControlManager.validateFilter.
    if (f.pattern.is_unknown()) return failure{acl_error{errc::invalid_filter, "Unknown patternFilter."}};
    if (f.entry.is_unknown()) return failure{acl_error{errc::invalid_filter, "Unknown entryFilter."}};
    return ok();
}

} // namespace skiff::acl
