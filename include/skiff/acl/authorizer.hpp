// The authorizer: the set of ACL bindings and Kafka's decision for one request.
//
// Decides as Kafka's StandardAuthorizer (StandardAuthorizerData.authorize / findAclRule /
// findResult), docs/acl.md has the rules with their sources. In short: super users are always
// allowed; otherwise every binding whose resource applies (the literal name, the literal "*",
// every prefixed pattern that is a prefix of the name) and whose principal (exact or "User:*")
// and host (exact or "*") match is considered; one matching DENY denies, else one matching
// ALLOW allows; with no binding on those resources at all the answer is
// allow_everyone_if_no_acl_found, with bindings but none matching it is deny.
//
// Lookups cost one hash lookup for the literal name, one for "*", and a walk over a sorted map
// that visits only the prefixed patterns that are prefixes of the name (plus at most one step
// per character), so decide() does not depend on the number of bindings of other resources.
//
// Pure and synchronous. Not synchronized: const members may run concurrently with each other,
// never with a mutation. The broker keeps one copy per core (the type is copyable) and applies
// each change to every copy, or swaps an immutable shared copy; either way on any core.
#pragma once

#include <skiff/acl/errc.hpp>
#include <skiff/acl/filter.hpp>
#include <skiff/acl/model.hpp>
#include <skiff/core/result.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace skiff::acl {

enum class decision : std::uint8_t { deny, allow };

// Which of Kafka's MatchingRules decided (SuperUserRule, MatchingAclRule, DefaultRule), for
// audit logs.
enum class rule : std::uint8_t {
    super_user,        // the principal is in super.users
    allow_acl,         // a matching ALLOW binding, and no matching DENY
    deny_acl,          // a matching DENY binding
    no_acl_found,      // no binding on the resource at all: allow_everyone_if_no_acl_found
    no_matching_allow, // bindings on the resource, none for this principal/host/operation
    invalid_action,    // operation or resource type UNKNOWN/ANY: always denied
};
std::string_view to_string(rule r) noexcept;

struct verdict {
    decision result = decision::deny;
    rule why = rule::invalid_action;
    std::optional<acl_binding> acl; // the deciding binding for allow_acl / deny_acl
};

// "User:alice;User:bob" (Kafka's super.users: ';'-separated, blanks around entries ignored).
// nullopt when an entry is not "Type:name".
std::optional<std::set<std::string, std::less<>>> parse_super_users(std::string_view list);

namespace detail {
struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using entries = std::vector<access_control_entry>;
// The bindings of one resource type: literal names hashed, prefixes sorted for the walk.
struct type_index {
    std::unordered_map<std::string, entries, string_hash, std::equal_to<>> literal;
    std::map<std::string, entries, std::less<>> prefixed;
};
} // namespace detail

class authorizer {
public:
    authorizer() = default;

    // super.users: principals ("User:admin") allowed everything, whatever the bindings say.
    void set_super_users(std::set<std::string, std::less<>> principals) { _super_users = std::move(principals); }
    const std::set<std::string, std::less<>>& super_users() const noexcept { return _super_users; }
    bool is_super_user(std::string_view principal) const { return _super_users.contains(principal); }

    // allow.everyone.if.no.acl.found (default false, as in Kafka).
    void set_allow_everyone_if_no_acl_found(bool v) noexcept { _allow_everyone = v; }
    bool allow_everyone_if_no_acl_found() const noexcept { return _allow_everyone; }

    // CreateAcls: validate_new_binding's refusal, else true when added and false when the
    // same binding was already there (Kafka answers success for both).
    result<bool, acl_error> add(const acl_binding& b);
    // True when b was present (and is now gone).
    bool remove(const acl_binding& b);
    // DeleteAcls: removes and returns (sorted) every binding f matches. Validate f first
    // (validate_filter); an UNKNOWN filter matches nothing here.
    std::vector<acl_binding> remove_matching(const acl_binding_filter& f);
    // Loading the store: every binding validated first; on a refusal nothing changes and the
    // message names the binding's index ("acls[3]: Invalid operation ANY"). Duplicates collapse.
    result<void, acl_error> replace_all(const std::vector<acl_binding>& bindings);
    void clear();

    // DescribeAcls: the bindings f matches, sorted. A linear scan, as Kafka's AclCache.acls.
    std::vector<acl_binding> acls(const acl_binding_filter& f) const;
    const std::set<acl_binding>& bindings() const noexcept { return _bindings; }
    std::size_t size() const noexcept { return _bindings.size(); }

    // May `principal` ("User:alice") connected from `host` (the peer's IP as text, compared
    // as a string with the bindings' hosts) do `op` on the literal resource (type, name)?
    // UNKNOWN/ANY operation or type: deny. Never fails and never allocates.
    decision decide(std::string_view principal, std::string_view host, operation op, resource_type type,
                    std::string_view name) const;
    // The same with the rule and binding that decided, for audit logs.
    verdict explain(std::string_view principal, std::string_view host, operation op, resource_type type,
                    std::string_view name) const;

    // Kafka's Authorizer.authorizeByResourceType: allow when the principal may do `op` on at
    // least one resource of `type` (Kafka uses it for IDEMPOTENT_WRITE's fallback to WRITE on
    // some topic / transactional id). Exactly Kafka's default method: first decide() on the
    // name "hardcode" (so super users and allow_everyone_if_no_acl_found apply), then allow if
    // an ALLOW of op (or ALL) on "*" matches, or on a literal name / prefix that no DENY
    // literal of the same name or DENY prefix of it covers. Implied operations do not apply.
    // Linear in the bindings of `type`.
    decision any_allowed(std::string_view principal, std::string_view host, operation op, resource_type type) const;

private:
    struct hit; // the deciding rule, with pointers into the index instead of copies
    hit evaluate(std::string_view principal, std::string_view host, operation op, resource_type type,
                 std::string_view name) const;
    void index_add(const acl_binding& b);
    void index_remove(const acl_binding& b);

    std::set<acl_binding> _bindings;
    std::array<detail::type_index, 8> _index; // by resource_type code
    std::set<std::string, std::less<>> _super_users;
    bool _allow_everyone = false;
};

} // namespace skiff::acl
