// A partition's log on the object store: the heart of skiff.
//
// Write path. append() assigns offsets (patching each batch's base offset in place) into a
// write buffer. A flush turns the buffer into one segment: the .kfs and its .index are built
// once, in one pass, and uploaded together (`when_all(put(kfs), put(index))`) — or one after
// the other with upload_mode::sequential, kept as a measurable baseline. Up to
// max_inflight_flushes segments of a partition upload at once; they commit strictly in
// offset order. An append is acknowledged only when its segment and every earlier segment
// have both objects stored; the high watermark is the end of that committed prefix. A
// time-index sidecar (.kfst, log_config::time_index) starts with the pair but is optional:
// no commit waits for it, and a failed one is left missing (readers fall back).
//
// Failures. A failed upload is retried with backoff under the same key with the same bytes
// (a segment's bytes never change once built). An append whose deadline passes fails with a
// retriable error while its data keeps being retried: nothing is ever acknowledged that is
// not inside a committed segment. Memory held by unflushed and in-flight data is bounded; at
// the bound, appends wait.
//
// Cluster mode (docs/cluster.md, "Storage"). Segment objects are put if-absent. Finding
// another owner's object under one of our keys fences the log: pending and later appends fail
// with append_errc::fenced, no further flush starts or commits, reads go on over what was
// committed. The owner hears of it through on_fenced() and reopens the partition. Batches
// carry log_config::leader_epoch when set; log_config::takeover_gap leaves offsets unused at
// open for a deposed owner's late uploads to land in.
//
// Read path. read() serves batches from the segment holding the offset onward, across
// segment boundaries, up to max_bytes and the high watermark. Recently committed segments are
// served from memory; older ones through range GETs from the index position (or by walking
// the segment when its index is missing).
//
// Restore. open() lists the partition's prefix, pairs .kfs and .index by base offset (a
// .kfst is never paired: it only reserves its base when its .kfs is missing), and reads only
// the newest segment's footer to find the next offset. Orphans never block it.
//
// Lifecycle (docs/lifecycle.md). A background loop on the log's core, one store request at a
// time: it writes a manifest (manifest_format.hpp) after log_config::manifest_every_segments
// new segments or manifest_interval, and at close; applies retention (whole segments, oldest
// first, by their largest timestamp or by the partition's bytes); and deletes the objects of
// segments that left the log once a manifest holding the new log start is stored and
// delete_delay passed, so a fetch reading one is never broken and a restart never brings one
// back. After a restore from a manifest it compares the manifest with one full LIST. It merges
// runs of small segments into one of about log_config::merge_target_bytes (log_merge.cpp).
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
#include <skiff/storage/layout.hpp>
#include <skiff/storage/log_config.hpp>
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

class partition_log {
public:
    // Restores the partition from the store (see "Restore" above). Its objects live under
    // `{ns}/{topic}/{partition}/` (layout.hpp); `ns` is the broker's bucket namespace.
    static runtime::task<result<std::unique_ptr<partition_log>, store_error>> open(object_store& store,
                                                                                  io_budget& budget,
                                                                                  std::string ns,
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
    //
    // Admission: at the partition's bound (max_pending_bytes, max_pending_records) or the
    // shared one (log_config::shared_memory) the append waits for room, at most `room_timeout`
    // when given (append_errc::no_room then, nothing appended); append_result::room_wait says
    // how long it waited.
    runtime::task<result<append_result, append_error>> append(std::span<const batch_view> batches, ack_mode acks,
                                                              std::stop_token st = {},
                                                              std::optional<std::chrono::milliseconds> room_timeout = {});

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

    // Retention (Kafka's retention.ms / retention.bytes, -1 unlimited), applied by the
    // background loop from its next tick on.
    void set_retention(std::int64_t retention_ms, std::int64_t retention_bytes);
    // Compaction (cleanup.policy includes compact; delete.retention.ms; min.compaction.lag.ms),
    // applied from the next tick on.
    void set_compaction(bool compact, std::int64_t delete_retention_ms, std::int64_t min_compaction_lag_ms);
    // Kafka's DeleteRecords: the log start moves up to `offset` (-1: the high watermark) and
    // segments wholly below it are deleted after the grace period. Resolves the new log start
    // once a manifest holding it is stored (so a restart keeps it). Errors: invalid_argument
    // past the high watermark (OFFSET_OUT_OF_RANGE), transient when the manifest could not
    // be stored (transient: the start already moved here and is stored later), precondition_failed
    // when fenced, cancelled.
    runtime::task<result<std::int64_t, store_error>> delete_records(std::int64_t offset, std::stop_token st = {});
    // Stores a manifest now if anything changed since the last one; true when one is stored.
    runtime::task<bool> checkpoint(std::stop_token st = {});

    std::int64_t high_watermark() const noexcept;
    std::int64_t log_start_offset() const noexcept;
    // The offset the next appended record gets: after a takeover gap, above the high watermark
    // until the first commit.
    std::int64_t next_offset() const noexcept;
    // Another owner wrote one of this log's segment keys (see "Cluster mode" above). Final.
    bool fenced() const noexcept;
    // Called once, on this core, when the log becomes fenced, from inside an upload: it must
    // not call back into the log synchronously (close() it from a task). Replaces an earlier
    // callback; empty to stop.
    void on_fenced(std::function<void()> fn);
    // Asked (on this core) before each request of the background work that changes the bucket:
    // a manifest, a delete, a merge's or a compaction's writes. While it answers false that
    // work waits for a later tick (counted in skiff_lifecycle_not_owner_total). The broker in
    // cluster mode answers whether its lease covers the request (docs/cluster.md): only the
    // fenced owner merges, compacts or deletes. Empty (the default): always allowed.
    void set_owner_check(std::function<bool()> fn);
    const restore_report& restored() const noexcept;
    log_stats stats() const noexcept;
    // The bytes the store holds for the log's live segments (.kfs and .index, as last listed
    // or written; segments already retired and waiting for their delete are not counted).
    std::uint64_t stored_bytes() const noexcept;
    const partition_id& id() const noexcept;

    struct state;

private:
    explicit partition_log(std::unique_ptr<state> s);
    std::unique_ptr<state> _s;
};

} // namespace skiff::storage
