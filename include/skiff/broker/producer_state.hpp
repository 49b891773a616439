// Idempotent producers on one partition: Kafka's sequence rules, so that a producer's retries
// never write a batch twice and a lost batch is noticed (KIP-98).
//
// Per producer id the table keeps the epoch and the last five batches' sequence ranges with
// the offsets they were written at. A batch is a duplicate when its range equals one of them
// (the producer retried after a lost answer: it gets the original offsets, nothing is
// written), in order when it starts right after the newest, and out of order otherwise. A
// batch's sequence range is reserved when it is accepted, before its append completes, so
// pipelined requests of one producer (max.in.flight up to 5) are checked against each other
// in arrival order, which is also the order the log appends them in.
//
// After a restart the table is rebuilt from the batch headers at the end of the log (the
// broker reads a window of recent offsets before the partition's first idempotent append), so
// a retry of a batch that was stored just before a crash is still recognised. A producer
// older than that window is accepted at whatever sequence it sends (Kafka does the same for
// producers whose state expired).
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace skiff::broker {

class producer_table {
public:
    enum class verdict : std::uint8_t {
        accept,            // new and in order: reserved, call complete() or abort()
        duplicate,         // already written at [base_offset, last_offset]
        duplicate_pending, // the same batch is being appended right now: retry later
        out_of_order,      // OUT_OF_ORDER_SEQUENCE_NUMBER
        stale_epoch,       // INVALID_PRODUCER_EPOCH (fenced by a newer epoch)
    };
    struct check_result {
        verdict v = verdict::accept;
        std::int64_t base_offset = -1;
        std::int64_t last_offset = -1;
    };

    explicit producer_table(std::size_t max_producers = 10000) : _max(max_producers) {}

    // `last_seq` = base_seq + record_count - 1 (wrapping past INT32_MAX to 0, as Kafka does).
    check_result check_and_reserve(std::int64_t pid, std::int16_t epoch, std::int32_t base_seq,
                                   std::int32_t last_seq, std::uint64_t now_ms);
    // The reserved batch was appended at these offsets.
    // `max_timestamp`: the batch's, shown by DescribeProducers (-1: unknown).
    void complete(std::int64_t pid, std::int16_t epoch, std::int32_t base_seq, std::int64_t base_offset,
                  std::int64_t last_offset, std::int64_t max_timestamp = -1);
    // The reserved batch was not appended: forget it so the producer's retry is accepted.
    void abort(std::int64_t pid, std::int16_t epoch, std::int32_t base_seq);
    // Replays a batch found in the log (in offset order), as if it had been accepted and
    // completed: rebuilds the table after a restart. Older epochs than known are ignored.
    void replay(std::int64_t pid, std::int16_t epoch, std::int32_t base_seq, std::int32_t last_seq,
                std::int64_t base_offset, std::int64_t last_offset, std::uint64_t now_ms,
                std::int64_t max_timestamp = -1);

    // A transaction marker at `epoch` was written for the producer: older epochs are refused
    // from now on (stale_epoch), and the new epoch starts its sequences afresh.
    void fence(std::int64_t pid, std::int16_t epoch);

    std::size_t size() const noexcept { return _producers.size(); }

    // DescribeProducers: each known producer with its epoch and its latest written batch's last
    // sequence and max timestamp (-1 while none is written yet), by producer id.
    struct producer_info {
        std::int64_t producer_id = -1;
        std::int16_t epoch = -1;
        std::int32_t last_sequence = -1;
        std::int64_t last_timestamp = -1;
    };
    std::vector<producer_info> describe() const;

    static std::int32_t next_seq(std::int32_t seq, std::int32_t n) noexcept; // wraps at INT32_MAX

private:
    struct batch {
        std::int32_t first_seq = 0;
        std::int32_t last_seq = 0;
        std::int64_t base_offset = -1;
        std::int64_t last_offset = -1;
        std::int64_t max_timestamp = -1;
        bool pending = true;
    };
    struct producer {
        std::int16_t epoch = 0;
        std::deque<batch> batches; // oldest first, at most 5
        std::uint64_t last_used_ms = 0;
    };
    void evict_one();

    std::unordered_map<std::int64_t, producer> _producers;
    std::size_t _max;
};

} // namespace skiff::broker
