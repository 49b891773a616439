// The processor side's segment reader: reads a topic straight from the bucket (S3 or the local
// store), without a broker. Two parts:
//
//  - topic_discovery finds a topic's partitions and segments and keeps them up to date
//    incrementally: the first refresh lists each partition's prefix once; later refreshes list
//    only the keys after the last one seen (LIST start-after), so a long-running processor
//    never re-lists the whole namespace. .kfs and .index are paired by base offset with the
//    completeness rules of docs/format.md ("Rules skiff adds"): a .kfs without .index is read
//    by walking its batches; an .index without .kfs is ignored and reported; the offsets of a
//    segment run from its base up to the next segment's base; a partition's log start (from
//    its newest manifest, when there is one) hides what retention deleted.
//
//  - segment_scan reads a planned list of segments in order with a bounded pool of parallel
//    ranged GETs and read-ahead: a rolling window refilled as soon as a GET ends, whether or
//    not the consumer is inside next(), within parallel_gets and read_ahead_bytes
//    (docs/reader.md). It checks every batch CRC, decompresses gzip/snappy/lz4/zstd batches,
//    and yields records in offset order per partition, segment after segment in plan order.
//    Pruning by offset uses the base offsets; pruning by timestamp uses the .kfst sidecar
//    (fetched only when a time bound is given), falling back to reading the segment when the
//    sidecar is missing.
//
// Both belong to the core (reactor) that created them, like the store they read. Every call
// takes a stop_token and never reports cancellation as success.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/reader/errc.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/object_store.hpp>
#include <skiff/storage/record_batch.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::reader {

// One segment of a partition as discovery found it.
struct segment_ref {
    segment_ref() = default;
    std::string topic;
    std::int32_t partition = 0;
    std::int64_t base = 0;          // first offset (from the key)
    std::int64_t end = -1;          // exclusive end = the next segment's base; -1 for the newest (read to its footer)
    std::uint64_t kfs_size = 0;
    bool has_index = false;
    bool has_time_index = false;    // a .kfst sidecar was listed
    std::int64_t log_start = 0;     // the partition's log start when planned: offsets below are hidden
};

struct partition_segments {
    partition_segments() = default;
    std::int32_t partition = 0;
    std::int64_t log_start = 0;            // offsets below are deleted (newest manifest), 0 without one
    std::vector<segment_ref> segments;     // increasing base; only segments with a .kfs
};

// Something discovery or a scan found wrong with the bucket: reported, never misread.
struct finding {
    finding() = default;
    enum class kind : std::uint8_t { orphan_index, stray_key, corrupt_segment, missing_index };
    kind what = kind::stray_key;
    std::string key;
    std::string detail;
};
const char* to_string(finding::kind k) noexcept;

struct discovery_stats {
    std::uint64_t list_requests = 0;
    std::uint64_t keys_listed = 0;
};

class topic_discovery {
public:
    topic_discovery(storage::object_store& store, std::string ns, std::string topic);
    ~topic_discovery();
    topic_discovery(const topic_discovery&) = delete;
    topic_discovery& operator=(const topic_discovery&) = delete;

    // Lists what is new since the last refresh (everything on the first). Errors: the store's
    // (as errc::store_failed, with its sentence).
    runtime::task<result<void, reader_error>> refresh(std::stop_token st);

    // By partition number. A topic with no objects has none.
    const std::map<std::int32_t, partition_segments>& partitions() const noexcept;
    // Everything found wrong so far (each key once).
    const std::vector<finding>& findings() const noexcept;
    const discovery_stats& stats() const noexcept;

private:
    struct impl;
    std::unique_ptr<impl> _impl;
};

// The topics of a namespace that have at least one segment object (sorted).
runtime::task<result<std::vector<std::string>, reader_error>> list_topics(storage::object_store& store,
                                                                          const std::string& ns, std::stop_token st);

// Inclusive bounds; nullopt = unbounded.
struct scan_bounds {
    scan_bounds() = default;
    std::optional<std::int64_t> min_offset, max_offset;
    std::optional<std::int64_t> min_timestamp, max_timestamp; // ms since the epoch
};

// Segments of `parts` that may hold records within `b` by offset (log start and base offsets
// only; time pruning happens in the scan, through the .kfst sidecars), in partition order and
// then base order. `only_partitions` empty = every partition.
std::vector<segment_ref> plan(const std::map<std::int32_t, partition_segments>& parts, const scan_bounds& b,
                              const std::vector<std::int32_t>& only_partitions = {});

// One GET a scan made (for traces): what it asked for and when, on the steady clock.
struct get_event {
    std::string_view key;                      // valid during the call only
    std::optional<storage::byte_range> range;  // nullopt: the whole object
    std::uint64_t bytes = 0;                   // received
    std::chrono::steady_clock::time_point start, end;
    bool ok = false;                           // false: failed or cancelled
};

struct scan_config {
    scan_config() = default;
    std::size_t parallel_gets = 16;                          // GETs in flight at once
    std::size_t read_ahead_bytes = 64u << 20;                // bytes fetched ahead of the consumer
    std::size_t max_segment_bytes = 1u << 30;                // larger segments are refused (errc::too_large)
    std::size_t max_uncompressed_batch_bytes = 64u << 20;    // decompression bomb bound per batch
    std::size_t part_bytes = 8u << 20;                       // bytes per ranged GET of a segment
    storage::io_budget* budget = nullptr;                    // shared with the storage engine; null = none
    // Called on the scan's core when each GET ends (failed and cancelled ones too), possibly
    // after the scan was destroyed (GETs still in flight end on a later reactor turn). Cheap;
    // must not throw.
    std::function<void(const get_event&)> on_get;
};

// One record. Views point into the current chunk and live until the next call to next().
struct record_row {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int64_t timestamp = 0;         // ms; LogAppendTime batches carry the batch's max timestamp
    std::optional<std::string_view> key;
    std::optional<std::string_view> value;
    const std::vector<storage::header_view>* headers = nullptr;
};

// Records of one batch-sized step, in offset order. Bounds are already applied.
struct chunk {
    std::string topic;
    std::int32_t partition = 0;
    std::vector<record_row> rows;
};

struct scan_stats {
    std::uint64_t segments_planned = 0;
    std::uint64_t segments_read = 0;
    std::uint64_t segments_pruned = 0;     // skipped by the .kfst time bounds
    std::uint64_t gets = 0;
    std::uint64_t bytes_read = 0;
    std::uint64_t read_ahead_hits = 0;     // segments already fetched when the consumer reached them
    std::uint64_t max_gets_in_flight = 0;
    std::uint64_t batches = 0;
    std::uint64_t records = 0;
};

class segment_scan {
public:
    // GETs and fetched bytes are only read ahead while this core's reactor runs: a consumer
    // that drives its reactor only inside next() (run_until_complete) still overlaps the GETs
    // with the rest of next()'s wait, not with its own work between calls.
    segment_scan(storage::object_store& store, std::string ns, std::vector<segment_ref> plan, scan_bounds bounds,
                 scan_config cfg = {});
    // Stops the GETs still in flight without waiting. Their tasks hold the scan's state, so
    // nothing dangles; they end on a later turn of this core's reactor (the store and the
    // io_budget must live until then). Prefer `co_await close()` first, which waits for them.
    ~segment_scan();
    segment_scan(const segment_scan&) = delete;
    segment_scan& operator=(const segment_scan&) = delete;

    // The next non-empty chunk in plan order; nullptr at the end. Errors: a GET that failed
    // after the store's retries (store_failed), a corrupt segment or batch (corrupt, naming the
    // key and offset), a limit (too_large), cancelled. After an error the scan is finished.
    runtime::task<result<const chunk*, reader_error>> next(std::stop_token st);

    // Stops every GET still in flight and resumes once all of them have ended; afterwards
    // next() fails with cancelled. Idempotent. A scan may be destroyed without it.
    runtime::task<void> close();

    const scan_stats& stats() const noexcept;
    std::uint64_t gets_in_flight() const noexcept;
    // Corrupt segments (and batches) this scan met, as finding::kind::corrupt_segment, each
    // key once, with the error's sentence as detail: for callers that report findings next to
    // topic_discovery::findings() rather than only the error that ended the scan.
    const std::vector<finding>& findings() const noexcept;

private:
    struct impl;
    std::shared_ptr<impl> _impl; // shared with the GET tasks still running
};

} // namespace skiff::reader
