// Kafka's produce validation, in its one home: every rule a produced batch is checked against
// before it reaches a partition log, with the error Kafka returns for it (LogValidator and
// ReplicaManager.appendToLocalLog in Apache Kafka). The batch is parsed here once; the storage
// layer appends the parsed view without parsing it again.
//
// Pure functions: no I/O, no allocation beyond a rewritten batch; callable on any core.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/kafka/errors.hpp>
#include <skiff/storage/record_batch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace skiff::broker {

// What a topic's configs (over the broker's defaults) ask of a produced batch. Built once per
// catalog snapshot, read by every produce of the topic.
struct topic_policy {
    topic_policy() = default;
    // max.message.bytes of the topic, else the broker's message.max.bytes: the largest batch
    // (12 + batchLength, after any recompression) the log takes.
    std::int64_t max_message_bytes = 1048588;
    bool compact = false;         // cleanup.policy includes "compact": every record needs a key
    bool deletes = true;          // cleanup.policy includes "delete": retention and DeleteRecords apply
    bool log_append_time = false; // message.timestamp.type=LogAppendTime
    std::int64_t timestamp_difference_max_ms = std::numeric_limits<std::int64_t>::max();
    // message.timestamp.before.max.ms / after.max.ms; at the maximum (their default) the
    // difference above applies on that side instead, as in Kafka.
    std::int64_t timestamp_before_max_ms = std::numeric_limits<std::int64_t>::max();
    std::int64_t timestamp_after_max_ms = std::numeric_limits<std::int64_t>::max();
    // compression.type: nullopt = "producer" (kept as sent); else the codec the log stores
    // (compression_codec::none for "uncompressed").
    std::optional<storage::compression_codec> compression;
    // Not a Kafka config: the most a compressed batch may decompress to before it is refused
    // (MESSAGE_TOO_LARGE), so a small "decompression bomb" cannot exhaust the broker's memory.
    std::size_t max_uncompressed_bytes = 64u << 20;
    // retention.ms / retention.bytes (-1: unlimited): read by the partition log's retention.
    std::int64_t retention_ms = -1;
    std::int64_t retention_bytes = -1;
    // Compaction (compact = true): tombstones kept this long; records younger than the lag
    // stay uncompacted (Kafka's delete.retention.ms, min.compaction.lag.ms).
    std::int64_t delete_retention_ms = 86400000;
    std::int64_t min_compaction_lag_ms = 0;
};

// The policy from a topic's configs (only those set on it) over the broker-wide defaults.
// Fails with one sentence naming the config and value that cannot be understood.
result<topic_policy, std::string> make_topic_policy(const std::map<std::string, std::string>& topic_configs,
                                                    const topic_policy& broker_defaults);

// One record Kafka names in a rejection (ProduceResponse v8+ record_errors).
struct record_error {
    std::int32_t batch_index = 0; // the record's index inside the batch
    std::string message;
};

struct produce_rejection {
    produce_rejection() = default;
    produce_rejection(kafka::error_code c, std::string m) : code(c), message(std::move(m)) {}
    kafka::error_code code = kafka::error_code::corrupt_message;
    std::string message;
    std::vector<record_error> record_errors;
};

// A batch that passed every rule. `view` points either into the request's bytes or, when the
// batch had to be rewritten (LogAppendTime, recompression), into `owned`; the caller keeps
// this object alive until the append that uses `view` has completed. Moving it keeps `view`
// valid (the std::string's heap buffer moves with it; `owned` is never short enough for SSO
// because a batch is at least 61 bytes).
struct validated_batch {
    storage::batch_view view;
    std::string owned;
};

// Parses the partition's record set (exactly one magic-2 batch, as Produce v3+ requires) and
// applies every rule of `policy` at broker time `now_ms`. Never throws; a rejection names the
// Kafka error code and, where Kafka gives them, the offending records.
result<validated_batch, produce_rejection> validate_produce(std::span<const char> record_set,
                                                            const topic_policy& policy, std::int64_t now_ms);

} // namespace skiff::broker
