// Transaction markers (KIP-98): the control batch a transaction coordinator writes into each
// partition of a transaction when it ends, and reading one back.
//
// A marker is a magic-2 batch with the transactional and control attributes, the producer's
// id and epoch, no sequence (-1), and one record whose key is {version int16 = 0, type int16}
// (0 abort, 1 commit) and whose value is {version int16 = 0, coordinator_epoch int32}, as
// Kafka's EndTransactionMarker writes it. Consumers (librdkafka, the Java client, kafkajs)
// recognise it by the control attribute and never hand it to the application.
//
// Pure functions over caller-owned bytes; any core or thread.
#pragma once

#include <skiff/storage/record_batch.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace skiff::broker::txn {

enum class marker_type : std::int16_t { abort = 0, commit = 1 };

// The whole batch, base offset 0 (the log assigns the real one), CRC-32C set.
std::string make_control_batch(std::int64_t producer_id, std::int16_t producer_epoch, marker_type type,
                               std::int32_t coordinator_epoch, std::int64_t timestamp_ms);

struct control_record {
    marker_type type = marker_type::abort;
    std::int32_t coordinator_epoch = 0;
};

// The marker a control batch holds; nullopt when `b` is not a control batch or its record does
// not parse as a marker (an unknown control type is not an error: Kafka skips those too).
std::optional<control_record> read_control_batch(const storage::batch_view& b);

} // namespace skiff::broker::txn
