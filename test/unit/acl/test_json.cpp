// The ACL store's JSON: round trip, Kafka's names, strict parsing with one-sentence errors.
#include <skiff/acl/authorizer.hpp>
#include <skiff/acl/json.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace skiff::acl;

namespace {

const char* one_binding = R"({"version":1,"acls":[{"resourceType":"Topic","resourceName":"orders",)"
                          R"("patternType":"Literal","principal":"User:alice","host":"*","operation":"Read",)"
                          R"("permissionType":"Allow"}]})";

std::string error_of(std::string_view text) {
    auto r = acls_from_json_text(text);
    REQUIRE_FALSE(r);
    return r.error();
}

// one_binding with member `key` replaced by the raw JSON `value`.
std::string with(const std::string& key, const nlohmann::json& value) {
    auto j = nlohmann::json::parse(one_binding);
    j["acls"][0][key] = value;
    return j.dump();
}

} // namespace

TEST_CASE("the store round-trips", "[acl][json]") {
    authorizer a;
    REQUIRE(a.add({{resource_type::topic, "orders", pattern_type::literal},
                   {"User:alice", "*", operation::read, permission::allow}}));
    REQUIRE(a.add({{resource_type::transactional_id, "tx-", pattern_type::prefixed},
                   {"User:CN=app:1", "2001:db8::1", operation::describe_configs, permission::deny}}));
    REQUIRE(a.add({{resource_type::cluster, "kafka-cluster", pattern_type::literal},
                   {"User:*", "10.1.2.3", operation::idempotent_write, permission::allow}}));
    REQUIRE(a.add({{resource_type::delegation_token, "t\xc3\xa9st \"q\"", pattern_type::literal},
                   {"User:bob", "*", operation::all, permission::allow}}));
    auto text = acls_to_json_text(a.bindings());
    auto back = acls_from_json_text(text);
    REQUIRE(back);
    authorizer b;
    REQUIRE(b.replace_all(*back));
    CHECK(b.bindings() == a.bindings());
    CHECK(acls_to_json_text(b.bindings()) == text);
    CHECK(acls_to_json(std::vector<acl_binding>(a.bindings().begin(), a.bindings().end())).dump() == text);
}

TEST_CASE("values are Kafka's printed names", "[acl][json]") {
    acl_binding b{{resource_type::transactional_id, "tx", pattern_type::prefixed},
                  {"User:alice", "*", operation::cluster_action, permission::deny}};
    auto j = binding_to_json(b);
    CHECK(j.at("resourceType") == "TransactionalId");
    CHECK(j.at("patternType") == "Prefixed");
    CHECK(j.at("operation") == "ClusterAction");
    CHECK(j.at("permissionType") == "Deny");
    CHECK(binding_from_json(j).value() == b);
    auto parsed = acls_from_json_text(one_binding);
    REQUIRE(parsed);
    REQUIRE(parsed->size() == 1);
    CHECK((*parsed)[0] == acl_binding{{resource_type::topic, "orders", pattern_type::literal},
                                      {"User:alice", "*", operation::read, permission::allow}});
    CHECK(acls_from_json_text(R"({"acls":[],"version":1})").value().empty());
}

TEST_CASE("malformed stores are refused with one sentence", "[acl][json]") {
    CHECK(error_of("") == "ACL store: not valid JSON");
    CHECK(error_of("{\"version\":1,") == "ACL store: not valid JSON");
    CHECK(error_of("[]") == "ACL store: not a JSON object");
    CHECK(error_of(R"({"version":1})") == "ACL store: missing member 'acls'");
    CHECK(error_of(R"({"version":1,"acls":[],"x":0})") == "ACL store: unknown member 'x'");
    CHECK(error_of(R"({"version":"1","acls":[]})") == "ACL store: 'version' is not an integer");
    CHECK(error_of(R"({"version":2,"acls":[]})") == "ACL store: unsupported version 2 (this skiff reads version 1)");
    CHECK(error_of(R"({"version":1,"acls":{}})") == "ACL store: 'acls' is not an array");
    CHECK(error_of(R"({"version":1,"version":1,"acls":[]})") == "ACL store: a member appears twice in one object");
    CHECK(error_of(R"({"version":1,"acls":[7]})") == "ACL store: acls[0]: not a JSON object");
}

TEST_CASE("malformed bindings name the member at fault", "[acl][json]") {
    CHECK(error_of(with("operation", "Reed")) == "ACL store: acls[0]: 'operation' \"Reed\" is not a Kafka ACL operation");
    CHECK(error_of(with("resourceType", "Topics")) ==
          "ACL store: acls[0]: 'resourceType' \"Topics\" is not a Kafka resource type");
    CHECK(error_of(with("patternType", "Glob")) == "ACL store: acls[0]: 'patternType' \"Glob\" is not a Kafka pattern type");
    CHECK(error_of(with("permissionType", "Maybe")) ==
          "ACL store: acls[0]: 'permissionType' \"Maybe\" is not a Kafka permission type");
    CHECK(error_of(with("host", 1)) == "ACL store: acls[0]: 'host' is not a string");
    CHECK(error_of(with("extra", "x")) == "ACL store: acls[0]: unknown member 'extra'");
    CHECK(error_of(with("patternType", "Match")) == "ACL store: acls[0]: Invalid patternType MATCH");
    CHECK(error_of(with("operation", "Any")) == "ACL store: acls[0]: Invalid operation ANY");
    CHECK(error_of(with("principal", "alice")).find("ACL store: acls[0]: Invalid principal") == 0);
    CHECK(error_of(with("host", "example.com")).find("ACL store: acls[0]: Invalid host") == 0);
    CHECK(error_of(with("resourceName", "")) == "ACL store: acls[0]: Invalid empty resource name");

    auto j = nlohmann::json::parse(one_binding);
    j["acls"][0].erase("host");
    CHECK(error_of(j.dump()) == "ACL store: acls[0]: missing member 'host'");
    j = nlohmann::json::parse(one_binding);
    j["acls"].push_back(j["acls"][0]);
    CHECK(error_of(j.dump()) == "ACL store: acls[1]: the same binding appears earlier");
    // Duplicate members inside a binding.
    std::string dup = one_binding;
    dup.replace(dup.find("\"host\""), 0, "\"host\":\"*\",");
    CHECK(error_of(dup) == "ACL store: a member appears twice in one object");
    CHECK_FALSE(binding_from_json(nlohmann::json::array()));
}
