// The partition log's façade: offsets, the high watermark, the memory bound and the
// waiters, over the flush pipeline (write side), the segment cache (read side) and restore.
// The produce path in three files: append() here buffers and waits on its ack latch;
// flush_pipeline.cpp seals, uploads both objects at once (run_job), commits in offset order
// and sets the acks; on_committed() here moves the high watermark first.
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
#include <skiff/storage/manifest_format.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>

namespace skiff::storage {

namespace {

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
    std::vector<std::int64_t> bases;
    std::vector<std::string> keys;
};

} // namespace

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

    std::vector<data_waiter> data_waiters;
    std::vector<durable_callback> durable_callbacks;

    restore_report report;
    log_stats stats;
    bool closing = false;
    bool fenced = false;
    std::function<void()> on_fenced;

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
    std::int64_t verify_below = -1;            // restored from a manifest covering this much: check it
    std::int64_t retired_below = 0;            // segments ending below this are queued for deletion
    std::deque<pending_delete> deletes;

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
        auto it = std::remove_if(data_waiters.begin(), data_waiters.end(), [this](data_waiter& w) {
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
        std::vector<durable_callback> due;
        auto keep = std::stable_partition(durable_callbacks.begin(), durable_callbacks.end(),
                                          [this](const durable_callback& c) { return hwm <= c.offset; });
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

// ---- lifecycle ---------------------------------------------------------------------------

// Stores a manifest of what the log holds now. Serialized (DeleteRecords may call it while
// the background loop does); true once a manifest at least this new is stored.
runtime::task<bool> partition_log::state::write_manifest(std::stop_token st) {
    auto lock = co_await manifest_lock.acquire(1, st);
    if (!lock || fenced || !manifests_on) co_return false;
    const std::uint64_t seen = changes;
    if (seen == changes_stored) co_return true; // another caller stored it meanwhile
    manifest mf;
    mf.epoch = manifest_epoch;
    mf.seq = manifest_seq;
    mf.log_start = log_start;
    mf.covered_end = hwm;
    mf.written_ms = cfg.wall_ms();
    mf.partition = id;
    for (const auto& [base, e] : cache.segments()) {
        if (base >= hwm) break;
        if (e.corrupt || retired(e)) continue;
        manifest_segment ms;
        ms.base = base;
        // An unknown end (a restored interior segment whose successor was never seen) is
        // bounded by the high watermark.
        ms.last = std::min(e.last >= 0 ? e.last : hwm - 1, hwm - 1);
        ms.kfs_size = e.kfs_size;
        ms.index_size = e.has_index ? std::max<std::uint32_t>(e.index_size, 1) : 0;
        ms.max_timestamp = e.max_timestamp;
        ms.created_ms = e.created_ms;
        mf.segments.push_back(ms);
    }
    const std::string key = manifest_key(ns, id, mf.epoch, mf.seq);
    const std::string bytes = encode_manifest(mf);
    auto span = metrics::span::root("manifest");
    if (span.active()) {
        span.set("topic", id.topic);
        span.set("partition", id.partition);
        span.set("segments", mf.segments.size());
        span.set("bytes", bytes.size());
    }
    auto permit = co_await acquire_io(st);
    if (!permit) co_return false;
    const auto t0 = m.now();
    auto put = co_await store.put(key, std::span<const char>(bytes.data(), bytes.size()), true, st);
    m.store_done(detail::store_op::put, detail::key_kind::manifest, t0, bytes.size(), 0, put ? nullptr : &put.error());
    // Given back before the old manifests' delete asks for another: two logs of a core each
    // holding one background slot and waiting for a second would wait forever.
    permit.reset();
    // The sequence moves on either way: a key is never offered twice with different bytes.
    ++manifest_seq;
    span.set("status", put ? "ok" : to_string(put.error().code));
    if (!put) {
        if (put.error().code != errc::cancelled) {
            m.manifest_write_failures.inc();
            log::warn("partition {}/{}: manifest {} not stored: {}", id.topic, id.partition, key, put.error().message);
        }
        co_return false;
    }
    m.manifest_writes.inc();
    changes_stored = seen;
    segments_since_manifest = 0;
    manifest_urgent = false;
    persisted_log_start = std::max(persisted_log_start, mf.log_start);
    manifest_keys.insert(std::upper_bound(manifest_keys.begin(), manifest_keys.end(), key), key);
    // Two are kept: if the newest is unreadable, restore still has the one before.
    if (manifest_keys.size() > 2) {
        std::vector<std::string> old(manifest_keys.begin(), manifest_keys.end() - 2);
        bool ok = false;
        co_await remove_keys(old, st, ok);
        if (ok) manifest_keys.erase(manifest_keys.begin(), manifest_keys.end() - 2);
    }
    co_return true;
}

runtime::task<void> partition_log::state::remove_keys(std::vector<std::string> keys, std::stop_token st, bool& ok) {
    ok = false;
    auto permit = co_await acquire_io(st);
    if (!permit) co_return;
    const auto n = keys.size();
    const auto t0 = m.now();
    auto r = co_await store.remove_many(std::move(keys), st);
    m.store_done(detail::store_op::del, detail::key_kind::none, t0, 0, 0, r ? nullptr : &r.error());
    if (!r) {
        if (r.error().code != errc::cancelled) {
            m.delete_failures.inc();
            log::warn("partition {}/{}: deleting {} objects failed ({}); tried again later", id.topic, id.partition, n,
                      r.error().message);
        }
        co_return;
    }
    m.deleted_objects.inc(n);
    ok = true;
}

// Segments that end below `start` leave the log: reads below refuse at once, their objects
// go once a manifest stored the new start and the grace period passed.
void partition_log::state::retire_below(std::int64_t start) {
    start = std::min(start, hwm);
    if (start <= log_start) return;
    log_start = start;
    changed();
    manifest_urgent = true;
    pending_delete batch;
    batch.due = runtime::reactor::local().now() + cfg.delete_delay;
    for (const auto& [base, e] : cache.segments()) {
        if (base >= hwm) break;
        const std::int64_t last = e.last >= 0 ? e.last : hwm - 1;
        if (last >= start) break;
        if (last < retired_below) continue; // already queued
        batch.bases.push_back(base);
        batch.keys.push_back(segment_key(ns, id, base));
        batch.keys.push_back(index_key(ns, id, base));
        batch.last = std::max(batch.last, last);
        m.retention_segments.inc();
        m.retention_bytes.inc(e.kfs_size);
    }
    retired_below = std::max(retired_below, start);
    if (!batch.bases.empty()) deletes.push_back(std::move(batch));
    log::info("partition {}/{}: log start offset now {}", id.topic, id.partition, log_start);
}

runtime::task<void> partition_log::state::apply_retention(std::stop_token st) {
    const auto ms = cfg.retention_ms;
    const auto bytes = cfg.retention_bytes;
    if (ms < 0 && bytes < 0) co_return;
    const std::int64_t now = cfg.wall_ms();
    // The bases, not the entries: the header GET below may change the map.
    std::uint64_t total = 0;
    std::vector<std::int64_t> bases;
    for (const auto& [base, e] : cache.segments()) {
        if (base >= hwm) break;
        if (retired(e)) continue;
        total += e.kfs_size;
        bases.push_back(base);
    }
    std::int64_t new_start = log_start;
    for (auto base : bases) {
        auto* e = cache.find(base);
        if (!e) break;
        bool drop = bytes >= 0 && total >= e->kfs_size && total - e->kfs_size >= static_cast<std::uint64_t>(bytes);
        if (!drop && ms >= 0) {
            std::int64_t t = e->max_timestamp >= 0 ? e->max_timestamp : e->created_ms;
            if (t < 0) {
                // Restored by a full LIST: the segment header's flush time (a 32-byte GET)
                // stands in for the records' largest timestamp.
                auto permit = co_await acquire_io(st);
                if (!permit) co_return;
                const auto t0 = m.now();
                auto head = co_await store.get(segment_key(ns, id, base), byte_range::between(0, segment_header_size - 1),
                                               st);
                m.store_done(detail::store_op::get_range, detail::key_kind::kfs, t0, 0, head ? head->data.size() : 0,
                             head ? nullptr : &head.error());
                if (!head) co_return;
                auto h = parse_segment_header(head->data);
                e = cache.find(base); // the wait may have changed the map
                if (!e) break;
                e->created_ms = h ? h->created_ms : 0;
                t = e->created_ms;
            }
            drop = t < now - ms;
        }
        if (!drop) break;
        const std::int64_t last = e->last >= 0 ? e->last : hwm - 1;
        new_start = std::max(new_start, last + 1);
        total -= std::min<std::uint64_t>(total, e->kfs_size);
    }
    if (new_start > log_start) retire_below(new_start);
}

runtime::task<void> partition_log::state::run_deletes(std::stop_token st) {
    const auto now = runtime::reactor::local().now();
    while (!deletes.empty()) {
        auto& d = deletes.front();
        // Never before a stored manifest says these offsets are gone (without manifests the
        // delete itself is what makes it so).
        if (d.due > now || (manifests_on && d.last >= persisted_log_start)) co_return;
        bool ok = false;
        co_await remove_keys(d.keys, st, ok);
        if (!ok) co_return;
        if (deletes.empty()) co_return;
        auto done = std::move(deletes.front());
        deletes.pop_front();
        for (auto base : done.bases) cache.erase(base);
    }
}

// After a restore from a manifest, one full LIST (in the background) compares it with the
// bucket: a listed segment that is gone is dropped (the manifest was stale), a segment it did
// not list is adopted (a deposed owner's late upload into a takeover gap), and leftovers below
// the log start (deletes a crash interrupted) are deleted. Either way a new manifest follows.
runtime::task<bool> partition_log::state::verify(std::stop_token st) {
    const std::string prefix = partition_prefix(ns, id);
    std::map<std::int64_t, std::uint64_t> kfs;
    std::map<std::int64_t, std::uint64_t> idx;
    std::string token;
    for (;;) {
        auto permit = co_await acquire_io(st);
        if (!permit) co_return false;
        const auto t0 = m.now();
        auto page = co_await store.list(prefix, "", token, 1000, st);
        m.store_done(detail::store_op::list, detail::key_kind::none, t0, 0, 0, page ? nullptr : &page.error());
        if (!page) co_return false;
        for (auto& o : page->objects) {
            auto parsed = parse_segment_name(std::string_view(o.key).substr(prefix.size()));
            if (!parsed || parsed->base >= verify_below) continue;
            (parsed->kind == object_kind::kfs ? kfs : idx)[parsed->base] = o.size;
        }
        if (page->next_token.empty()) break;
        token = page->next_token;
    }
    // The first segment still served: anything wholly below it and below the log start is
    // a leftover.
    std::int64_t first_live = verify_below;
    for (const auto& [base, e] : cache.segments()) {
        if (!retired(e)) {
            first_live = base;
            break;
        }
    }
    std::vector<std::int64_t> missing, no_index;
    for (const auto& [base, e] : cache.segments()) {
        if (base >= verify_below) break;
        if (retired(e)) continue;
        if (!kfs.count(base)) missing.push_back(base);
        else if (e.has_index && !idx.count(base)) no_index.push_back(base);
    }
    // An index the manifest knew but the bucket lacks (a deposed owner removed its half of a
    // pair whose bytes equalled ours): served by walking, and rebuilt.
    for (auto base : no_index) {
        m.verify_mismatches[0].inc();
        log::warn("partition {}/{}: the .index of segment {} is gone; rebuilding it", id.topic, id.partition, base);
        if (auto* e = cache.find(base)) {
            e->has_index = false;
            e->index_size = 0;
            e->index.reset();
        }
        changed();
        spawn_repair(base);
    }
    for (auto base : missing) {
        m.verify_mismatches[0].inc();
        log::warn("partition {}/{}: segment {} is in the manifest but not in the bucket; no longer served", id.topic,
                  id.partition, base);
        cache.erase(base);
        changed();
    }
    std::vector<std::string> leftovers;
    for (const auto& [base, size] : kfs) {
        if (cache.find(base)) continue;
        if (base < first_live && base < log_start) {
            leftovers.push_back(segment_key(ns, id, base));
            leftovers.push_back(index_key(ns, id, base));
            continue;
        }
        detail::segment_entry e;
        e.base = base;
        e.kfs_size = size;
        e.has_index = idx.count(base) > 0;
        if (e.has_index) e.index_size = static_cast<std::uint32_t>(idx[base]);
        auto next = cache.next_base(base);
        e.last = (next ? std::min(*next, verify_below) : verify_below) - 1;
        m.verify_mismatches[1].inc();
        log::warn("partition {}/{}: segment {} is in the bucket but not in the manifest; served from now on", id.topic,
                  id.partition, base);
        const bool repair = !e.has_index;
        cache.insert(std::move(e));
        changed();
        if (repair) spawn_repair(base);
    }
    for (const auto& [base, size] : idx) {
        if (!kfs.count(base) && base < first_live && base < log_start) leftovers.push_back(index_key(ns, id, base));
    }
    if (!leftovers.empty()) {
        log::info("partition {}/{}: deleting {} objects below the log start left by an interrupted delete",
                  id.topic, id.partition, leftovers.size());
        bool ok = false;
        co_await remove_keys(std::move(leftovers), st, ok);
    }
    co_return true;
}

// One round of background work. A timer starts it (not a loop waiting in the gate), so an
// idle log holds nothing open and can be destroyed without close().
runtime::task<void> partition_log::state::lifecycle_tick() {
    auto st = gate.stop_token();
    if (!verified) verified = co_await verify(st);
    if (!st.stop_requested()) co_await apply_retention(st);
    const auto now = runtime::reactor::local().now();
    if (!st.stop_requested() && manifests_on && manifest_dirty() &&
        (manifest_urgent || segments_since_manifest >= cfg.manifest_every_segments ||
         now - dirty_since >= cfg.manifest_interval)) {
        (void)co_await write_manifest(st);
    }
    if (!st.stop_requested()) co_await run_deletes(st);
    if (!closing && !fenced) lifecycle_timer.arm_after(cfg.lifecycle_tick);
}

void partition_log::state::on_lifecycle_timer() {
    if (closing || fenced) return;
    if (!gate.spawn(lifecycle_tick())) return;
}

partition_log::partition_log(std::unique_ptr<state> s) : _s(std::move(s)) {}

partition_log::~partition_log() {
    if (_s && _s->gate.count() != 0) {
        log::error("partition {}/{} destroyed without close(); background uploads abandoned", _s->id.topic,
                   _s->id.partition);
    }
    if (_s) _s->fail_durable();
}

void partition_log::on_durable(std::int64_t offset, std::function<void(bool durable)> fn) {
    auto& s = *_s;
    if (s.hwm > offset) {
        fn(true);
        return;
    }
    if (s.fenced || (s.closing && s.gate.is_closed())) {
        fn(false);
        return;
    }
    s.durable_callbacks.push_back(durable_callback{offset, std::move(fn)});
}

runtime::task<result<std::unique_ptr<partition_log>, store_error>> partition_log::open(object_store& store,
                                                                                      io_budget& budget,
                                                                                      std::string ns,
                                                                                      partition_id id,
                                                                                      log_config cfg) {
    auto s = std::make_unique<state>(store, budget, std::move(ns), std::move(id), std::move(cfg));
    const auto t0 = s->m.now();
    auto r = co_await detail::restore(s->store, s->ns, s->id, s->m, s->cfg.manifests);
    if (!r) {
        s->m.restore_failures.inc();
        co_return failure{std::move(r).error()};
    }
    s->cache.adopt(std::move(r->segments));
    // The gap: offsets a deposed owner may still upload segments at stay unused here. The
    // high watermark stays at what is committed, so readers wait at it instead of polling
    // an empty range.
    s->next_offset = std::max(r->next_offset + std::max<std::int64_t>(s->cfg.takeover_gap, 0), s->cfg.min_next_offset);
    s->hwm = r->next_offset;
    s->appended_end = r->next_offset;
    s->log_start = r->log_start;
    s->report = r->report;
    s->restore_ctx = r->trace;
    s->persisted_log_start = r->log_start;
    s->retired_below = r->log_start;
    s->manifest_keys = std::move(r->manifest_keys);
    s->manifest_epoch = s->cfg.leader_epoch.value_or(0);
    s->manifests_on = s->cfg.manifests;
    if (r->manifest_covered_end >= 0) s->verify_below = r->manifest_covered_end;
    // Our keys continue after every key of our epoch, readable or not: a key is never offered
    // twice.
    const auto mprefix = manifest_prefix(s->ns, s->id);
    for (const auto& k : s->manifest_keys) {
        auto n = parse_manifest_name(std::string_view(k).substr(mprefix.size()));
        if (!n) continue;
        if (n->epoch == s->manifest_epoch) s->manifest_seq = std::max(s->manifest_seq, n->seq + 1);
        if (n->epoch > s->manifest_epoch && s->manifests_on) {
            // A newer owner's checkpoint: ours would sort below it and never be read.
            s->manifests_on = false;
            log::warn("partition {}/{}: a manifest of epoch {} exists, above ours ({}); not writing manifests",
                      s->id.topic, s->id.partition, n->epoch, s->manifest_epoch);
        }
    }
    // Restored without a manifest (or with segments past it): checkpoint soon, so the next
    // restore is cheap.
    if (s->manifests_on && (r->manifest_covered_end < 0 ? r->report.segments > 0 : r->next_offset > r->manifest_covered_end)) {
        s->changed();
        s->manifest_urgent = true;
    }
    for (auto base : r->to_repair) s->spawn_repair(base);
    if (s->m.enabled) {
        auto& m = s->m;
        m.restores.inc();
        m.restore_duration.record(std::chrono::steady_clock::now() - t0);
        m.restored_segments.inc(s->report.segments);
        m.orphans[0].inc(s->report.orphan_kfs);
        m.orphans[1].inc(s->report.orphan_index);
        m.corrupt_segments.inc(s->report.corrupt);
    }
    if (s->m.enabled) {
        if (s->report.from_manifest) s->m.restores_from_manifest.inc();
        s->m.manifests_unusable.inc(s->report.manifests_unusable);
    }
    s->verified = s->verify_below < 0;
    s->lifecycle_timer.arm_after(s->cfg.lifecycle_tick);
    s->register_partition_gauges();
    // A new, empty partition is not news; one with data (or damage) is.
    const auto& rep = s->report;
    log::emit(rep.segments || rep.orphan_kfs || rep.orphan_index || rep.corrupt ? log::level::info : log::level::debug,
              "restored partition {}/{} from {}: {} segments, next offset {}, {} orphan .kfs, {} orphan .index, "
              "{} corrupt, {} list pages{}; new data from offset {}",
              s->id.topic, s->id.partition, store.describe(), rep.segments, rep.next_offset, rep.orphan_kfs,
              rep.orphan_index, rep.corrupt, rep.list_pages,
              rep.from_manifest ? fmt::format(" (manifest with {} segments)", rep.manifest_segments) : "",
              s->next_offset);
    co_return std::unique_ptr<partition_log>(new partition_log(std::move(s)));
}

runtime::task<result<append_result, append_error>> partition_log::append(std::span<const char> record_set,
                                                                         ack_mode acks, std::stop_token st) {
    if (_s->fenced) co_return failure{append_error(append_errc::fenced, "the partition log is fenced")};
    if (_s->closing) co_return failure{append_error(append_errc::shutting_down, "the partition is closing")};
    auto batches = split_batches(record_set);
    if (!batches) {
        const bool old = batches.error().code == format_errc::old_message_format;
        co_return failure{append_error(old ? append_errc::unsupported_version : append_errc::corrupt_message,
                                       batches.error().message)};
    }
    const std::span<const batch_view> views(*batches);
    auto appended = append(views, acks, std::move(st));
    co_return co_await std::move(appended);
}

runtime::task<result<append_result, append_error>> partition_log::append(std::span<const batch_view> batches,
                                                                         ack_mode acks, std::stop_token st,
                                                                         std::optional<std::chrono::milliseconds> room_timeout) {
    auto& s = *_s;
    if (s.fenced) co_return failure{append_error(append_errc::fenced, "the partition log is fenced")};
    if (s.closing) co_return failure{append_error(append_errc::shutting_down, "the partition is closing")};
    if (batches.empty()) co_return failure{append_error(append_errc::corrupt_message, "empty record set")};
    std::size_t set_bytes = 0;
    std::size_t set_offsets = 0;
    for (const auto& b : batches) {
        set_bytes += b.size();
        set_offsets += static_cast<std::size_t>(b.last_offset_delta) + 1;
    }

    // Memory and offset bounds: buffered + in flight, the partition's and the shared one. At a
    // bound the producer waits here, up to room_timeout. A set larger than a bound waits until
    // nothing else is pending. Order: partition bytes, shared bytes, offsets — every append
    // takes them in this order, and nobody waits on one while a waiter of an earlier one holds
    // a later one, so no two appends wait on each other.
    const std::size_t need = std::min(set_bytes, s.cfg.max_pending_bytes);
    const std::size_t need_offsets = std::min(set_offsets, s.records.capacity());
    runtime::semaphore* shared = s.cfg.shared_memory.get();
    const std::size_t need_shared = shared ? std::min(set_bytes, shared->capacity()) : 0;
    std::optional<runtime::semaphore::units> units = s.memory.try_acquire(need);
    std::optional<runtime::semaphore::units> shared_units;
    if (units && shared) shared_units = shared->try_acquire(need_shared);
    std::optional<runtime::semaphore::units> offset_units;
    if (units && (!shared || shared_units)) offset_units = s.records.try_acquire(need_offsets);
    std::chrono::nanoseconds waited{0};
    if (!offset_units) {
        // The slow path: the store is behind. Only here is a deadline armed.
        const auto t0 = runtime::reactor::local().now();
        std::optional<runtime::deadline_scope> deadline;
        std::stop_token wait_st = st;
        if (room_timeout) {
            deadline.emplace(t0 + *room_timeout, st);
            wait_st = deadline->token();
        }
        std::optional<std::error_code> failed;
        if (!units) {
            auto u = co_await s.memory.acquire(need, wait_st);
            if (u) units = std::move(*u);
            else failed = u.error();
        }
        if (!failed && shared && !shared_units) {
            auto u = co_await shared->acquire(need_shared, wait_st);
            if (u) shared_units = std::move(*u);
            else failed = u.error();
        }
        if (!failed) {
            auto u = co_await s.records.acquire(need_offsets, wait_st);
            if (u) offset_units = std::move(*u);
            else failed = u.error();
        }
        waited = runtime::reactor::local().now() - t0;
        s.m.room_waits.inc();
        s.m.room_wait.record(waited);
        if (failed) {
            append_error e;
            if (deadline && deadline->expired() && !st.stop_requested()) {
                s.m.room_timeouts.inc();
                e = append_error(append_errc::no_room,
                                 "no room for the append within the request timeout: the store is behind; nothing "
                                 "was written");
            } else if (runtime::is_cancelled(*failed)) {
                e = append_error(append_errc::cancelled, "no room for the append");
            } else if (s.fenced) {
                e = append_error(append_errc::fenced, "the partition log is fenced");
            } else {
                e = append_error(append_errc::shutting_down, "no room for the append");
            }
            e.room_wait = waited;
            co_return failure{std::move(e)};
        }
    }
    if (s.fenced) co_return failure{append_error(append_errc::fenced, "the partition log is fenced")};
    if (s.closing) co_return failure{append_error(append_errc::shutting_down, "the partition is closing")};
    auto range = s.pipeline.buffer(batches, set_bytes, s.next_offset, std::move(*units), std::move(*offset_units),
                                   std::move(shared_units));
    if (!range) co_return failure{std::move(range).error()};
    append_result out;
    out.room_wait = waited;
    out.base_offset = range->base_offset;
    out.last_offset = range->last_offset;
    s.next_offset = out.last_offset + 1;
    s.appended_end = s.next_offset;
    ++s.stats.appends;
    s.stats.appended_records += static_cast<std::uint64_t>(out.last_offset - out.base_offset + 1);
    s.m.appends.inc();
    s.m.appended_records.inc(static_cast<std::uint64_t>(out.last_offset - out.base_offset + 1));
    s.m.appended_bytes.inc(set_bytes);

    if (acks != ack_mode::durable) {
        s.pipeline.maybe_flush();
        co_return out;
    }
    // The ack: set by the commit (or by close), unless the timeout or a stop comes first — the
    // data then stays in its flush and is still uploaded, but this producer is never told
    // "success".
    auto ack = std::make_shared<detail::ack_latch>();
    s.pipeline.add_waiter(ack);
    s.pipeline.maybe_flush();
    auto acked = co_await ack->wait(s.cfg.append_timeout, st);
    std::optional<append_errc> error;
    if (!acked) {
        error = acked.error() == make_error_code(runtime::errc::timed_out) ? append_errc::timed_out
                                                                           : append_errc::cancelled;
    } else {
        error = acked->error;
    }
    if (error) {
        if (*error == append_errc::timed_out) {
            ++s.stats.timed_out_appends;
            s.m.append_timeouts.inc();
        }
        append_error err(*error, *error == append_errc::timed_out
                                     ? "not durable within the append timeout; still retrying"
                                     : "not acknowledged");
        err.base_offset = out.base_offset;
        err.room_wait = waited;
        err.last_offset = out.last_offset;
        co_return failure{std::move(err)};
    }
    out.flush_span = acked->flush;
    co_return out;
}

runtime::task<result<read_result, store_error>> partition_log::read(std::int64_t offset, std::size_t max_bytes,
                                                                    std::stop_token st) {
    auto& s = *_s;
    read_result out;
    out.high_watermark = s.hwm;
    out.log_start_offset = s.log_start;
    if (offset < s.log_start || offset > s.hwm) {
        co_return failure{store_error(errc::invalid_argument,
                                      fmt::format("offset {} is outside [{}, {}]", offset, s.log_start, s.hwm))};
    }
    std::int64_t cur = offset;
    while (cur < s.hwm && (out.records.empty() || out.records.size() < max_bytes)) {
        auto* seg = s.cache.covering(cur);
        if (!seg) break;
        if (seg->base > cur) cur = seg->base; // skip a gap
        if (seg->corrupt) {
            co_return failure{store_error(errc::corrupt, fmt::format("segment {} is corrupt", seg->base))};
        }
        const std::int64_t base = seg->base;
        const bool was_cached = static_cast<bool>(seg->bytes);
        auto slice = co_await s.cache.slice_for(base, cur, st);
        if (!slice) co_return failure{std::move(slice).error()};
        if (!was_cached) s.cache.prefetch_after(base, s.hwm);
        walk_options wo;
        wo.verify_crc = false; // the body CRC or the writer already covered these bytes
        auto walked = walk_batches(slice->body_part, cur, wo);
        if (!walked) {
            s.cache.mark_corrupt(base);
            co_return failure{store_error(errc::corrupt, fmt::format("segment {}: {}", base, walked.error().message))};
        }
        bool full = false;
        std::int64_t next = cur;
        for (auto& b : walked->batches) {
            if (b.base_offset >= s.hwm) break;
            if (!out.records.empty() && out.records.size() + b.size() > max_bytes) {
                full = true;
                break;
            }
            out.records.append(b.bytes.data(), b.bytes.size());
            next = b.next_offset();
        }
        if (full) break;
        // Past the last batch of this segment: continue in the next one.
        auto after = s.cache.next_base(base);
        if (!after) break;
        cur = std::max(next, *after);
    }
    co_return out;
}

runtime::task<bool> partition_log::wait_for_data(std::int64_t offset, std::chrono::milliseconds timeout,
                                                 std::stop_token st) {
    auto& s = *_s;
    if (s.hwm > offset) co_return true;
    if (s.closing) co_return false;
    auto latch = std::make_shared<runtime::oneshot<bool>>();
    s.data_waiters.push_back(data_waiter{offset, latch});
    auto woken = co_await latch->wait(timeout, st);
    co_return woken && *woken;
}

runtime::task<void> partition_log::flush() {
    auto& s = *_s;
    const std::int64_t target = s.appended_end;
    if (s.hwm >= target || s.fenced) co_return;
    s.pipeline.flush_now();
    while (s.hwm < target && !s.fenced && !(s.closing && s.pipeline.idle())) {
        auto ok = co_await wait_for_data(target - 1, std::chrono::milliseconds(1000), s.gate.stop_token());
        if (!ok && s.gate.stop_token().stop_requested()) co_return;
    }
}

runtime::task<void> partition_log::close() {
    auto& s = *_s;
    if (s.closing && s.gate.is_closed()) co_return;
    s.closing = true;
    s.pipeline.start_closing();
    s.pipeline.flush_now();
    if (!s.pipeline.idle()) {
        // Bounded: a store that never answers must not hold shutdown forever.
        runtime::deadline_scope scope(runtime::reactor::local().now() + s.cfg.close_timeout);
        while (!s.pipeline.idle() && !scope.expired()) {
            auto slept = co_await runtime::sleep(std::chrono::milliseconds(2), scope.token());
            (void)slept;
        }
    }
    s.pipeline.stop_timer();
    s.lifecycle_timer.cancel();
    s.memory.broken();
    // A last checkpoint, so the next owner restores with one GET and a short LIST.
    if (!s.fenced && s.manifests_on && s.manifest_dirty()) {
        runtime::deadline_scope scope(runtime::reactor::local().now() + s.cfg.close_timeout);
        (void)co_await s.write_manifest(scope.token());
    }
    co_await s.gate.close();
    // Uploads cut short by the gate: their producers were never acknowledged.
    s.pipeline.abandon_all();
    for (auto& w : s.data_waiters) w.latch->set(false);
    s.data_waiters.clear();
    s.fail_durable();
    // The partition is gone from this core's point of view: its own series go too.
    s.hwm_reg.reset();
    s.start_reg.reset();
}

void partition_log::set_retention(std::int64_t retention_ms, std::int64_t retention_bytes) {
    _s->cfg.retention_ms = retention_ms;
    _s->cfg.retention_bytes = retention_bytes;
}

runtime::task<result<std::int64_t, store_error>> partition_log::delete_records(std::int64_t offset,
                                                                                std::stop_token st) {
    auto& s = *_s;
    if (offset == -1) offset = s.hwm;
    if (offset < 0 || offset > s.hwm) {
        co_return failure{store_error(errc::invalid_argument,
                                      fmt::format("offset {} is outside [0, {}]", offset, s.hwm))};
    }
    if (s.fenced) co_return failure{store_error(errc::precondition_failed, "the partition log is fenced")};
    if (offset <= s.log_start) co_return s.log_start;
    s.retire_below(offset);
    if (s.manifests_on) {
        auto holder = s.gate.enter();
        if (!holder) co_return failure{store_error(errc::cancelled, "the partition is closing")};
        // The answer says the records are gone: only once a restart would agree.
        if (!co_await s.write_manifest(st)) {
            co_return failure{store_error(errc::transient,
                                          "the new log start offset could not be stored; it is tried again")};
        }
    }
    co_return s.log_start;
}

runtime::task<bool> partition_log::checkpoint(std::stop_token st) {
    auto& s = *_s;
    if (!s.manifests_on || s.fenced) co_return false;
    if (!s.manifest_dirty()) co_return true;
    auto holder = s.gate.enter();
    if (!holder) co_return false;
    co_return co_await s.write_manifest(st);
}

std::int64_t partition_log::high_watermark() const noexcept { return _s->hwm; }
std::int64_t partition_log::log_start_offset() const noexcept { return _s->log_start; }
std::int64_t partition_log::next_offset() const noexcept { return _s->next_offset; }
bool partition_log::fenced() const noexcept { return _s->fenced; }
void partition_log::on_fenced(std::function<void()> fn) { _s->on_fenced = std::move(fn); }
const restore_report& partition_log::restored() const noexcept { return _s->report; }
const partition_id& partition_log::id() const noexcept { return _s->id; }

log_stats partition_log::stats() const noexcept {
    log_stats st = _s->stats;
    st.inflight_flushes = static_cast<std::size_t>(_s->pipeline.uploading());
    st.buffered_bytes = _s->pipeline.buffered_bytes();
    st.pending_bytes = _s->pending_bytes();
    return st;
}

} // namespace skiff::storage
