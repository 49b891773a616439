// Compacted topics (cleanup.policy=compact; docs/lifecycle.md, "Compaction"): the background
// loop keeps the latest record of every key, with the record rules of compaction.hpp.
//
// A pass covers the log's compactable prefix: sealed segments (never the newest) whose records
// are all older than min.compaction.lag.ms, each first source listed in a stored manifest.
// Pass 1 reads those not compacted yet and learns each key's latest offset, up to the map's
// memory bound (log_config::compaction_map_bytes; more keys are compacted in rounds, each
// covering the log up to the last segment it mapped); pass 2 rewrites them in groups of up
// to the merge target, each group into one segment under its first source's key (a compaction
// also merges), batches keeping their offsets. The later sources of a group leave the log as
// a merge's do (log_merge.cpp). A group where nothing goes and nothing merges is left alone.
//
// Unlike a merge, a compacted segment does not start with its source's bytes, so an old
// .index would point into the new .kfs at wrong places. The order of writes keeps every pair
// in the bucket consistent: DELETE the .index and the .kfst sidecar (the .kfs alone is served
// by walking it, as any orphan; without a sidecar readers read its header), PUT the new .kfs,
// PUT its .index, then PUT its .kfst (best effort: a failure leaves none, which is right). A reader in this process that used an old
// position finds another batch there and walks the segment instead (segment_cache.cpp). A
// crash in between leaves an orphan or a complete pair, and the check after restore sees the
// first source's new size and finishes the group (log_lifecycle.cpp, verify).
#include "log_state.hpp"

#include <skiff/storage/compaction.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <limits>
#include <map>

namespace skiff::storage {

runtime::task<bool> partition_log::state::compact_once(std::stop_token st) {
    if (!cfg.compact || fenced || closing) co_return false;
    const auto now_steady = runtime::reactor::local().now();
    if (last_compaction != runtime::time_point{} && now_steady - last_compaction < cfg.compaction_interval) {
        co_return false;
    }
    const std::int64_t now = cfg.wall_ms();
    const std::int64_t start_below = manifests_on ? persisted_covered_end : std::numeric_limits<std::int64_t>::max();
    // The compactable prefix.
    std::vector<std::int64_t> bases;
    bool dirty = false;
    {
        const auto& segs = cache.segments();
        auto end = segs.lower_bound(hwm);
        if (end == segs.begin()) co_return false;
        --end;
        for (auto it = segs.begin(); it != end; ++it) {
            const auto& e = it->second;
            if (retired(e)) continue;
            if (e.corrupt || it->first >= start_below) break;
            const std::int64_t ts = e.max_timestamp >= 0 ? e.max_timestamp : e.created_ms;
            if (ts >= 0 && ts > now - cfg.min_compaction_lag_ms) break;
            bases.push_back(it->first);
            if (it->first >= compacted_end) dirty = true;
        }
    }
    if (bases.empty() || !dirty) co_return false;
    last_compaction = now_steady;
    // One pass at a time per core (the broker shares the slots): its key map is the memory.
    std::optional<runtime::semaphore::units> slot;
    if (cfg.compaction_slots) {
        auto u = co_await cfg.compaction_slots->acquire(1, st);
        if (!u) co_return false;
        slot.emplace(std::move(*u));
        if (fenced || closing) co_return false;
    }

    auto span = metrics::span::root("compaction");
    if (span.active()) {
        span.set("topic", id.topic);
        span.set("partition", id.partition);
        span.set("segments", bases.size());
    }
    auto fail = [&](std::string_view why) {
        span.set("status", std::string(why));
        m.compaction_failures.inc();
        log::debug("partition {}/{}: compaction stopped: {}", id.topic, id.partition, why);
    };
    // Sources read in pass 1 are kept for pass 2 up to keep_limit; the others are read again.
    std::map<std::int64_t, std::shared_ptr<const std::string>> kept_bytes;
    std::size_t kept_total = 0;
    constexpr std::size_t keep_limit = 64u << 20;
    // Pass 1 reads ahead this many segments (and bytes) at once.
    const std::size_t read_ahead = std::max<std::size_t>(cfg.compaction_read_ahead, 1);
    constexpr std::uint64_t read_ahead_bytes = 16u << 20;
    // Each source holds the batches below the next segment's base (a merge or compaction cut
    // off by a crash may have left more in it).
    auto limit_of = [&](std::int64_t base) {
        auto next = cache.next_base(base);
        return next ? *next : hwm;
    };

    // Pass 1: the latest offset of every key in the segments not compacted yet (those below
    // compacted_end hold no key twice, only keys the newer ones may supersede), as many as
    // the map's bound allows; the pass then covers the log up to the last one mapped.
    key_index index;
    for (const auto& [producer, base] : compacted_producers) index.learn_producer(producer, base);
    std::uint64_t bytes_in = 0;
    bool cut = false;
    std::map<std::int64_t, std::shared_ptr<const std::string>> ahead; // read, not mapped yet
    for (std::size_t n = 0; n < bases.size(); ++n) {
        const auto base = bases[n];
        if (base < compacted_end) continue;
        if (index.keys() > 0 && index.memory_bytes() >= cfg.compaction_map_bytes) {
            bases.resize(n);
            cut = true;
            break;
        }
        if (!ahead.count(base)) {
            // The next few segments with GETs in parallel (one round trip, not one each).
            std::vector<std::int64_t> chunk;
            std::uint64_t chunk_bytes = 0;
            for (std::size_t j = n; j < bases.size() && chunk.size() < read_ahead; ++j) {
                const auto* e = cache.find(bases[j]);
                const std::uint64_t size = e ? e->kfs_size : 0;
                if (!chunk.empty() && chunk_bytes + size > read_ahead_bytes) break;
                chunk.push_back(bases[j]);
                chunk_bytes += size;
            }
            auto read = co_await read_sources(chunk, st);
            if (!read) {
                fail(read.error().code == errc::cancelled ? "cancelled" : "a GET failed");
                co_return false;
            }
            for (std::size_t j = 0; j < chunk.size(); ++j) ahead[chunk[j]] = std::move((*read)[j]);
        }
        auto bytes = std::move(ahead.at(base));
        ahead.erase(base);
        const auto* cached = cache.find(base);
        if (!(cached && cached->bytes == bytes) && kept_total + bytes->size() <= keep_limit) {
            kept_total += bytes->size();
            kept_bytes[base] = bytes;
        }
        auto seg = decode_segment(*bytes);
        if (!seg || seg->base_offset() != base) {
            fail("a segment does not decode");
            co_return false;
        }
        bytes_in += bytes->size();
        const auto limit = limit_of(base);
        for (const auto& b : seg->batches) {
            if (b.base_offset >= limit) break;
            auto added = index.add(b, 64u << 20);
            if (!added) {
                fail("a batch does not decode");
                log::warn("partition {}/{}: segment {} not compacted: {}", id.topic, id.partition, base,
                          added.error().message);
                co_return false;
            }
        }
    }

    // Pass 2: groups of sources up to the target, each rewritten into its first one's key.
    compaction_rules rules;
    rules.now_ms = now;
    rules.delete_retention_ms = cfg.delete_retention_ms;
    const std::uint64_t group_limit = cfg.merge_target_bytes > 0 ? cfg.merge_target_bytes : (32u << 20);
    std::size_t i = 0;
    std::uint64_t bytes_out = 0;
    std::int64_t removed = 0;
    while (i < bases.size()) {
        std::vector<std::int64_t> group{bases[i]};
        std::uint64_t size = cache.find(bases[i]) ? cache.find(bases[i])->kfs_size : 0;
        ++i;
        while (i < bases.size()) {
            auto* e = cache.find(bases[i]);
            const std::uint64_t s = e ? e->kfs_size : 0;
            if (size + s > group_limit) break;
            size += s;
            group.push_back(bases[i]);
            ++i;
        }
        segment_builder builder(group.front(), cfg.index_interval);
        bool changed_any = group.size() > 1;
        std::int64_t created = -1;
        std::int64_t group_removed = 0;
        // The group's sources not in memory, in parallel (a group is at most the target).
        std::vector<std::int64_t> missing;
        for (auto base : group) {
            if (kept_bytes.count(base)) continue;
            // Held from here, so an eviction during the GETs below cannot take it away.
            if (const auto* e = cache.find(base); e && e->bytes) kept_bytes[base] = e->bytes;
            else missing.push_back(base);
        }
        if (!missing.empty()) {
            auto read = co_await read_sources(missing, st);
            if (!read) {
                fail(read.error().code == errc::cancelled ? "cancelled" : "a GET failed");
                co_return false;
            }
            for (std::size_t j = 0; j < missing.size(); ++j) kept_bytes[missing[j]] = std::move((*read)[j]);
        }
        for (std::size_t g = 0; g < group.size(); ++g) {
            const auto bytes = kept_bytes.at(group[g]);
            auto seg = decode_segment(*bytes);
            if (!seg) {
                fail("a segment does not decode");
                co_return false;
            }
            created = std::max(created, seg->header.created_ms);
            const auto limit = limit_of(group[g]);
            const bool last_source = g + 1 == group.size();
            std::size_t last_batch = 0;
            for (std::size_t k = 0; k < seg->batches.size() && seg->batches[k].base_offset < limit; ++k) last_batch = k;
            for (std::size_t k = 0; k < seg->batches.size(); ++k) {
                const auto& b = seg->batches[k];
                if (b.base_offset >= limit) break;
                // The group's first and last batches always stay (empty if need be): the new
                // segment then starts at its key's base (the format requires its first batch
                // there) and ends where the group did, so the restore rule (a segment's end is
                // the next base) finds the same ranges before and after.
                const bool edge = (g == 0 && k == 0) || (last_source && k == last_batch);
                auto f = filter_batch(b, index, rules, edge);
                if (!f) {
                    fail("a batch does not decode");
                    co_return false;
                }
                group_removed += f->records_in - f->records_out;
                std::span<const char> out = b.bytes;
                if (f->fate == batch_fate::dropped) {
                    changed_any = true;
                    continue;
                }
                if (f->fate != batch_fate::kept) {
                    changed_any = true;
                    out = std::span<const char>(f->bytes.data(), f->bytes.size());
                }
                auto moved = builder.skip_to(b.base_offset);
                auto added = moved ? builder.append(out) : result<std::int64_t, format_error>(failure{moved.error()});
                if (!added) {
                    fail("the compacted segment cannot take a batch");
                    co_return false;
                }
            }
        }
        if (!changed_any || builder.empty()) {
            for (auto base : group) kept_bytes.erase(base);
            continue;
        }
        auto built = std::move(builder).finish(created);
        auto kfs = std::make_shared<const std::string>(std::move(built.kfs));
        auto idx = std::make_shared<const std::string>(std::move(built.index));
        const std::int64_t first = group.front();
        // DELETE the old .index, PUT the .kfs, PUT the .index: one at a time (see the top).
        {
            auto permit = co_await acquire_io(st);
            if (!permit) co_return false;
            if (!may_modify()) {
                fail("not the owner");
                co_return false;
            }
            const auto t0 = m.now();
            std::vector<std::string> old_keys;
            old_keys.push_back(index_key(ns, id, first));
            old_keys.push_back(time_index_key(ns, id, first));
            auto r = co_await store.remove_many(std::move(old_keys), st);
            m.store_done(detail::store_op::del, detail::key_kind::none, t0, 0, 0, r ? nullptr : &r.error());
            if (!r && r.error().code != errc::not_found) {
                fail("a DELETE failed");
                co_return false;
            }
        }
        if (auto* e = cache.find(first)) {
            // Until the new pair is stored, this segment is read by walking it.
            e->has_index = false;
            e->index.reset();
            e->index_size = 0;
        }
        for (int which = 0; which < 2; ++which) {
            const auto& body = which == 0 ? kfs : idx;
            // Not a ternary inside the co_await: g++ 12 destroys such string temporaries twice.
            std::string key;
            if (which == 0) key = segment_key(ns, id, first);
            else key = index_key(ns, id, first);
            auto permit = co_await acquire_io(st);
            if (!permit) co_return false;
            if (!may_modify()) {
                // The .index is gone: whichever .kfs is stored gets it back.
                fail("not the owner");
                spawn_repair(first);
                co_return false;
            }
            const auto t0 = m.now();
            auto r = co_await store.put(std::move(key), std::span<const char>(body->data(), body->size()), false, st);
            m.store_done(detail::store_op::put, which == 0 ? detail::key_kind::kfs : detail::key_kind::index, t0,
                         body->size(), 0, r ? nullptr : &r.error());
            if (!r) {
                fail("a PUT failed");
                log::warn("partition {}/{}: compacted segment {} not stored ({}); tried again later", id.topic,
                          id.partition, first, r.error().message);
                spawn_repair(first); // whichever .kfs is stored gets its index back
                co_return false;
            }
        }
        // The old sidecar is gone already: a failure here leaves none (counted, not a failure
        // of the pass).
        if (cfg.time_index) (void)co_await rewrite_time_index(first, built.meta, st);
        if (!adopt_rewrite(group, built.meta, kfs, idx, created)) {
            fail("a source left the log during compaction");
            co_return false;
        }
        for (auto base : group) kept_bytes.erase(base);
        bytes_out += kfs->size();
        removed += group_removed;
        m.compacted_segments.inc(group.size());
    }
    compacted_end = limit_of(bases.back());
    compacted_producers = index.producers();
    // Cut short by the map's bound: the next round goes on at the next tick.
    if (cut) last_compaction = {};
    m.compactions.inc();
    m.compaction_bytes_in.inc(bytes_in);
    m.compaction_records_removed.inc(static_cast<std::uint64_t>(std::max<std::int64_t>(removed, 0)));
    span.set("status", "ok");
    span.set("covered", bases.size());
    span.set("cut", cut);
    span.set("keys", index.keys());
    span.set("records", index.records());
    span.set("removed", removed);
    span.set("bytes_in", bytes_in);
    span.set("bytes_out", bytes_out);
    log::debug("partition {}/{}: compacted {} segments: {} records, {} keys, {} removed", id.topic, id.partition,
               bases.size(), index.records(), index.keys(), removed);
    co_return true;
}

} // namespace skiff::storage
