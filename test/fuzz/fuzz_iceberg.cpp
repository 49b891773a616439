// libFuzzer target for the Iceberg sink's readers of untrusted files: the sink reads back table
// metadata, manifest lists and manifests that any writer (another sink, Java Iceberg, a person
// with the bucket's keys) may have left in the warehouse, and Parquet footers of data files. The
// first input byte (mod 5) picks the reader, the rest is the file:
//   0 avro::read_container   1 iceberg::read_manifest   2 iceberg::read_manifest_list
//   3 table_metadata::parse  4 parquet::read_footer
// Whatever parses must survive a round trip through the matching writer (what we read, we can
// write, and reading that back gives the same thing), and table metadata must accept the next
// commit's changes without throwing. A violation aborts, so the fuzzer reports it like a crash.
//
//   CXX=clang++-14 meson setup build-fuzz -Dfuzzers=true -Db_lundef=false
//   ninja -C build-fuzz test/fuzz/fuzz_iceberg
//   build-fuzz/test/fuzz/fuzz_iceberg -max_total_time=60 <scratch dir> test/fuzz/corpus/iceberg
//
// Seeds (test/fuzz/corpus/iceberg, each file = selector byte + file): avro_write_samples's
// manifest.avro and snap.avro (deflate and null codecs), parquet_write_sample's two files cut
// down to "PAR1" + footer + length + "PAR1" (read_footer reads nothing else), and table
// metadata written by `skiff iceberg` (a fresh table and one with snapshots).
#include <skiff/avro/container.hpp>
#include <skiff/iceberg/manifest.hpp>
#include <skiff/iceberg/table_metadata.hpp>
#include <skiff/parquet/footer.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

using namespace skiff;

namespace {

#define FUZZ_CHECK(cond)                                                                              \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            std::abort();                                                                             \
        }                                                                                             \
    } while (0)

// ---- value equality (avro::value has no operator==; NaNs compare by bits) ----------------------

bool same(const avro::value& a, const avro::value& b);

template <typename F>
bool same_bits(F x, F y) {
    return std::memcmp(&x, &y, sizeof x) == 0;
}

bool same(const avro::value& a, const avro::value& b) {
    if (a.v.index() != b.v.index()) return false;
    return std::visit(
        [&](const auto& x) -> bool {
            using T = std::decay_t<decltype(x)>;
            const T& y = std::get<T>(b.v);
            if constexpr (std::is_same_v<T, std::monostate>) {
                return true;
            } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
                return same_bits(x, y);
            } else if constexpr (std::is_same_v<T, avro::array>) {
                if (x.size() != y.size()) return false;
                for (std::size_t i = 0; i < x.size(); ++i)
                    if (!same(x[i], y[i])) return false;
                return true;
            } else if constexpr (std::is_same_v<T, avro::map>) {
                if (x.size() != y.size()) return false;
                for (std::size_t i = 0; i < x.size(); ++i)
                    if (x[i].key != y[i].key || !same(x[i].val, y[i].val)) return false;
                return true;
            } else if constexpr (std::is_same_v<T, avro::record>) {
                if (x.fields.size() != y.fields.size()) return false;
                for (std::size_t i = 0; i < x.fields.size(); ++i)
                    if (!same(x.fields[i], y.fields[i])) return false;
                return true;
            } else if constexpr (std::is_same_v<T, avro::enum_symbol>) {
                return x.index == y.index && x.symbol == y.symbol;
            } else {
                return x == y;
            }
        },
        a.v);
}

bool same(const std::vector<avro::value>& a, const std::vector<avro::value>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!same(a[i], b[i])) return false;
    return true;
}

// A fixed sync marker keeps the rewrite deterministic (the writer picks a random one otherwise).
avro::sync_marker fixed_sync() {
    avro::sync_marker s{};
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::uint8_t>(0xa5 ^ i);
    return s;
}

// ---- 0: Avro object container files --------------------------------------------------------------

void exercise_container(std::string_view in) {
    auto c = avro::read_container(in);
    if (!c) return;
    FUZZ_CHECK(c->schema != nullptr);
    FUZZ_CHECK(c->find_metadata("avro.schema") != nullptr);
    // Every decoded record re-encodes with its own schema, and the rewritten file reads back
    // the same records and metadata.
    avro::writer_options o;
    o.codec = c->codec;
    o.sync = fixed_sync();
    for (const auto& [k, v] : c->metadata)
        if (!k.starts_with("avro.")) o.metadata.emplace_back(k, v);
    auto w = avro::container_writer::create(c->schema_json, std::move(o));
    FUZZ_CHECK(w.has_value()); // the reader parsed this schema, so the writer must too
    for (const auto& r : c->records) {
        auto appended = w->append(r);
        FUZZ_CHECK(appended.has_value());
    }
    auto file = w->finish();
    FUZZ_CHECK(file.has_value());
    auto again = avro::read_container(*file);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->codec == c->codec);
    FUZZ_CHECK(same(again->records, c->records));
    for (const auto& [k, v] : c->metadata) {
        if (k.starts_with("avro.")) continue;
        const std::string* w2 = again->find_metadata(k);
        FUZZ_CHECK(w2 != nullptr);
    }
}

// ---- 1: manifests ----------------------------------------------------------------------------------

bool same_spec(const iceberg::partition_spec& a, const iceberg::partition_spec& b) {
    if (a.spec_id != b.spec_id || a.fields.size() != b.fields.size()) return false;
    for (std::size_t i = 0; i < a.fields.size(); ++i) {
        const auto& x = a.fields[i];
        const auto& y = b.fields[i];
        if (x.name != y.name || x.field_id != y.field_id || x.source_id != y.source_id || x.transform != y.transform ||
            x.result_type != y.result_type)
            return false;
    }
    return true;
}

bool same_file(const iceberg::data_file& a, const iceberg::data_file& b) {
    return a.content == b.content && a.file_path == b.file_path && a.file_format == b.file_format &&
           same(a.partition, b.partition) && a.record_count == b.record_count &&
           a.file_size_in_bytes == b.file_size_in_bytes && a.column_sizes == b.column_sizes &&
           a.value_counts == b.value_counts && a.null_value_counts == b.null_value_counts &&
           a.nan_value_counts == b.nan_value_counts && a.lower_bounds == b.lower_bounds &&
           a.upper_bounds == b.upper_bounds && a.key_metadata == b.key_metadata && a.split_offsets == b.split_offsets &&
           a.equality_ids == b.equality_ids && a.sort_order_id == b.sort_order_id;
}

void exercise_manifest(std::string_view in) {
    auto m = iceberg::read_manifest(in);
    if (!m) return;
    // Not everything another writer may put in a manifest is something we write (a partition
    // type we do not support, a value that does not fit the spec), so the writer may refuse;
    // what it writes must read back as what was read.
    iceberg::write_options o;
    o.sync = fixed_sync();
    auto file = iceberg::write_manifest(m->info, m->entries, o);
    if (!file) return;
    auto again = iceberg::read_manifest(*file);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->info.schema_json == m->info.schema_json);
    FUZZ_CHECK(again->info.schema_id == m->info.schema_id);
    FUZZ_CHECK(again->info.content == m->info.content);
    FUZZ_CHECK(same_spec(again->info.spec, m->info.spec));
    FUZZ_CHECK(again->entries.size() == m->entries.size());
    for (std::size_t i = 0; i < m->entries.size(); ++i) {
        const auto& x = m->entries[i];
        const auto& y = again->entries[i];
        FUZZ_CHECK(x.status == y.status && x.snapshot_id == y.snapshot_id && x.sequence_number == y.sequence_number &&
                   x.file_sequence_number == y.file_sequence_number);
        FUZZ_CHECK(same_file(x.file, y.file));
    }
}

// ---- 2: manifest lists -----------------------------------------------------------------------------

bool same_summary(const iceberg::field_summary& a, const iceberg::field_summary& b) {
    return a.contains_null == b.contains_null && a.contains_nan == b.contains_nan && a.lower_bound == b.lower_bound &&
           a.upper_bound == b.upper_bound;
}

void exercise_manifest_list(std::string_view in) {
    auto l = iceberg::read_manifest_list(in);
    if (!l) return;
    iceberg::write_options o;
    o.sync = fixed_sync();
    o.codec = avro::codec::null;
    auto file = iceberg::write_manifest_list(l->info, l->manifests, o);
    FUZZ_CHECK(file.has_value()); // every manifest_file value has a schema type, so this cannot fail
    auto again = iceberg::read_manifest_list(*file);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->info.snapshot_id == l->info.snapshot_id);
    FUZZ_CHECK(again->info.parent_snapshot_id == l->info.parent_snapshot_id);
    FUZZ_CHECK(again->info.sequence_number == l->info.sequence_number);
    FUZZ_CHECK(again->manifests.size() == l->manifests.size());
    for (std::size_t i = 0; i < l->manifests.size(); ++i) {
        const auto& x = l->manifests[i];
        const auto& y = again->manifests[i];
        FUZZ_CHECK(x.manifest_path == y.manifest_path && x.manifest_length == y.manifest_length &&
                   x.partition_spec_id == y.partition_spec_id && x.content == y.content &&
                   x.sequence_number == y.sequence_number && x.min_sequence_number == y.min_sequence_number &&
                   x.added_snapshot_id == y.added_snapshot_id);
        FUZZ_CHECK(x.added_files_count == y.added_files_count && x.existing_files_count == y.existing_files_count &&
                   x.deleted_files_count == y.deleted_files_count && x.added_rows_count == y.added_rows_count &&
                   x.existing_rows_count == y.existing_rows_count && x.deleted_rows_count == y.deleted_rows_count);
        FUZZ_CHECK(x.key_metadata == y.key_metadata);
        FUZZ_CHECK(x.partitions.has_value() == y.partitions.has_value());
        if (x.partitions) {
            FUZZ_CHECK(x.partitions->size() == y.partitions->size());
            for (std::size_t k = 0; k < x.partitions->size(); ++k)
                FUZZ_CHECK(same_summary((*x.partitions)[k], (*y.partitions)[k]));
        }
    }
}

// ---- 3: table metadata -----------------------------------------------------------------------------

void exercise_table_metadata(std::string_view in) {
    auto t = iceberg::table_metadata::parse(in);
    if (!t) return;
    // What the sink reads from a parsed table before it commits (parse checked these exist).
    const auto& schema = t->current_schema();
    const auto& spec = t->default_spec();
    FUZZ_CHECK(schema.is_object() && spec.is_object());
    (void)t->properties();
    (void)t->uuid();
    (void)t->location();
    const auto cur = t->current_snapshot();
    const auto all = t->snapshots();
    // The metadata file is rewritten by every commit: what parsed must dump and parse again.
    const std::string text = t->dump();
    auto again = iceberg::table_metadata::parse(text);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(again->dump() == text);

    // The next append, as the sink makes it, must be accepted and parse.
    iceberg::snapshot s;
    s.id = 1;
    while (t->find_snapshot(s.id)) ++s.id;
    s.parent = cur ? std::optional<std::int64_t>(cur->id) : std::nullopt;
    s.timestamp_ms = 1700000000000;
    s.manifest_list = "file:///fuzz/snap.avro";
    s.summary = {{"operation", "append"}};
    // A table at the last sequence number takes no more commits; with_snapshot itself computes
    // last + 1, so it is not asked.
    if (t->last_sequence_number() < INT64_MAX) {
        s.sequence_number = t->last_sequence_number() + 1;
        auto next = t->with_snapshot(s, "file:///fuzz/v1.metadata.json", 1700000000000);
        FUZZ_CHECK(next.has_value());
        auto reparsed = iceberg::table_metadata::parse(next->dump());
        FUZZ_CHECK(reparsed.has_value());
        auto now = reparsed->current_snapshot();
        FUZZ_CHECK(now && now->id == s.id);
    }
    // Expiring every snapshot but the current one, as maintenance does.
    std::set<std::int64_t> old;
    for (const auto& x : all)
        if (!cur || x.id != cur->id) old.insert(x.id);
    auto expired = t->without_snapshots(old, "file:///fuzz/v1.metadata.json", 1700000000000);
    FUZZ_CHECK(expired.has_value());
    auto reparsed = iceberg::table_metadata::parse(expired->dump());
    FUZZ_CHECK(reparsed.has_value());
}

// ---- 4: Parquet footers ----------------------------------------------------------------------------

void exercise_footer(std::string_view in) {
    auto f = parquet::read_footer(in);
    if (!f) return;
    for (const auto& g : f->row_groups)
        for (const auto& c : g.columns) FUZZ_CHECK(c.path.size() <= in.size());
    FUZZ_CHECK(f->schema.size() <= in.size());
    FUZZ_CHECK(f->created_by.size() <= in.size());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 5) {
    case 0: exercise_container(in); break;
    case 1: exercise_manifest(in); break;
    case 2: exercise_manifest_list(in); break;
    case 3: exercise_table_metadata(in); break;
    default: exercise_footer(in); break;
    }
    return 0;
}
