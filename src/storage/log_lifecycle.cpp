// The partition log's background work (partition_log.hpp, "Lifecycle"; docs/lifecycle.md):
// manifests, retention, the deletes that follow, and the check of a manifest against the
// bucket after a restore. One tick at a time, started by a timer on the log's core.
#include "log_state.hpp"

#include <skiff/storage/manifest_format.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <set>

namespace skiff::storage {

// ---- lifecycle ---------------------------------------------------------------------------

// Stores a manifest of what the log holds now. Serialized (DeleteRecords may call it while
// the background loop does); true once a manifest at least this new is stored.
runtime::task<bool> partition_log::state::write_manifest(std::stop_token st) {
    auto lock = co_await manifest_lock.acquire(1, st);
    if (!lock || !manifests_on || !may_modify()) co_return false;
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
    persisted_covered_end = std::max(persisted_covered_end, mf.covered_end);
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
    if (!permit || !may_modify()) co_return;
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
    detail::pending_delete batch;
    batch.due = runtime::reactor::local().now() + cfg.delete_delay;
    for (const auto& [base, e] : cache.segments()) {
        if (base >= hwm) break;
        const std::int64_t last = e.last >= 0 ? e.last : hwm - 1;
        if (last >= start) break;
        if (last < retired_below) continue; // already queued
        batch.bases.push_back(base);
        batch.keys.push_back(segment_key(ns, id, base));
        batch.keys.push_back(index_key(ns, id, base));
        batch.keys.push_back(time_index_key(ns, id, base)); // whether or not one was written
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
        if (d.due > now) co_return;
        if (manifests_on && (d.merged ? changes_stored < d.after_change : d.last >= persisted_log_start)) co_return;
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
    std::set<std::int64_t> sidecars;
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
            switch (parsed->kind) {
            case object_kind::kfs: kfs[parsed->base] = o.size; break;
            case object_kind::index: idx[parsed->base] = o.size; break;
            case object_kind::kfst: sidecars.insert(parsed->base); break;
            }
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
    // A merge that stopped before its manifest: the first source's object grew (the LIST size
    // is not the manifest's). Its footer says how far it reaches; the sources it covers leave
    // the log as if the merge had finished (log_merge.cpp).
    std::vector<std::int64_t> grown;
    std::vector<std::string> stale_sidecars;
    for (const auto& [base, e] : cache.segments()) {
        if (base >= verify_below) break;
        if (retired(e) || e.kfs_size == 0) continue;
        if (auto it = kfs.find(base); it != kfs.end() && it->second != e.kfs_size) grown.push_back(base);
    }
    for (auto base : grown) {
        const std::uint64_t size = kfs[base];
        if (size < segment_header_size + segment_footer_size) continue;
        auto permit = co_await acquire_io(st);
        if (!permit) co_return false;
        const auto t0 = m.now();
        auto tail = co_await store.get(segment_key(ns, id, base), byte_range::between(size - segment_footer_size, size - 1), st);
        m.store_done(detail::store_op::get_range, detail::key_kind::kfs, t0, 0, tail ? tail->data.size() : 0,
                     tail ? nullptr : &tail.error());
        if (!tail) co_return false;
        auto footer = parse_segment_footer(tail->data);
        auto* e = cache.find(base);
        if (!footer || !e) continue;
        auto next = cache.next_base(base);
        if (!next || footer->last_offset < *next) {
            // Rewritten in place (compacted alone): the same offsets, another size.
            e->kfs_size = size;
            e->index.reset();
            e->index_size = idx.count(base) ? static_cast<std::uint32_t>(idx[base]) : 0;
            changed();
            continue;
        }
        std::vector<std::int64_t> covered;
        std::int64_t max_ts = e->max_timestamp;
        for (auto it = cache.segments().upper_bound(base); it != cache.segments().end() && it->first <= footer->last_offset; ++it) {
            covered.push_back(it->first);
            max_ts = std::max(max_ts, it->second.max_timestamp);
        }
        m.verify_mismatches[2].inc();
        log::warn("partition {}/{}: segment {} already holds offsets up to {} (a merge stopped before its manifest); "
                  "finishing it", id.topic, id.partition, base, footer->last_offset);
        detail::segment_entry merged = *e;
        merged.last = footer->last_offset;
        merged.kfs_size = size;
        merged.index.reset(); // loaded again: the stored one may be the merged one
        merged.index_size = idx.count(base) ? static_cast<std::uint32_t>(idx[base]) : 0;
        merged.max_timestamp = max_ts;
        // Its sidecar may still be the first source's (the merge stopped before replacing
        // it): once the sources go it would describe too little. Readers fall back without one.
        if (sidecars.count(base)) stale_sidecars.push_back(time_index_key(ns, id, base));
        cache.apply_merge(std::move(merged));
        changed();
        queue_merged_away(covered);
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
    std::vector<std::string> leftovers = std::move(stale_sidecars);
    std::vector<std::int64_t> merged_away;
    for (const auto& [base, size] : kfs) {
        if (cache.find(base)) continue;
        // Inside a served segment: a merge's source whose delete a crash interrupted.
        if (auto* c = cache.covering(base); c && c->base < base && c->last >= base) {
            merged_away.push_back(base);
            continue;
        }
        if (base < first_live && base < log_start) {
            leftovers.push_back(segment_key(ns, id, base));
            leftovers.push_back(index_key(ns, id, base));
            if (sidecars.count(base)) leftovers.push_back(time_index_key(ns, id, base));
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
    for (auto base : sidecars) {
        if (!kfs.count(base) && base < first_live && base < log_start) leftovers.push_back(time_index_key(ns, id, base));
    }
    if (!merged_away.empty()) {
        log::info("partition {}/{}: {} segments merged before the restore are still in the bucket; deleting them",
                  id.topic, id.partition, merged_away.size());
        queue_merged_away(merged_away);
        changed();
    }
    if (!leftovers.empty()) {
        log::info("partition {}/{}: deleting {} objects left by an interrupted delete or merge", id.topic,
                  id.partition, leftovers.size());
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
    // A compacted log merges as it compacts; other logs merge here, a few merges per tick so a
    // backlog (merging just turned on, or a burst) drains.
    const bool compacted = !st.stop_requested() && co_await compact_once(st);
    for (int i = 0; i < 4 && !compacted && !cfg.compact && !st.stop_requested(); ++i) {
        if (!co_await merge_once(st)) break;
    }
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

} // namespace skiff::storage
