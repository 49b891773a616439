// The authorizer's index and decision (Kafka's StandardAuthorizerData and AclCache).
#include <skiff/acl/authorizer.hpp>
#include <skiff/acl/validate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace skiff::acl {

std::string_view to_string(rule r) noexcept {
    switch (r) {
    case rule::super_user: return "SuperUser";
    case rule::allow_acl: return "MatchingAllowAcl";
    case rule::deny_acl: return "MatchingDenyAcl";
    case rule::no_acl_found: return "NoAclFound";
    case rule::no_matching_allow: return "NoMatchingAllowAcl";
    case rule::invalid_action: return "InvalidAction";
    }
    return "Unknown";
}

std::optional<std::set<std::string, std::less<>>> parse_super_users(std::string_view list) {
    std::set<std::string, std::less<>> out;
    while (!list.empty()) {
        auto semi = list.find(';');
        auto item = list.substr(0, semi);
        list = semi == std::string_view::npos ? std::string_view{} : list.substr(semi + 1);
        // StandardAuthorizer.getConfiguredSuperUsers trims each entry and skips empty ones.
        while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
        if (item.empty()) continue;
        if (!parse_principal(item)) return std::nullopt;
        out.emplace(item);
    }
    return out;
}

namespace {

bool is_action_valid(operation op, resource_type type) noexcept {
    return op != operation::unknown && op != operation::any && type != resource_type::unknown &&
           type != resource_type::any;
}

std::size_t slot(resource_type t) noexcept { return static_cast<std::size_t>(code(t)) & 7u; }

// StandardAuthorizerData.findResult without the principal/host part: whether entry e speaks
// about op at all. ALL covers every operation, for ALLOW and DENY alike. The implications
// (READ/WRITE/DELETE/ALTER => DESCRIBE, ALTER_CONFIGS => DESCRIBE_CONFIGS) hold for ALLOW
// only: a DENY of READ does not deny DESCRIBE.
bool operation_matches(const access_control_entry& e, operation op) noexcept {
    if (e.op == operation::all) return true;
    if (e.perm != permission::allow) return e.op == op;
    switch (op) {
    case operation::describe:
        return e.op == operation::describe || e.op == operation::read || e.op == operation::write ||
               e.op == operation::del || e.op == operation::alter;
    case operation::describe_configs: return e.op == operation::describe_configs || e.op == operation::alter_configs;
    default: return e.op == op;
    }
}

// StandardAuthorizerData.matchingPrincipals: the session's principal and User:*; hosts exact
// or "*". Both compared as strings, as Kafka compares KafkaPrincipal (type, name) pairs.
bool entry_matches(const access_control_entry& e, std::string_view principal, std::string_view host) noexcept {
    return (e.principal == principal || e.principal == wildcard_principal) &&
           (e.host == wildcard_host || e.host == host);
}

std::size_t common_prefix(std::string_view a, std::string_view b) noexcept {
    std::size_t n = std::min(a.size(), b.size()), i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return i;
}

} // namespace

struct authorizer::hit {
    rule why = rule::invalid_action;
    const access_control_entry* entry = nullptr;
    const std::string* name = nullptr; // the deciding binding's resource name
    pattern_type pattern = pattern_type::literal;
};

namespace {

// MatchingRuleBuilder: a DENY ends the search; the last ALLOW seen is kept; whether any
// binding existed on a matching resource decides between DefaultRule and DENY_RULE.
struct rule_builder {
    std::string_view principal;
    std::string_view host;
    operation op;
    bool has_resource_acls = false;
    const access_control_entry* deny = nullptr;
    const access_control_entry* allow = nullptr;
    const std::string* deny_name = nullptr;
    const std::string* allow_name = nullptr;
    pattern_type deny_pattern = pattern_type::literal;
    pattern_type allow_pattern = pattern_type::literal;

    // Returns true once a DENY is found (checkSection returns there too).
    bool visit(const detail::entries& es, const std::string& name, pattern_type pt) noexcept {
        if (es.empty()) return false;
        has_resource_acls = true;
        for (const auto& e : es) {
            if (!entry_matches(e, principal, host) || !operation_matches(e, op)) continue;
            if (e.perm == permission::deny) {
                deny = &e;
                deny_name = &name;
                deny_pattern = pt;
                return true;
            }
            allow = &e;
            allow_name = &name;
            allow_pattern = pt;
        }
        return false;
    }
};

} // namespace

authorizer::hit authorizer::evaluate(std::string_view principal, std::string_view host, operation op,
                                     resource_type type, std::string_view name) const {
    if (!is_action_valid(op, type)) return hit{rule::invalid_action};
    // StandardAuthorizerData.authorize: super users first, before any binding is looked at,
    // so not even a DENY applies to them.
    if (_super_users.contains(principal)) return hit{rule::super_user};

    const auto& idx = _index[slot(type)];
    rule_builder rb{principal, host, op};
    auto done = [&]() -> bool { return rb.deny != nullptr; };

    // The literal name itself.
    if (auto it = idx.literal.find(name); it != idx.literal.end()) rb.visit(it->second, it->first, pattern_type::literal);

    // Every prefixed pattern that is a prefix of name: findAclRule's walk. The greatest key
    // <= candidate is either a prefix of candidate (a match; continue below it) or diverges
    // from candidate at index c, and then no key longer than c can be a prefix of candidate
    // (it would sort between that key and candidate), so candidate shrinks to its first c
    // characters. Each step shortens candidate, so at most name.size() steps.
    std::string_view candidate = name;
    while (!done() && !candidate.empty() && !idx.prefixed.empty()) {
        auto it = idx.prefixed.upper_bound(candidate);
        if (it == idx.prefixed.begin()) break;
        --it;
        std::string_view key = it->first;
        auto c = common_prefix(key, candidate);
        if (c == key.size()) {
            rb.visit(it->second, it->first, pattern_type::prefixed);
            if (key.empty()) break;
            candidate = key.substr(0, key.size() - 1);
        } else {
            candidate = candidate.substr(0, c);
        }
    }

    // The wildcard literal "*" (findAclRule's second section).
    if (!done() && name != wildcard_resource) {
        if (auto it = idx.literal.find(wildcard_resource); it != idx.literal.end())
            rb.visit(it->second, it->first, pattern_type::literal);
    }

    if (rb.deny) return hit{rule::deny_acl, rb.deny, rb.deny_name, rb.deny_pattern};
    if (rb.allow) return hit{rule::allow_acl, rb.allow, rb.allow_name, rb.allow_pattern};
    return hit{rb.has_resource_acls ? rule::no_matching_allow : rule::no_acl_found};
}

namespace {

decision decision_of(rule why, bool allow_everyone) noexcept {
    switch (why) {
    case rule::super_user:
    case rule::allow_acl: return decision::allow;
    case rule::no_acl_found: return allow_everyone ? decision::allow : decision::deny;
    default: return decision::deny;
    }
}

} // namespace

decision authorizer::decide(std::string_view principal, std::string_view host, operation op, resource_type type,
                            std::string_view name) const {
    return decision_of(evaluate(principal, host, op, type, name).why, _allow_everyone);
}

verdict authorizer::explain(std::string_view principal, std::string_view host, operation op, resource_type type,
                            std::string_view name) const {
    auto h = evaluate(principal, host, op, type, name);
    verdict v{decision_of(h.why, _allow_everyone), h.why, std::nullopt};
    if (h.entry) v.acl = acl_binding{resource_pattern{type, *h.name, h.pattern}, *h.entry};
    return v;
}

decision authorizer::any_allowed(std::string_view principal, std::string_view host, operation op,
                                 resource_type type) const {
    // SecurityUtils.authorizeByResourceTypeCheckArgs throws; a refusal is the safe answer.
    if (!is_action_valid(op, type)) return decision::deny;
    // Authorizer.authorizeByResourceType: "Check a hard-coded name to ensure that super users
    // are granted access regardless of DENY ACLs."
    if (decide(principal, host, op, type, "hardcode") == decision::allow) return decision::allow;

    std::unordered_set<std::string_view> deny_literal, deny_prefixed, allow_literal, allow_prefixed;
    bool wildcard_allow = false;
    // Kafka matches op exactly or ALL here: no implied operations.
    auto relevant = [&](const access_control_entry& e) {
        return (e.host == host || e.host == wildcard_host) &&
               (e.principal == principal || e.principal == wildcard_principal) &&
               (e.op == op || e.op == operation::all);
    };
    const auto& idx = _index[slot(type)];
    for (const auto& kv : idx.literal) {
        for (const auto& e : kv.second) {
            if (!relevant(e)) continue;
            if (e.perm == permission::deny) {
                // "If wildcard deny exists, return deny directly"
                if (kv.first == wildcard_resource) return decision::deny;
                deny_literal.insert(kv.first);
            } else if (e.perm == permission::allow) {
                if (kv.first == wildcard_resource)
                    wildcard_allow = true;
                else
                    allow_literal.insert(kv.first);
            }
        }
    }
    for (const auto& kv : idx.prefixed) {
        for (const auto& e : kv.second) {
            if (!relevant(e)) continue;
            if (e.perm == permission::deny)
                deny_prefixed.insert(kv.first);
            else if (e.perm == permission::allow)
                allow_prefixed.insert(kv.first);
        }
    }
    if (wildcard_allow) return decision::allow;
    // An allowed name or prefix counts unless a DENY prefix of it (or, for a literal, a DENY
    // literal of the same name) dominates it.
    auto dominated = [&](std::string_view s) {
        for (std::size_t n = 1; n <= s.size(); ++n)
            if (deny_prefixed.contains(s.substr(0, n))) return true;
        return false;
    };
    for (auto s : allow_literal)
        if (!deny_literal.contains(s) && !dominated(s)) return decision::allow;
    for (auto s : allow_prefixed)
        if (!dominated(s)) return decision::allow;
    return decision::deny;
}

void authorizer::index_add(const acl_binding& b) {
    auto& idx = _index[slot(b.pattern.type)];
    if (b.pattern.pattern == pattern_type::prefixed)
        idx.prefixed[b.pattern.name].push_back(b.entry);
    else
        idx.literal[b.pattern.name].push_back(b.entry);
}

void authorizer::index_remove(const acl_binding& b) {
    auto& idx = _index[slot(b.pattern.type)];
    auto drop = [&](auto& map) {
        auto it = map.find(b.pattern.name);
        if (it == map.end()) return;
        auto& es = it->second;
        es.erase(std::remove(es.begin(), es.end(), b.entry), es.end());
        // An empty vector would count as "a binding exists here" (has_resource_acls).
        if (es.empty()) map.erase(it);
    };
    if (b.pattern.pattern == pattern_type::prefixed)
        drop(idx.prefixed);
    else
        drop(idx.literal);
}

result<bool, acl_error> authorizer::add(const acl_binding& b) {
    auto v = validate_new_binding(b);
    if (!v) return failure{std::move(v).error()};
    if (!_bindings.insert(b).second) return false;
    index_add(b);
    return true;
}

bool authorizer::remove(const acl_binding& b) {
    if (_bindings.erase(b) == 0) return false;
    index_remove(b);
    return true;
}

std::vector<acl_binding> authorizer::remove_matching(const acl_binding_filter& f) {
    auto gone = acls(f);
    for (const auto& b : gone) remove(b);
    return gone;
}

result<void, acl_error> authorizer::replace_all(const std::vector<acl_binding>& bindings) {
    for (std::size_t i = 0; i < bindings.size(); ++i) {
        auto v = validate_new_binding(bindings[i]);
        if (!v) {
            auto e = std::move(v).error();
            e.message = fmt::format("acls[{}]: {}", i, e.message);
            return failure{std::move(e)};
        }
    }
    clear();
    for (const auto& b : bindings)
        if (_bindings.insert(b).second) index_add(b);
    return ok();
}

void authorizer::clear() {
    _bindings.clear();
    for (auto& idx : _index) {
        idx.literal.clear();
        idx.prefixed.clear();
    }
}

std::vector<acl_binding> authorizer::acls(const acl_binding_filter& f) const {
    std::vector<acl_binding> out;
    if (f.is_unknown()) return out;
    for (const auto& b : _bindings)
        if (f.matches(b)) out.push_back(b);
    return out;
}

} // namespace skiff::acl
