// Segment merging (docs/lifecycle.md, "Merging"): a busy partition flushes a small segment
// every few hundred milliseconds; merging turns runs of them into segments of about
// log_config::merge_target_bytes, so the bucket holds (and a restore or a reader lists) a few
// objects per day instead of hundreds of thousands.
//
// Why a merge can stop at any step. The merged .kfs is the first source's header (count and
// time updated) followed by the sources' bodies, concatenated: its bytes start with the first
// source's batches at the same positions, so it replaces that source under the same key, and
// the old .index stays right for every offset the old object held. Readers (this broker after
// a restart, `skiff fsck`, any reader of the format) take a segment's end from the next
// segment's base, so while the later sources exist they serve their own offsets and the
// merged object's copy of them is never read twice. Steps:
//   1. PUT the merged .kfs and its .index (together), over the first source's; then its
//      .kfst (or DELETE the first source's, when that fails or sidecars are off). Until then
//      the old sidecar describes exactly the offsets readers take from that object (up to
//      the next source's base); a merge whose old sidecar can be neither replaced nor
//      deleted is not adopted, so its sources are never deleted under a narrower sidecar.
//   2. Forget the later sources in memory: their offsets are read from the merged segment.
//   3. Store a manifest without them, then, after delete_delay, delete them.
// A crash before 3 leaves the sources in a manifest; the check after the next restore sees
// the first source's object grown (LIST size != manifest size), reads its footer and finishes
// the merge (log_lifecycle.cpp, verify). A failed PUT leaves either object, old or new: both
// are right for the offsets the first source holds; the merge is tried again.
#include "log_state.hpp"

#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <limits>

namespace skiff::storage {

namespace {

// g++ 12 and aggregates returned from coroutines: see s3/client.hpp.
struct fetched_segment {
    fetched_segment() = default;
    std::shared_ptr<const std::string> bytes;
};

} // namespace

// The first run of adjacent small segments worth merging. Small: under half the target (a
// merged segment is never merged again once it reached that, so each byte is rewritten at
// most once by size). Worth it: two or more that add up to half the target, or whose newest
// is older than merge_age. The newest committed segment is never a source: restore reads
// its footer for the log's end.
std::optional<partition_log::state::merge_group> partition_log::state::plan_merge() const {
    const std::uint64_t target = cfg.merge_target_bytes;
    if (target == 0 || fenced || closing) return std::nullopt;
    // A merge cut off by a crash is found by the size its first source has in the LIST and
    // in the manifest: so the first source must be in a stored manifest (without manifests,
    // restore lists everything and the next-base rule serves each offset once anyway).
    const std::int64_t start_below = manifests_on ? persisted_covered_end : std::numeric_limits<std::int64_t>::max();
    const std::uint64_t half = target / 2;
    const auto& segs = cache.segments();
    auto end = segs.lower_bound(hwm);
    if (end == segs.begin()) return std::nullopt;
    --end; // the newest committed segment: excluded
    const std::int64_t now = cfg.wall_ms();
    const std::int64_t age_ms = cfg.merge_age.count();
    merge_group g;
    std::int64_t newest_created = -1;
    auto worth = [&] {
        if (g.bases.size() < 2) return false;
        return g.bytes >= half || newest_created < 0 || now - newest_created >= age_ms;
    };
    for (auto it = segs.begin(); it != end; ++it) {
        const auto& e = it->second;
        const bool small = !e.corrupt && !retired(e) && e.kfs_size > 0 && e.kfs_size < half;
        if (!small || g.bytes + e.kfs_size > target) {
            if (worth()) return g;
            g = merge_group{};
            newest_created = -1;
            if (!small) continue;
        }
        if (g.bases.empty() && it->first >= start_below) break;
        g.bases.push_back(it->first);
        g.bytes += e.kfs_size;
        newest_created = e.created_ms;
    }
    if (worth()) return g;
    return std::nullopt;
}

bool partition_log::state::adopt_rewrite(const std::vector<std::int64_t>& sources, const segment_meta& meta,
                                         const std::shared_ptr<const std::string>& kfs,
                                         const std::shared_ptr<const std::string>& index, std::int64_t created_ms) {
    for (auto base : sources) {
        auto* e = cache.find(base);
        if (!e || retired(*e)) return false;
    }
    detail::segment_entry merged;
    merged.base = sources.front();
    merged.last = meta.last_offset;
    merged.kfs_size = kfs->size();
    merged.has_index = true;
    merged.index_size = static_cast<std::uint32_t>(index->size());
    merged.index = index;
    merged.max_timestamp = meta.max_timestamp;
    merged.created_ms = created_ms;
    cache.apply_merge(std::move(merged));
    changed();
    manifest_urgent = true;
    queue_merged_away(std::vector<std::int64_t>(sources.begin() + 1, sources.end()));
    return true;
}

void partition_log::state::queue_merged_away(const std::vector<std::int64_t>& bases) {
    if (bases.empty()) return;
    detail::pending_delete d;
    d.due = runtime::reactor::local().now() + cfg.delete_delay;
    d.merged = true;
    d.after_change = changes;
    for (auto b : bases) {
        d.keys.push_back(segment_key(ns, id, b));
        d.keys.push_back(index_key(ns, id, b));
        d.keys.push_back(time_index_key(ns, id, b));
    }
    deletes.push_back(std::move(d));
    manifest_urgent = true; // the delete waits for a manifest without them
}

runtime::task<bool> partition_log::state::rewrite_time_index(std::int64_t base, const segment_meta& meta,
                                                              std::stop_token st) {
    const std::string key = time_index_key(ns, id, base);
    if (cfg.time_index) {
        const std::string body = encode_time_index(time_index_of(meta));
        auto permit = co_await acquire_io(st);
        if (!permit) co_return false;
        if (!may_modify()) co_return false;
        const auto t0 = m.now();
        auto r = co_await store.put(key, std::span<const char>(body.data(), body.size()), false, st);
        m.store_done(detail::store_op::put, detail::key_kind::kfst, t0, body.size(), 0, r ? nullptr : &r.error());
        if (r) {
            m.time_index_writes.inc();
            co_return true;
        }
        m.time_index_failures.inc();
        log::warn("partition {}/{}: time-index sidecar of segment {} not stored ({}); deleting the old one", id.topic,
                  id.partition, base, r.error().message);
    }
    auto permit = co_await acquire_io(st);
    if (!permit) co_return false;
    if (!may_modify()) co_return false;
    const auto t0 = m.now();
    auto r = co_await store.remove(key, st);
    m.store_done(detail::store_op::del, detail::key_kind::none, t0, 0, 0, r ? nullptr : &r.error());
    co_return static_cast<bool>(r);
}

runtime::task<result<std::shared_ptr<const std::string>, store_error>>
partition_log::state::read_source(std::int64_t base, std::stop_token st) {
    if (auto* e = cache.find(base); e && e->bytes) co_return e->bytes;
    auto permit = co_await acquire_io(st);
    if (!permit) co_return failure{store_error(errc::cancelled, "cancelled")};
    std::string key = segment_key(ns, id, base);
    const auto t0 = m.now();
    auto got = co_await store.get(std::move(key), std::nullopt, st);
    m.store_done(detail::store_op::get, detail::key_kind::kfs, t0, 0, got ? got->data.size() : 0,
                 got ? nullptr : &got.error());
    if (!got) co_return failure{std::move(got).error()};
    co_return std::make_shared<const std::string>(std::move(got->data));
}

runtime::task<result<partition_log::state::source_bytes, store_error>>
partition_log::state::read_sources(std::vector<std::int64_t> bases, std::stop_token st) {
    std::vector<runtime::task<result<std::shared_ptr<const std::string>, store_error>>> reads;
    reads.reserve(bases.size());
    for (auto base : bases) reads.push_back(read_source(base, st));
    auto got = co_await runtime::when_all(std::move(reads));
    source_bytes out;
    out.reserve(got.size());
    for (auto& g : got) {
        if (!g) co_return failure{std::move(g).error()};
        out.push_back(std::move(*g));
    }
    co_return out;
}

runtime::task<bool> partition_log::state::merge_once(std::stop_token st) {
    auto plan = plan_merge();
    if (!plan) co_return false;
    const auto& bases = plan->bases;
    const std::int64_t first = bases.front();
    auto span = metrics::span::root("merge");
    if (span.active()) {
        span.set("topic", id.topic);
        span.set("partition", id.partition);
        span.set("base", first);
        span.set("sources", bases.size());
        span.set("bytes", plan->bytes);
    }
    auto fail = [&](std::string_view why) {
        span.set("status", std::string(why));
        m.merge_failures.inc();
        log::debug("partition {}/{}: merge at {} not done: {}", id.topic, id.partition, first, why);
    };
    // The sources' bytes: from memory when cached, else GETs in parallel (background priority;
    // a group is at most the merge target).
    for (auto base : bases) {
        if (!cache.find(base)) {
            fail("a source left the log");
            co_return false;
        }
    }
    auto read = co_await read_sources(bases, st);
    if (!read) {
        fail(read.error().code == errc::cancelled ? "cancelled" : "a GET failed");
        co_return false;
    }
    auto sources = std::move(*read);
    // Each source contributes the batches below the next segment's base: an object may hold
    // more (a merge interrupted before), and those offsets are served from where they lie now.
    segment_builder builder(first, cfg.index_interval, plan->bytes);
    std::int64_t created = -1;
    for (std::size_t i = 0; i < bases.size(); ++i) {
        auto seg = decode_segment(*sources[i]);
        if (!seg || seg->base_offset() != bases[i]) {
            // Never merged, never deleted: a corrupt source is reported by reads and fsck.
            fail("a source does not decode");
            log::warn("partition {}/{}: segment {} not merged: {}", id.topic, id.partition, bases[i],
                      seg ? "its header names another base" : seg.error().message);
            co_return false;
        }
        auto next = cache.next_base(bases[i]);
        const std::int64_t limit = next ? *next : hwm;
        for (const auto& b : seg->batches) {
            if (b.base_offset >= limit) break;
            auto moved = builder.skip_to(b.base_offset);
            auto added = moved ? builder.append(b.bytes) : result<std::int64_t, format_error>(failure{moved.error()});
            if (!added) {
                fail("the merged segment cannot take a batch");
                co_return false;
            }
        }
        created = std::max(created, seg->header.created_ms);
    }
    if (builder.empty()) {
        fail("no batches");
        co_return false;
    }
    auto built = std::move(builder).finish(created);
    sources.clear();
    auto kfs = std::make_shared<const std::string>(std::move(built.kfs));
    auto index = std::make_shared<const std::string>(std::move(built.index));

    // Both objects at once, over the first source's (not if-absent: the key is ours and the
    // new bytes extend the old ones).
    auto put_one = [this](std::string key, std::shared_ptr<const std::string> body, detail::key_kind kind,
                          std::stop_token pst) -> runtime::task<result<void, store_error>> {
        auto permit = co_await acquire_io(pst);
        if (!permit) co_return failure{store_error(errc::cancelled, "cancelled")};
        const auto t0 = m.now();
        auto r = co_await store.put(key, std::span<const char>(body->data(), body->size()), false, pst);
        m.store_done(detail::store_op::put, kind, t0, body->size(), 0, r ? nullptr : &r.error());
        co_return r;
    };
    if (!may_modify()) {
        fail("not the owner");
        co_return false;
    }
    auto [pk, pi] = co_await runtime::when_all(put_one(segment_key(ns, id, first), kfs, detail::key_kind::kfs, st),
                                               put_one(index_key(ns, id, first), index, detail::key_kind::index, st));
    if (!pk || !pi) {
        const auto& err = !pk ? pk.error() : pi.error();
        if (err.code != errc::cancelled) {
            fail("a PUT failed");
            log::warn("partition {}/{}: merge at {} not stored ({}); tried again later", id.topic, id.partition, first,
                      err.message);
        }
        co_return false;
    }
    if (!co_await rewrite_time_index(first, built.meta, st)) {
        fail("the time-index sidecar could be neither stored nor deleted");
        co_return false;
    }
    // The log may have moved while the PUTs were out (DeleteRecords retired a source).
    if (!adopt_rewrite(bases, built.meta, kfs, index, created)) {
        fail("a source left the log during the merge");
        co_return false;
    }
    m.merges.inc();
    m.merge_sources.inc(bases.size());
    m.merge_bytes.inc(kfs->size());
    span.set("status", "ok");
    span.set("merged_bytes", kfs->size());
    log::debug("partition {}/{}: merged {} segments at {} into {} bytes", id.topic, id.partition, bases.size(), first,
               kfs->size());
    co_return true;
}

} // namespace skiff::storage
