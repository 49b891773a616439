#include "log_restore.hpp"

#include <skiff/core/log.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/manifest_format.hpp>
#include <skiff/storage/segment_format.hpp>

#include <algorithm>
#include <map>

namespace skiff::storage::detail {

namespace {

// The newest usable manifest of the partition, if any: LIST its manifest prefix (a few keys),
// then GET from the newest down. A manifest that cannot be read or decoded is skipped (and
// counted): an older one, or the full LIST, still restores the log.
runtime::task<result<std::optional<manifest>, store_error>> newest_manifest(object_store& store, const std::string& ns,
                                                                            const partition_id& id,
                                                                            log_instruments& m, restored_log& out,
                                                                            metrics::span& trace) {
    const std::string prefix = manifest_prefix(ns, id);
    std::vector<std::string> keys;
    std::string token;
    auto span = trace.child("manifest");
    for (;;) {
        const auto t0 = m.now();
        auto page = co_await store.list(prefix, "", token, 1000, {});
        m.store_done(store_op::list, key_kind::none, t0, 0, 0, page ? nullptr : &page.error());
        if (!page) {
            span.set("status", to_string(page.error().code));
            co_return failure{std::move(page).error()};
        }
        ++out.report.list_pages;
        for (auto& o : page->objects) {
            if (parse_manifest_name(std::string_view(o.key).substr(prefix.size()))) keys.push_back(o.key);
        }
        if (page->next_token.empty()) break;
        token = page->next_token;
    }
    std::sort(keys.begin(), keys.end());
    out.manifest_keys = keys;
    std::optional<manifest> found;
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
        ++out.report.gets;
        const auto t0 = m.now();
        auto got = co_await store.get(*it, std::nullopt, {});
        m.store_done(store_op::get, key_kind::none, t0, 0, got ? got->data.size() : 0, got ? nullptr : &got.error());
        if (!got) {
            if (got.error().code == errc::not_found) continue; // deleted while we listed
            span.set("status", to_string(got.error().code));
            co_return failure{std::move(got).error()};
        }
        auto decoded = decode_manifest(got->data);
        if (!decoded || decoded->partition.topic != id.topic || decoded->partition.partition != id.partition) {
            ++out.report.manifests_unusable;
            log::warn("{}{}: manifest unusable ({}); trying an older one or a full list", store.describe(), *it,
                      decoded ? "it names another partition" : decoded.error().message);
            continue;
        }
        out.manifest_key = *it;
        found = std::move(*decoded);
        break;
    }
    span.set("manifests", keys.size());
    span.set("status", found ? "ok" : "none");
    co_return found;
}

} // namespace

runtime::task<result<restored_log, store_error>> restore(object_store& store, const std::string& ns,
                                                         const partition_id& id, log_instruments& m,
                                                         bool use_manifest) {
    restored_log out;
    auto& report = out.report;
    auto& segments = out.segments;
    std::int64_t next_offset = 0;
    const std::string prefix = partition_prefix(ns, id);
    std::map<std::int64_t, std::uint64_t> kfs;
    std::map<std::int64_t, std::uint64_t> idx;
    std::vector<std::int64_t> sidecars; // .kfst bases: never paired, never orphans
    std::string token;
    auto trace = metrics::span::root("restore");
    if (trace.active()) {
        trace.set("topic", id.topic);
        trace.set("partition", id.partition);
    }
    out.trace = trace.context();

    // With a manifest, only what was written after it is listed: restore costs one LIST of
    // the manifests, one GET, and a LIST of the newest segments, however old the log is.
    std::optional<manifest> mf;
    if (use_manifest) {
        auto found = co_await newest_manifest(store, ns, id, m, out, trace);
        if (!found) {
            trace.set("status", to_string(found.error().code));
            co_return failure{std::move(found).error()};
        }
        mf = std::move(*found);
    }
    std::string start_after;
    if (mf) {
        report.from_manifest = true;
        report.manifest_segments = mf->segments.size();
        out.manifest_covered_end = mf->covered_end;
        for (const auto& e : mf->segments) {
            segment_entry se;
            se.base = e.base;
            se.last = e.last;
            se.kfs_size = e.kfs_size;
            se.has_index = e.index_size > 0;
            se.index_size = e.index_size;
            se.max_timestamp = e.max_timestamp;
            se.created_ms = e.created_ms;
            if (!se.has_index) out.to_repair.push_back(e.base);
            segments[e.base] = std::move(se);
        }
        next_offset = mf->covered_end;
        // ".index" < ".kfs" < ".kfst": starting after the .kfst key of covered_end - 1 skips
        // every object of that base and lists every segment at covered_end or above.
        if (mf->covered_end > 0) start_after = time_index_key(ns, id, mf->covered_end - 1);
    }

    auto list_span = trace.child("list");
    for (;;) {
        const auto t0 = m.now();
        // Named, not a temporary inside the co_await (g++ 12 destroys such temporaries twice).
        std::string after = token.empty() ? start_after : std::string();
        auto page = co_await store.list(prefix, std::move(after), token, 1000, {});
        m.store_done(store_op::list, key_kind::none, t0, 0, 0, page ? nullptr : &page.error());
        if (!page) {
            list_span.set("status", to_string(page.error().code));
            trace.set("status", to_string(page.error().code));
            co_return failure{std::move(page).error()};
        }
        ++report.list_pages;
        for (auto& o : page->objects) {
            std::string_view name(o.key);
            name.remove_prefix(prefix.size());
            auto parsed = parse_segment_name(name);
            if (!parsed) continue;
            if (mf && parsed->base < mf->covered_end) continue; // a store that ignores start_after
            switch (parsed->kind) {
            case object_kind::kfs: kfs[parsed->base] = o.size; break;
            case object_kind::index: idx[parsed->base] = o.size; break;
            case object_kind::kfst: sidecars.push_back(parsed->base); break;
            }
        }
        if (page->next_token.empty()) break;
        token = page->next_token;
    }
    list_span.set("pages", report.list_pages);
    list_span.set("objects", kfs.size() + idx.size());
    list_span.end();
    std::int64_t orphan_floor = 0;
    for (auto& [base, _] : idx) {
        if (!kfs.count(base)) {
            ++report.orphan_index;
            // Never build a new segment at this base: its new .kfs could be paired with
            // this stale .index if the new .index upload failed.
            orphan_floor = std::max(orphan_floor, base + 1);
            log::warn("{}{}: .index of segment {} has no .kfs; ignored", store.describe(), prefix, base);
        }
    }
    // A sidecar is optional and never makes or breaks a segment. One without its .kfs (a
    // flush cut short after the sidecar landed) still reserves its base like an orphan .index:
    // a new segment there would be described by it until its own sidecar replaced it.
    for (auto base : sidecars) {
        if (!kfs.count(base)) orphan_floor = std::max(orphan_floor, base + 1);
    }
    for (auto& [base, size] : kfs) {
        segment_entry e;
        e.base = base;
        e.kfs_size = size;
        auto ix = idx.find(base);
        e.has_index = ix != idx.end();
        if (e.has_index) e.index_size = static_cast<std::uint32_t>(ix->second);
        if (!e.has_index) {
            ++report.orphan_kfs;
            out.to_repair.push_back(base);
            log::warn("{}{}: segment {} has no .index; it is served by walking it", store.describe(), prefix, base);
        }
        segments[base] = std::move(e);
    }
    // The next offset comes from the newest valid segment's footer: one 16-byte GET. Also
    // when the manifest listed it: the GET is what finds a newest segment cut short.
    while (!segments.empty()) {
        auto& newest = segments.rbegin()->second;
        ++report.gets;
        auto footer_span = trace.child("footer");
        footer_span.set("segment", newest.base);
        const auto t0 = m.now();
        auto tail = co_await store.get(segment_key(ns, id, newest.base), byte_range::suffix(segment_footer_size), {});
        m.store_done(store_op::get_range, key_kind::kfs, t0, 0, tail ? tail->data.size() : 0,
                     tail ? nullptr : &tail.error());
        footer_span.set("status", tail ? "ok" : to_string(tail.error().code));
        if (!tail) {
            if (tail.error().code == errc::not_found) {
                segments.erase(newest.base);
                continue;
            }
            trace.set("status", to_string(tail.error().code));
            co_return failure{std::move(tail).error()};
        }
        auto footer = parse_segment_footer(tail->data);
        if (!footer || footer->last_offset < newest.base) {
            ++report.corrupt;
            log::error("{}{}: segment {} has a missing or wrong footer; it is not served", store.describe(), prefix,
                       newest.base);
            newest.corrupt = true;
            // A corrupt newest segment still reserves its base offset: new segments start
            // after it so its key is never reused for different bytes.
            next_offset = std::max(next_offset, newest.base + 1);
            auto base = newest.base;
            segments.erase(base);
            continue;
        }
        newest.last = footer->last_offset;
        next_offset = std::max(next_offset, footer->last_offset + 1);
        break;
    }
    // Interior segments end where the next one begins (an upper bound if there is a gap).
    std::int64_t prev_base = -1;
    for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (prev_base >= 0 && it->second.last < 0) it->second.last = prev_base - 1;
        prev_base = it->first;
    }
    next_offset = std::max(next_offset, orphan_floor);
    out.next_offset = next_offset;
    if (mf) {
        out.log_start = std::min(mf->log_start, next_offset);
    } else {
        out.log_start = segments.empty() ? next_offset : segments.begin()->first;
    }
    report.segments = segments.size();
    report.next_offset = next_offset;
    if (trace.active()) {
        trace.set("segments", report.segments);
        trace.set("from_manifest", report.from_manifest ? 1 : 0);
        trace.set("orphan_kfs", report.orphan_kfs);
        trace.set("orphan_index", report.orphan_index);
        trace.set("corrupt", report.corrupt);
        trace.set("next_offset", next_offset);
        trace.set("status", "ok");
    }
    // Only segments still served are repaired (a corrupt newest one was dropped above).
    std::erase_if(out.to_repair, [&segments](std::int64_t base) { return segments.count(base) == 0; });
    co_return out;
}

runtime::task<void> repair(object_store& store, io_budget& budget, const std::string& ns, const partition_id& id,
                           const log_config& cfg,
                           log_instruments& m, std::int64_t base, metrics::span_context parent, std::stop_token st,
                           std::function<void(std::shared_ptr<const std::string>)> on_repaired) {
    // A child of the restore trace, although it ends after the restore did.
    auto span = metrics::span::child_of("repair", parent);
    span.set("segment", base);
    auto permit = co_await budget.acquire(io_budget::priority::normal, st);
    if (!permit) {
        span.set("status", "cancelled");
        co_return;
    }
    auto t0 = m.now();
    auto whole = co_await store.get(segment_key(ns, id, base), std::nullopt, st);
    m.store_done(store_op::get, key_kind::kfs, t0, 0, whole ? whole->data.size() : 0, whole ? nullptr : &whole.error());
    if (!whole) {
        if (whole.error().code != errc::cancelled) m.repair_failures.inc();
        span.set("status", to_string(whole.error().code));
        co_return;
    }
    auto rebuilt = rebuild_index(whole->data, cfg.index_interval);
    if (!rebuilt) {
        m.repair_failures.inc();
        span.set("status", "corrupt");
        log::error("cannot rebuild the index of segment {}: {}", base, rebuilt.error().message);
        co_return;
    }
    std::string index = std::move(*rebuilt);
    t0 = m.now();
    auto put = co_await store.put(index_key(ns, id, base), std::span<const char>(index.data(), index.size()), true,
                                  st);
    m.store_done(store_op::put, key_kind::index, t0, index.size(), 0, put ? nullptr : &put.error());
    span.set("status", put ? "ok" : to_string(put.error().code));
    if (!put && put.error().code != errc::precondition_failed && put.error().code != errc::cancelled) {
        m.repair_failures.inc();
    }
    if (put || put.error().code == errc::precondition_failed) {
        m.repairs.inc();
        on_repaired(std::make_shared<const std::string>(std::move(index)));
        log::info("rebuilt the index of segment {} of {}/{}", base, id.topic, id.partition);
    }
}

} // namespace skiff::storage::detail
