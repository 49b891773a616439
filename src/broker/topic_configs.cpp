// The table of Kafka's topic configs and their validation, after Apache Kafka's
// storage/src/main/java/org/apache/kafka/storage/internals/log/LogConfig.java (the CONFIG
// definitions and validateNames/validateValues) and clients/.../common/config/ConfigDef.java
// (parseType and the Range, ValidString and ValidList validators).
#include <skiff/broker/topic_configs.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

namespace skiff::broker {

namespace {

using t = topic_config_type;

constexpr std::string_view long_max = "9223372036854775807";

// Sorted by name (find_topic_config searches it with lower_bound).
constexpr topic_config_def defs[] = {
    {"cleanup.policy", t::list, "delete", true, "delete, compact or both: retention and compaction of the log"},
    {"compression.gzip.level", t::int32, "-1", false,
     "skiff recompresses with its codec's default level (compression.type)"},
    {"compression.lz4.level", t::int32, "9", false, "skiff recompresses with its codec's default level (compression.type)"},
    {"compression.type", t::string, "producer", true, "the codec the log stores; producer keeps batches as sent"},
    {"compression.zstd.level", t::int32, "3", false,
     "skiff recompresses with its codec's default level (compression.type)"},
    {"delete.retention.ms", t::int64, "86400000", true, "how long compaction keeps tombstones"},
    {"file.delete.delay.ms", t::int64, "60000", false,
     "broker-wide: --file-delete-delay-ms delays the deletion of every removed segment object"},
    {"flush.messages", t::int64, long_max, false, "no local files to fsync: a produce is acknowledged once stored"},
    {"flush.ms", t::int64, long_max, false, "no local files to fsync: a produce is acknowledged once stored"},
    {"follower.replication.throttled.replicas", t::list, "", false, "no followers: the object store replicates"},
    {"index.interval.bytes", t::int32, "4096", false, "each segment object carries its own index"},
    {"leader.replication.throttled.replicas", t::list, "", false, "no followers: the object store replicates"},
    {"local.retention.bytes", t::int64, "-2", false, "no local tier: the whole log is in the bucket"},
    {"local.retention.ms", t::int64, "-2", false, "no local tier: the whole log is in the bucket"},
    {"max.compaction.lag.ms", t::int64, long_max, false,
     "broker-wide: --compaction-interval-ms bounds how long a record waits for compaction"},
    {"max.message.bytes", t::int32, "1048588", true, "the largest batch a produce may carry"},
    {"message.downconversion.enable", t::boolean, "true", false,
     "skiff serves record batches of magic 2 only; old fetch versions are not served"},
    {"message.format.version", t::string, "3.0-IV1", false, "deprecated in Kafka and ignored since 3.0, as in Kafka"},
    {"message.timestamp.after.max.ms", t::int64, long_max, true,
     "how far in the future a CreateTime timestamp may be (else the difference below)"},
    {"message.timestamp.before.max.ms", t::int64, long_max, true,
     "how far in the past a CreateTime timestamp may be (else the difference below)"},
    {"message.timestamp.difference.max.ms", t::int64, long_max, true,
     "deprecated in Kafka: how far a CreateTime timestamp may be from the broker's clock"},
    {"message.timestamp.type", t::string, "CreateTime", true, "CreateTime or LogAppendTime"},
    {"min.cleanable.dirty.ratio", t::float64, "0.5", false,
     "compaction runs every --compaction-interval-ms once segments were added"},
    {"min.compaction.lag.ms", t::int64, "0", true, "records younger than this are not compacted"},
    {"min.insync.replicas", t::int32, "1", false, "no replicas: a produce is acknowledged once the store has it"},
    {"preallocate", t::boolean, "false", false, "no local segment files"},
    {"remote.log.copy.disable", t::boolean, "false", false, "no tiering: the whole log is in the bucket"},
    {"remote.log.delete.on.disable", t::boolean, "false", false, "no tiering: the whole log is in the bucket"},
    {"remote.storage.enable", t::boolean, "false", false, "no tiering: the whole log is in the bucket"},
    {"retention.bytes", t::int64, "-1", true, "the most a partition keeps (-1: no limit)"},
    {"retention.ms", t::int64, "604800000", true, "how long records are kept (-1: for ever)"},
    {"segment.bytes", t::int32, "1073741824", false, "broker-wide: --segment-bytes is when a partition flushes"},
    {"segment.index.bytes", t::int32, "10485760", false, "each segment object carries its own index"},
    {"segment.jitter.ms", t::int64, "0", false, "segments are objects written at each flush"},
    {"segment.ms", t::int64, "604800000", false, "segments are objects written at each flush"},
    {"unclean.leader.election.enable", t::boolean, "false", false, "no replicas to elect from"},
};

// Kafka's ConfigDef trims with String.trim(): every character up to ' '.
std::string_view trim(std::string_view s) {
    while (!s.empty() && static_cast<unsigned char>(s.front()) <= ' ') s.remove_prefix(1);
    while (!s.empty() && static_cast<unsigned char>(s.back()) <= ' ') s.remove_suffix(1);
    return s;
}

std::string invalid(std::string_view name, std::string_view value, std::string_view why) {
    return fmt::format("Invalid value {} for configuration {}: {}", value, name, why);
}

// Integer.parseInt / Long.parseLong: an optional sign, then decimal digits only.
template <typename Int>
std::optional<Int> parse_integer(std::string_view s) {
    if (!s.empty() && s.front() == '+') {
        s.remove_prefix(1);
        if (!s.empty() && (s.front() == '-' || s.front() == '+')) return std::nullopt;
    }
    Int v{};
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::optional<double> parse_double(std::string_view s) {
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

// ConfigDef's LIST: an empty (trimmed) value is the empty list, else items split at commas
// with the whitespace around them dropped ("a, ,b" has an empty middle item).
std::vector<std::string_view> list_items(std::string_view value) {
    std::vector<std::string_view> out;
    value = trim(value);
    if (value.empty()) return out;
    for (;;) {
        const auto comma = value.find(',');
        out.push_back(trim(value.substr(0, comma)));
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return out;
}

// MetadataVersion.fromVersionString: the first two parts of the version (three for 0.x) name
// a release or a release's IV ("2.8", "3.0-IV1", "0.10.0-IV0"); Kafka's own list.
bool known_metadata_version(std::string_view v) {
    static constexpr std::string_view versions[] = {
        "0.8.0",       "0.8.1",       "0.8.2",       "0.9.0",       "0.10.0",      "0.10.0-IV0",  "0.10.0-IV1",
        "0.10.1",      "0.10.1-IV0",  "0.10.1-IV1",  "0.10.1-IV2",  "0.10.2",      "0.10.2-IV0",  "0.11.0",
        "0.11.0-IV0",  "0.11.0-IV1",  "0.11.0-IV2",  "1.0",         "1.0-IV0",     "1.1",         "1.1-IV0",
        "2.0",         "2.0-IV0",     "2.0-IV1",     "2.1",         "2.1-IV0",     "2.1-IV1",     "2.1-IV2",
        "2.2",         "2.2-IV0",     "2.2-IV1",     "2.3",         "2.3-IV0",     "2.3-IV1",     "2.4",
        "2.4-IV0",     "2.4-IV1",     "2.5",         "2.5-IV0",     "2.6",         "2.6-IV0",     "2.7",
        "2.7-IV0",     "2.7-IV1",     "2.7-IV2",     "2.8",         "2.8-IV0",     "2.8-IV1",     "3.0",
        "3.0-IV0",     "3.0-IV1",     "3.1",         "3.1-IV0",     "3.2",         "3.2-IV0",     "3.3",
        "3.3-IV0",     "3.3-IV1",     "3.3-IV2",     "3.3-IV3",     "3.4",         "3.4-IV0",     "3.5",
        "3.5-IV0",     "3.5-IV1",     "3.5-IV2",
    };
    static constexpr std::string_view newer[] = {
        "3.6", "3.6-IV0", "3.6-IV1", "3.6-IV2", "3.7", "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3",
        "3.7-IV4", "3.8", "3.8-IV0", "3.9", "3.9-IV0", "4.0-IV0", "4.0-IV1", "4.0-IV2", "4.0-IV3",
    };
    const std::size_t parts = v.starts_with("0.") ? 3 : 2;
    std::string_view key = v;
    std::size_t dots = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (v[i] == '.' && ++dots == parts) {
            key = v.substr(0, i);
            break;
        }
    }
    auto in = [key](const auto& list) { return std::find(std::begin(list), std::end(list), key) != std::end(list); };
    return in(versions) || in(newer);
}

// The validator Kafka's LogConfig attaches to each config, on the parsed value.
std::optional<std::string> check_range(const topic_config_def& d, std::string_view raw, std::int64_t v) {
    const std::string_view n = d.name;
    auto at_least = [&](std::int64_t min) -> std::optional<std::string> {
        if (v < min) return invalid(n, raw, fmt::format("Value must be at least {}", min));
        return std::nullopt;
    };
    auto between = [&](std::int64_t min, std::int64_t max) -> std::optional<std::string> {
        if (v < min) return invalid(n, raw, fmt::format("Value must be at least {}", min));
        if (v > max) return invalid(n, raw, fmt::format("Value must be no more than {}", max));
        return std::nullopt;
    };
    if (n == "segment.bytes") return at_least(14); // LegacyRecord.RECORD_OVERHEAD_V0
    if (n == "segment.index.bytes") return at_least(4);
    if (n == "segment.ms" || n == "flush.messages" || n == "max.compaction.lag.ms" || n == "min.insync.replicas") {
        return at_least(1);
    }
    if (n == "retention.ms") return at_least(-1);
    if (n == "local.retention.ms" || n == "local.retention.bytes") return at_least(-2);
    if (n == "compression.gzip.level") {
        // CompressionType.GZIP's validator: Deflater's 1..9, or -1 (its default).
        if (v > 9 || (v < 1 && v != -1)) return invalid(n, raw, "Value must be between 1 and 9 or equal to -1");
        return std::nullopt;
    }
    if (n == "compression.lz4.level") return between(1, 17);
    if (n == "compression.zstd.level") return between(-131072, 22);
    if (n == "retention.bytes") return std::nullopt; // any long: below 0 is "no limit"
    return at_least(0);                              // every other number of LogConfig
}

} // namespace

std::span<const topic_config_def> topic_config_defs() noexcept { return defs; }

const topic_config_def* find_topic_config(std::string_view name) noexcept {
    auto it = std::lower_bound(std::begin(defs), std::end(defs), name,
                               [](const topic_config_def& d, std::string_view n) { return d.name < n; });
    return it != std::end(defs) && it->name == name ? it : nullptr;
}

bool is_list_topic_config(std::string_view name) noexcept {
    const auto* d = find_topic_config(name);
    return d && d->type == t::list;
}

std::optional<std::string> invalid_topic_config_value(const topic_config_def& d, std::string_view value) {
    const std::string_view v = trim(value);
    switch (d.type) {
    case t::boolean: {
        auto lower_eq = [v](std::string_view word) {
            return v.size() == word.size() && std::equal(v.begin(), v.end(), word.begin(), [](char a, char b) {
                       return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
                   });
        };
        if (lower_eq("true") || lower_eq("false")) return std::nullopt;
        return invalid(d.name, value, "Expected value to be either true or false");
    }
    case t::int32: {
        auto n = parse_integer<std::int32_t>(v);
        if (!n) return invalid(d.name, value, "Not a number of type INT");
        return check_range(d, value, *n);
    }
    case t::int64: {
        auto n = parse_integer<std::int64_t>(v);
        if (!n) return invalid(d.name, value, "Not a number of type LONG");
        return check_range(d, value, *n);
    }
    case t::float64: {
        auto x = parse_double(v);
        if (!x) return invalid(d.name, value, "Not a number of type DOUBLE");
        // min.cleanable.dirty.ratio, between(0, 1).
        if (*x < 0) return invalid(d.name, value, "Value must be at least 0");
        if (*x > 1) return invalid(d.name, value, "Value must be no more than 1");
        return std::nullopt;
    }
    case t::string: {
        if (d.name == "compression.type") {
            // Kafka compares these exactly; skiff has always taken them in any case ("ZSTD"),
            // and clients rely on that, so the case is forgiven here only.
            static constexpr std::array<std::string_view, 6> codecs{"uncompressed", "zstd", "lz4",
                                                                    "snappy",       "gzip", "producer"};
            for (auto c : codecs) {
                if (v.size() == c.size() && std::equal(v.begin(), v.end(), c.begin(), [](char a, char b) {
                        return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
                    })) {
                    return std::nullopt;
                }
            }
            return invalid(d.name, value, "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer");
        }
        if (d.name == "message.timestamp.type") {
            if (v == "CreateTime" || v == "LogAppendTime") return std::nullopt;
            return invalid(d.name, value, "String must be one of: CreateTime, LogAppendTime");
        }
        if (d.name == "message.format.version") {
            if (known_metadata_version(v)) return std::nullopt;
            return invalid(d.name, value, fmt::format("Version {} is not a valid version", v));
        }
        return std::nullopt;
    }
    case t::list: {
        const auto items = list_items(value);
        if (d.name == "cleanup.policy") {
            // ValidList.in("compact", "delete"); the empty list is valid (neither).
            for (auto item : items) {
                if (item != "compact" && item != "delete") {
                    return invalid(d.name, value, "String must be one of: compact, delete");
                }
            }
            return std::nullopt;
        }
        // ThrottledReplicaListValidator: "*" or [partitionId]:[brokerId] items.
        bool all = true;
        std::string joined;
        for (auto item : items) {
            joined += item;
            const auto colon = item.find(':');
            const bool pair = item.empty() ||
                              (colon != std::string_view::npos && colon > 0 && colon + 1 < item.size() &&
                               std::all_of(item.begin(), item.begin() + static_cast<std::ptrdiff_t>(colon),
                                           [](char c) { return c >= '0' && c <= '9'; }) &&
                               std::all_of(item.begin() + static_cast<std::ptrdiff_t>(colon) + 1, item.end(),
                                           [](char c) { return c >= '0' && c <= '9'; }));
            all = all && pair;
        }
        if (all || joined == "*") return std::nullopt;
        return invalid(d.name, value,
                       fmt::format("{} must be the literal '*' or a list of replicas in the following format: "
                                   "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
                                   d.name));
    }
    }
    return std::nullopt;
}

std::optional<std::string> invalid_topic_configs(const std::map<std::string, std::string>& configs) {
    // LogConfig.validateNames, then each value (ConfigDef.parse), then validateValues.
    for (const auto& [name, value] : configs) {
        if (!find_topic_config(name)) return "Unknown topic config name: " + name;
    }
    for (const auto& [name, value] : configs) {
        if (auto why = invalid_topic_config_value(*find_topic_config(name), value)) return why;
    }
    auto long_of = [&](const char* name, std::int64_t dflt) {
        auto it = configs.find(name);
        if (it == configs.end()) return dflt;
        return parse_integer<std::int64_t>(trim(it->second)).value_or(dflt);
    };
    const auto min_lag = long_of("min.compaction.lag.ms", 0);
    const auto max_lag = long_of("max.compaction.lag.ms", std::numeric_limits<std::int64_t>::max());
    if (min_lag > max_lag) {
        return fmt::format("conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
                           min_lag, max_lag);
    }
    return std::nullopt;
}

} // namespace skiff::broker
