// Kafka's ACL model: what an ACL binding is, with Kafka's wire codes and printed names.
//
// Mirrors org.apache.kafka.common.resource.{ResourceType, PatternType, ResourcePattern} and
// org.apache.kafka.common.acl.{AclOperation, AclPermissionType, AccessControlEntry,
// AclBinding}. The codes are the int8 values of CreateAcls / DescribeAcls / DeleteAcls and
// must never change. Names are Kafka's PascalCase (SecurityUtils.resourceTypeName and friends:
// "Topic", "TransactionalId", "Read", "Allow", "Literal"), used by the CLI and the JSON store.
// Pure; any core or thread.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::acl {

enum class resource_type : std::int8_t {
    unknown = 0,
    any = 1, // filters only
    topic = 2,
    group = 3,
    cluster = 4,
    transactional_id = 5,
    delegation_token = 6,
    user = 7,
};

enum class pattern_type : std::int8_t {
    unknown = 0,
    any = 1,   // filters only: any pattern, name compared exactly
    match = 2, // filters only: the patterns that would apply to a literal name
    literal = 3,
    prefixed = 4,
};

enum class operation : std::int8_t {
    unknown = 0,
    any = 1, // filters only
    all = 2,
    read = 3,
    write = 4,
    create = 5,
    del = 6, // DELETE ("delete" is a keyword)
    alter = 7,
    describe = 8,
    cluster_action = 9,
    describe_configs = 10,
    alter_configs = 11,
    idempotent_write = 12,
    create_tokens = 13,
    describe_tokens = 14,
};

enum class permission : std::int8_t {
    unknown = 0,
    any = 1, // filters only
    deny = 2,
    allow = 3,
};

// Wire codes. from_code maps codes Kafka does not know to unknown, as Kafka's fromCode does.
constexpr std::int8_t code(resource_type v) noexcept { return static_cast<std::int8_t>(v); }
constexpr std::int8_t code(pattern_type v) noexcept { return static_cast<std::int8_t>(v); }
constexpr std::int8_t code(operation v) noexcept { return static_cast<std::int8_t>(v); }
constexpr std::int8_t code(permission v) noexcept { return static_cast<std::int8_t>(v); }
resource_type resource_type_from_code(std::int8_t c) noexcept;
pattern_type pattern_type_from_code(std::int8_t c) noexcept;
operation operation_from_code(std::int8_t c) noexcept;
permission permission_from_code(std::int8_t c) noexcept;

// "Topic", "TransactionalId", "Literal", "DescribeConfigs", "Allow", ...
std::string_view name(resource_type v) noexcept;
std::string_view name(pattern_type v) noexcept;
std::string_view name(operation v) noexcept;
std::string_view name(permission v) noexcept;
// Kafka's enum constant names ("TOPIC", "TRANSACTIONAL_ID", "READ"): what Kafka's toString()
// prints inside ResourcePattern(...) and validation messages.
std::string_view enum_name(resource_type v) noexcept;
std::string_view enum_name(pattern_type v) noexcept;
std::string_view enum_name(operation v) noexcept;
std::string_view enum_name(permission v) noexcept;

// Case-insensitive, with or without underscores ("Topic", "TOPIC", "transactional_id",
// "TransactionalId"), as Kafka's fromString and SecurityUtils lookups together accept.
// Anything else is unknown, as in Kafka (so "unknown" and "bogus" both give unknown).
resource_type parse_resource_type(std::string_view s) noexcept;
pattern_type parse_pattern_type(std::string_view s) noexcept;
operation parse_operation(std::string_view s) noexcept;
permission parse_permission(std::string_view s) noexcept;

// ResourcePattern.WILDCARD_RESOURCE, StandardAuthorizerData.WILDCARD_PRINCIPAL / WILDCARD,
// Resource.CLUSTER_NAME.
inline constexpr std::string_view wildcard_resource = "*";
inline constexpr std::string_view wildcard_principal = "User:*";
inline constexpr std::string_view wildcard_host = "*";
inline constexpr std::string_view cluster_name = "kafka-cluster";

// KafkaPrincipal as "Type:name". Split at the first colon (StandardAcl.kafkaPrincipal); the
// name may contain further colons. nullopt when there is no colon or either side is empty.
struct kafka_principal {
    std::string type;
    std::string name;

    std::string to_string() const { return type + ":" + name; }
    friend bool operator==(const kafka_principal&, const kafka_principal&) = default;
};
std::optional<kafka_principal> parse_principal(std::string_view s);

struct resource_pattern {
    resource_type type = resource_type::unknown;
    std::string name;
    pattern_type pattern = pattern_type::literal;

    friend bool operator==(const resource_pattern&, const resource_pattern&) = default;
    friend std::strong_ordering operator<=>(const resource_pattern&, const resource_pattern&) = default;
};

struct access_control_entry {
    std::string principal; // "User:alice", or "User:*" for every user
    std::string host;      // "*" or an IP address as the broker prints the peer's
    operation op = operation::unknown;
    permission perm = permission::unknown;

    friend bool operator==(const access_control_entry&, const access_control_entry&) = default;
    friend std::strong_ordering operator<=>(const access_control_entry&, const access_control_entry&) = default;
};

struct acl_binding {
    resource_pattern pattern;
    access_control_entry entry;

    friend bool operator==(const acl_binding&, const acl_binding&) = default;
    friend std::strong_ordering operator<=>(const acl_binding&, const acl_binding&) = default;
};

// Kafka's toString: "(pattern=ResourcePattern(resourceType=TOPIC, name=foo,
// patternType=LITERAL), entry=(principal=User:alice, host=*, operation=READ,
// permissionType=ALLOW))". Names are passed through printable() (bounded, no control bytes).
std::string to_string(const acl_binding& b);

} // namespace skiff::acl
