// The Iceberg sink's step: read, write, commit, rebase or abandon (include/skiff/iceberg/sink.hpp).
#include <skiff/iceberg/sink.hpp>

#include "data_files.hpp"

#include <skiff/core/log.hpp>
#include <skiff/iceberg/manifest.hpp>
#include <skiff/iceberg/table_store.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>

namespace skiff::iceberg {

namespace {

using json = nlohmann::json;
constexpr std::string_view offsets_key = "skiff.next-offsets";

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string civil_day(std::int32_t days) {
    // Howard Hinnant's civil_from_days.
    std::int64_t z = days + 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2);
    return fmt::format("{:04}-{:02}-{:02}", y, m, d);
}

std::string partition_dir(partitioning p, std::int32_t value) {
    switch (p) {
    case partitioning::day: return "timestamp_day=" + civil_day(value) + "/";
    case partitioning::identity_partition: return fmt::format("partition={}/", value);
    case partitioning::none: return "";
    }
    return "";
}

avro::bytes int_bound(std::int32_t v) {
    avro::bytes b(4);
    for (int i = 0; i < 4; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((static_cast<std::uint32_t>(v) >> (8 * i)) & 0xff);
    return b;
}

iceberg_error from_avro(const avro::error& e, std::string_view what) {
    return iceberg_error(errc::invalid_metadata, fmt::format("{}: {}", what, e.message));
}


} // namespace

result<std::map<std::int32_t, std::int64_t>, iceberg_error> parse_next_offsets(const std::map<std::string, std::string>& summary) {
    std::map<std::int32_t, std::int64_t> out;
    auto it = summary.find(std::string(offsets_key));
    if (it == summary.end()) return out;
    json j = json::parse(it->second, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return iceberg_error(errc::invalid_metadata, fmt::format("{} is not a JSON object", offsets_key));
    for (auto& [k, v] : j.items()) {
        std::int32_t p = -1;
        try {
            std::size_t used = 0;
            p = std::stoi(k, &used);
            if (used != k.size()) p = -1;
        } catch (...) {
            p = -1;
        }
        if (p < 0 || !v.is_number_integer() || v.get<std::int64_t>() < 0) {
            return iceberg_error(errc::invalid_metadata, fmt::format("{} has a bad entry \"{}\": {}", offsets_key, k, v.dump()));
        }
        out[p] = v.get<std::int64_t>();
    }
    return out;
}

table_place place_table(std::string_view warehouse, std::string_view ns, std::string_view base, std::string_view store_uri,
                        std::string_view topic) {
    auto trimmed = [](std::string_view x) {
        while (!x.empty() && x.back() == '/') x.remove_suffix(1);
        return std::string(x);
    };
    table_place out;
    out.prefix = (warehouse.empty() ? "iceberg/" + std::string(ns) : trimmed(warehouse)) + "/" + std::string(topic);
    out.location = trimmed(base.empty() ? store_uri : base) + "/" + out.prefix;
    return out;
}

std::string format_next_offsets(const std::map<std::int32_t, std::int64_t>& offsets) {
    json j = json::object();
    for (auto& [p, o] : offsets) j[std::to_string(p)] = o;
    return j.dump();
}

struct sink::impl {
    storage::object_store& store;
    sink_config cfg;
    table_store table;
    reader::topic_discovery discovery;
    sink_stats stats;
    std::uint64_t attempts = 0;

    impl(storage::object_store& s, sink_config c)
        : store(s), cfg(std::move(c)), table(s, cfg.table_prefix, cfg.location), discovery(s, cfg.ns, cfg.topic) {
        table.set_budget(cfg.scan.budget); // the table's requests share the scan's S3 budget
    }

    bool stage(std::string_view name) { return !cfg.before_stage || cfg.before_stage(name); }

    // The table, created or evolved to the configured projections.
    runtime::task<result<loaded_table, iceberg_error>> ensure_table(std::stop_token st) {
        for (int attempt = 0; attempt < cfg.max_commit_attempts; ++attempt) {
            auto t = co_await table.load(st);
            if (!t && t.error().code != errc::not_found) co_return t.error();
            if (!t) {
                auto s = evolve_schema(nullptr, 0, cfg.projections, 0);
                if (!s) co_return s.error();
                const json spec = partition_spec_json(cfg.partition_by, 0);
                const std::map<std::string, std::string> props = {
                    {"write.format.default", "parquet"}, {"write.parquet.compression-codec", cfg.zstd ? "zstd" : "none"},
                    {"skiff.topic", cfg.topic}};
                table_metadata md = table_metadata::create(cfg.location, new_uuid(), s->schema, s->last_column_id, spec, props, now_ms());
                auto c = co_await table.commit(0, md, st);
                if (!c && c.error().code != errc::conflict) co_return c.error();
                if (c) log::info("iceberg: created table {} for topic {}", cfg.location, cfg.topic);
                continue; // load what is there now (ours or the winner's)
            }
            const auto& spec = t->metadata.default_spec();
            if (spec.value("fields", json::array()) != partition_spec_json(cfg.partition_by, 0)["fields"]) {
                co_return iceberg_error(errc::invalid_argument,
                                        fmt::format("the table at {} is partitioned {}, not by {} as configured", cfg.location,
                                                    spec.value("fields", json::array()).dump(), to_string(cfg.partition_by)));
            }
            const int next_schema_id = [&] {
                int m = 0;
                for (const auto& s : t->metadata.doc()["schemas"]) m = std::max(m, s.value("schema-id", 0));
                return m + 1;
            }();
            auto ev = evolve_schema(&t->metadata.current_schema(), t->metadata.last_column_id(), cfg.projections, next_schema_id);
            if (!ev) co_return ev.error();
            if (!ev->changed) co_return std::move(*t);
            const std::string prev = table.uri_of(table.metadata_key(t->version));
            table_metadata next = t->metadata.with_schema(ev->schema, ev->last_column_id, prev, now_ms());
            auto c = co_await table.commit(t->version, next, st);
            if (!c && c.error().code != errc::conflict) co_return c.error();
            if (c) log::info("iceberg: table {} has schema {} (columns added for projections)", cfg.location, next_schema_id);
        }
        co_return iceberg_error(errc::conflict, fmt::format("the table at {} kept changing under this sink", cfg.location));
    }

    runtime::task<void> remove_quietly(std::vector<std::string> keys, std::stop_token st) {
        auto r = co_await table.remove_many(std::move(keys), st);
        if (!r) log::warn("iceberg: could not delete the files of an abandoned commit (maintenance will): {}", r.error().message);
    }
};

sink::sink(storage::object_store& store, sink_config cfg) : _impl(std::make_unique<impl>(store, std::move(cfg))) {
    if (_impl->cfg.sink_id.empty()) _impl->cfg.sink_id = new_uuid().substr(0, 8);
}
sink::~sink() = default;
const sink_stats& sink::stats() const noexcept { return _impl->stats; }
const sink_config& sink::config() const noexcept { return _impl->cfg; }

runtime::task<result<step_result, iceberg_error>> sink::step(std::stop_token st) {
    auto& i = *_impl;
    const auto t0 = std::chrono::steady_clock::now();
    ++i.stats.steps;
    step_result out;
    // One trace per step: read, upload, manifest, each commit attempt (the observability
    // endpoint's timeline shows them beside the flushes).
    auto trace = metrics::span::root("iceberg_step");
    trace.set("topic", i.cfg.topic);
    trace.set("outcome", "failed");
    auto loaded = co_await i.ensure_table(st);
    if (!loaded) co_return loaded.error();
    loaded_table t = std::move(*loaded);
    const auto base_snapshot = t.metadata.current_snapshot();
    std::map<std::int32_t, std::int64_t> next;
    if (base_snapshot) {
        auto n = parse_next_offsets(base_snapshot->summary);
        if (!n) co_return n.error();
        next = std::move(*n);
    }

    // What is new: every partition from its next offset (or its log start).
    auto refreshed = co_await i.discovery.refresh(st);
    if (!refreshed) co_return iceberg_error(errc::store_failed, "discovering segments: " + refreshed.error().message);
    std::vector<reader::segment_ref> planned;
    for (const auto& [p, ps] : i.discovery.partitions()) {
        if (i.cfg.owns_partition && !i.cfg.owns_partition(p)) continue;
        reader::scan_bounds b;
        auto it = next.find(p);
        const std::int64_t from = it == next.end() ? 0 : it->second;
        if (ps.log_start > from) {
            // Retention deleted records this table never got: they are gone for it too.
            i.stats.skipped_by_retention += static_cast<std::uint64_t>(ps.log_start - from);
            log::warn("iceberg: topic {} partition {}: offsets {}..{} were deleted before the sink read them", i.cfg.topic, p,
                      from, ps.log_start - 1);
        }
        b.min_offset = std::max(from, ps.log_start);
        const std::vector<std::int32_t> only = {p};
        auto segs = reader::plan(i.discovery.partitions(), b, only);
        for (auto& s : segs) planned.push_back(std::move(s));
    }
    out.version = t.version;
    out.next_offsets = next;
    if (planned.empty()) {
        trace.set("outcome", "nothing new");
        out.took = std::chrono::steady_clock::now() - t0;
        if (i.cfg.on_step) i.cfg.on_step(out);
        co_return out;
    }

    auto builder = data_file_builder::make(t.metadata.current_schema(), i.cfg.partition_by, i.cfg.projections,
                                           [&] {
                                               data_file_options o;
                                               o.row_group_bytes = i.cfg.row_group_bytes;
                                               o.zstd = i.cfg.zstd;
                                               return o;
                                           }());
    if (!builder) co_return builder.error();
    std::map<std::int32_t, std::int64_t> read_from; // first offset this step read, per partition
    std::map<std::int32_t, std::int64_t> read_next = next;
    bool cut = false;
    {
        auto read_span = trace.child("read");
        reader::scan_bounds none;
        reader::segment_scan scan(i.store, i.cfg.ns, std::move(planned), none, i.cfg.scan);
        while (true) {
            auto c = co_await scan.next(st);
            if (!c) {
                co_await scan.close();
                co_return iceberg_error(c.error().code == reader::errc::cancelled ? errc::cancelled : errc::store_failed,
                                        "reading segments: " + c.error().message);
            }
            const reader::chunk* ch = *c;
            if (!ch) break;
            for (const auto& r : ch->rows) {
                auto n = read_next.find(r.partition);
                if (n != read_next.end() && r.offset < n->second) continue; // below the table's next offset
                auto a = builder->add(r);
                if (!a) {
                    co_await scan.close();
                    co_return a.error();
                }
                read_from.try_emplace(r.partition, r.offset);
                read_next[r.partition] = r.offset + 1;
                ++out.rows;
                if (out.oldest_timestamp_ms < 0 || r.timestamp < out.oldest_timestamp_ms) out.oldest_timestamp_ms = r.timestamp;
            }
            if (builder->pending_bytes() >= i.cfg.commit_bytes) {
                cut = true;
                break;
            }
        }
        co_await scan.close();
        read_span.set("rows", out.rows);
        read_span.set("record_bytes", static_cast<std::int64_t>(builder->pending_bytes()));
    }
    out.more = cut;
    out.record_bytes = static_cast<std::int64_t>(builder->pending_bytes());
    out.dead_letters = builder->dead_letters();
    if (out.rows == 0) {
        trace.set("outcome", "nothing new");
        out.took = std::chrono::steady_clock::now() - t0;
        if (i.cfg.on_step) i.cfg.on_step(out);
        co_return out;
    }

    // Data files, uploaded in parallel.
    auto files = builder->take_files();
    if (!files) co_return files.error();
    const std::string attempt = fmt::format("{}-{}-{}", now_ms(), i.cfg.sink_id, ++i.attempts);
    std::vector<std::string> written; // keys, to delete if this step is abandoned
    std::vector<manifest_entry> entries;
    std::vector<runtime::task<result<void, iceberg_error>>> puts;
    const std::int64_t snapshot_id = new_snapshot_id();
    for (std::size_t k = 0; k < files->size(); ++k) {
        auto& f = (*files)[k];
        std::string key = fmt::format("{}/data/{}{}-{}.parquet", i.cfg.table_prefix, partition_dir(i.cfg.partition_by, f.partition_value),
                                      attempt, k);
        f.entry.file_path = i.table.uri_of(key);
        out.file_bytes += f.entry.file_size_in_bytes;
        written.push_back(key);
        manifest_entry e;
        e.status = entry_status::added;
        e.snapshot_id = snapshot_id;
        e.file = f.entry;
        entries.push_back(std::move(e));
    }
    if (!i.stage("data")) co_return iceberg_error(errc::cancelled, "stopped before the data files (test hook)");
    for (std::size_t k = 0; k < files->size(); ++k) {
        const std::string& body = (*files)[k].bytes;
        puts.push_back(i.table.write(written[k], std::span<const char>(body.data(), body.size()), st));
    }
    auto upload_span = trace.child("upload");
    upload_span.set("files", static_cast<std::int64_t>(files->size()));
    upload_span.set("bytes", out.file_bytes);
    auto put_results = co_await runtime::when_all(std::move(puts));
    upload_span.end();
    for (auto& r : put_results) {
        if (!r) {
            co_await i.remove_quietly(written, st);
            co_return r.error();
        }
    }
    out.files = static_cast<int>(files->size());

    // The manifest of the added files (sequence numbers inherited from the manifest list, so
    // a rebase rewrites only the list).
    manifest_info info;
    info.schema_json = t.metadata.current_schema().dump();
    info.schema_id = t.metadata.current_schema_id();
    info.spec = builder->spec();
    info.spec.spec_id = t.metadata.default_spec_id();
    auto mbytes = write_manifest(info, entries);
    if (!mbytes) co_return from_avro(mbytes.error(), "writing the manifest");
    const std::string manifest_key = fmt::format("{}/metadata/{}-m0.avro", i.cfg.table_prefix, attempt);
    if (!i.stage("manifest")) co_return iceberg_error(errc::cancelled, "stopped before the manifest (test hook)");
    {
        auto w = co_await i.table.write(manifest_key, std::span<const char>(mbytes->data(), mbytes->size()), st);
        if (!w) {
            co_await i.remove_quietly(written, st);
            co_return w.error();
        }
    }
    written.push_back(manifest_key);
    manifest_file mine;
    mine.manifest_path = i.table.uri_of(manifest_key);
    mine.manifest_length = static_cast<std::int64_t>(mbytes->size());
    mine.partition_spec_id = info.spec.spec_id;
    mine.added_snapshot_id = snapshot_id;
    mine.added_files_count = static_cast<std::int32_t>(entries.size());
    for (const auto& e : entries) mine.added_rows_count += e.file.record_count;
    if (!info.spec.fields.empty()) {
        std::int32_t lo = (*files)[0].partition_value, hi = lo;
        for (const auto& f : *files) lo = std::min(lo, f.partition_value), hi = std::max(hi, f.partition_value);
        field_summary fs;
        fs.contains_null = false;
        fs.lower_bound = int_bound(lo);
        fs.upper_bound = int_bound(hi);
        mine.partitions = std::vector<field_summary>{fs};
    }

    // Commit, rebasing on other writers' snapshots as long as they did not cover our offsets.
    std::vector<std::string> stale_lists; // of attempts that lost: referenced by nothing
    for (int attempt_no = 1; attempt_no <= i.cfg.max_commit_attempts; ++attempt_no) {
        const auto parent = t.metadata.current_snapshot();
        std::map<std::int32_t, std::int64_t> table_next;
        std::vector<manifest_file> manifests;
        std::int64_t parent_records = 0, parent_files = 0, parent_size = 0;
        if (parent) {
            auto tn = parse_next_offsets(parent->summary);
            if (!tn) co_return tn.error();
            table_next = std::move(*tn);
            for (const auto& [p, from] : read_from) {
                auto it = table_next.find(p);
                const std::int64_t covered = it == table_next.end() ? 0 : it->second;
                if (covered > from) {
                    // Another writer appended offsets this step read: ours would duplicate them.
                    log::info("iceberg: {} covered partition {} up to {} first; dropping this step's {} rows", i.cfg.location, p,
                              covered, out.rows);
                    co_await i.remove_quietly(written, st);
                    ++i.stats.abandoned;
                    out.abandoned = true;
                    trace.set("outcome", "abandoned");
                    trace.set("conflicts", out.conflicts);
                    out.committed = false;
                    out.version = t.version;
                    out.next_offsets = table_next;
                    out.more = true;
                    out.took = std::chrono::steady_clock::now() - t0;
                    if (i.cfg.on_step) i.cfg.on_step(out);
                    co_return out;
                }
            }
            const std::string list_uri = parent->manifest_list;
            auto list_key = i.table.key_of(list_uri);
            if (!list_key) {
                co_return iceberg_error(errc::invalid_metadata, fmt::format("manifest list {} is outside the table's location", list_uri));
            }
            auto lbytes = co_await i.table.read(*list_key, st);
            if (!lbytes) co_return lbytes.error();
            auto list = read_manifest_list(*lbytes);
            if (!list) co_return from_avro(list.error(), fmt::format("reading {}", *list_key));
            manifests = std::move(list->manifests);
            parent_records = summary_number(parent->summary, "total-records");
            parent_files = summary_number(parent->summary, "total-data-files");
            parent_size = summary_number(parent->summary, "total-files-size");
        }
        const std::int64_t seq = t.metadata.last_sequence_number() + 1;
        mine.sequence_number = seq;
        mine.min_sequence_number = seq;
        manifests.insert(manifests.begin(), mine);
        manifest_list_info li;
        li.snapshot_id = snapshot_id;
        if (parent) li.parent_snapshot_id = parent->id;
        li.sequence_number = seq;
        auto lb = write_manifest_list(li, manifests);
        if (!lb) co_return from_avro(lb.error(), "writing the manifest list");
        const std::string list_key = fmt::format("{}/metadata/snap-{}-{}-{}.avro", i.cfg.table_prefix, snapshot_id, attempt_no, attempt);
        if (!i.stage("list")) co_return iceberg_error(errc::cancelled, "stopped before the manifest list (test hook)");
        auto lw = co_await i.table.write(list_key, std::span<const char>(lb->data(), lb->size()), st);
        if (!lw) {
            co_await i.remove_quietly(written, st);
            co_return lw.error();
        }
        written.push_back(list_key);

        std::map<std::int32_t, std::int64_t> merged = table_next;
        for (const auto& [p, n] : read_next) merged[p] = std::max(merged[p], n);
        snapshot s;
        s.id = snapshot_id;
        if (parent) s.parent = parent->id;
        s.sequence_number = seq;
        s.timestamp_ms = std::max(now_ms(), t.metadata.last_updated_ms());
        s.manifest_list = i.table.uri_of(list_key);
        s.schema_id = t.metadata.current_schema_id();
        s.summary = {{"operation", "append"},
                     {"added-data-files", std::to_string(entries.size())},
                     {"added-records", std::to_string(out.rows)},
                     {"added-files-size", std::to_string(out.file_bytes)},
                     {"total-data-files", std::to_string(parent_files + static_cast<std::int64_t>(entries.size()))},
                     {"total-records", std::to_string(parent_records + out.rows)},
                     {"total-files-size", std::to_string(parent_size + out.file_bytes)},
                     {"total-delete-files", "0"},
                     {"total-position-deletes", "0"},
                     {"total-equality-deletes", "0"},
                     {"skiff.sink", i.cfg.sink_id},
                     {std::string(offsets_key), format_next_offsets(merged)}};
        const std::string prev = i.table.uri_of(i.table.metadata_key(t.version));
        auto nextmd = t.metadata.with_snapshot(s, prev, now_ms());
        if (!nextmd) co_return nextmd.error();
        if (!i.stage("commit")) co_return iceberg_error(errc::cancelled, "stopped before the commit (test hook)");
        auto commit_span = trace.child("commit");
        commit_span.set("version", t.version + 1);
        auto c = co_await i.table.commit(t.version, *nextmd, st);
        commit_span.set("outcome", c ? "committed" : c.error().code == errc::conflict ? "conflict" : "failed");
        commit_span.end();
        int landed = c ? *c : 0;
        if (!c && c.error().code != errc::conflict) co_return c.error(); // our files stay: it may have landed
        if (!c) {
            auto reloaded = co_await i.table.load(st);
            if (!reloaded) co_return reloaded.error();
            t = std::move(*reloaded);
            // Our own version, whose answer was lost: the store retried the PUT and found it
            // there. The snapshot id is ours alone (random), so this is a success, and
            // deleting "our" files now would break the table.
            if (t.metadata.find_snapshot(snapshot_id)) landed = t.version;
        }
        if (landed) {
            trace.set("outcome", "committed");
            trace.set("rows", out.rows);
            trace.set("files", out.files);
            trace.set("file_bytes", out.file_bytes);
            trace.set("version", landed);
            if (!stale_lists.empty()) co_await i.remove_quietly(std::move(stale_lists), st);
            ++i.stats.commits;
            i.stats.rows += static_cast<std::uint64_t>(out.rows);
            i.stats.record_bytes += static_cast<std::uint64_t>(out.record_bytes);
            i.stats.file_bytes += static_cast<std::uint64_t>(out.file_bytes);
            i.stats.files += static_cast<std::uint64_t>(out.files);
            i.stats.dead_letters += out.dead_letters;
            out.committed = true;
            out.version = landed;
            out.snapshot_id = snapshot_id;
            out.next_offsets = merged;
            out.took = std::chrono::steady_clock::now() - t0;
            trace.set("conflicts", out.conflicts);
            if (i.cfg.on_step) i.cfg.on_step(out);
            co_return out;
        }
        ++out.conflicts;
        ++i.stats.conflicts;
        stale_lists.push_back(list_key);
        manifests.clear();
        if (t.metadata.current_schema_id() != info.schema_id || t.metadata.default_spec_id() != info.spec.spec_id) {
            // The schema or spec changed under us: the files follow the old one. Start over.
            co_await i.remove_quietly(written, st);
            co_return iceberg_error(errc::conflict, "the table's schema or partition spec changed during the commit");
        }
    }
    co_return iceberg_error(errc::conflict, fmt::format("gave up after {} conflicting commits", i.cfg.max_commit_attempts));
}

runtime::task<void> sink::run(std::stop_token st) {
    auto& i = *_impl;
    while (!st.stop_requested()) {
        auto r = co_await step(st);
        if (!r) {
            if (r.error().code == errc::cancelled && st.stop_requested()) break;
            ++i.stats.failures;
            log::warn("iceberg: step for topic {} failed: {}", i.cfg.topic, r.error().message);
        }
        if (r && r->more) continue; // stopped at commit_bytes, or yielded to another writer
        auto slept = co_await runtime::sleep(i.cfg.commit_interval, st);
        if (!slept) break;
    }
}

} // namespace skiff::iceberg
