// `skiff produce` input: one record per line, an optional key separator (kcat's -K), headers
// given as -H key=value, and the partition a keyed record goes to (Kafka's default
// partitioner). Pure functions.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/storage/record_batch.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::cli {

// Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), seed 0x9747b28c.
std::int32_t murmur2(std::string_view data) noexcept;

// The partition Kafka's default partitioner (and librdkafka's murmur2_random, kafkajs's
// default) picks for a non-null key: (murmur2(key) & 0x7fffffff) % partitions.
std::int32_t partition_for_key(std::string_view key, std::int32_t partitions) noexcept;

// `-H name=value`: split at the first '='. A header without '=' has a null value (kcat does
// the same). An empty name is an error.
result<storage::record_header, std::string> parse_header(std::string_view text);

// One input line as a record: with a non-empty `key_separator`, the text before its first
// occurrence is the key and the rest the value (a line without the separator is an error, so a
// typo does not silently produce keyless records); otherwise the whole line is the value and
// the key is null. `headers` are attached to every record. A trailing '\r' is removed.
result<storage::record, std::string> parse_line(std::string_view line, std::string_view key_separator,
                                                const std::vector<storage::record_header>& headers);

} // namespace skiff::cli
