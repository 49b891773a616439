// The partition log's state, shared by the files that implement it: partition_log.cpp (the
// façade: append, read, open, close), log_lifecycle.cpp (manifests, retention, deletes, the
// check after a restore) and log_merge.cpp (merging small segments). One core, like the log.
//
// Private to src/storage.
#pragma once

#include "flush_pipeline.hpp"
#include "log_instruments.hpp"
#include "log_restore.hpp"
#include "segment_cache.hpp"

#include <skiff/core/log.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/segment_format.hpp>

#include <algorithm>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace skiff::storage {

namespace detail {
// A reader waiting for the high watermark to pass `offset`: true once it has, false when
// the log closes. A timed-out reader leaves its latch with nobody waiting on it.
struct data_waiter {
    std::int64_t offset;
    std::shared_ptr<runtime::oneshot<bool>> latch;
};

struct durable_callback {
    std::int64_t offset;
    std::function<void(bool)> fn;
};

// Segments that left the log, their objects deleted once `due` passed and a manifest with a
// log start above them is stored (so a restart never brings them back).
struct pending_delete {
    runtime::time_point due;
    std::int64_t last = 0; // the highest offset among them
    // A merge's sources: their offsets stay in the log (in the merged segment), so the gate
    // is a manifest stored after the merge (changes_stored >= after_change), not the log start.
    bool merged = false;
    std::uint64_t after_change = 0;
    std::vector<std::int64_t> bases;
    std::vector<std::string> keys;
};

} // namespace detail

struct partition_log::state {
    state(object_store& st, io_budget& b, std::string n, partition_id i, log_config c)
        : store(st), budget(b), ns(std::move(n)), id(std::move(i)), cfg(std::move(c)), memory(cfg.max_pending_bytes, "log-memory"),
          records(std::max<std::size_t>(cfg.max_pending_records, 1), "log-records"), m(detail::log_instruments::make()) {
        if (!cfg.wall_ms) {
            cfg.wall_ms = [] {
                return std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                    .count();
            };
        }
        if (cfg.max_inflight_flushes < 1) cfg.max_inflight_flushes = 1;
    }

    object_store& store;
    io_budget& budget;
    std::string ns;
    partition_id id;
    log_config cfg;
    runtime::gate gate{"partition-log"};
    runtime::semaphore memory;
    runtime::semaphore records; // offsets buffered + in flight (max_pending_records)

    std::int64_t next_offset = 0;
    std::int64_t hwm = 0;
    // The end of what was appended here (flush() waits for it). Below next_offset only
    // while a takeover gap is still unused.
    std::int64_t appended_end = 0;
    std::int64_t log_start = 0;

    std::vector<detail::data_waiter> data_waiters;
    std::vector<detail::durable_callback> durable_callbacks;

    restore_report report;
    log_stats stats;
    bool closing = false;
    bool fenced = false;
    std::function<void()> on_fenced;
    // Asked before every request of the background work that changes the bucket (manifest,
    // deletes, merge and compaction writes): in cluster mode, whether this broker's lease
    // still covers such a request, so a deposed owner never merges, compacts or deletes what
    // the next owner serves (partition_log.hpp, set_owner_check).
    std::function<bool()> owner_check;
    bool may_modify() {
        if (fenced) return false;
        if (owner_check && !owner_check()) {
            m.background_skipped.inc();
            return false;
        }
        return true;
    }

    // Metrics (inert when metrics were off at open); the parts below hold shares of its
    // gauges. The partition's own callback gauges are the last members (removed first).
    detail::log_instruments m;
    detail::segment_cache cache{store, budget, ns, id, cfg, gate, m, stats};
    detail::flush_pipeline pipeline{store, budget, ns, id, cfg, gate, m, stats,
                                    [this](const detail::flush_job& j) { on_committed(j); },
                                    [this] { on_pipeline_fenced(); }};
    metrics::span_context restore_ctx;
    metrics::registration hwm_reg, start_reg;

    // Lifecycle (partition_log.hpp, "Lifecycle"): manifests, retention and deletes, run by
    // one background loop so that at most one of its requests is out at a time.
    bool manifests_on = false;
    std::int32_t manifest_epoch = 0;
    std::int64_t manifest_seq = 0;             // the next manifest's
    std::vector<std::string> manifest_keys;    // found at restore or written, sorted
    runtime::semaphore manifest_lock{1, "manifest"};
    std::uint64_t changes = 0;                 // bumped by every change a manifest records
    std::uint64_t changes_stored = 0;          // ... and what the last stored manifest saw
    std::size_t segments_since_manifest = 0;
    runtime::time_point dirty_since{};
    bool manifest_urgent = false;              // the log start moved: store it before deleting
    std::int64_t persisted_log_start = 0;      // the log start of the newest stored manifest
    // Segments below this are in a stored manifest, with the sizes it lists: a merge starts only
    // at one of them, so a crash after its PUT shows as a size the manifest does not know.
    std::int64_t persisted_covered_end = -1;
    std::int64_t verify_below = -1;            // restored from a manifest covering this much: check it
    std::int64_t retired_below = 0;            // segments ending below this are queued for deletion
    std::deque<detail::pending_delete> deletes;

    bool manifest_dirty() const noexcept { return changes != changes_stored; }
    // Wholly below the log start: left the log, its objects waiting for deletion.
    bool retired(const detail::segment_entry& e) const noexcept { return e.last >= 0 && e.last < log_start; }
    void changed() {
        if (!manifest_dirty()) dirty_since = runtime::reactor::local().now();
        ++changes;
    }

    // A permit for one lifecycle request: the shared background slot first (if any), then
    // the io budget's. Empty when `st` fired or the budget shut down.
    // Not an aggregate (g++ 12 and aggregates in coroutines: see s3/client.hpp).
    struct lifecycle_permit {
        lifecycle_permit() = default;
        runtime::semaphore::units slot;
        io_budget::permit permit;
    };
    runtime::task<std::optional<lifecycle_permit>> acquire_io(std::stop_token st) {
        std::optional<lifecycle_permit> out;
        out.emplace();
        if (cfg.background_io) {
            auto u = co_await cfg.background_io->acquire(1, st);
            if (!u) co_return std::nullopt;
            out->slot = std::move(*u);
        }
        auto p = co_await budget.acquire(io_budget::priority::normal, st);
        if (!p) co_return std::nullopt;
        out->permit = std::move(*p);
        co_return out;
    }

    runtime::task<bool> write_manifest(std::stop_token st);
    runtime::task<void> lifecycle_tick();
    void on_lifecycle_timer();
    bool verified = true;
    runtime::timer lifecycle_timer{[this] { on_lifecycle_timer(); }};
    runtime::task<bool> verify(std::stop_token st);
    runtime::task<void> apply_retention(std::stop_token st);
    runtime::task<void> run_deletes(std::stop_token st);
    runtime::task<void> remove_keys(std::vector<std::string> keys, std::stop_token st, bool& ok);
    void retire_below(std::int64_t start);
    // Merging (log_merge.cpp): one group of small adjacent segments per tick.
    struct merge_group {
        merge_group() = default;
        std::vector<std::int64_t> bases;
        std::uint64_t bytes = 0;
    };
    std::optional<merge_group> plan_merge() const;
    // Compaction (log_compact.cpp): one pass over the compactable prefix.
    runtime::task<bool> compact_once(std::stop_token st);
    std::int64_t compacted_end = -1;   // the passes so far covered the segments below this
    // Producers' latest batches as of compacted_end (key_index::learn_producer).
    std::unordered_map<std::int64_t, std::int64_t> compacted_producers;
    runtime::time_point last_compaction{};
    runtime::task<bool> merge_once(std::stop_token st);
    // The bytes of segments `bases` (a merge's or compaction's sources): from memory when
    // cached, the others with GETs in parallel (each under acquire_io, so the background
    // bound still holds). The caller bounds how many bytes one call asks for.
    using source_bytes = std::vector<std::shared_ptr<const std::string>>;
    runtime::task<result<source_bytes, store_error>> read_sources(std::vector<std::int64_t> bases, std::stop_token st);
    runtime::task<result<std::shared_ptr<const std::string>, store_error>> read_source(std::int64_t base,
                                                                                        std::stop_token st);
    // A merge or compaction stored `kfs`/`index` under sources.front()'s key: memory follows,
    // unless a source left the log meanwhile (false; the objects are right either way).
    bool adopt_rewrite(const std::vector<std::int64_t>& sources, const segment_meta& meta,
                       const std::shared_ptr<const std::string>& kfs, const std::shared_ptr<const std::string>& index,
                       std::int64_t created_ms);
    // The queue entry that deletes merged-away sources once a manifest without them is stored.
    void queue_merged_away(const std::vector<std::int64_t>& bases);
    // After a merge or compaction stored a new .kfs under `base`: PUT its time-index sidecar
    // (log_config::time_index), or DELETE whatever sidecar is there when it is off or the PUT
    // failed, so no sidecar describes other bytes than its segment. False when neither worked
    // (an old sidecar may remain). Not cancellable midway: `st` stops the next request only.
    runtime::task<bool> rewrite_time_index(std::int64_t base, const segment_meta& meta, std::stop_token st);

    // Rebuilds a missing .index in the background (restore or the check after it found the
    // .kfs alone); the manifest learns of it.
    void spawn_repair(std::int64_t base) {
        if (!cfg.repair_orphans) return;
        auto on_repaired = [this, base](std::shared_ptr<const std::string> index) {
            ++report.repaired;
            cache.set_index(base, std::move(index));
            changed();
        };
        (void)gate.spawn(detail::repair(store, budget, ns, id, cfg, m, base, restore_ctx, gate.stop_token(),
                                        std::move(on_repaired)));
    }

    void register_partition_gauges() {
        if (!m.enabled) return;
        auto& reg = metrics::registry::local();
        const metrics::labels l{{"topic", id.topic}, {"partition", std::to_string(id.partition)}};
        try {
            hwm_reg = reg.gauge_fn("skiff_partition_high_watermark",
                                   "Offset after the last committed record of the partition.", l, [this] { return hwm; });
            start_reg = reg.gauge_fn("skiff_partition_log_start_offset", "First offset of the partition.", l,
                                     [this] { return log_start; });
        } catch (const std::invalid_argument&) {
            // The same partition is already open on this core (only tests do that: a second
            // instance on the same bucket). The first one keeps reporting.
            hwm_reg.reset();
            log::debug("partition {}/{} is open twice on this core; its gauges report the first", id.topic,
                       id.partition);
        }
    }

    std::size_t pending_bytes() const noexcept {
        return static_cast<std::size_t>(static_cast<std::int64_t>(memory.capacity()) - memory.available());
    }

    // The flush pipeline committed a segment (in offset order): readers may have it now.
    void on_committed(const detail::flush_job& j) {
        cache.add_committed(j.base, j.last, j.kfs, j.index, j.max_timestamp, j.created_ms);
        hwm = j.last + 1;
        changed();
        ++segments_since_manifest;
        wake_readers();
    }

    void wake_readers() {
        auto it = std::remove_if(data_waiters.begin(), data_waiters.end(), [this](detail::data_waiter& w) {
            if (w.latch->waiters() == 0) return true; // timed out or stopped
            if (hwm > w.offset) {
                w.latch->set(true);
                return true;
            }
            return false;
        });
        data_waiters.erase(it, data_waiters.end());
        notify_durable();
    }

    // Calls the on_durable callbacks the high watermark has passed. They are taken out of the
    // list before any runs, so a callback that registers another cannot invalidate the walk.
    void notify_durable() {
        if (durable_callbacks.empty()) return;
        std::vector<detail::durable_callback> due;
        auto keep = std::stable_partition(durable_callbacks.begin(), durable_callbacks.end(),
                                          [this](const detail::durable_callback& c) { return hwm <= c.offset; });
        std::move(keep, durable_callbacks.end(), std::back_inserter(due));
        durable_callbacks.erase(keep, durable_callbacks.end());
        for (auto& c : due) c.fn(true);
    }

    // The pipeline found another owner's object under our key (it already failed its
    // producers). Appends waiting for room fail too; nothing pending will become durable.
    void on_pipeline_fenced() {
        fenced = true;
        memory.broken();
        records.broken();
        fail_durable();
        log::warn("partition {}/{} is fenced: another owner writes it; appends fail until it is reopened", id.topic,
                  id.partition);
        if (on_fenced) on_fenced();
    }

    // The log closes: whoever still waits is told its data did not become durable here.
    void fail_durable() {
        auto all = std::exchange(durable_callbacks, {});
        for (auto& c : all) c.fn(false);
    }
};

} // namespace skiff::storage
