// CreateAcls validation (AclApis + AclControlManager.validateNewAcl + skiff's own checks).
#include <skiff/acl/validate.hpp>

#include <catch2/catch.hpp>

using namespace skiff::acl;

namespace {

acl_binding good() {
    return {{resource_type::topic, "orders", pattern_type::literal}, {"User:alice", "*", operation::read, permission::allow}};
}

std::string refusal(const acl_binding& b) {
    auto r = validate_new_binding(b);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_binding);
    CHECK(r.error().kafka_code() == 42);
    return r.error().message;
}

} // namespace

TEST_CASE("valid bindings pass", "[acl][validate]") {
    CHECK(validate_new_binding(good()));
    auto b = good();
    b.pattern.pattern = pattern_type::prefixed;
    b.entry.host = "10.0.0.1";
    b.entry.perm = permission::deny;
    CHECK(validate_new_binding(b));
    b = good();
    b.pattern = {resource_type::cluster, "kafka-cluster", pattern_type::literal};
    b.entry.op = operation::cluster_action;
    b.entry.host = "::1";
    CHECK(validate_new_binding(b));
    b = good();
    b.pattern.name = "*";
    b.entry.principal = "User:*";
    b.entry.op = operation::all;
    CHECK(validate_new_binding(b));
}

TEST_CASE("filter-only and unknown values are refused", "[acl][validate]") {
    auto b = good();
    b.pattern.type = resource_type::any;
    CHECK(refusal(b) == "Invalid resourceType ANY");
    b.pattern.type = resource_type::unknown;
    CHECK(refusal(b) == "Invalid resourceType UNKNOWN");
    b = good();
    b.pattern.pattern = pattern_type::match;
    CHECK(refusal(b) == "Invalid patternType MATCH");
    b.pattern.pattern = pattern_type::any;
    CHECK(refusal(b) == "Invalid patternType ANY");
    b.pattern.pattern = pattern_type::unknown;
    CHECK(refusal(b) == "Invalid patternType UNKNOWN");
    b = good();
    b.entry.op = operation::any;
    CHECK(refusal(b) == "Invalid operation ANY");
    b.entry.op = operation::unknown;
    CHECK(refusal(b) == "Invalid operation UNKNOWN");
    b = good();
    b.entry.perm = permission::any;
    CHECK(refusal(b) == "Invalid permissionType ANY");
    b.entry.perm = permission::unknown;
    CHECK(refusal(b) == "Invalid permissionType UNKNOWN");
}

TEST_CASE("names, principals and hosts are checked", "[acl][validate]") {
    auto b = good();
    b.pattern.name = "";
    CHECK(refusal(b) == "Invalid empty resource name");
    b = good();
    b.pattern = {resource_type::cluster, "my-cluster", pattern_type::literal};
    CHECK(refusal(b) == "The only valid name for the CLUSTER resource is kafka-cluster");
    b.pattern.name = "*";
    CHECK(refusal(b) == "The only valid name for the CLUSTER resource is kafka-cluster");
    b = good();
    b.entry.principal = "alice";
    CHECK(refusal(b).find("Invalid principal 'alice'") == 0);
    b.entry.principal = "User:";
    CHECK(refusal(b).find("Invalid principal") == 0);
    b = good();
    b.entry.host = "broker.example.com";
    CHECK(refusal(b).find("Invalid host 'broker.example.com'") == 0);
    b.entry.host = "";
    CHECK(refusal(b).find("Invalid host") == 0);
    b.entry.host = "10.0.0.256";
    CHECK(refusal(b).find("Invalid host") == 0);
}

TEST_CASE("hosts: * or an IP literal", "[acl][validate]") {
    CHECK(valid_host("*"));
    CHECK(valid_host("127.0.0.1"));
    CHECK(valid_host("2001:db8::1"));
    CHECK(valid_host("0:0:0:0:0:0:0:1"));
    CHECK_FALSE(valid_host("**"));
    CHECK_FALSE(valid_host("10.0.0.0/8"));
    CHECK_FALSE(valid_host(std::string(100, '1')));
    CHECK_FALSE(valid_host(std::string_view("1.2.3.4\0x", 9)));
}
