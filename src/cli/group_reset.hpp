// The plan of `skiff group reset-offsets`: what each partition's committed offset becomes.
//
// Pure functions, the rules of Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand):
//   --to-earliest / --to-latest   the log start / log end offset
//   --to-offset N                 N, clamped to [log start, log end]
//   --shift-by N                  committed + N, clamped; a partition without a committed
//                                 offset is an error (Kafka: "Cannot shift offset ... since there
//                                 is no current committed offset")
//   --to-datetime T               the first offset whose timestamp is >= T (ListOffsets by
//                                 timestamp), or the log end when no record is that new
#pragma once

#include <skiff/core/result.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace skiff::cli {

enum class reset_mode : std::uint8_t { to_earliest, to_latest, to_offset, to_datetime, shift_by };

struct reset_spec {
    reset_spec() = default;
    reset_spec(reset_mode m, std::int64_t v) : mode(m), value(v) {}
    reset_mode mode = reset_mode::to_earliest;
    std::int64_t value = 0; // the offset, the shift, or Unix ms for to_datetime
};

// What is known about one partition before planning.
struct partition_state {
    partition_state() = default;
    partition_state(std::string t, std::int32_t p, std::int64_t log_start, std::int64_t log_end)
        : topic(std::move(t)), partition(p), earliest(log_start), latest(log_end) {}
    std::string topic;
    std::int32_t partition = 0;
    std::int64_t earliest = 0;
    std::int64_t latest = 0;
    std::optional<std::int64_t> committed;
    // For to_datetime: ListOffsets' answer for the timestamp; nullopt when it found no record
    // (offset -1).
    std::optional<std::int64_t> offset_for_time;
};

struct planned_reset {
    planned_reset() = default;
    std::string topic;
    std::int32_t partition = 0;
    std::optional<std::int64_t> current; // the committed offset before
    std::int64_t target = 0;
};

// One planned offset per input partition, in input order; an error message naming the first
// partition that cannot be planned (shift-by without a committed offset).
result<std::vector<planned_reset>, std::string> plan_reset(const std::vector<partition_state>& parts,
                                                           const reset_spec& spec);

// Consumer lag as Kafka's tool shows it: log end - committed, never negative; nullopt without
// a committed offset.
std::optional<std::int64_t> lag(std::optional<std::int64_t> committed, std::int64_t log_end);

} // namespace skiff::cli
