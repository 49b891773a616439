// Small-file rewriting (include/skiff/iceberg/maintenance.hpp): a partition value's small data
// files, read back with the Parquet reader and written again as larger files, committed as a
// "replace" snapshot. The replaced files stay referenced by older snapshots (through their
// manifests) until those expire; the orphan pass deletes them after that.
#include <skiff/iceberg/maintenance.hpp>

#include "data_files.hpp"

#include <skiff/core/log.hpp>
#include <skiff/iceberg/manifest.hpp>
#include <skiff/parquet/reader.hpp>
#include <skiff/parquet/writer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace skiff::iceberg {

namespace {

namespace pq = parquet;

// A live data file of the current snapshot, with its sequence numbers resolved (entries added
// by a manifest inherit them from the manifest list).
struct live_file {
    std::size_t manifest = 0; // index in the list
    data_file file;
    std::int64_t snapshot_id = 0, sequence_number = 0, file_sequence_number = 0;
    std::string key;
};

std::string partition_key(const std::vector<avro::value>& p) {
    std::string out;
    for (const auto& v : p) {
        if (auto i = v.get_if<std::int32_t>()) out += fmt::format("i{};", *i);
        else if (auto l = v.get_if<std::int64_t>()) out += fmt::format("l{};", *l);
        else if (auto s = v.get_if<std::string>()) out += "s" + *s + ";";
        else out += "?;";
    }
    return out;
}

std::string schema_signature(const pq::schema& s) {
    std::string out;
    for (const auto& l : s.leaves()) out += fmt::format("{}:{}:{}:{};", l.dotted(), l.field_id.value_or(-1), int(l.type), int(l.logical));
    return out;
}

// Appends src's entries to dst (same leaf).
void append(pq::column_data& dst, const pq::column_data& src) {
    dst.def_levels.insert(dst.def_levels.end(), src.def_levels.begin(), src.def_levels.end());
    dst.rep_levels.insert(dst.rep_levels.end(), src.rep_levels.begin(), src.rep_levels.end());
    dst.bools.insert(dst.bools.end(), src.bools.begin(), src.bools.end());
    dst.i32.insert(dst.i32.end(), src.i32.begin(), src.i32.end());
    dst.i64.insert(dst.i64.end(), src.i64.begin(), src.i64.end());
    dst.f64.insert(dst.f64.end(), src.f64.begin(), src.f64.end());
    const std::size_t base = dst.bytes.size();
    dst.bytes += src.bytes;
    for (auto e : src.ends) dst.ends.push_back(base + e);
}

std::size_t data_bytes(const std::vector<pq::column_data>& cols) {
    std::size_t n = 0;
    for (const auto& c : cols) n += c.bytes.size() + 8 * (c.i64.size() + c.f64.size()) + 4 * c.i32.size() + c.def_levels.size();
    return n;
}


iceberg_error avro_error(const avro::error& e, std::string_view what) {
    return iceberg_error(errc::invalid_metadata, fmt::format("{}: {}", what, e.message));
}

// One output file in the making: the sources' rows appended column by column.
struct output {
    std::unique_ptr<pq::file_writer> writer;
    pq::schema schema;
    std::string signature;
    std::vector<pq::column_data> cols;
    std::int64_t group_rows = 0;
    std::vector<std::size_t> sources; // indexes into live
    std::int64_t in_bytes = 0;
};

struct finished {
    bool produced = false; // false: fewer than two sources, nothing gained
    std::string bytes;
    manifest_entry entry;
    std::vector<std::size_t> sources;
};

result<void, iceberg_error> close_group(output& o) {
    if (o.group_rows == 0) return ok();
    auto w = o.writer->write_row_group(o.cols);
    if (!w) return iceberg_error(errc::invalid_metadata, "rewrite: " + w.error().message);
    for (auto& c : o.cols) c.clear();
    o.group_rows = 0;
    return ok();
}

result<finished, iceberg_error> finish_output(output& o, const std::vector<live_file>& live, std::int64_t snapshot_id) {
    finished f;
    if (!o.writer) return f;
    if (auto r = close_group(o); !r) return r.error();
    auto fin = o.writer->finish();
    o.writer.reset();
    if (!fin) return iceberg_error(errc::invalid_metadata, "rewrite: " + fin.error().message);
    f.sources = std::move(o.sources);
    o.sources.clear();
    o.in_bytes = 0;
    if (f.sources.size() < 2) return f;
    f.produced = true;
    f.entry.status = entry_status::added;
    f.entry.snapshot_id = snapshot_id;
    f.entry.file = describe_file(o.schema, *fin, live[f.sources.front()].file.partition);
    f.bytes = std::move(fin->bytes);
    return f;
}

} // namespace

runtime::task<result<maintenance_result, iceberg_error>> rewrite_small_files(table_store& table, const maintenance_config& cfg,
                                                                              std::int64_t now_ms, std::stop_token st) {
    maintenance_result out;
    if (cfg.rewrite_min_files <= 0) co_return out;
    auto loaded = co_await table.load(st);
    if (!loaded) co_return loaded.error();
    const loaded_table t = std::move(*loaded);
    out.version = t.version;
    const auto cur = t.metadata.current_snapshot();
    if (!cur) co_return out;
    auto list_key = table.key_of(cur->manifest_list);
    if (!list_key) co_return out;
    auto lbytes = co_await table.read(*list_key, st);
    if (!lbytes) co_return lbytes.error();
    auto list = read_manifest_list(*lbytes);
    if (!list) co_return avro_error(list.error(), *list_key);
    std::vector<manifest> manifests;
    std::vector<live_file> live;
    for (std::size_t mi = 0; mi < list->manifests.size(); ++mi) {
        const auto& mf = list->manifests[mi];
        auto mk = table.key_of(mf.manifest_path);
        if (!mk) co_return out; // a manifest outside the table: leave such tables alone
        auto mb = co_await table.read(*mk, st);
        if (!mb) co_return mb.error();
        auto m = read_manifest(*mb);
        if (!m) co_return avro_error(m.error(), *mk);
        for (const auto& e : m->entries) {
            if (e.status == entry_status::deleted) continue;
            live_file f;
            f.manifest = mi;
            f.file = e.file;
            f.snapshot_id = e.snapshot_id.value_or(mf.added_snapshot_id);
            f.sequence_number = e.sequence_number.value_or(mf.sequence_number);
            f.file_sequence_number = e.file_sequence_number.value_or(mf.sequence_number);
            if (auto k = table.key_of(e.file.file_path)) f.key = *k;
            live.push_back(std::move(f));
        }
        manifests.push_back(std::move(*m));
    }

    // Candidates: ours, Parquet data, small; by partition value.
    std::map<std::string, std::vector<std::size_t>> groups;
    for (std::size_t k = 0; k < live.size(); ++k) {
        const auto& f = live[k];
        if (f.key.empty() || f.file.content != file_content::data || f.file.file_format != "PARQUET") continue;
        if (f.file.file_size_in_bytes >= static_cast<std::int64_t>(cfg.small_file_bytes)) continue;
        groups[partition_key(f.file.partition)].push_back(k);
    }
    const std::int64_t snapshot_id = new_snapshot_id();
    const std::int64_t seq = t.metadata.last_sequence_number() + 1;
    std::vector<std::string> written;
    std::set<std::size_t> replaced; // indexes into live
    std::vector<manifest_entry> added;
    std::int64_t bytes_in = 0, bytes_out = 0;
    int n_new = 0;
    constexpr std::size_t row_group_bytes = std::size_t{32} << 20;
    pq::writer_options wopts;
    wopts.compression = cfg.zstd ? pq::codec::zstd : pq::codec::uncompressed;
    std::vector<pq::column_data> tmp;
    for (auto& [pkey, members] : groups) {
        if (static_cast<int>(members.size()) < cfg.rewrite_min_files) continue;
        std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) { return live[a].key < live[b].key; });
        const std::string& first_key = live[members.front()].key;
        const std::string dir = first_key.substr(0, first_key.rfind('/') + 1); // the partition's directory
        output o;
        for (std::size_t n = 0; n <= members.size(); ++n) {
            std::optional<std::string> body;
            std::optional<pq::file_reader> reader;
            std::string sig;
            if (n < members.size()) {
                auto b = co_await table.read(live[members[n]].key, st);
                if (!b) co_return b.error(); // nothing committed; what was uploaded is an orphan
                body = std::move(*b);
                auto rd = pq::file_reader::open(*body);
                if (!rd) {
                    log::warn("iceberg: {}: {} does not read back ({}); left as it is", table.location(), live[members[n]].key,
                              rd.error().message);
                    continue;
                }
                reader.emplace(std::move(*rd));
                sig = schema_signature(reader->schema());
            }
            const bool last = n == members.size();
            if (o.writer && (last || sig != o.signature ||
                             o.in_bytes + live[members[n]].file.file_size_in_bytes > static_cast<std::int64_t>(cfg.target_file_bytes))) {
                auto f = finish_output(o, live, snapshot_id);
                if (!f) co_return f.error();
                if (f->produced) {
                    const std::string key = fmt::format("{}{}-rewrite-{}.parquet", dir, now_ms, ++n_new);
                    f->entry.file.file_path = table.uri_of(key);
                    auto w = co_await table.write(key, std::span<const char>(f->bytes.data(), f->bytes.size()), st);
                    if (!w) co_return w.error();
                    written.push_back(key);
                    bytes_out += f->entry.file.file_size_in_bytes;
                    for (auto sidx : f->sources) {
                        replaced.insert(sidx);
                        bytes_in += live[sidx].file.file_size_in_bytes;
                    }
                    added.push_back(std::move(f->entry));
                }
            }
            if (last) break;
            if (!o.writer) {
                o.schema = reader->schema();
                o.signature = sig;
                o.writer = std::make_unique<pq::file_writer>(o.schema, wopts);
                o.cols.clear();
                for (const auto& l : o.schema.leaves()) o.cols.emplace_back(l);
            }
            for (std::size_t g = 0; g < reader->row_groups().size(); ++g) {
                auto r = reader->read_row_group(g, tmp);
                if (!r) co_return iceberg_error(errc::invalid_metadata, fmt::format("{}: {}", live[members[n]].key, r.error().message));
                for (std::size_t c = 0; c < o.cols.size(); ++c) append(o.cols[c], tmp[c]);
                o.group_rows += reader->row_groups()[g].num_rows;
                if (data_bytes(o.cols) >= row_group_bytes) {
                    if (auto cg = close_group(o); !cg) co_return cg.error();
                }
            }
            o.sources.push_back(members[n]);
            o.in_bytes += live[members[n]].file.file_size_in_bytes;
        }
    }
    if (added.empty()) co_return out;

    // Manifests: the new files; each manifest that listed a replaced file, rewritten with it
    // DELETED and the others EXISTING (sequence numbers written out: they no longer inherit).
    std::vector<manifest_file> new_list;
    std::int64_t added_rows = 0;
    for (const auto& e : added) added_rows += e.file.record_count;
    {
        manifest_info info = manifests.empty() ? manifest_info() : manifests.front().info;
        auto mb = write_manifest(info, added);
        if (!mb) co_return avro_error(mb.error(), "writing the rewrite's manifest");
        const std::string key = fmt::format("{}/metadata/{}-rewrite-{}-m0.avro", table.prefix(), now_ms, snapshot_id);
        auto w = co_await table.write(key, std::span<const char>(mb->data(), mb->size()), st);
        if (!w) co_return w.error();
        written.push_back(key);
        manifest_file mf;
        mf.manifest_path = table.uri_of(key);
        mf.manifest_length = static_cast<std::int64_t>(mb->size());
        mf.partition_spec_id = info.spec.spec_id;
        mf.sequence_number = seq;
        mf.min_sequence_number = seq;
        mf.added_snapshot_id = snapshot_id;
        mf.added_files_count = static_cast<std::int32_t>(added.size());
        mf.added_rows_count = added_rows;
        new_list.push_back(std::move(mf));
    }
    for (std::size_t mi = 0; mi < list->manifests.size(); ++mi) {
        bool touched = false;
        for (auto r : replaced) touched = touched || live[r].manifest == mi;
        if (!touched) {
            new_list.push_back(list->manifests[mi]);
            continue;
        }
        std::vector<manifest_entry> entries;
        manifest_file mf = list->manifests[mi];
        mf.added_files_count = mf.existing_files_count = mf.deleted_files_count = 0;
        mf.added_rows_count = mf.existing_rows_count = mf.deleted_rows_count = 0;
        std::int64_t min_seq = seq;
        for (std::size_t k = 0; k < live.size(); ++k) {
            if (live[k].manifest != mi) continue;
            manifest_entry e;
            e.file = live[k].file;
            e.sequence_number = live[k].sequence_number;
            e.file_sequence_number = live[k].file_sequence_number;
            if (replaced.count(k)) {
                e.status = entry_status::deleted;
                e.snapshot_id = snapshot_id;
                ++mf.deleted_files_count;
                mf.deleted_rows_count += e.file.record_count;
            } else {
                e.status = entry_status::existing;
                e.snapshot_id = live[k].snapshot_id;
                ++mf.existing_files_count;
                mf.existing_rows_count += e.file.record_count;
                min_seq = std::min(min_seq, live[k].sequence_number);
            }
            entries.push_back(std::move(e));
        }
        auto mb = write_manifest(manifests[mi].info, entries);
        if (!mb) co_return avro_error(mb.error(), "rewriting a manifest");
        const std::string key = fmt::format("{}/metadata/{}-rewrite-{}-m{}.avro", table.prefix(), now_ms, snapshot_id, mi + 1);
        auto w = co_await table.write(key, std::span<const char>(mb->data(), mb->size()), st);
        if (!w) co_return w.error();
        written.push_back(key);
        mf.manifest_path = table.uri_of(key);
        mf.manifest_length = static_cast<std::int64_t>(mb->size());
        mf.sequence_number = seq;
        mf.min_sequence_number = min_seq;
        mf.added_snapshot_id = snapshot_id;
        new_list.push_back(std::move(mf));
    }
    manifest_list_info li;
    li.snapshot_id = snapshot_id;
    li.parent_snapshot_id = cur->id;
    li.sequence_number = seq;
    auto lb = write_manifest_list(li, new_list);
    if (!lb) co_return avro_error(lb.error(), "writing the rewrite's manifest list");
    const std::string new_list_key = fmt::format("{}/metadata/snap-{}-1-{}-rewrite.avro", table.prefix(), snapshot_id, now_ms);
    {
        auto w = co_await table.write(new_list_key, std::span<const char>(lb->data(), lb->size()), st);
        if (!w) co_return w.error();
    }
    written.push_back(new_list_key);

    snapshot s;
    s.id = snapshot_id;
    s.parent = cur->id;
    s.sequence_number = seq;
    s.timestamp_ms = std::max(now_ms, t.metadata.last_updated_ms());
    s.manifest_list = table.uri_of(new_list_key);
    s.schema_id = t.metadata.current_schema_id();
    s.summary = cur->summary; // keeps skiff.next-offsets: the sink resumes from the current snapshot
    s.summary["operation"] = "replace";
    s.summary.erase("added-records");
    s.summary["added-data-files"] = std::to_string(added.size());
    s.summary["deleted-data-files"] = std::to_string(replaced.size());
    s.summary["added-records"] = std::to_string(added_rows);
    s.summary["deleted-records"] = std::to_string(added_rows);
    s.summary["added-files-size"] = std::to_string(bytes_out);
    s.summary["removed-files-size"] = std::to_string(bytes_in);
    s.summary["total-data-files"] = std::to_string(summary_number(cur->summary, "total-data-files") -
                                                   static_cast<std::int64_t>(replaced.size()) + static_cast<std::int64_t>(added.size()));
    s.summary["total-files-size"] = std::to_string(summary_number(cur->summary, "total-files-size") - bytes_in + bytes_out);
    const std::string prev = table.uri_of(table.metadata_key(t.version));
    auto next = t.metadata.with_snapshot(s, prev, now_ms);
    if (!next) co_return next.error();
    auto c = co_await table.commit(t.version, *next, st);
    if (!c) {
        // Another writer committed first (a sink, usually): drop this rewrite; the next pass
        // plans again on the new table. A lost answer may mean it landed: then the files stay.
        if (c.error().code == errc::conflict) {
            auto again = co_await table.load(st);
            if (again && again->metadata.find_snapshot(snapshot_id)) {
                out.version = again->version;
                out.rewritten_files = static_cast<int>(replaced.size());
                out.new_files = static_cast<int>(added.size());
                co_return out;
            }
            auto rm = co_await table.remove_many(written, st);
            (void)rm;
            out.rewrite_conflict = true;
            co_return out;
        }
        co_return c.error();
    }
    out.version = *c;
    out.rewritten_files = static_cast<int>(replaced.size());
    out.new_files = static_cast<int>(added.size());
    log::info("iceberg: {}: rewrote {} small data files ({} bytes) into {} ({} bytes), version {}", table.location(),
              replaced.size(), bytes_in, added.size(), bytes_out, *c);
    co_return out;
}

} // namespace skiff::iceberg
