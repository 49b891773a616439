// Codes, names and parsing of Kafka's ACL enums (ResourceType, PatternType, AclOperation,
// AclPermissionType) and the printed form of a binding.
#include <skiff/acl/model.hpp>

#include <skiff/core/ascii.hpp>
#include <skiff/core/printable.hpp>

#include <fmt/format.h>

#include <array>
#include <cstddef>

namespace skiff::acl {

namespace {

// One row per enum constant, indexed by wire code: {PascalCase name, Kafka constant name}.
struct names_row {
    std::string_view pascal;
    std::string_view constant;
};

constexpr std::array<names_row, 8> resource_names = {{
    {"Unknown", "UNKNOWN"},
    {"Any", "ANY"},
    {"Topic", "TOPIC"},
    {"Group", "GROUP"},
    {"Cluster", "CLUSTER"},
    {"TransactionalId", "TRANSACTIONAL_ID"},
    {"DelegationToken", "DELEGATION_TOKEN"},
    {"User", "USER"},
}};

constexpr std::array<names_row, 5> pattern_names = {{
    {"Unknown", "UNKNOWN"},
    {"Any", "ANY"},
    {"Match", "MATCH"},
    {"Literal", "LITERAL"},
    {"Prefixed", "PREFIXED"},
}};

constexpr std::array<names_row, 15> operation_names = {{
    {"Unknown", "UNKNOWN"},
    {"Any", "ANY"},
    {"All", "ALL"},
    {"Read", "READ"},
    {"Write", "WRITE"},
    {"Create", "CREATE"},
    {"Delete", "DELETE"},
    {"Alter", "ALTER"},
    {"Describe", "DESCRIBE"},
    {"ClusterAction", "CLUSTER_ACTION"},
    {"DescribeConfigs", "DESCRIBE_CONFIGS"},
    {"AlterConfigs", "ALTER_CONFIGS"},
    {"IdempotentWrite", "IDEMPOTENT_WRITE"},
    {"CreateTokens", "CREATE_TOKENS"},
    {"DescribeTokens", "DESCRIBE_TOKENS"},
}};

constexpr std::array<names_row, 4> permission_names = {{
    {"Unknown", "UNKNOWN"},
    {"Any", "ANY"},
    {"Deny", "DENY"},
    {"Allow", "ALLOW"},
}};

template <std::size_t N>
const names_row& row(const std::array<names_row, N>& table, std::int8_t c) noexcept {
    auto i = static_cast<std::size_t>(c);
    return (c >= 0 && i < N) ? table[i] : table[0];
}

// Case-insensitive and blind to underscores: Kafka's fromString upper-cases the constant
// name ("transactional_id"), SecurityUtils also maps the PascalCase name ("TransactionalId")
// and its upper case ("TRANSACTIONALID"); this accepts all of them with one comparison.
bool loose_equals(std::string_view input, std::string_view pascal) noexcept {
    std::size_t j = 0;
    for (char c : input) {
        if (c == '_') continue;
        if (j == pascal.size() || ascii_lower(c) != ascii_lower(pascal[j])) return false;
        ++j;
    }
    return j == pascal.size();
}

template <std::size_t N>
std::int8_t parse_code(const std::array<names_row, N>& table, std::string_view s) noexcept {
    // A leading or doubled underscore is not a spelling Kafka accepts.
    if (s.empty() || s.front() == '_' || s.back() == '_' || s.find("__") != std::string_view::npos) return 0;
    for (std::size_t i = 0; i < N; ++i)
        if (loose_equals(s, table[i].pascal)) return static_cast<std::int8_t>(i);
    return 0;
}

} // namespace

resource_type resource_type_from_code(std::int8_t c) noexcept {
    return (c >= 0 && c < static_cast<std::int8_t>(resource_names.size())) ? static_cast<resource_type>(c)
                                                                            : resource_type::unknown;
}
pattern_type pattern_type_from_code(std::int8_t c) noexcept {
    return (c >= 0 && c < static_cast<std::int8_t>(pattern_names.size())) ? static_cast<pattern_type>(c)
                                                                           : pattern_type::unknown;
}
operation operation_from_code(std::int8_t c) noexcept {
    return (c >= 0 && c < static_cast<std::int8_t>(operation_names.size())) ? static_cast<operation>(c)
                                                                             : operation::unknown;
}
permission permission_from_code(std::int8_t c) noexcept {
    return (c >= 0 && c < static_cast<std::int8_t>(permission_names.size())) ? static_cast<permission>(c)
                                                                              : permission::unknown;
}

std::string_view name(resource_type v) noexcept { return row(resource_names, code(v)).pascal; }
std::string_view name(pattern_type v) noexcept { return row(pattern_names, code(v)).pascal; }
std::string_view name(operation v) noexcept { return row(operation_names, code(v)).pascal; }
std::string_view name(permission v) noexcept { return row(permission_names, code(v)).pascal; }
std::string_view enum_name(resource_type v) noexcept { return row(resource_names, code(v)).constant; }
std::string_view enum_name(pattern_type v) noexcept { return row(pattern_names, code(v)).constant; }
std::string_view enum_name(operation v) noexcept { return row(operation_names, code(v)).constant; }
std::string_view enum_name(permission v) noexcept { return row(permission_names, code(v)).constant; }

resource_type parse_resource_type(std::string_view s) noexcept {
    return static_cast<resource_type>(parse_code(resource_names, s));
}
pattern_type parse_pattern_type(std::string_view s) noexcept {
    return static_cast<pattern_type>(parse_code(pattern_names, s));
}
operation parse_operation(std::string_view s) noexcept { return static_cast<operation>(parse_code(operation_names, s)); }
permission parse_permission(std::string_view s) noexcept {
    return static_cast<permission>(parse_code(permission_names, s));
}

std::optional<kafka_principal> parse_principal(std::string_view s) {
    // SecurityUtils.parseKafkaPrincipal splits at the first colon only ("User:CN=a:b" is
    // type User, name "CN=a:b"). Kafka lets either side be empty; skiff refuses that, since
    // neither "User:" nor ":alice" can be the principal of an authenticated session.
    auto colon = s.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return std::nullopt;
    return kafka_principal{std::string(s.substr(0, colon)), std::string(s.substr(colon + 1))};
}

std::string to_string(const acl_binding& b) {
    return fmt::format("(pattern=ResourcePattern(resourceType={}, name={}, patternType={}), "
                       "entry=(principal={}, host={}, operation={}, permissionType={}))",
                       enum_name(b.pattern.type), printable(b.pattern.name), enum_name(b.pattern.pattern),
                       printable(b.entry.principal), printable(b.entry.host), enum_name(b.entry.op),
                       enum_name(b.entry.perm));
}

} // namespace skiff::acl
