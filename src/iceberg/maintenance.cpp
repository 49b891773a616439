// Snapshot expiry and orphan deletion (include/skiff/iceberg/maintenance.hpp).
#include <skiff/iceberg/maintenance.hpp>

#include <skiff/core/log.hpp>
#include <skiff/iceberg/manifest.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace skiff::iceberg {

namespace {

std::optional<std::int64_t> leading_ms(std::string_view s) {
    std::size_t n = 0;
    while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
    // Milliseconds since 1970 have 13 digits from 2001 to 2286; anything else is not ours.
    if (n != 13 || n >= s.size() || s[n] != '-') return std::nullopt;
    std::int64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v = v * 10 + (s[i] - '0');
    return v;
}

} // namespace

std::optional<std::int64_t> file_time_ms(std::string_view key) {
    const auto slash = key.rfind('/');
    std::string_view name = slash == std::string_view::npos ? key : key.substr(slash + 1);
    if (name.starts_with("snap-")) {
        // snap-<snapshot id>-<attempt>-<ms>-...
        std::string_view rest = name.substr(5);
        for (int dashes = 0; dashes < 2; ++dashes) {
            const auto d = rest.find('-');
            if (d == std::string_view::npos) return std::nullopt;
            rest = rest.substr(d + 1);
        }
        return leading_ms(rest);
    }
    return leading_ms(name);
}

std::string describe(const maintenance_result& r) {
    if (!r.expired_snapshots && !r.deleted_files && !r.rewritten_files) return {};
    return fmt::format("rewrote {} small files into {}, expired {} snapshots, deleted {} files ({} bytes), kept {} young "
                       "unreferenced",
                       r.rewritten_files, r.new_files, r.expired_snapshots, r.deleted_files, r.deleted_bytes, r.kept_young);
}

runtime::task<void> maintain_every(table_store& table, const maintenance_config& cfg, std::chrono::milliseconds every,
                                   std::stop_token st) {
    while (!st.stop_requested()) {
        auto slept = co_await runtime::sleep(every, st);
        if (!slept) break;
        const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
        auto r = co_await maintain(table, cfg, now.count(), st);
        if (!r) {
            if (r.error().code != errc::cancelled) log::warn("iceberg: maintenance of {}: {}", table.location(), r.error().message);
            continue;
        }
        if (auto line = describe(*r); !line.empty()) log::info("iceberg: {}: maintenance {}", table.location(), line);
    }
}

runtime::task<result<maintenance_result, iceberg_error>> maintain(table_store& table, const maintenance_config& cfg,
                                                                   std::int64_t now_ms, std::stop_token st) {
    maintenance_result out;
    // 0. Small files into larger ones (a "replace" snapshot): before expiry, so that expiry can
    // later release what it replaced.
    {
        auto rw = co_await rewrite_small_files(table, cfg, now_ms, st);
        if (!rw) co_return rw.error();
        out.rewritten_files = rw->rewritten_files;
        out.new_files = rw->new_files;
        out.rewrite_conflict = rw->rewrite_conflict;
    }
    loaded_table t;
    // 1. Expire: a commit that removes old snapshots from the metadata.
    for (int attempt = 0;; ++attempt) {
        auto l = co_await table.load(st);
        if (!l) co_return l.error();
        t = std::move(*l);
        auto snaps = t.metadata.snapshots();
        std::sort(snaps.begin(), snaps.end(), [](const snapshot& a, const snapshot& b) { return a.timestamp_ms > b.timestamp_ms; });
        const auto cur = t.metadata.current_snapshot();
        std::set<std::int64_t> expire;
        for (std::size_t k = 0; k < snaps.size(); ++k) {
            if (static_cast<int>(k) < cfg.keep_snapshots) continue;
            if (cur && snaps[k].id == cur->id) continue;
            if (now_ms - snaps[k].timestamp_ms < cfg.expire_after.count()) continue;
            expire.insert(snaps[k].id);
        }
        if (expire.empty()) break;
        const std::string prev = table.uri_of(table.metadata_key(t.version));
        auto next = t.metadata.without_snapshots(expire, prev, now_ms);
        if (!next) co_return next.error();
        auto c = co_await table.commit(t.version, *next, st);
        if (c) {
            out.expired_snapshots = static_cast<int>(expire.size());
            t.version = *c;
            t.metadata = std::move(*next);
            log::info("iceberg: {}: expired {} snapshots (version {})", table.location(), expire.size(), *c);
            break;
        }
        if (c.error().code != errc::conflict || attempt + 1 >= cfg.max_commit_attempts) co_return c.error();
    }
    out.version = t.version;

    // 2. What the live snapshots reference: their manifest lists, manifests and data files.
    std::set<std::string> referenced;
    std::set<std::string> manifests_seen;
    for (const auto& s : t.metadata.snapshots()) {
        auto lk = table.key_of(s.manifest_list);
        if (!lk) continue; // outside the table: not ours to read or delete
        referenced.insert(*lk);
        auto lbytes = co_await table.read(*lk, st);
        if (!lbytes) co_return lbytes.error(); // never delete on a partial picture
        auto list = read_manifest_list(*lbytes);
        if (!list) co_return iceberg_error(errc::invalid_metadata, fmt::format("{}: {}", *lk, list.error().message));
        for (const auto& mf : list->manifests) {
            auto mk = table.key_of(mf.manifest_path);
            if (!mk) continue;
            referenced.insert(*mk);
            if (!manifests_seen.insert(*mk).second) continue;
            auto mbytes = co_await table.read(*mk, st);
            if (!mbytes) co_return mbytes.error();
            auto m = read_manifest(*mbytes);
            if (!m) co_return iceberg_error(errc::invalid_metadata, fmt::format("{}: {}", *mk, m.error().message));
            for (const auto& e : m->entries) {
                if (e.status == entry_status::deleted) continue;
                if (auto dk = table.key_of(e.file.file_path)) referenced.insert(*dk);
            }
        }
    }
    out.referenced_files = static_cast<std::int64_t>(referenced.size());

    // 3. Orphans: ours (a time in the name), old enough, referenced by nothing live.
    std::vector<std::string> doomed;
    for (const char* sub : {"data/", "metadata/"}) {
        auto keys = co_await table.list(sub, st);
        if (!keys) co_return keys.error();
        for (const auto& e : *keys) {
            if (referenced.count(e.key)) continue;
            const auto made = file_time_ms(e.key);
            if (!made) continue;
            if (now_ms - *made < cfg.orphan_grace.count()) {
                ++out.kept_young;
                continue;
            }
            doomed.push_back(e.key);
            out.deleted_bytes += static_cast<std::int64_t>(e.size);
        }
    }
    if (!doomed.empty()) {
        out.deleted_files = static_cast<std::int64_t>(doomed.size());
        auto r = co_await table.remove_many(std::move(doomed), st);
        if (!r) co_return r.error();
        log::info("iceberg: {}: deleted {} unreferenced files ({} bytes)", table.location(), out.deleted_files, out.deleted_bytes);
    }
    co_return out;
}

} // namespace skiff::iceberg
