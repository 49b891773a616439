// Client quotas set through the Kafka API (AlterClientQuotas, DescribeClientQuotas): Kafka's
// entities (a user, a client id, both, or their defaults) with producer_byte_rate and
// consumer_byte_rate, stored next to the topics catalog in `{ns}/skiff~meta/quotas.json` and
// resolved with Kafka's precedence (docs/quotas.md). The command-line quotas
// (--quota-*-bytes-per-second, --client-quotas) rank below every stored entity.
#pragma once

#include <skiff/broker/quota.hpp>
#include <skiff/core/result.hpp>

#include <compare>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::broker {

// One entity type's part of an entity: absent, the default (Kafka's null name) or a name.
struct quota_entity_part {
    bool present = false;
    bool is_default = false;
    std::string name;
    auto operator<=>(const quota_entity_part&) const = default;
    static quota_entity_part named(std::string n) { return {true, false, std::move(n)}; }
    static quota_entity_part default_entity() { return {true, true, {}}; }
};

struct quota_entity {
    quota_entity_part user;
    quota_entity_part client_id;
    auto operator<=>(const quota_entity&) const = default;
};

// The keys skiff stores and enforces.
inline constexpr std::string_view producer_byte_rate = "producer_byte_rate";
inline constexpr std::string_view consumer_byte_rate = "consumer_byte_rate";

using quota_values = std::map<std::string, double, std::less<>>;

struct client_quota_table {
    std::map<quota_entity, quota_values> entries; // no entry has an empty value map
    bool operator==(const client_quota_table&) const = default;
};

// Kafka's unauthenticated principal: every client of a listener without SASL (or client
// certificates) is this user.
inline constexpr std::string_view anonymous_user = "ANONYMOUS";

std::string client_quotas_key(std::string_view ns);
std::string encode_client_quotas(const client_quota_table& t);
result<client_quota_table, std::string> decode_client_quotas(std::string_view json);

// The limits of (user, client id): per key, the most specific stored entity that sets it, in
// Kafka's order (user+client, user+default client, user, default user+client, default
// user+default client, default user, client, default client), then the command-line quotas.
// No client id (nullopt): what an id named nowhere gets (the meter's overflow entity).
quota_limits resolve_quota(const client_quota_table& t, const quota_config& flags, std::string_view user,
                           std::optional<std::string_view> client_id);

} // namespace skiff::broker
