// Log compaction's record-level rules (Kafka's cleanup.policy=compact), apart from any I/O, so
// the partition log (log_compact.cpp), tests and benchmarks share them.
//
// Two passes over the part of a log being compacted. The first (key_index::add) learns, for
// every key, the offset of its latest record, and for every producer id the base offset of
// its latest batch. The second (filter_batch) rewrites each batch keeping:
//   - a record whose offset is its key's latest, unless it is a tombstone (null value) older
//     than delete.retention.ms;
//   - every record without a key (a compacted topic refuses them, but older data may hold some);
//   - control batches (transaction markers) whole.
// A batch keeps its base offset, last offset delta, base sequence, producer id and epoch, so
// offsets stay what they were (gaps are normal, as in Kafka) and an idempotent or transactional
// producer's sequence checks still hold; a batch left with no records survives as an empty
// batch (header only) when it is its producer's latest, as Kafka's cleaner keeps it.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/storage/record_batch.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace skiff::storage {

struct compaction_rules {
    compaction_rules() = default;
    std::int64_t now_ms = 0;
    std::int64_t delete_retention_ms = 86400000; // Kafka's delete.retention.ms
    std::size_t max_uncompressed = 64u << 20;     // bound for decompressing one batch
};

class key_index {
public:
    // Learns the records of one batch (decompressing it if needed). Batches must come in
    // offset order.
    result<void, format_error> add(const batch_view& batch, std::size_t max_uncompressed);

    // The offset of `key`'s latest record; nullopt when never seen.
    std::optional<std::int64_t> latest(std::string_view key) const;
    // Whether the batch at `base_offset` is the latest of producer `producer_id`.
    bool producer_latest(std::int64_t producer_id, std::int64_t base_offset) const;
    std::size_t keys() const noexcept { return _latest.size(); }
    std::size_t records() const noexcept { return _records; }
    // An estimate of the memory the map holds (keys, entries, buckets), to bound a pass.
    std::size_t memory_bytes() const noexcept;
    // Producers' latest batches, carried from one pass to the next: a round that does not map
    // a segment still knows whether its batch is a producer's latest. Batches learned later
    // (by add) win when newer.
    void learn_producer(std::int64_t producer_id, std::int64_t base_offset);
    const std::unordered_map<std::int64_t, std::int64_t>& producers() const noexcept { return _producers; }

private:
    struct hash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, std::int64_t, hash, std::equal_to<>> _latest;
    std::unordered_map<std::int64_t, std::int64_t> _producers;
    std::size_t _records = 0;
    std::size_t _key_heap_bytes = 0; // key bytes outside the strings' inline buffers
};

// What filter_batch did with one batch.
enum class batch_fate : std::uint8_t { kept, rewritten, emptied, dropped };

struct filtered_batch {
    filtered_batch() = default;
    batch_fate fate = batch_fate::kept;
    std::string bytes;            // the batch to write (rewritten or emptied); empty when kept or dropped
    std::int32_t records_in = 0;
    std::int32_t records_out = 0;
};

// Applies the rules above to one batch. `keep_empty`: keep a header-only batch even when the
// producer rule would drop it (the caller's last batch, so a segment is never empty).
result<filtered_batch, format_error> filter_batch(const batch_view& batch, const key_index& index,
                                                  const compaction_rules& rules, bool keep_empty = false);

} // namespace skiff::storage
