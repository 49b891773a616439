// Every topic config Apache Kafka defines (LogConfig.CONFIG in Kafka's storage module), with
// Kafka's type, default and validator, and what each does in skiff. CreateTopics, AlterConfigs
// and IncrementalAlterConfigs accept exactly these names and validate values as Kafka's
// ConfigDef does; DescribeConfigs shows all of them. Those with no meaning for a log in a
// bucket (replication, local files, tiering) are accepted, stored and shown, and change
// nothing: docs/broker.md, "Topic configs", lists which.
//
// Pure functions over a static table; callable on any core.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace skiff::broker {

// DescribeConfigs v3+ config_type values (Kafka's DescribeConfigsResponse.ConfigType).
enum class topic_config_type : std::int8_t { boolean = 1, string = 2, int32 = 3, int64 = 5, float64 = 6, list = 7 };

struct topic_config_def {
    std::string_view name;
    topic_config_type type;
    std::string_view default_value; // Kafka's default, as DescribeConfigs shows it
    // False: accepted, stored and shown, but a log in a bucket has no use for it.
    bool honoured;
    // One phrase for docs/broker.md: what skiff does with it, or why it has no effect.
    std::string_view skiff_note;
};

// Sorted by name.
std::span<const topic_config_def> topic_config_defs() noexcept;
const topic_config_def* find_topic_config(std::string_view name) noexcept;

// Kafka's LIST-typed topic configs, the only ones IncrementalAlterConfigs' APPEND and
// SUBTRACT apply to.
bool is_list_topic_config(std::string_view name) noexcept;

// One value as Kafka's ConfigDef.parseType and the config's validator judge it: nullopt when
// Kafka accepts it, else the reason in Kafka's words ("Invalid value x for configuration y: ...").
std::optional<std::string> invalid_topic_config_value(const topic_config_def& def, std::string_view value);

// A topic's configs (only those set on it) as Kafka's LogConfig.validate checks them: every
// name one Kafka defines ("Unknown topic config name: x" otherwise), every value valid, and
// the cross-config rule (min.compaction.lag.ms <= max.compaction.lag.ms). nullopt when valid,
// else the one sentence of the INVALID_CONFIG answer.
std::optional<std::string> invalid_topic_configs(const std::map<std::string, std::string>& configs);

} // namespace skiff::broker
