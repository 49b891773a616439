// Kafka look-ups shared by `skiff produce`, `skiff consume` and `skiff group`: a topic's
// partitions and leaders, and ListOffsets (earliest, latest, by time) per partition.
//
// Reactor thread only, like the client they use.
#pragma once

#include <skiff/client/client.hpp>
#include <skiff/core/result.hpp>
#include <skiff/runtime/task.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace skiff::cli {

// ListOffsets' special timestamps.
inline constexpr std::int64_t latest_timestamp = -1;
inline constexpr std::int64_t earliest_timestamp = -2;

struct topic_layout {
    topic_layout() = default;
    std::string topic;
    std::map<std::int32_t, std::int32_t> leaders; // partition -> leader node id (-1: none)
};

// The topic's partitions from Metadata. `auto_create`: ask the broker to create a missing
// topic (as kcat's producer does), retrying while it answers LEADER_NOT_AVAILABLE. A topic
// that does not exist is a broker_error with UNKNOWN_TOPIC_OR_PARTITION.
runtime::task<result<topic_layout, client::error>> describe_topic(client::client& c, std::string topic,
                                                                  bool auto_create);

// ListOffsets for `partitions` of `layout` at `timestamp` (earliest_timestamp,
// latest_timestamp, or Unix ms: the first offset whose timestamp is >= it). One request per
// leader. partition -> offset, -1 where the broker found none (a time after every record).
runtime::task<result<std::map<std::int32_t, std::int64_t>, client::error>>
list_offsets(client::client& c, const topic_layout* layout, std::vector<std::int32_t> partitions,
             std::int64_t timestamp);

} // namespace skiff::cli
