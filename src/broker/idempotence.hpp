// The idempotent-producer guard of one produced batch on its partition (KIP-98): reserves the
// batch's sequence range before the append is issued, tells a duplicate (answered with the
// original offsets) from a batch to write, and then completes or aborts the reservation.
// Built on producer_table (the sequence rules); this adds the partition's lifecycle: the
// table is rebuilt from the log's tail before the partition's first idempotent append.
// Private to the broker module; runs on the partition's owning core.
#pragma once

#include "shard.hpp"

#include <skiff/broker/producer_state.hpp>
#include <skiff/storage/record_batch.hpp>

#include <cstdint>
#include <string>

namespace skiff::broker {

// Rebuilds the partition's producer table from its log's tail unless done already (one
// rebuild at a time; later callers wait for it).
// `sh`: the partition's core (its store holds the abort index).
runtime::task<void> ensure_producers_loaded(shard* sh, partition_slot* slot, std::string topic, std::int32_t partition);

class idempotence_guard {
public:
    // `batch` is the validated batch about to be appended to `slot`. A batch without a
    // producer id makes every call below a no-op and reserve() answer accept.
    idempotence_guard(shard& sh, partition_slot& slot, std::string topic, std::int32_t partition,
                      const storage::batch_view& batch);
    ~idempotence_guard(); // aborts a reservation neither completed nor handed to complete_when_durable
    idempotence_guard(const idempotence_guard&) = delete;
    idempotence_guard& operator=(const idempotence_guard&) = delete;

    bool idempotent() const noexcept { return _pid >= 0; }

    // Checks the batch against the producer's state and reserves its range when it is next
    // in order. Rebuilds the table first if this is the partition's first idempotent append
    // (concurrent callers wait for that, then proceed in arrival order). While the very same
    // batch is being appended by another request it waits for that outcome (up to ~10 s,
    // then answers duplicate_pending). Completes without suspending when the table is
    // loaded and the batch is not pending elsewhere: produce ordering relies on it.
    runtime::task<producer_table::check_result> reserve();

    // The reserved batch was appended at [base, last] and is as durable as asked.
    void complete(std::int64_t base, std::int64_t last);
    // The reserved batch was not appended: the producer's retry is accepted as new.
    void abort();
    // The append timed out but its data is being stored at [base, last]: the range stays
    // reserved (a retry is not written twice) and is completed when the log reports it
    // durable (partition_log::on_durable), so the retry is then answered as a duplicate with
    // these offsets.
    void complete_when_durable(std::int64_t base, std::int64_t last);

private:
    shard& _sh;
    partition_slot& _slot;
    std::string _topic;
    std::int32_t _partition;
    std::int64_t _pid;
    std::int16_t _epoch;
    std::int32_t _base_seq;
    std::int32_t _last_seq;
    std::int64_t _max_timestamp;
    bool _reserved = false;
};

} // namespace skiff::broker
