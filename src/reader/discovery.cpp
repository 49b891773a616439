// topic_discovery, list_topics and plan: what a topic holds in the bucket, found by LIST.
//
// Cost per refresh after the first (docs/reader.md): one LIST page per partition (start-after
// its last key), one LIST of the topic's manifests (a few keys), and one GET of the topic
// catalog (or, for a bucket without one, one LIST probe of the next partition number).
#include <skiff/core/parse_int.hpp>
#include <skiff/reader/segment_reader.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/manifest_format.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

namespace skiff::reader {

namespace {

struct listed_objects {
    bool kfs = false;
    std::uint64_t kfs_size = 0;
    bool index = false;
    bool kfst = false;
};

struct partition_state {
    std::string last_key; // the greatest key listed under the partition's prefix so far
    std::map<std::int64_t, listed_objects> objects;
    std::string manifest_key; // the manifest log_start was taken from
    std::int64_t log_start = 0;
};

reader_error store_error_to_reader(const storage::store_error& e, std::string_view what, std::string_view key) {
    if (e.code == storage::errc::cancelled) return reader_error(errc::cancelled, fmt::format("{} {} cancelled", what, key));
    return reader_error(errc::store_failed, fmt::format("{} {} failed: {}", what, key, e.message));
}

// Unpadded decimal as partition_prefix writes it: "0", "7", "12" (not "07", not "+1").
std::optional<std::int32_t> parse_partition(std::string_view s) {
    if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
    auto v = parse_unsigned<std::uint32_t>(s);
    if (!v || *v > static_cast<std::uint32_t>(std::numeric_limits<std::int32_t>::max())) return std::nullopt;
    return static_cast<std::int32_t>(*v);
}

// Every page of `prefix` after `start_after`.
runtime::task<result<void, reader_error>> list_all(storage::object_store& store, std::string prefix,
                                                   std::string start_after, int max_keys,
                                                   std::vector<storage::object_entry>& out, discovery_stats& stats,
                                                   std::stop_token st) {
    std::string token;
    for (;;) {
        std::string after = token.empty() ? start_after : std::string();
        auto page = co_await store.list(prefix, std::move(after), token, max_keys, st);
        if (!page) co_return failure{store_error_to_reader(page.error(), "LIST", prefix)};
        ++stats.list_requests;
        stats.keys_listed += page->objects.size();
        for (auto& o : page->objects) out.push_back(std::move(o));
        if (page->next_token.empty() || max_keys > 0) co_return ok();
        token = std::move(page->next_token);
    }
}

} // namespace

struct topic_discovery::impl {
    storage::object_store& store;
    std::string ns;
    std::string topic;
    std::string topic_prefix; // "{ns}/{topic}/"
    bool first = true;
    std::int32_t known_count = 0; // partitions 0..known_count-1 are listed every refresh
    std::map<std::int32_t, partition_state> states;
    std::map<std::int32_t, partition_segments> parts;
    std::vector<finding> found;
    std::set<std::string> found_keys;
    discovery_stats stats;

    impl(storage::object_store& s, std::string n, std::string t)
        : store(s), ns(std::move(n)), topic(std::move(t)), topic_prefix(ns + "/" + topic + "/") {}

    void report(finding::kind k, std::string key, std::string detail) {
        if (!found_keys.insert(key).second) return;
        finding f;
        f.what = k;
        f.key = std::move(key);
        f.detail = std::move(detail);
        found.push_back(std::move(f));
    }

    // One listed key under "{ns}/{topic}/"; `rest` is the part after that prefix.
    void take(const storage::object_entry& o, std::string_view rest) {
        const auto slash = rest.find('/');
        std::optional<std::int32_t> p;
        if (slash != std::string_view::npos) p = parse_partition(rest.substr(0, slash));
        if (!p) {
            report(finding::kind::stray_key, o.key, "not under a partition of the topic");
            return;
        }
        auto& ps = states[*p];
        if (o.key > ps.last_key) ps.last_key = o.key;
        const auto name = rest.substr(slash + 1);
        if (auto seg = storage::parse_segment_name(name)) {
            auto& lo = ps.objects[seg->base];
            switch (seg->kind) {
            case storage::object_kind::kfs:
                lo.kfs = true;
                lo.kfs_size = o.size;
                break;
            case storage::object_kind::index: lo.index = true; break;
            case storage::object_kind::kfst: lo.kfst = true; break;
            }
            return;
        }
        report(finding::kind::stray_key, o.key, "not a segment, index or time index");
    }

    // The segment list of one partition from what was listed (docs/format.md, "Rules skiff adds").
    void rebuild(std::int32_t p, partition_state& ps) {
        // Objects wholly below the log start are deleted (or about to be): forget them.
        for (auto it = ps.objects.begin(); it != ps.objects.end();) {
            auto next = std::next(it);
            while (next != ps.objects.end() && !next->second.kfs) ++next;
            if (next != ps.objects.end() && next->first <= ps.log_start) {
                it = ps.objects.erase(it);
            } else {
                ++it;
            }
        }
        partition_segments out;
        out.partition = p;
        out.log_start = ps.log_start;
        std::int64_t newest_kfs = -1;
        for (auto& [base, lo] : ps.objects)
            if (lo.kfs) newest_kfs = base;
        for (auto& [base, lo] : ps.objects) {
            if (!lo.kfs) {
                // An .index alone may be the first half of an upload in progress while it is the
                // newest object; once a later segment exists it is an orphan (never served).
                if (lo.index && base < newest_kfs)
                    report(finding::kind::orphan_index, storage::index_key(ns, {topic, p}, base),
                           "an .index without its .kfs; ignored");
                continue;
            }
            if (!lo.index && base < newest_kfs)
                report(finding::kind::missing_index, storage::segment_key(ns, {topic, p}, base),
                       "a .kfs without its .index; read by walking its batches");
            segment_ref r;
            r.topic = topic;
            r.partition = p;
            r.base = base;
            r.kfs_size = lo.kfs_size;
            r.has_index = lo.index;
            r.has_time_index = lo.kfst;
            r.log_start = ps.log_start;
            if (!out.segments.empty()) out.segments.back().end = base;
            out.segments.push_back(std::move(r));
        }
        if (ps.objects.empty()) {
            parts.erase(p);
        } else {
            parts[p] = std::move(out);
        }
    }

    // The partition count from the topic catalog of a skiff-written bucket (src/broker/catalog.cpp:
    // "{ns}/skiff~meta/topics/{topic}.json", field "partitions"); nullopt when there is none.
    runtime::task<result<std::optional<std::int32_t>, reader_error>> catalog_partitions(std::stop_token st) {
        std::string key = ns + "/skiff~meta/topics/" + topic + ".json";
        std::optional<storage::byte_range> whole;
        auto g = co_await store.get(key, whole, st);
        if (!g) {
            if (g.error().code == storage::errc::not_found) co_return std::optional<std::int32_t>();
            co_return failure{store_error_to_reader(g.error(), "GET", key)};
        }
        auto j = nlohmann::json::parse(g->data, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("partitions") || !j["partitions"].is_number_integer())
            co_return std::optional<std::int32_t>();
        const auto n = j["partitions"].get<std::int64_t>();
        if (n <= 0 || n > 1000000) co_return std::optional<std::int32_t>();
        co_return std::optional<std::int32_t>(static_cast<std::int32_t>(n));
    }

    // log_start per partition from its newest manifest that decodes (one LIST for the topic).
    runtime::task<result<void, reader_error>> refresh_manifests(std::stop_token st) {
        const std::string prefix = storage::manifest_topic_prefix(ns, topic);
        std::vector<storage::object_entry> keys;
        std::string none;
        auto l = co_await list_all(store, prefix, none, 0, keys, stats, st);
        if (!l) co_return failure{l.error()};
        std::map<std::int32_t, std::vector<std::string>> by_partition;
        for (auto& o : keys) {
            std::string_view rest = std::string_view(o.key).substr(prefix.size());
            const auto slash = rest.find('/');
            if (slash == std::string_view::npos) continue;
            auto p = parse_partition(rest.substr(0, slash));
            if (!p || !storage::parse_manifest_name(rest.substr(slash + 1))) continue;
            by_partition[*p].push_back(o.key);
        }
        for (auto& [p, names] : by_partition) {
            auto& ps = states[p];
            // Newest first; a manifest that does not decode is skipped for the one before it.
            for (auto it = names.rbegin(); it != names.rend(); ++it) {
                if (*it == ps.manifest_key) break;
                std::optional<storage::byte_range> whole;
                std::string key = *it;
                auto g = co_await store.get(key, whole, st);
                if (!g) {
                    if (g.error().code == storage::errc::not_found) continue; // replaced meanwhile
                    co_return failure{store_error_to_reader(g.error(), "GET", *it)};
                }
                auto m = storage::decode_manifest(std::span<const char>(g->data.data(), g->data.size()));
                if (!m || m->partition.topic != topic || m->partition.partition != p) continue;
                ps.manifest_key = *it;
                // The log start only moves forward; an older manifest never brings data back.
                ps.log_start = std::max(ps.log_start, m->log_start);
                break;
            }
        }
        co_return ok();
    }
};

topic_discovery::topic_discovery(storage::object_store& store, std::string ns, std::string topic)
    : _impl(std::make_unique<impl>(store, std::move(ns), std::move(topic))) {}
topic_discovery::~topic_discovery() = default;

runtime::task<result<void, reader_error>> topic_discovery::refresh(std::stop_token st) {
    auto& d = *_impl;
    if (d.topic.empty() || d.topic.find('/') != std::string::npos)
        co_return failure{reader_error(errc::invalid_argument, fmt::format("bad topic name '{}'", d.topic))};
    std::set<std::int32_t> touched;
    std::optional<std::int32_t> catalog;
    bool manifests_read = false;
    if (d.first) {
        // The catalog, the one LIST of the whole topic (every partition, paged) and the LIST of
        // its manifests do not depend on each other: one round trip for the three, not three.
        // Every partition is rebuilt below, so the manifests need not come after the segments.
        std::vector<storage::object_entry> keys;
        std::string none;
        auto catalog_task = d.catalog_partitions(st);
        auto list_task = list_all(d.store, d.topic_prefix, none, 0, keys, d.stats, st);
        auto manifest_task = d.refresh_manifests(st);
        auto [c, l, m] = co_await runtime::when_all(std::move(catalog_task), std::move(list_task), std::move(manifest_task));
        if (!c) co_return failure{c.error()};
        if (!l) co_return failure{l.error()};
        if (!m) co_return failure{m.error()};
        catalog = *c;
        manifests_read = true;
        for (auto& o : keys) d.take(o, std::string_view(o.key).substr(d.topic_prefix.size()));
        for (auto& [p, ps] : d.states) {
            touched.insert(p);
            d.known_count = std::max(d.known_count, p + 1);
        }
        if (catalog) d.known_count = std::max(d.known_count, *catalog);
        d.first = false;
    } else {
        auto c = co_await d.catalog_partitions(st);
        if (!c) co_return failure{c.error()};
        catalog = *c;
        if (catalog) {
            d.known_count = std::max(d.known_count, *catalog);
        } else {
            // No catalog (a KafScale bucket): probe the next partition numbers, one key each.
            for (;;) {
                std::vector<storage::object_entry> probe;
                const auto prefix = storage::partition_prefix(d.ns, {d.topic, d.known_count});
                std::string none;
                auto l = co_await list_all(d.store, prefix, none, 1, probe, d.stats, st);
                if (!l) co_return failure{l.error()};
                if (probe.empty()) break;
                ++d.known_count;
            }
        }
        for (std::int32_t p = 0; p < d.known_count; ++p) {
            const auto prefix = storage::partition_prefix(d.ns, {d.topic, p});
            std::string after = d.states.count(p) ? d.states[p].last_key : std::string();
            std::vector<storage::object_entry> keys;
            auto l = co_await list_all(d.store, prefix, std::move(after), 0, keys, d.stats, st);
            if (!l) co_return failure{l.error()};
            for (auto& o : keys) d.take(o, std::string_view(o.key).substr(d.topic_prefix.size()));
            if (!keys.empty()) touched.insert(p);
        }
    }
    const auto before = [&] {
        std::map<std::int32_t, std::int64_t> m;
        for (auto& [p, ps] : d.states) m[p] = ps.log_start;
        return m;
    }();
    if (!manifests_read) {
        auto m = co_await d.refresh_manifests(st);
        if (!m) co_return failure{m.error()};
    }
    for (auto& [p, ps] : d.states) {
        auto b = before.find(p);
        if (b == before.end() || b->second != ps.log_start) touched.insert(p);
    }
    for (auto p : touched) d.rebuild(p, d.states[p]);
    co_return ok();
}

const std::map<std::int32_t, partition_segments>& topic_discovery::partitions() const noexcept { return _impl->parts; }
const std::vector<finding>& topic_discovery::findings() const noexcept { return _impl->found; }
const discovery_stats& topic_discovery::stats() const noexcept { return _impl->stats; }

runtime::task<result<std::vector<std::string>, reader_error>> list_topics(storage::object_store& store,
                                                                          const std::string& ns, std::stop_token st) {
    const std::string prefix = ns + "/";
    std::set<std::string> topics;
    std::string token;
    for (;;) {
        std::string none;
        auto page = co_await store.list(prefix, none, token, 0, st);
        if (!page) co_return failure{store_error_to_reader(page.error(), "LIST", prefix)};
        for (auto& o : page->objects) {
            auto a = storage::parse_object_key(std::string_view(o.key).substr(prefix.size()));
            if (a && a->name.kind == storage::object_kind::kfs) topics.insert(a->partition.topic);
        }
        if (page->next_token.empty()) break;
        token = std::move(page->next_token);
    }
    co_return std::vector<std::string>(topics.begin(), topics.end());
}

std::vector<segment_ref> plan(const std::map<std::int32_t, partition_segments>& parts, const scan_bounds& b,
                              const std::vector<std::int32_t>& only_partitions) {
    std::vector<segment_ref> out;
    for (auto& [p, ps] : parts) {
        if (!only_partitions.empty() && std::find(only_partitions.begin(), only_partitions.end(), p) == only_partitions.end())
            continue;
        const std::int64_t lo = std::max(ps.log_start, b.min_offset.value_or(0));
        for (auto& s : ps.segments) {
            if (s.end >= 0 && s.end <= lo) continue;               // wholly below
            if (b.max_offset && s.base > *b.max_offset) break;      // wholly above (bases increase)
            out.push_back(s);
            out.back().log_start = ps.log_start;
        }
    }
    return out;
}

} // namespace skiff::reader
