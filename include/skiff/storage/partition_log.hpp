// A partition's log on the object store: the heart of skiff.
//
// Write path. append() assigns offsets (patching each batch's base offset in place) into a
// write buffer. A flush turns the buffer into one segment: the .kfs and its .index are built
// once, in one pass, and uploaded together (`when_all(put(kfs), put(index))`) — or one after
// the other with upload_mode::sequential, kept as a measurable baseline. Up to
// max_inflight_flushes segments of a partition upload at once; they commit strictly in
// offset order. An append is acknowledged only when its segment and every earlier segment
// have both objects stored; the high watermark is the end of that committed prefix.
//
// Failures. A failed upload is retried with backoff under the same key with the same bytes
// (a segment's bytes never change once built). An append whose deadline passes fails with a
// retriable error while its data keeps being retried: nothing is ever acknowledged that is
// not inside a committed segment. Memory held by unflushed and in-flight data is bounded; at
// the bound, appends wait.
//
// Read path. read() serves batches from the segment holding the offset onward, across
// segment boundaries, up to max_bytes and the high watermark. Recently committed segments are
// served from memory; older ones through range GETs from the index position (or by walking
// the segment when its index is missing).
//
// Restore. open() lists the partition's prefix, pairs .kfs and .index by base offset, and
// reads only the newest segment's footer to find the next offset. Orphans never block it.
//
// Observability. Metrics (skiff_flush_*, skiff_store_*, skiff_log_*, skiff_cache_*,
// skiff_restore_*, and per partition skiff_partition_high_watermark /
// skiff_partition_log_start_offset{topic,partition}) go to the core's registry; they are
// registered at open() unless metrics::metrics_enabled() is off then, and the per-partition
// series are removed by close(). Each flush is a trace (root "flush": "build", one "put" per
// object, "commit"); each restore one (root "restore": "list", "footer", later "repair").
// See docs/observability.md.
//
// A partition_log lives on one core; every call must be made there.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/object_store.hpp>
#include <skiff/storage/record_batch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

namespace skiff::storage {

enum class upload_mode : std::uint8_t { parallel, sequential };

struct log_config {
    log_config() = default;
    std::string ns = "default";
    std::size_t segment_bytes = 4 << 20;       // flush when the buffer holds this much
    std::size_t segment_records = 100000;      // ... or this many records
    std::chrono::milliseconds max_age{500};    // ... or its oldest record is this old
    // A flush starts no later than this after the first append someone waits on.
    std::chrono::milliseconds linger{2};
    int max_inflight_flushes = 4;              // pipelining depth; 1 = no pipelining
    upload_mode mode = upload_mode::parallel;
    int index_interval = 100;
    std::size_t max_pending_bytes = 64 << 20;  // buffered + in flight; appends wait beyond
    std::chrono::milliseconds append_timeout{30000};
    std::chrono::milliseconds retry_base{20};
    std::chrono::milliseconds retry_cap{2000};
    bool repair_orphans = true;                // rebuild and upload missing .index files
    // close() waits this long for uploads to land; then it cancels them, and appends that
    // were waiting fail (they were never acknowledged).
    std::chrono::milliseconds close_timeout{30000};
    std::size_t cache_bytes = 32 << 20;        // committed segments kept for readers
    std::function<std::int64_t()> wall_ms;     // segment created-time; null: system clock
};

struct partition_id {
    partition_id() = default;
    partition_id(std::string t, std::int32_t p) : topic(std::move(t)), partition(p) {}
    std::string topic;
    std::int32_t partition = 0;
};

// Keys of the KafScale layout: {ns}/{topic}/{partition}/segment-{base:020d}.kfs|.index
std::string partition_prefix(const std::string& ns, const partition_id& p);
std::string segment_key(const std::string& ns, const partition_id& p, std::int64_t base);
std::string index_key(const std::string& ns, const partition_id& p, std::int64_t base);

enum class append_errc {
    corrupt_message = 1, // a batch failed validation (CRC, magic, framing): Kafka CORRUPT_MESSAGE
    unsupported_version, // magic 0/1
    timed_out,           // not durable within append_timeout; retriable (REQUEST_TIMED_OUT)
    shutting_down,       // the log is closing; retriable (NOT_LEADER-like)
    cancelled,
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
};

struct append_result {
    std::int64_t base_offset = 0;
    std::int64_t last_offset = 0;
    // ack_mode::durable: the root span of the flush that committed the data, for the
    // caller's produce span to link to (`produce.link(r.flush_span)`). Invalid (not
    // valid()) for other ack modes and when tracing was off at that flush.
    metrics::span_context flush_span{};
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
};

struct log_stats {
    std::uint64_t appends = 0;
    std::uint64_t appended_records = 0;
    std::uint64_t flushes = 0;
    std::uint64_t flushed_bytes = 0;
    std::uint64_t upload_retries = 0;
    std::uint64_t timed_out_appends = 0;
    std::uint64_t cache_hits = 0;
    std::uint64_t cache_misses = 0;
    std::size_t inflight_flushes = 0;
    std::size_t buffered_bytes = 0;
    std::size_t pending_bytes = 0;
};

class partition_log {
public:
    // Restores the partition from the store (see "Restore" above).
    static runtime::task<result<std::unique_ptr<partition_log>, store_error>> open(object_store& store,
                                                                                  io_budget& budget,
                                                                                  partition_id id,
                                                                                  log_config cfg);
    ~partition_log();

    // Appends a Kafka record set (one or more magic-2 batches). With ack_mode::durable the
    // task completes once the data is committed (both objects stored, all earlier segments
    // too); with leader/none once it is buffered.
    // The record set is split and CRC-checked here (corrupt_message / unsupported_version).
    runtime::task<result<append_result, append_error>> append(std::span<const char> record_set, ack_mode acks,
                                                              std::stop_token st = {});
    // The same for batches the caller already parsed and CRC-checked (split_batches or
    // parse_batch with verify_crc), so they are not parsed again. The bytes the views point
    // into must stay alive and unchanged until the task completes. An empty span is
    // corrupt_message; a batch the segment format cannot take fails the whole append.
    runtime::task<result<append_result, append_error>> append(std::span<const batch_view> batches, ack_mode acks,
                                                              std::stop_token st = {});

    // Calls fn(true) once the high watermark passes `offset` (at once, before returning, if it
    // already has), or fn(false) if the log closes (or is destroyed) first; exactly one call.
    // fn runs on this core, from inside the commit (or close): it must not call back into the
    // log synchronously, and should hand real work to a task. A wake-up instead of a poll for
    // whoever must learn when some data becomes durable.
    void on_durable(std::int64_t offset, std::function<void(bool durable)> fn);

    // Batches from the one holding `offset` onward, across segments, up to max_bytes (but at
    // least one whole batch when there is one) and below the high watermark. At the high
    // watermark: no records. Outside [log start, high watermark]: errc::invalid_argument
    // (Kafka's OFFSET_OUT_OF_RANGE). Offset gaps are skipped; a corrupt segment is reported
    // (errc::corrupt) and never served.
    runtime::task<result<read_result, store_error>> read(std::int64_t offset, std::size_t max_bytes,
                                                         std::stop_token st = {});

    // Resolves true once the high watermark passes `offset`, false on timeout or stop.
    runtime::task<bool> wait_for_data(std::int64_t offset, std::chrono::milliseconds timeout, std::stop_token st = {});

    // Starts a flush of whatever is buffered and waits until everything appended so far
    // is committed (or failed permanently on close).
    runtime::task<void> flush();
    // Graceful drain: flush, wait for uploads, stop background work.
    runtime::task<void> close();

    std::int64_t high_watermark() const noexcept;
    std::int64_t log_start_offset() const noexcept;
    std::int64_t next_offset() const noexcept;
    const restore_report& restored() const noexcept;
    log_stats stats() const noexcept;
    const partition_id& id() const noexcept;

    struct state;

private:
    explicit partition_log(std::unique_ptr<state> s);
    std::unique_ptr<state> _s;
};

} // namespace skiff::storage
