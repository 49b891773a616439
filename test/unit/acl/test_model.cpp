// Kafka's ACL enums: wire codes, printed names, parsing; principals; a binding's printed form.
#include <skiff/acl/model.hpp>

#include <catch2/catch.hpp>

using namespace skiff::acl;

TEST_CASE("wire codes are Kafka's", "[acl][model]") {
    CHECK(code(resource_type::unknown) == 0);
    CHECK(code(resource_type::any) == 1);
    CHECK(code(resource_type::topic) == 2);
    CHECK(code(resource_type::group) == 3);
    CHECK(code(resource_type::cluster) == 4);
    CHECK(code(resource_type::transactional_id) == 5);
    CHECK(code(resource_type::delegation_token) == 6);
    CHECK(code(resource_type::user) == 7);
    CHECK(code(pattern_type::match) == 2);
    CHECK(code(pattern_type::literal) == 3);
    CHECK(code(pattern_type::prefixed) == 4);
    CHECK(code(operation::all) == 2);
    CHECK(code(operation::del) == 6);
    CHECK(code(operation::describe) == 8);
    CHECK(code(operation::cluster_action) == 9);
    CHECK(code(operation::idempotent_write) == 12);
    CHECK(code(operation::describe_tokens) == 14);
    CHECK(code(permission::deny) == 2);
    CHECK(code(permission::allow) == 3);
}

TEST_CASE("codes round-trip and unknown codes map to UNKNOWN", "[acl][model]") {
    for (std::int8_t c = 0; c <= 7; ++c) CHECK(code(resource_type_from_code(c)) == c);
    for (std::int8_t c = 0; c <= 4; ++c) CHECK(code(pattern_type_from_code(c)) == c);
    for (std::int8_t c = 0; c <= 14; ++c) CHECK(code(operation_from_code(c)) == c);
    for (std::int8_t c = 0; c <= 3; ++c) CHECK(code(permission_from_code(c)) == c);
    CHECK(resource_type_from_code(8) == resource_type::unknown);
    CHECK(resource_type_from_code(-1) == resource_type::unknown);
    CHECK(pattern_type_from_code(5) == pattern_type::unknown);
    CHECK(operation_from_code(15) == operation::unknown);
    CHECK(operation_from_code(127) == operation::unknown);
    CHECK(permission_from_code(4) == permission::unknown);
}

TEST_CASE("names are Kafka's PascalCase and parse back", "[acl][model]") {
    CHECK(name(resource_type::topic) == "Topic");
    CHECK(name(resource_type::transactional_id) == "TransactionalId");
    CHECK(name(resource_type::delegation_token) == "DelegationToken");
    CHECK(name(pattern_type::literal) == "Literal");
    CHECK(name(pattern_type::prefixed) == "Prefixed");
    CHECK(name(operation::read) == "Read");
    CHECK(name(operation::del) == "Delete");
    CHECK(name(operation::describe_configs) == "DescribeConfigs");
    CHECK(name(operation::idempotent_write) == "IdempotentWrite");
    CHECK(name(permission::allow) == "Allow");
    CHECK(enum_name(resource_type::transactional_id) == "TRANSACTIONAL_ID");
    CHECK(enum_name(operation::cluster_action) == "CLUSTER_ACTION");

    for (std::int8_t c = 0; c <= 7; ++c) {
        auto t = resource_type_from_code(c);
        CHECK(parse_resource_type(name(t)) == t);
        CHECK(parse_resource_type(enum_name(t)) == t);
    }
    for (std::int8_t c = 0; c <= 4; ++c) {
        auto t = pattern_type_from_code(c);
        CHECK(parse_pattern_type(name(t)) == t);
        CHECK(parse_pattern_type(enum_name(t)) == t);
    }
    for (std::int8_t c = 0; c <= 14; ++c) {
        auto t = operation_from_code(c);
        CHECK(parse_operation(name(t)) == t);
        CHECK(parse_operation(enum_name(t)) == t);
    }
    for (std::int8_t c = 0; c <= 3; ++c) {
        auto t = permission_from_code(c);
        CHECK(parse_permission(name(t)) == t);
        CHECK(parse_permission(enum_name(t)) == t);
    }
}

TEST_CASE("parsing is case-insensitive and refuses other words", "[acl][model]") {
    CHECK(parse_resource_type("topic") == resource_type::topic);
    CHECK(parse_resource_type("transactional_id") == resource_type::transactional_id);
    CHECK(parse_resource_type("TRANSACTIONALID") == resource_type::transactional_id);
    CHECK(parse_operation("describe_CONFIGS") == operation::describe_configs);
    CHECK(parse_operation("DELETE") == operation::del);
    CHECK(parse_permission("allow") == permission::allow);
    CHECK(parse_pattern_type("PREFIXED") == pattern_type::prefixed);
    CHECK(parse_resource_type("topics") == resource_type::unknown);
    CHECK(parse_resource_type("") == resource_type::unknown);
    CHECK(parse_operation("Reed") == operation::unknown);
    CHECK(parse_operation("_read") == operation::unknown);
    CHECK(parse_operation("describe__configs") == operation::unknown);
    CHECK(parse_permission("permit") == permission::unknown);
    CHECK(parse_pattern_type("Literally") == pattern_type::unknown);
}

TEST_CASE("principals split at the first colon", "[acl][model]") {
    auto p = parse_principal("User:alice");
    REQUIRE(p);
    CHECK(p->type == "User");
    CHECK(p->name == "alice");
    auto q = parse_principal("User:CN=a,O=b:c");
    REQUIRE(q);
    CHECK(q->name == "CN=a,O=b:c");
    CHECK(q->to_string() == "User:CN=a,O=b:c");
    CHECK(parse_principal("User:*"));
    CHECK_FALSE(parse_principal("alice"));
    CHECK_FALSE(parse_principal("User:"));
    CHECK_FALSE(parse_principal(":alice"));
    CHECK_FALSE(parse_principal(""));
}

TEST_CASE("a binding prints as Kafka's toString", "[acl][model]") {
    acl_binding b{{resource_type::topic, "orders", pattern_type::literal},
                  {"User:alice", "*", operation::read, permission::allow}};
    CHECK(to_string(b) == "(pattern=ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL), "
                          "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))");
}
