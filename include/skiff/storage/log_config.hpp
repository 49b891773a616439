// The partition log's settings and the values its calls return, apart from the log itself
// so the parts of the log (flush pipeline, segment cache, restore) and its users' configs
// need not include the façade. See partition_log.hpp for what they mean in use.
#pragma once

#include <skiff/metrics/trace.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace skiff::runtime {
class semaphore;
}

namespace skiff::storage {

class cache_budget;

enum class upload_mode : std::uint8_t { parallel, sequential };

struct log_config {
    log_config() = default;
    std::size_t segment_bytes = 4 << 20;       // flush when the buffer holds this much
    std::size_t segment_records = 100000;      // ... or this many records
    std::chrono::milliseconds max_age{100};    // ... or its oldest record is this old
    // Unset (the default): adaptive group commit (docs/flush-scheduling.md): an acks=all append
    // to a partition with no upload in flight is flushed in the same reactor turn; behind
    // uploads in flight, appends gather until a slot frees or the oldest waiter has waited a
    // quarter of the observed round trip. Set: the fixed rule, a flush starts this long after
    // the first append someone waits on (a bound that trades latency for fewer PUTs).
    std::optional<std::chrono::milliseconds> linger;
    // Pipelining depth: the most segments of one partition uploading at once. Adaptive
    // scheduling keeps the depth below this as the round trip and the arrival rate require.
    int max_inflight_flushes = 16;
    upload_mode mode = upload_mode::parallel;
    int index_interval = 100;
    std::size_t max_pending_bytes = 64 << 20;  // buffered + in flight; appends wait beyond
    // Bytes buffered + in flight across every log that shares it (the broker: one per core);
    // appends wait beyond, like at max_pending_bytes. Null: no shared bound. The semaphore
    // must live on the log's core and outlive the log's pending data.
    std::shared_ptr<runtime::semaphore> shared_memory;
    // Offsets buffered + in flight; appends wait beyond. It bounds the offsets a deposed
    // owner may still write after a takeover (docs/cluster.md, "Storage").
    std::size_t max_pending_records = std::size_t{1} << 20;
    // Cluster mode. Set: every appended batch's partitionLeaderEpoch is overwritten with it,
    // as a Kafka leader does. Unset: batches are stored as the producer sent them.
    std::optional<std::int32_t> leader_epoch;
    // Offsets skipped at open: new data starts at the restored next offset + this, so that
    // segments a deposed owner may still upload land where this log never writes. Larger
    // than max_pending_records after an unclean takeover; 0 otherwise.
    std::int64_t takeover_gap = 0;
    // New data starts at least here: a clean hand-over passes on where the previous owner's
    // offsets ended, which lies past the restored end when that owner itself started after a
    // gap and never committed (docs/cluster.md).
    std::int64_t min_next_offset = 0;
    std::chrono::milliseconds append_timeout{30000};
    std::chrono::milliseconds retry_base{20};
    std::chrono::milliseconds retry_cap{2000};
    bool repair_orphans = true;                // rebuild and upload missing .index files
    // Write a time-index sidecar (.kfst) beside every segment a flush, merge or compaction
    // stores. Optional for readers, so never on the acknowledgement's path: a flush sends it
    // alongside the pair but commits without it (flush_pipeline.hpp).
    bool time_index = true;
    // close() waits this long for uploads to land; then it cancels them, and appends that
    // were waiting fail (they were never acknowledged).
    std::chrono::milliseconds close_timeout{30000};
    std::size_t cache_bytes = 32 << 20;        // committed segments kept for readers
    // The same, across every log sharing it (the broker: one per core; cache_budget.hpp).
    // Null: only cache_bytes bounds this log's cache.
    std::shared_ptr<cache_budget> shared_cache;
    std::function<std::int64_t()> wall_ms;     // segment created-time; null: system clock

    // Partition manifests (manifest_format.hpp, docs/format.md): a checkpoint of the log is
    // written after this many new segments, or this long after the first change, and at
    // close; restore then reads it instead of listing every segment.
    bool manifests = true;
    std::size_t manifest_every_segments = 64;
    std::chrono::milliseconds manifest_interval{30000};
    // Retention, Kafka's retention.ms / retention.bytes (-1: unlimited); changed live with
    // partition_log::set_retention.
    std::int64_t retention_ms = -1;
    std::int64_t retention_bytes = -1;
    // Objects of segments that left the log are deleted this long after (Kafka's
    // file.delete.delay.ms), so a fetch that is reading one is never broken.
    std::chrono::milliseconds delete_delay{60000};
    // Segment merging (docs/lifecycle.md, "Merging"): adjacent segments smaller than half of
    // merge_target_bytes are merged, in the same format, into one of at most that size, once
    // they add up to half of it or the newest of them is older than merge_age. The merged
    // object replaces the first source under its own key (its bytes start with the source's,
    // unchanged); the others are deleted like retention's, after a manifest and delete_delay.
    // 0: no merging.
    std::uint64_t merge_target_bytes = 0;
    std::chrono::milliseconds merge_age{600000};
    // Compaction (cleanup.policy=compact; docs/lifecycle.md, "Compaction"): keep the latest
    // record of each key; tombstones go delete_retention_ms after their timestamp; a segment
    // is compacted only once all its records are min_compaction_lag_ms old. A pass runs at
    // most every compaction_interval, and only when segments were added since the last one.
    bool compact = false;
    std::int64_t delete_retention_ms = 86400000;
    std::int64_t min_compaction_lag_ms = 0;
    std::chrono::milliseconds compaction_interval{15000};
    // The memory a pass's key map may use (Kafka's log.cleaner.dedupe.buffer.size). A log with
    // more distinct keys is compacted in rounds: each pass maps the keys of as many
    // not-yet-compacted segments as fit (at least one) and rewrites the log up to there; the
    // next pass goes on from that point. Passes sharing compaction_slots run one at a time,
    // so the broker holds at most this much per core.
    std::size_t compaction_map_bytes = 128u << 20;
    // Segments a pass reads ahead with GETs in parallel (at most 16 MiB of them at once).
    std::size_t compaction_read_ahead = 8;
    std::shared_ptr<runtime::semaphore> compaction_slots;
    // How often the background work (manifest, retention, deletes) looks for something to do.
    std::chrono::milliseconds lifecycle_tick{1000};
    // Store requests of that background work in flight at once across every log sharing it
    // (the broker: one per core), taken before an io budget permit, so flushes and fetches
    // always keep the rest of the budget. Null: one request at a time per log, no shared bound.
    std::shared_ptr<runtime::semaphore> background_io;
};

enum class append_errc {
    corrupt_message = 1, // a batch failed validation (CRC, magic, framing): Kafka CORRUPT_MESSAGE
    unsupported_version, // magic 0/1
    timed_out,           // not durable within append_timeout; retriable (REQUEST_TIMED_OUT)
    shutting_down,       // the log is closing; retriable (NOT_LEADER-like)
    cancelled,
    // Another owner wrote where this log was going to: it was deposed. Nothing it had not
    // acknowledged yet will be; retriable once the new owner serves the partition
    // (NOT_LEADER_OR_FOLLOWER).
    fenced,
    // No room within the caller's room timeout (append's `room_timeout`): the partition's or
    // the shared bytes bound stayed full because the store is slow. Nothing was appended;
    // retriable (REQUEST_TIMED_OUT, with the wait reported as throttle time).
    no_room,
};

struct append_error {
    append_error() = default;
    append_error(append_errc c, std::string m) : code(c), message(std::move(m)) {}
    append_errc code = append_errc::corrupt_message;
    std::string message;
    // The offsets the records were given, when they were given some (a timed-out append's
    // data is still being stored there; -1 when nothing was appended).
    std::int64_t base_offset = -1;
    std::int64_t last_offset = -1;
    // How long the append waited for room under the memory bounds (admission).
    std::chrono::nanoseconds room_wait{0};
};

struct append_result {
    std::int64_t base_offset = 0;
    std::int64_t last_offset = 0;
    // ack_mode::durable: the root span of the flush that committed the data, for the
    // caller's produce span to link to (`produce.link(r.flush_span)`). Invalid (not
    // valid()) for other ack modes and when tracing was off at that flush.
    metrics::span_context flush_span{};
    // How long the append waited for room under the memory bounds (admission): zero unless the
    // store fell behind. The broker reports it to the producer as throttle_time_ms.
    std::chrono::nanoseconds room_wait{0};
};

enum class ack_mode : std::uint8_t { none, leader, durable }; // Kafka acks 0, 1, -1

struct read_result {
    std::string records;          // whole batches, concatenated
    std::int64_t high_watermark = 0;
    std::int64_t log_start_offset = 0;
};

struct restore_report {
    std::size_t segments = 0;
    std::size_t orphan_kfs = 0;      // .kfs without .index (served by walking)
    std::size_t orphan_index = 0;    // .index without .kfs (ignored)
    std::size_t corrupt = 0;         // .kfs with a missing or wrong footer (not served)
    std::size_t repaired = 0;        // indexes rebuilt and uploaded
    std::size_t gaps = 0;            // offset ranges no segment covers
    std::size_t list_pages = 0;
    std::size_t gets = 0;
    std::int64_t next_offset = 0;
    bool from_manifest = false;         // restored from a manifest plus a LIST of what is newer
    std::size_t manifest_segments = 0;  // segments the manifest listed
    std::size_t manifests_unusable = 0; // newer manifests skipped (corrupt, unreadable)
};

struct log_stats {
    std::uint64_t appends = 0;
    std::uint64_t appended_records = 0;
    std::uint64_t flushes = 0;
    std::uint64_t flushed_bytes = 0;
    std::uint64_t upload_retries = 0;
    // A PUT refused as "already exists" whose stored bytes were ours: an earlier attempt
    // landed but its answer was lost.
    std::uint64_t upload_already_landed = 0;
    std::uint64_t timed_out_appends = 0;
    std::uint64_t cache_hits = 0;
    std::uint64_t cache_misses = 0;
    std::size_t inflight_flushes = 0;
    std::size_t buffered_bytes = 0;
    std::size_t pending_bytes = 0;
};

} // namespace skiff::storage
