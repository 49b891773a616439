// The authorizer's decision (Kafka's StandardAuthorizerData rules) and its binding set.
#include <skiff/acl/authorizer.hpp>

#include <catch2/catch.hpp>

#include <random>

using namespace skiff::acl;

namespace {

constexpr auto allow = decision::allow;
constexpr auto deny = decision::deny;

acl_binding bind(resource_type t, std::string name, pattern_type p, std::string principal, operation op,
                 permission perm, std::string host = "*") {
    return {{t, std::move(name), p}, {std::move(principal), std::move(host), op, perm}};
}

acl_binding topic(std::string name, std::string principal, operation op, permission perm = permission::allow,
                  pattern_type p = pattern_type::literal, std::string host = "*") {
    return bind(resource_type::topic, std::move(name), p, std::move(principal), op, perm, std::move(host));
}

void add(authorizer& a, const acl_binding& b) {
    auto r = a.add(b);
    REQUIRE(r);
}

decision read_topic(const authorizer& a, std::string_view principal, std::string_view name,
                    std::string_view host = "10.0.0.1") {
    return a.decide(principal, host, operation::read, resource_type::topic, name);
}

} // namespace

TEST_CASE("super users are allowed whatever the ACLs say", "[acl][authorizer]") {
    authorizer a;
    a.set_super_users({"User:admin"});
    add(a, topic("t", "User:admin", operation::all, permission::deny));
    add(a, topic("*", "User:*", operation::all, permission::deny));
    CHECK(read_topic(a, "User:admin", "t") == allow);
    CHECK(a.decide("User:admin", "1.2.3.4", operation::cluster_action, resource_type::cluster, "kafka-cluster") == allow);
    CHECK(a.explain("User:admin", "1.2.3.4", operation::write, resource_type::topic, "t").why == rule::super_user);
    CHECK(read_topic(a, "User:alice", "t") == deny);
    // "Group:admin" is not "User:admin".
    CHECK(read_topic(a, "Group:admin", "t") == deny);
}

TEST_CASE("super.users parses Kafka's list", "[acl][authorizer]") {
    auto s = parse_super_users(" User:admin ; User:CN=broker,O=x;;");
    REQUIRE(s);
    CHECK(*s == std::set<std::string, std::less<>>{"User:admin", "User:CN=broker,O=x"});
    CHECK_FALSE(parse_super_users("User:admin;bob"));
    CHECK(parse_super_users("")->empty());
}

TEST_CASE("DENY wins over ALLOW", "[acl][authorizer]") {
    authorizer a;
    add(a, topic("t", "User:alice", operation::read));
    CHECK(read_topic(a, "User:alice", "t") == allow);
    add(a, topic("t", "User:alice", operation::read, permission::deny));
    CHECK(read_topic(a, "User:alice", "t") == deny);
    auto v = a.explain("User:alice", "10.0.0.1", operation::read, resource_type::topic, "t");
    CHECK(v.why == rule::deny_acl);
    REQUIRE(v.acl);
    CHECK(v.acl->entry.perm == permission::deny);
    // A DENY for everyone on "*" beats a specific ALLOW too.
    authorizer b;
    add(b, topic("t", "User:alice", operation::read));
    add(b, topic("*", "User:*", operation::read, permission::deny));
    CHECK(read_topic(b, "User:alice", "t") == deny);
}

TEST_CASE("wildcard principal User:*", "[acl][authorizer]") {
    authorizer a;
    add(a, topic("t", "User:*", operation::read));
    CHECK(read_topic(a, "User:alice", "t") == allow);
    CHECK(read_topic(a, "User:bob", "t") == allow);
    add(a, topic("t", "User:bob", operation::read, permission::deny));
    CHECK(read_topic(a, "User:bob", "t") == deny);
    CHECK(read_topic(a, "User:alice", "t") == allow);
}

TEST_CASE("wildcard host vs a specific host", "[acl][authorizer]") {
    authorizer a;
    add(a, topic("t", "User:alice", operation::read, permission::allow, pattern_type::literal, "10.0.0.1"));
    CHECK(read_topic(a, "User:alice", "t", "10.0.0.1") == allow);
    CHECK(read_topic(a, "User:alice", "t", "10.0.0.2") == deny);
    add(a, topic("t", "User:bob", operation::read, permission::allow, pattern_type::literal, "*"));
    add(a, topic("t", "User:bob", operation::read, permission::deny, pattern_type::literal, "10.0.0.9"));
    CHECK(read_topic(a, "User:bob", "t", "10.0.0.2") == allow);
    CHECK(read_topic(a, "User:bob", "t", "10.0.0.9") == deny);
}

TEST_CASE("prefixed resources: every prefix applies; a DENY on a shorter prefix wins", "[acl][authorizer]") {
    authorizer a;
    add(a, topic("fin", "User:alice", operation::read, permission::allow, pattern_type::prefixed));
    add(a, topic("finance.", "User:bob", operation::read, permission::allow, pattern_type::prefixed));
    add(a, topic("finance.payroll", "User:carol", operation::read, permission::allow, pattern_type::prefixed));
    add(a, topic("fo", "User:bob", operation::read, permission::allow, pattern_type::prefixed));
    add(a, topic("finance.payrollx", "User:dave", operation::read)); // literal, not a prefix rule
    CHECK(read_topic(a, "User:alice", "finance.payroll.2024") == allow);
    CHECK(read_topic(a, "User:bob", "finance.payroll.2024") == allow);
    CHECK(read_topic(a, "User:carol", "finance.payroll.2024") == allow);
    CHECK(read_topic(a, "User:carol", "finance.audit") == deny);
    CHECK(read_topic(a, "User:bob", "financial") == deny);
    CHECK(read_topic(a, "User:alice", "financial") == allow);
    CHECK(read_topic(a, "User:dave", "finance.payrollx2") == deny);
    CHECK(read_topic(a, "User:dave", "finance.payrollx") == allow);
    CHECK(read_topic(a, "User:alice", "fi") == deny); // shorter than the prefix
    CHECK(read_topic(a, "User:alice", "fin") == allow); // a prefix matches the name itself

    add(a, topic("fi", "User:carol", operation::read, permission::deny, pattern_type::prefixed));
    CHECK(read_topic(a, "User:carol", "finance.payroll.2024") == deny);
    CHECK(read_topic(a, "User:bob", "finance.payroll.2024") == allow);
    auto v = a.explain("User:carol", "10.0.0.1", operation::read, resource_type::topic, "finance.payroll.2024");
    REQUIRE(v.acl);
    CHECK(v.acl->pattern == resource_pattern{resource_type::topic, "fi", pattern_type::prefixed});
}

TEST_CASE("prefix walk over Kafka's findAclRule example", "[acl][authorizer]") {
    // StandardAuthorizerData.findAclRule's comment: the walk from "foobar" must visit foobar,
    // foo and f (prefixed) and skip foob (literal), fb, fa and gar.
    authorizer a;
    for (const char* n : {"gar", "foobar", "foo", "fb", "fa", "f"})
        add(a, topic(n, std::string("User:") + n, operation::read, permission::allow, pattern_type::prefixed));
    add(a, topic("foob", "User:foob", operation::read));
    add(a, topic("eeee", "User:eeee", operation::read));
    CHECK(read_topic(a, "User:foobar", "foobar") == allow);
    CHECK(read_topic(a, "User:foo", "foobar") == allow);
    CHECK(read_topic(a, "User:f", "foobar") == allow);
    CHECK(read_topic(a, "User:foob", "foobar") == deny);
    CHECK(read_topic(a, "User:fb", "foobar") == deny);
    CHECK(read_topic(a, "User:fa", "foobar") == deny);
    CHECK(read_topic(a, "User:gar", "foobar") == deny);
    CHECK(read_topic(a, "User:eeee", "foobar") == deny);
    CHECK(read_topic(a, "User:fa", "fab") == allow);
}

TEST_CASE("implied DESCRIBE and DESCRIBE_CONFIGS come from ALLOW only", "[acl][authorizer]") {
    authorizer a;
    for (auto op : {operation::read, operation::write, operation::del, operation::alter}) {
        authorizer x;
        add(x, topic("t", "User:alice", op));
        CHECK(x.decide("User:alice", "h", operation::describe, resource_type::topic, "t") == allow);
        CHECK(x.decide("User:alice", "h", operation::describe_configs, resource_type::topic, "t") == deny);
    }
    add(a, topic("t", "User:alice", operation::create));
    CHECK(a.decide("User:alice", "h", operation::describe, resource_type::topic, "t") == deny);
    add(a, topic("t", "User:alice", operation::alter_configs));
    CHECK(a.decide("User:alice", "h", operation::describe_configs, resource_type::topic, "t") == allow);
    CHECK(a.decide("User:alice", "h", operation::describe, resource_type::topic, "t") == deny);
    // DESCRIBE does not imply READ.
    add(a, topic("u", "User:alice", operation::describe));
    CHECK(a.decide("User:alice", "h", operation::read, resource_type::topic, "u") == deny);

    // A DENY of READ does not deny DESCRIBE implied by an ALLOW of WRITE.
    authorizer b;
    add(b, topic("t", "User:alice", operation::write));
    add(b, topic("t", "User:alice", operation::read, permission::deny));
    CHECK(b.decide("User:alice", "h", operation::describe, resource_type::topic, "t") == allow);
    CHECK(b.decide("User:alice", "h", operation::read, resource_type::topic, "t") == deny);
    // A DENY of ALTER_CONFIGS does not deny DESCRIBE_CONFIGS; a DENY of DESCRIBE denies it.
    add(b, topic("t", "User:alice", operation::alter_configs));
    add(b, topic("t", "User:alice", operation::alter_configs, permission::deny));
    CHECK(b.decide("User:alice", "h", operation::describe_configs, resource_type::topic, "t") == allow);
    add(b, topic("t", "User:alice", operation::describe, permission::deny));
    CHECK(b.decide("User:alice", "h", operation::describe, resource_type::topic, "t") == deny);
}

TEST_CASE("ALL allows every operation and a DENY of ALL denies every operation", "[acl][authorizer]") {
    authorizer a;
    add(a, topic("t", "User:alice", operation::all));
    for (std::int8_t c = 2; c <= 14; ++c)
        CHECK(a.decide("User:alice", "h", operation_from_code(c), resource_type::topic, "t") == allow);
    add(a, topic("t", "User:alice", operation::all, permission::deny, pattern_type::prefixed));
    for (std::int8_t c = 2; c <= 14; ++c)
        CHECK(a.decide("User:alice", "h", operation_from_code(c), resource_type::topic, "t") == deny);
    // UNKNOWN / ANY actions are refused, even when ALL is allowed.
    authorizer b;
    add(b, topic("t", "User:alice", operation::all));
    CHECK(b.decide("User:alice", "h", operation::any, resource_type::topic, "t") == deny);
    CHECK(b.decide("User:alice", "h", operation::read, resource_type::any, "t") == deny);
}

TEST_CASE("no ACL found: allow_everyone_if_no_acl_found decides", "[acl][authorizer]") {
    authorizer a;
    CHECK_FALSE(a.allow_everyone_if_no_acl_found());
    CHECK(read_topic(a, "User:alice", "t") == deny);
    CHECK(a.explain("User:alice", "h", operation::read, resource_type::topic, "t").why == rule::no_acl_found);
    a.set_allow_everyone_if_no_acl_found(true);
    CHECK(read_topic(a, "User:alice", "t") == allow);
    // Any binding on the resource, even for someone else, switches the default off there.
    add(a, topic("t", "User:bob", operation::write));
    CHECK(read_topic(a, "User:alice", "t") == deny);
    CHECK(a.explain("User:alice", "h", operation::read, resource_type::topic, "t").why == rule::no_matching_allow);
    CHECK(read_topic(a, "User:alice", "other") == allow);
    // ... and so does a prefix or "*" covering it; bindings of another type do not.
    add(a, topic("ot", "User:bob", operation::write, permission::allow, pattern_type::prefixed));
    CHECK(read_topic(a, "User:alice", "other") == deny);
    add(a, bind(resource_type::group, "*", pattern_type::literal, "User:bob", operation::read, permission::allow));
    CHECK(read_topic(a, "User:alice", "x") == allow);
    add(a, topic("*", "User:bob", operation::write));
    CHECK(read_topic(a, "User:alice", "x") == deny);
    // Removing them brings the default back.
    REQUIRE(a.remove(topic("*", "User:bob", operation::write)));
    CHECK(read_topic(a, "User:alice", "x") == allow);
}

TEST_CASE("cluster resource", "[acl][authorizer]") {
    authorizer a;
    auto cb = bind(resource_type::cluster, "kafka-cluster", pattern_type::literal, "User:broker",
                   operation::cluster_action, permission::allow);
    add(a, cb);
    CHECK(a.decide("User:broker", "h", operation::cluster_action, resource_type::cluster, "kafka-cluster") == allow);
    CHECK(a.decide("User:alice", "h", operation::cluster_action, resource_type::cluster, "kafka-cluster") == deny);
    CHECK(a.decide("User:broker", "h", operation::alter, resource_type::cluster, "kafka-cluster") == deny);
    // A topic named kafka-cluster is another resource.
    CHECK(a.decide("User:broker", "h", operation::cluster_action, resource_type::topic, "kafka-cluster") == deny);
    auto bad = cb;
    bad.pattern.name = "other";
    auto r = a.add(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "The only valid name for the CLUSTER resource is kafka-cluster");
}

TEST_CASE("any_allowed follows Kafka's authorizeByResourceType", "[acl][authorizer]") {
    authorizer a;
    CHECK(a.any_allowed("User:alice", "h", operation::write, resource_type::topic) == deny);
    add(a, topic("logs", "User:alice", operation::write));
    CHECK(a.any_allowed("User:alice", "h", operation::write, resource_type::topic) == allow);
    CHECK(a.any_allowed("User:alice", "h", operation::read, resource_type::topic) == deny);
    CHECK(a.any_allowed("User:bob", "h", operation::write, resource_type::topic) == deny);
    CHECK(a.any_allowed("User:alice", "h", operation::write, resource_type::group) == deny);
    // A DENY prefix dominating the only allowed name.
    add(a, topic("lo", "User:alice", operation::write, permission::deny, pattern_type::prefixed));
    CHECK(a.any_allowed("User:alice", "h", operation::write, resource_type::topic) == deny);
    add(a, topic("metrics.", "User:*", operation::all, permission::allow, pattern_type::prefixed));
    CHECK(a.any_allowed("User:alice", "h", operation::write, resource_type::topic) == allow);
    // A wildcard DENY ends it.
    add(a, topic("*", "User:alice", operation::write, permission::deny));
    CHECK(a.any_allowed("User:alice", "h", operation::write, resource_type::topic) == deny);
    a.set_super_users({"User:alice"});
    CHECK(a.any_allowed("User:alice", "h", operation::write, resource_type::topic) == allow);
    CHECK(a.any_allowed("User:alice", "h", operation::any, resource_type::topic) == deny);
}

TEST_CASE("binding set: add, remove, filters, replace_all", "[acl][authorizer]") {
    authorizer a;
    auto b1 = topic("t", "User:alice", operation::read);
    CHECK(a.add(b1).value() == true);
    CHECK(a.add(b1).value() == false); // already there: Kafka answers success
    CHECK(a.size() == 1);
    auto b2 = topic("t", "User:bob", operation::write, permission::deny);
    auto b3 = topic("t", "User:bob", operation::write, permission::allow, pattern_type::prefixed);
    add(a, b2);
    add(a, b3);
    auto rejected = a.add(topic("t", "bob", operation::write));
    REQUIRE_FALSE(rejected);
    CHECK(rejected.error().kafka_code() == 42);
    CHECK(a.size() == 3);

    acl_binding_filter f;
    f.entry.principal = "User:bob";
    CHECK(a.acls(f).size() == 2);
    f.pattern = {resource_type::topic, "tx", pattern_type::match};
    CHECK(a.acls(f) == std::vector<acl_binding>{b3});
    auto gone = a.remove_matching(f);
    CHECK(gone == std::vector<acl_binding>{b3});
    CHECK(a.size() == 2);
    CHECK(a.decide("User:bob", "h", operation::write, resource_type::topic, "tx") == deny);
    CHECK_FALSE(a.remove(b3));
    CHECK(a.remove(b2));
    CHECK(a.decide("User:bob", "h", operation::write, resource_type::topic, "t") == deny);
    CHECK(read_topic(a, "User:alice", "t") == allow);

    auto r = a.replace_all({b2, b3, b3});
    REQUIRE(r);
    CHECK(a.size() == 2);
    CHECK(read_topic(a, "User:alice", "t") == deny);
    CHECK(a.decide("User:bob", "h", operation::write, resource_type::topic, "tz") == allow);
    auto bad = a.replace_all({b1, topic("", "User:x", operation::read)});
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message == "acls[1]: Invalid empty resource name");
    CHECK(a.size() == 2); // unchanged
    a.clear();
    CHECK(a.size() == 0);
    CHECK(a.decide("User:bob", "h", operation::write, resource_type::topic, "tz") == deny);
}

namespace {

// The rules written the slow way: every binding, MATCH semantics for the resource.
decision reference(const std::vector<acl_binding>& all, std::string_view principal, std::string_view host,
                   operation op, resource_type type, std::string_view name, bool allow_everyone) {
    bool any_on_resource = false, allowed = false;
    resource_pattern_filter f{type, std::string(name), pattern_type::match};
    for (const auto& b : all) {
        if (!f.matches(b.pattern)) continue;
        any_on_resource = true;
        const auto& e = b.entry;
        if (e.principal != principal && e.principal != "User:*") continue;
        if (e.host != host && e.host != "*") continue;
        bool op_ok = e.op == operation::all || e.op == op;
        if (e.perm == permission::allow) {
            if (op == operation::describe)
                op_ok = op_ok || e.op == operation::read || e.op == operation::write || e.op == operation::del ||
                        e.op == operation::alter;
            if (op == operation::describe_configs) op_ok = op_ok || e.op == operation::alter_configs;
        }
        if (!op_ok) continue;
        if (e.perm == permission::deny) return deny;
        allowed = true;
    }
    if (allowed) return allow;
    return (!any_on_resource && allow_everyone) ? allow : deny;
}

} // namespace

TEST_CASE("10k bindings: decide() agrees with a linear reference", "[acl][authorizer][perf]") {
    std::mt19937 rng(12345);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    const std::string alphabet = "abcdefghij.";
    auto random_name = [&](int max_len) {
        std::string s;
        int len = 1 + pick(max_len);
        for (int i = 0; i < len; ++i) s.push_back(alphabet[static_cast<std::size_t>(pick(static_cast<int>(alphabet.size())))]);
        return s;
    };
    const std::vector<std::string> principals = {"User:alice", "User:bob", "User:carol", "User:*"};
    const std::vector<std::string> hosts = {"*", "10.0.0.1", "10.0.0.2"};
    const std::vector<operation> ops = {operation::all, operation::read, operation::write, operation::describe,
                                        operation::alter_configs, operation::describe_configs, operation::del};
    authorizer a;
    std::vector<acl_binding> all;
    while (all.size() < 10000) {
        auto t = pick(5) == 0 ? resource_type::group : resource_type::topic;
        auto p = pick(4) == 0 ? pattern_type::prefixed : pattern_type::literal;
        // Short prefixes are rare, as in real clusters: otherwise every name is covered.
        std::string n = p == pattern_type::prefixed ? random_name(3) + random_name(4) : random_name(6);
        if (pick(500) == 0 && p == pattern_type::literal) n = "*";
        auto b = bind(t, n, p, principals[static_cast<std::size_t>(pick(4))], ops[static_cast<std::size_t>(pick(7))],
                      pick(8) == 0 ? permission::deny : permission::allow, hosts[static_cast<std::size_t>(pick(3))]);
        if (a.add(b).value()) all.push_back(b);
    }
    REQUIRE(a.size() == 10000);
    int allowed = 0, denied = 0;
    for (int i = 0; i < 5000; ++i) {
        // Names of bindings (literal hits), names under prefixes, and random names.
        const auto& near = all[static_cast<std::size_t>(pick(static_cast<int>(all.size())))].pattern.name;
        std::string name = pick(3) == 0 ? random_name(8) : (pick(2) == 0 ? near : near + random_name(3));
        const auto& principal = principals[static_cast<std::size_t>(pick(3))];
        const auto& host = hosts[static_cast<std::size_t>(1 + pick(2))];
        auto op = ops[static_cast<std::size_t>(1 + pick(6))];
        auto type = pick(5) == 0 ? resource_type::group : resource_type::topic;
        bool everyone = pick(2) == 0;
        a.set_allow_everyone_if_no_acl_found(everyone);
        auto got = a.decide(principal, host, op, type, name);
        INFO(principal << " " << host << " " << name << " op " << int(code(op)));
        REQUIRE(got == reference(all, principal, host, op, type, name, everyone));
        (got == allow ? allowed : denied)++;
    }
    // The random set must exercise both outcomes, or the comparison proves little.
    CHECK(allowed > 100);
    CHECK(denied > 100);
}
