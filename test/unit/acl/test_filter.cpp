// AclBindingFilter semantics: nulls and ANY, MATCH, exact comparison, at-most-one, validation.
#include <skiff/acl/filter.hpp>

#include <catch2/catch.hpp>

using namespace skiff::acl;

namespace {

acl_binding bind(resource_type t, std::string name, pattern_type p, std::string principal = "User:alice",
                 operation op = operation::read, permission perm = permission::allow, std::string host = "*") {
    return {{t, std::move(name), p}, {std::move(principal), std::move(host), op, perm}};
}

resource_pattern_filter pf(resource_type t, std::optional<std::string> n, pattern_type p) { return {t, std::move(n), p}; }

} // namespace

TEST_CASE("the ANY filter matches every binding", "[acl][filter]") {
    auto any = acl_binding_filter::any();
    CHECK(any.matches(bind(resource_type::topic, "a", pattern_type::literal)));
    CHECK(any.matches(bind(resource_type::group, "g", pattern_type::prefixed, "User:*", operation::all,
                           permission::deny, "10.0.0.1")));
    CHECK_FALSE(any.matches_at_most_one());
    CHECK(any.find_indefinite_field() == std::optional<std::string_view>("Resource type is ANY."));
}

TEST_CASE("pattern type ANY and a specific type compare the name exactly", "[acl][filter]") {
    auto lit = bind(resource_type::topic, "foo", pattern_type::literal);
    auto star = bind(resource_type::topic, "*", pattern_type::literal);
    auto pre = bind(resource_type::topic, "fo", pattern_type::prefixed);
    auto f_any = pf(resource_type::topic, "foo", pattern_type::any);
    CHECK(f_any.matches(lit.pattern));
    CHECK_FALSE(f_any.matches(star.pattern));
    CHECK_FALSE(f_any.matches(pre.pattern));
    auto f_lit = pf(resource_type::topic, "foo", pattern_type::literal);
    CHECK(f_lit.matches(lit.pattern));
    CHECK_FALSE(f_lit.matches(star.pattern));
    auto f_pre = pf(resource_type::topic, "fo", pattern_type::prefixed);
    CHECK(f_pre.matches(pre.pattern));
    CHECK_FALSE(f_pre.matches(lit.pattern));
    CHECK_FALSE(pf(resource_type::group, "foo", pattern_type::any).matches(lit.pattern));
    CHECK(pf(resource_type::any, std::nullopt, pattern_type::prefixed).matches(pre.pattern));
    CHECK_FALSE(pf(resource_type::any, std::nullopt, pattern_type::prefixed).matches(lit.pattern));
}

TEST_CASE("MATCH selects what applies to a literal name", "[acl][filter]") {
    auto f = pf(resource_type::topic, "foobar", pattern_type::match);
    CHECK(f.matches({resource_type::topic, "foobar", pattern_type::literal}));
    CHECK(f.matches({resource_type::topic, "*", pattern_type::literal}));
    CHECK(f.matches({resource_type::topic, "foo", pattern_type::prefixed}));
    CHECK(f.matches({resource_type::topic, "foobar", pattern_type::prefixed}));
    CHECK_FALSE(f.matches({resource_type::topic, "foo", pattern_type::literal}));
    CHECK_FALSE(f.matches({resource_type::topic, "foobarbaz", pattern_type::prefixed}));
    CHECK_FALSE(f.matches({resource_type::topic, "*", pattern_type::prefixed}));
    CHECK_FALSE(f.matches({resource_type::group, "foobar", pattern_type::literal}));
    // Without a name MATCH is every pattern.
    CHECK(pf(resource_type::topic, std::nullopt, pattern_type::match)
              .matches({resource_type::topic, "x", pattern_type::prefixed}));
    CHECK_FALSE(f.matches_at_most_one());
}

TEST_CASE("entry filters compare as strings; nulls and ANY match all", "[acl][filter]") {
    access_control_entry e{"User:alice", "10.0.0.1", operation::write, permission::deny};
    CHECK(access_control_entry_filter{}.matches(e));
    CHECK(access_control_entry_filter{"User:alice", std::nullopt, operation::any, permission::any}.matches(e));
    CHECK_FALSE(access_control_entry_filter{"User:*", std::nullopt, operation::any, permission::any}.matches(e));
    CHECK_FALSE(access_control_entry_filter{std::nullopt, "*", operation::any, permission::any}.matches(e));
    CHECK(access_control_entry_filter{std::nullopt, "10.0.0.1", operation::write, permission::deny}.matches(e));
    CHECK_FALSE(access_control_entry_filter{std::nullopt, std::nullopt, operation::read, permission::any}.matches(e));
    CHECK_FALSE(access_control_entry_filter{std::nullopt, std::nullopt, operation::any, permission::allow}.matches(e));
}

TEST_CASE("matches_at_most_one as Kafka's", "[acl][filter]") {
    auto b = bind(resource_type::topic, "t", pattern_type::literal);
    auto exact = acl_binding_filter::exactly(b);
    CHECK(exact.matches(b));
    CHECK(exact.matches_at_most_one());
    CHECK_FALSE(exact.find_indefinite_field());

    auto f = exact;
    f.pattern.name.reset();
    CHECK(f.find_indefinite_field() == std::optional<std::string_view>("Resource name is NULL."));
    f = exact;
    f.pattern.pattern = pattern_type::match;
    CHECK(f.find_indefinite_field() == std::optional<std::string_view>("Resource pattern type is MATCH."));
    f = exact;
    f.pattern.pattern = pattern_type::any; // Kafka does not call ANY indefinite
    CHECK(f.matches_at_most_one());
    f = exact;
    f.entry.principal.reset();
    CHECK(f.find_indefinite_field() == std::optional<std::string_view>("Principal is NULL"));
    f = exact;
    f.entry.host.reset();
    CHECK(f.find_indefinite_field() == std::optional<std::string_view>("Host is NULL"));
    f = exact;
    f.entry.op = operation::any;
    CHECK(f.find_indefinite_field() == std::optional<std::string_view>("Operation is ANY"));
    f = exact;
    f.entry.perm = permission::any;
    CHECK(f.find_indefinite_field() == std::optional<std::string_view>("Permission type is ANY"));
}

TEST_CASE("UNKNOWN filters are refused for Describe/DeleteAcls", "[acl][filter]") {
    CHECK(validate_filter(acl_binding_filter::any()));
    auto f = acl_binding_filter::any();
    f.pattern.type = resource_type::unknown;
    auto r = validate_filter(f);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "Unknown patternFilter.");
    CHECK(r.error().code == errc::invalid_filter);
    CHECK(r.error().kafka_code() == 42);
    f = acl_binding_filter::any();
    f.entry.perm = permission::unknown;
    r = validate_filter(f);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "Unknown entryFilter.");
}
