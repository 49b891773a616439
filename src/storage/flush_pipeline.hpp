// The write side of a partition log: the segment being built, the sealed segments on their
// way to the store, and the acknowledgements waiting on them.
//
// Appends are copied into the active segment (buffer()). seal() turns it into a flush job
// with both objects built once; pump() starts up to max_inflight_flushes jobs, each uploading
// its .kfs and .index together (run_job: when_all of two upload()s) and retrying each object
// until it is stored or the log shuts down. Jobs commit strictly in offset order
// (commit_ready): a job whose objects are stored waits for every earlier one. On commit the
// log hears of it through on_committed(job) — it moves the high watermark and serves the
// segment to readers — and then the job's producers are acknowledged.
//
// The time-index sidecar (.kfst, 40 bytes). Built from the metadata the same one pass over
// the batches gathered, it starts in the same turn as the pair (so it costs no round trip of
// its own) but outside run_job's when_all: a job commits when its .kfs and .index are stored,
// whatever became of the sidecar. upload_sidecar tries a bounded number of times, unhedged
// (its latency gates nothing, and its 40-byte round trips would drag the PUT hedge's p99
// down), under a normal-priority permit (never ahead of a waiting flush), and gives up by
// counting (skiff_store_time_index_failures_total): readers fall back to the segment. Under
// a request budget no sidecar is sent (it would be a third paid PUT per flush). A sidecar
// must describe the bytes under its .kfs key: one found with other bytes is replaced only once
// our .kfs is known to be stored, and ours is removed again when our .kfs lost to another
// owner's (sidecar_link carries what each side knows to the other).
//
// Fencing. Every object is put if-absent: a segment's key is only ever written by the owner
// that assigned its offsets. An attempt refused because the key exists reads the object back:
// our own bytes (an earlier attempt landed, its answer was lost) count as stored; anything
// else means another owner took the partition, and the pipeline is fenced (fence()).
//
// Scheduling (docs/flush-scheduling.md). When to seal the active segment is maybe_flush()'s
// decision. Adaptive (log_config::linger unset): an acks=all waiter on a partition with no
// upload in flight is flushed at the end of the reactor turn (every append of that turn
// joins); behind uploads in flight, appends gather until every producer the last commits
// acknowledged is back, or the oldest waiter has waited wait_bound() (a quarter of the observed
// round trip), and a slot is free; or until a slot frees after the depth limit held them back. The depth limit follows the round trip and the
// arrival rate (depth_limit()). Fixed (linger set): a flush starts `linger` after the first
// waiter, up to max_inflight_flushes deep. Either way a full segment is sealed at once, data
// nobody waits on (acks 0/1) goes out with the next flush or after max_age, and under a
// request budget (put_rate.hpp) a due flush first reserves its two PUTs, gathering appends
// while it waits.
//
// Private to src/storage. One core, like the log that owns it.
#pragma once

#include "log_instruments.hpp"

#include <skiff/core/backoff.hpp>
#include <skiff/core/result.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/log_config.hpp>
#include <skiff/storage/object_store.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::storage::detail {

// How a durable append ends: committed (no error; `flush` is the root span of the flush that
// carried it, when it was traced), shutting_down or fenced. Timeouts and stops are the waiter's own
// outcome (oneshot::wait), so a late commit never turns them into success.
struct ack_outcome {
    std::optional<append_errc> error;
    metrics::span_context flush{};
};
using ack_latch = runtime::oneshot<ack_outcome>;

// What the sidecar upload and the job's own uploads tell each other (the job may be gone
// before the sidecar is done).
struct sidecar_link {
    enum class kfs_state : std::uint8_t { pending, stored, lost }; // lost: fenced or abandoned
    kfs_state kfs = kfs_state::pending;
    bool kfst_put = false; // our PUT of the sidecar succeeded
};

// A sealed segment on its way to the store.
struct flush_job {
    using clock = std::chrono::steady_clock;
    std::int64_t base = 0;
    std::int64_t last = 0;
    std::int32_t records = 0;
    std::int64_t max_timestamp = -1; // for retention by time and the manifest
    std::int64_t created_ms = 0;
    std::shared_ptr<const std::string> kfs;
    std::shared_ptr<const std::string> index;
    std::shared_ptr<const std::string> kfst;  // null: no sidecar (off, or under a request budget)
    std::shared_ptr<sidecar_link> link;       // with kfst
    bool started = false;
    bool finished = false; // run_job returned (or never ran): nothing points at the job
    bool stored[2] = {false, false}; // kfs, index
    bool theirs[2] = {false, false}; // another owner's object found under the key
    bool failed = false;
    std::vector<std::shared_ptr<ack_latch>> waiters;
    std::vector<runtime::semaphore::units> memory;
    metrics::span_context flush_ctx;    // handed to the producers it acknowledges
    clock::time_point sealed_at;
    clock::time_point upload_started;   // only read when metrics are on
    runtime::time_point upload_began{}; // the reactor's clock: the round-trip estimate
    runtime::time_point first_append{}; // of its data: the flush wait
    int prepaid = 0;                    // PUTs of the request budget reserved before sealing
    metrics::span trace;                // root "flush": build, put ×2, commit
    metrics::span commit_span;          // both objects stored → committed in offset order
    gauge_share in_flight_bytes;        // skiff_log_in_flight_bytes, taken back when the job goes
    bool done() const noexcept { return stored[0] && stored[1]; }
};

// The offsets buffer() gave a record set.
struct buffered_range {
    std::int64_t base_offset = 0;
    std::int64_t last_offset = 0;
};

class flush_pipeline {
public:
    using commit_fn = std::function<void(const flush_job&)>;
    using fenced_fn = std::function<void()>;

    // `gate` runs the uploads and stops them at close; `stats` gets flushes, bytes and retries.
    // on_fenced is called once, from inside an upload, after fence() did its work.
    flush_pipeline(object_store& store, io_budget& budget, const std::string& ns, const partition_id& id,
                   const log_config& cfg, runtime::gate& gate, log_instruments& m, log_stats& stats,
                   commit_fn on_committed, fenced_fn on_fenced);
    flush_pipeline(const flush_pipeline&) = delete;
    flush_pipeline& operator=(const flush_pipeline&) = delete;

    // Copies a validated record set into the active segment, starting a new segment at
    // `next_offset` when there is none, or when the set would push the active one past the
    // segment size or the format's limits (a set is never split across segments, so a failed
    // request leaves nothing behind for a retry to duplicate). `memory` is held until the
    // data is committed; so are `records` (units of the pending-records bound) and `shared` (of
    // log_config::shared_memory). Errors:
    // corrupt_message when the segment format refuses a batch.
    result<buffered_range, append_error> buffer(std::span<const batch_view> batches, std::size_t set_bytes,
                                                std::int64_t next_offset, runtime::semaphore::units memory,
                                                runtime::semaphore::units records,
                                                std::optional<runtime::semaphore::units> shared = {});
    // The producer of the set just buffered waits for it (ack_mode::durable).
    void add_waiter(std::shared_ptr<ack_latch> w);
    // Seals the active segment now if a size, age or linger trigger says so (always when
    // closing); otherwise arms the flush timer for when one will.
    void maybe_flush();
    // Seals what is buffered (if anything) and starts uploads while slots are free.
    void flush_now();
    // From now on every buffered byte is sealed at once, and a job cut short by the gate
    // fails everything behind it.
    void start_closing() noexcept { _closing = true; }
    void stop_timer() noexcept { _flush_timer.cancel(); }
    // After the gate closed: every producer still waiting is told shutting_down.
    void abandon_all();

    // Another owner's object sits under one of our keys: fail every producer still waiting
    // (append_errc::fenced), drop what is buffered and never start another upload. Uploads
    // already running stop after their current attempt; nothing is committed any more.
    void fence();
    bool fenced() const noexcept { return _fenced; }

    bool idle() const noexcept { return _jobs.empty(); }
    // Sidecar uploads still running (close() waits for them as for the jobs).
    int sidecars_in_flight() const noexcept { return _sidecars; }
    int uploading() const noexcept { return _uploading; }
    // The adaptive scheduler's current view: how long a waiter behind uploads in flight may be
    // held to gather more, and how many uploads may run at once (log_config::max_inflight_flushes
    // in the fixed mode). The round-trip estimate is 0 before the first upload finished.
    runtime::duration wait_bound() const noexcept;
    int depth_limit() const noexcept;
    runtime::duration round_trip() const noexcept { return runtime::duration(_rtt_ns); }
    std::size_t buffered_bytes() const noexcept { return _builder ? _builder->body_bytes() : 0; }

private:
    using clock = flush_job::clock;

    void seal();
    void pump();
    void on_timer();
    // A due flush: now, or (under a request budget) once its two PUTs are reserved.
    void start_flush();
    runtime::task<void> paced_flush();
    void note_upload_done(const flush_job& job) noexcept;
    runtime::task<void> upload(flush_job* job, int which);
    runtime::task<void> run_job(flush_job* job);
    void commit_ready();
    void abandon(flush_job& j) noexcept;
    void abandon_jobs();
    void start_segment(std::int64_t next_offset, std::size_t set_bytes);
    enum class existing : std::uint8_t { ours, theirs, unknown };
    runtime::task<existing> compare_existing(const std::string& key, const std::string& body, key_kind kind,
                                             std::stop_token st);
    void drop_idle_jobs();
    runtime::task<void> remove_half_pair(flush_job* job);
    runtime::task<void> upload_sidecar(std::int64_t base, std::shared_ptr<const std::string> body,
                                       std::shared_ptr<sidecar_link> link);
    runtime::task<bool> remove_sidecar(const std::string& key, std::stop_token st);
    void sidecar_failed(const std::string& key, std::string_view why);

    object_store& _store;
    io_budget& _budget;
    const std::string& _ns;
    const partition_id& _id;
    const log_config& _cfg;
    runtime::gate& _gate;
    log_instruments& _m;
    log_stats& _stats;
    commit_fn _on_committed;
    fenced_fn _on_fenced;

    // The active segment: appends copy their batches straight into the bytes that will
    // become the .kfs.
    std::optional<segment_builder> _builder;
    std::int64_t _builder_records = 0;
    std::optional<runtime::time_point> _first_append; // the reactor's clock, like the timer
    std::optional<runtime::time_point> _first_waiter;
    std::vector<std::shared_ptr<ack_latch>> _builder_waiters;
    std::vector<runtime::semaphore::units> _builder_memory;

    std::deque<std::unique_ptr<flush_job>> _jobs; // sealed, in offset order
    int _uploading = 0;
    int _sidecars = 0;
    bool _sidecar_failure_logged = false; // a failed sidecar is logged once per log
    bool _closing = false;
    bool _fenced = false;
    bool _timer_firing = false; // maybe_flush() runs from the flush timer (the turn's end)
    bool _pacing = false;       // a due flush waits for its PUT slots; appends join it
    int _prepaid = 0;           // PUT slots reserved for the next sealed job
    // Estimates for the adaptive scheduler: an upload's round trip (EWMA of both objects
    // stored, ns) and the bytes buffered per second (EWMA, sampled at each seal).
    std::int64_t _rtt_ns = 0;
    double _arrival_bps = 0;
    // Producers acknowledged by commits whose next append has not been sealed yet: closed-loop
    // clients come back after an ack, so a segment gathering behind uploads in flight goes as
    // soon as all of them are back instead of waiting out the bound.
    std::int64_t _expected_back = 0;
    std::optional<runtime::time_point> _last_seal;
    runtime::timer _flush_timer;
    full_jitter_backoff _upload_backoff; // upload()'s delays, one generator per partition
    gauge_share _buffered_g, _uploading_g;
};

} // namespace skiff::storage::detail
