// ACL binding filters: what DescribeAcls selects and DeleteAcls removes.
//
// Mirrors Kafka's ResourcePatternFilter, AccessControlEntryFilter and AclBindingFilter. A
// nullopt name / principal / host and the ANY enum values match anything. Pattern type MATCH
// selects the bindings that would apply to a literal resource name: the literal name itself,
// the literal wildcard "*" and every prefixed pattern that is a prefix of the name. Pure; any
// core or thread.
#pragma once

#include <skiff/acl/errc.hpp>
#include <skiff/acl/model.hpp>
#include <skiff/core/result.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace skiff::acl {

struct resource_pattern_filter {
    resource_type type = resource_type::any;
    std::optional<std::string> name; // nullopt: any name
    pattern_type pattern = pattern_type::any;

    bool matches(const resource_pattern& p) const noexcept;
    // Kafka's matchesAtMostOne: false for an ANY/UNKNOWN type, no name, or a MATCH/UNKNOWN
    // pattern type. Pattern type ANY with a name counts as definite, as in Kafka.
    bool matches_at_most_one() const noexcept { return !find_indefinite_field(); }
    // Kafka's findIndefiniteField sentence ("Resource name is NULL."), nullopt when definite.
    std::optional<std::string_view> find_indefinite_field() const noexcept;
    bool is_unknown() const noexcept { return type == resource_type::unknown || pattern == pattern_type::unknown; }

    friend bool operator==(const resource_pattern_filter&, const resource_pattern_filter&) = default;
};

struct access_control_entry_filter {
    std::optional<std::string> principal; // nullopt: any principal (compared as a string)
    std::optional<std::string> host;      // nullopt: any host (compared as a string)
    operation op = operation::any;
    permission perm = permission::any;

    bool matches(const access_control_entry& e) const noexcept;
    bool matches_at_most_one() const noexcept { return !find_indefinite_field(); }
    std::optional<std::string_view> find_indefinite_field() const noexcept;
    bool is_unknown() const noexcept { return op == operation::unknown || perm == permission::unknown; }

    friend bool operator==(const access_control_entry_filter&, const access_control_entry_filter&) = default;
};

struct acl_binding_filter {
    resource_pattern_filter pattern;
    access_control_entry_filter entry;

    bool matches(const acl_binding& b) const noexcept { return pattern.matches(b.pattern) && entry.matches(b.entry); }
    bool matches_at_most_one() const noexcept { return pattern.matches_at_most_one() && entry.matches_at_most_one(); }
    std::optional<std::string_view> find_indefinite_field() const noexcept;
    bool is_unknown() const noexcept { return pattern.is_unknown() || entry.is_unknown(); }

    // AclBindingFilter.ANY: every binding.
    static acl_binding_filter any() { return {}; }
    // AclBinding.toFilter: exactly this binding.
    static acl_binding_filter exactly(const acl_binding& b);

    friend bool operator==(const acl_binding_filter&, const acl_binding_filter&) = default;
};

// DescribeAcls / DeleteAcls: errc::invalid_filter when the filter has UNKNOWN parts, with the
// message of AclControlManager.validateFilter ("Unknown patternFilter." / "Unknown
// entryFilter."). The broker answers INVALID_REQUEST for that filter alone.
result<void, acl_error> validate_filter(const acl_binding_filter& f);

} // namespace skiff::acl
