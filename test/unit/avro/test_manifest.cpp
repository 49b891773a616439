// Iceberg v2 manifests and manifest lists: round trips, the schema's field ids and metadata,
// and reading what another writer (older layout, other names, extra fields) produced.
#include <skiff/avro/container.hpp>
#include <skiff/iceberg/manifest.hpp>

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

using namespace skiff;
using namespace skiff::iceberg;

namespace {

partition_spec day_spec() {
    partition_spec spec;
    spec.spec_id = 0;
    spec.fields.push_back(partition_field{"timestamp_day", 1000, 3, "day", "date"});
    return spec;
}

manifest_entry sample_entry(std::int32_t day, std::string path) {
    manifest_entry e;
    e.status = entry_status::added;
    e.snapshot_id = 42;
    e.sequence_number = 7;
    e.file_sequence_number = 7;
    e.file.file_path = std::move(path);
    e.file.partition = {avro::value(day)};
    e.file.record_count = 100;
    e.file.file_size_in_bytes = 4096;
    e.file.column_sizes = {{1, 10}, {2, 800}};
    e.file.value_counts = {{1, 100}, {2, 100}};
    e.file.null_value_counts = {{1, 0}, {2, 3}};
    e.file.lower_bounds = {{2, avro::bytes{0, 0, 0, 0, 0, 0, 0, 0}}};
    e.file.upper_bounds = {{2, avro::bytes{99, 0, 0, 0, 0, 0, 0, 0}}};
    e.file.split_offsets = std::vector<std::int64_t>{4};
    e.file.sort_order_id = 0;
    return e;
}

manifest_info sample_info(partition_spec spec) {
    manifest_info info;
    info.schema_json = R"({"type":"struct","schema-id":0,"fields":[]})";
    info.schema_id = 0;
    info.spec = std::move(spec);
    return info;
}

// Field ids of a record schema's fields, by name.
std::map<std::string, std::int32_t> ids(const avro::node& rec) {
    std::map<std::string, std::int32_t> out;
    for (const auto& f : rec.fields) out[f.name] = f.field_id.value_or(-1);
    return out;
}

const avro::node& unwrap(const avro::node& n) {
    if (n.kind != avro::type::union_) return n;
    return *n.branches.at(1);
}

} // namespace

TEST_CASE("a partitioned manifest round-trips with both codecs", "[avro][iceberg]") {
    for (auto codec : {avro::codec::deflate, avro::codec::null}) {
        std::vector<manifest_entry> entries{sample_entry(19700, "s3://b/t/data/a.parquet"), sample_entry(19701, "s3://b/t/data/b.parquet")};
        entries[1].status = entry_status::existing;
        entries[1].snapshot_id.reset();
        entries[1].file.partition = {avro::value()}; // null partition value
        entries[1].file.key_metadata = avro::bytes{1, 2, 3};
        entries[1].file.equality_ids = std::vector<std::int32_t>{1, 2};
        entries[1].file.nan_value_counts = {{5, 1}};
        write_options o;
        o.codec = codec;
        auto file = write_manifest(sample_info(day_spec()), entries, o);
        REQUIRE(file);
        auto m = read_manifest(*file);
        REQUIRE(m);
        CHECK(m->info.schema_json == R"({"type":"struct","schema-id":0,"fields":[]})");
        CHECK(m->info.content == "data");
        REQUIRE(m->info.spec.fields.size() == 1);
        CHECK(m->info.spec.fields[0].name == "timestamp_day");
        CHECK(m->info.spec.fields[0].field_id == 1000);
        CHECK(m->info.spec.fields[0].source_id == 3);
        CHECK(m->info.spec.fields[0].transform == "day");
        CHECK(m->info.spec.fields[0].result_type == "date");
        REQUIRE(m->entries.size() == 2);
        const auto& a = m->entries[0];
        CHECK(a.status == entry_status::added);
        CHECK(a.snapshot_id == 42);
        CHECK(a.sequence_number == 7);
        CHECK(a.file_sequence_number == 7);
        CHECK(a.file.file_path == "s3://b/t/data/a.parquet");
        CHECK(a.file.file_format == "PARQUET");
        REQUIRE(a.file.partition.size() == 1);
        CHECK(*a.file.partition[0].get_if<std::int32_t>() == 19700);
        CHECK(a.file.record_count == 100);
        CHECK(a.file.file_size_in_bytes == 4096);
        CHECK(a.file.column_sizes == column_counts{{1, 10}, {2, 800}});
        CHECK(a.file.null_value_counts == column_counts{{1, 0}, {2, 3}});
        CHECK(a.file.nan_value_counts.empty());
        CHECK(a.file.lower_bounds == column_bounds{{2, avro::bytes{0, 0, 0, 0, 0, 0, 0, 0}}});
        CHECK(a.file.upper_bounds == column_bounds{{2, avro::bytes{99, 0, 0, 0, 0, 0, 0, 0}}});
        CHECK(!a.file.key_metadata);
        CHECK(a.file.split_offsets == std::vector<std::int64_t>{4});
        CHECK(!a.file.equality_ids);
        CHECK(a.file.sort_order_id == 0);
        const auto& b = m->entries[1];
        CHECK(b.status == entry_status::existing);
        CHECK(!b.snapshot_id);
        CHECK(b.file.partition[0].is_null());
        CHECK(b.file.key_metadata == avro::bytes{1, 2, 3});
        CHECK(b.file.equality_ids == std::vector<std::int32_t>{1, 2});
        CHECK(b.file.nan_value_counts == column_counts{{5, 1}});
    }
}

TEST_CASE("a manifest carries the spec's field ids and metadata", "[avro][iceberg]") {
    std::vector<manifest_entry> entries{sample_entry(1, "f")};
    auto file = write_manifest(sample_info(day_spec()), entries);
    REQUIRE(file);
    auto c = avro::read_container(*file);
    REQUIRE(c);
    CHECK(c->codec == avro::codec::deflate);
    for (const char* key : {"schema", "schema-id", "partition-spec", "partition-spec-id", "format-version", "content"})
        CHECK(c->find_metadata(key) != nullptr);
    CHECK(*c->find_metadata("format-version") == "2");
    CHECK(nlohmann::json::parse(*c->find_metadata("partition-spec")) ==
          nlohmann::json::parse(R"([{"name":"timestamp_day","transform":"day","source-id":3,"field-id":1000}])"));
    const avro::node& entry = *c->schema;
    CHECK(entry.name == "manifest_entry");
    CHECK(ids(entry) == std::map<std::string, std::int32_t>{
                            {"status", 0}, {"snapshot_id", 1}, {"sequence_number", 3}, {"file_sequence_number", 4}, {"data_file", 2}});
    const avro::node& df = *entry.fields[4].schema;
    CHECK(df.name == "r2");
    CHECK(ids(df) == std::map<std::string, std::int32_t>{
                         {"content", 134}, {"file_path", 100}, {"file_format", 101}, {"partition", 102}, {"record_count", 103},
                         {"file_size_in_bytes", 104}, {"column_sizes", 108}, {"value_counts", 109}, {"null_value_counts", 110},
                         {"nan_value_counts", 137}, {"lower_bounds", 125}, {"upper_bounds", 128}, {"key_metadata", 131},
                         {"split_offsets", 132}, {"equality_ids", 135}, {"sort_order_id", 140}});
    const avro::node& part = *df.fields[3].schema;
    CHECK(part.name == "r102");
    CHECK(ids(part) == std::map<std::string, std::int32_t>{{"timestamp_day", 1000}});
    CHECK(unwrap(*part.fields[0].schema).logical_type == "date");
    const avro::node& sizes = unwrap(*df.fields[6].schema);
    CHECK(sizes.kind == avro::type::array);
    CHECK(sizes.logical_type == "map");
    CHECK(ids(*sizes.items) == std::map<std::string, std::int32_t>{{"key", 117}, {"value", 118}});
    CHECK(ids(*unwrap(*df.fields[10].schema).items) == std::map<std::string, std::int32_t>{{"key", 126}, {"value", 127}});
    CHECK(unwrap(*df.fields[13].schema).element_id == 133);
    CHECK(unwrap(*df.fields[14].schema).element_id == 136);
}

TEST_CASE("unpartitioned and identity specs", "[avro][iceberg]") {
    auto empty = write_manifest(sample_info(partition_spec{}), std::vector<manifest_entry>{[] {
                                    auto e = sample_entry(0, "u");
                                    e.file.partition.clear();
                                    return e;
                                }()});
    REQUIRE(empty);
    auto m = read_manifest(*empty);
    REQUIRE(m);
    CHECK(m->info.spec.fields.empty());
    REQUIRE(m->entries.size() == 1);
    CHECK(m->entries[0].file.partition.empty());

    partition_spec ident;
    ident.spec_id = 1;
    ident.fields.push_back(partition_field{"partition", 1000, 1, "identity", "int"});
    auto e = sample_entry(0, "p");
    e.file.partition = {avro::value(std::int32_t{5})};
    auto file = write_manifest(sample_info(ident), std::vector<manifest_entry>{e});
    REQUIRE(file);
    auto mi = read_manifest(*file);
    REQUIRE(mi);
    CHECK(mi->info.spec.spec_id == 1);
    CHECK(mi->info.spec.fields[0].result_type == "int");
    CHECK(*mi->entries[0].file.partition[0].get_if<std::int32_t>() == 5);

    // A partition value of the wrong type, or the wrong number of them, is refused.
    e.file.partition = {avro::value(std::string("five"))};
    auto bad = write_manifest(sample_info(ident), std::vector<manifest_entry>{e});
    REQUIRE(!bad);
    CHECK(bad.error().code == avro::errc::type_mismatch);
    e.file.partition.clear();
    auto bad2 = write_manifest(sample_info(ident), std::vector<manifest_entry>{e});
    REQUIRE(!bad2);
    CHECK(bad2.error().code == avro::errc::type_mismatch);
}

TEST_CASE("a manifest list round-trips and carries its field ids and metadata", "[avro][iceberg]") {
    manifest_file mf;
    mf.manifest_path = "s3://b/t/metadata/m0.avro";
    mf.manifest_length = 5120;
    mf.partition_spec_id = 0;
    mf.content = 0;
    mf.sequence_number = 7;
    mf.min_sequence_number = 3;
    mf.added_snapshot_id = 42;
    mf.added_files_count = 2;
    mf.existing_files_count = 1;
    mf.deleted_files_count = 0;
    mf.added_rows_count = 200;
    mf.existing_rows_count = 50;
    mf.deleted_rows_count = 0;
    mf.partitions = std::vector<field_summary>{field_summary{true, false, avro::bytes{0x24, 0x4d, 0, 0}, avro::bytes{0x25, 0x4d, 0, 0}}};
    manifest_file second = mf;
    second.manifest_path = "s3://b/t/metadata/m1.avro";
    second.partitions.reset();
    second.key_metadata = avro::bytes{7};
    manifest_list_info info{};
    info.snapshot_id = 42;
    info.parent_snapshot_id = 41;
    info.sequence_number = 7;
    auto file = write_manifest_list(info, std::vector<manifest_file>{mf, second});
    REQUIRE(file);
    auto l = read_manifest_list(*file);
    REQUIRE(l);
    CHECK(l->info.snapshot_id == 42);
    CHECK(l->info.parent_snapshot_id == 41);
    CHECK(l->info.sequence_number == 7);
    REQUIRE(l->manifests.size() == 2);
    const auto& a = l->manifests[0];
    CHECK(a.manifest_path == mf.manifest_path);
    CHECK(a.manifest_length == 5120);
    CHECK(a.sequence_number == 7);
    CHECK(a.min_sequence_number == 3);
    CHECK(a.added_snapshot_id == 42);
    CHECK(a.added_files_count == 2);
    CHECK(a.existing_files_count == 1);
    CHECK(a.added_rows_count == 200);
    CHECK(a.existing_rows_count == 50);
    REQUIRE(a.partitions);
    REQUIRE(a.partitions->size() == 1);
    CHECK((*a.partitions)[0].contains_null);
    CHECK((*a.partitions)[0].contains_nan == false);
    CHECK((*a.partitions)[0].lower_bound == avro::bytes{0x24, 0x4d, 0, 0});
    CHECK((*a.partitions)[0].upper_bound == avro::bytes{0x25, 0x4d, 0, 0});
    CHECK(!a.key_metadata);
    CHECK(!l->manifests[1].partitions);
    CHECK(l->manifests[1].key_metadata == avro::bytes{7});

    auto c = avro::read_container(*file);
    REQUIRE(c);
    for (const char* key : {"snapshot-id", "parent-snapshot-id", "sequence-number", "format-version"}) CHECK(c->find_metadata(key));
    CHECK(c->schema->name == "manifest_file");
    CHECK(ids(*c->schema) == std::map<std::string, std::int32_t>{
                                 {"manifest_path", 500}, {"manifest_length", 501}, {"partition_spec_id", 502}, {"content", 517},
                                 {"sequence_number", 515}, {"min_sequence_number", 516}, {"added_snapshot_id", 503},
                                 {"added_files_count", 504}, {"existing_files_count", 505}, {"deleted_files_count", 506},
                                 {"added_rows_count", 512}, {"existing_rows_count", 513}, {"deleted_rows_count", 514},
                                 {"partitions", 507}, {"key_metadata", 519}});
    const avro::node& parts = unwrap(c->schema->fields[13].schema ? *c->schema->fields[13].schema : *c->schema);
    CHECK(parts.element_id == 508);
    CHECK(parts.items->name == "r508");
    CHECK(ids(*parts.items) == std::map<std::string, std::int32_t>{{"contains_null", 509}, {"contains_nan", 518}, {"lower_bound", 510}, {"upper_bound", 511}});

    manifest_list_info first{};
    first.snapshot_id = 1;
    auto f2 = write_manifest_list(first, std::vector<manifest_file>{});
    REQUIRE(f2);
    auto l2 = read_manifest_list(*f2);
    REQUIRE(l2);
    CHECK(!l2->info.parent_snapshot_id);
    CHECK(l2->manifests.empty());
}

TEST_CASE("lists and manifests of another writer read by field id", "[avro][iceberg]") {
    // Java Iceberg's names (added_data_files_count), fields in another order, an extra field
    // this reader does not know, and the optional ones (content, sequence numbers) left out.
    const std::string schema = R"({"type":"record","name":"manifest_file","fields":[
        {"name":"added_snapshot_id","type":"long","field-id":503},
        {"name":"manifest_path","type":"string","field-id":500},
        {"name":"extra","type":{"type":"map","values":"string"}},
        {"name":"manifest_length","type":"long","field-id":501},
        {"name":"partition_spec_id","type":"int","field-id":502},
        {"name":"added_data_files_count","type":["null","int"],"field-id":504},
        {"name":"deleted_data_files_count","type":["null","int"],"field-id":506}]})";
    avro::writer_options o;
    o.metadata = {{"snapshot-id", "9"}, {"parent-snapshot-id", "null"}};
    auto w = avro::container_writer::create(schema, o);
    REQUIRE(w);
    REQUIRE(w->append(avro::record{{avro::value(std::int64_t{9}), avro::value(std::string("m.avro")),
                                    avro::value(avro::map{avro::map_entry{"k", avro::value(std::string("v"))}}),
                                    avro::value(std::int64_t{77}), avro::value(std::int32_t{0}), avro::value(std::int32_t{3}),
                                    avro::value()}}));
    auto file = w->finish();
    REQUIRE(file);
    auto l = read_manifest_list(*file);
    REQUIRE(l);
    CHECK(l->info.snapshot_id == 9);
    CHECK(!l->info.parent_snapshot_id);
    REQUIRE(l->manifests.size() == 1);
    CHECK(l->manifests[0].manifest_path == "m.avro");
    CHECK(l->manifests[0].manifest_length == 77);
    CHECK(l->manifests[0].added_snapshot_id == 9);
    CHECK(l->manifests[0].added_files_count == 3);
    CHECK(l->manifests[0].deleted_files_count == 0);
    CHECK(l->manifests[0].sequence_number == 0);

    // A manifest list is not a manifest.
    auto m = read_manifest(*file);
    REQUIRE(!m);
    CHECK(m.error().code == avro::errc::corrupt);
    // And garbage is neither.
    auto g = read_manifest_list("Obj\x01garbage");
    CHECK(!g);
}

TEST_CASE("a v1-layout manifest (Java's, with block_size_in_bytes and no sequence numbers) reads", "[avro][iceberg]") {
    // The shape Java Iceberg writes for format v1: no content or sequence numbers, a required
    // block_size_in_bytes (105) this reader does not know, docs on fields, a string partition.
    const std::string schema = R"({"type":"record","name":"manifest_entry","fields":[
        {"name":"status","type":"int","field-id":0},
        {"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1},
        {"name":"data_file","type":{"type":"record","name":"r2","fields":[
          {"name":"file_path","type":"string","doc":"Location URI with FS scheme","field-id":100},
          {"name":"file_format","type":"string","field-id":101},
          {"name":"partition","type":{"type":"record","name":"r102","fields":[
            {"name":"category","type":["null","string"],"default":null,"field-id":1000}]},"field-id":102},
          {"name":"record_count","type":"long","field-id":103},
          {"name":"file_size_in_bytes","type":"long","field-id":104},
          {"name":"block_size_in_bytes","type":"long","field-id":105},
          {"name":"column_sizes","type":["null",{"type":"array","items":{"type":"record","name":"k117_v118","fields":[
            {"name":"key","type":"int","field-id":117},{"name":"value","type":"long","field-id":118}]},"logicalType":"map"}],
           "default":null,"field-id":108},
          {"name":"split_offsets","type":["null",{"type":"array","items":"long","element-id":133}],"default":null,"field-id":132}]},
         "field-id":2}]})";
    avro::writer_options o;
    o.codec = avro::codec::deflate;
    o.metadata = {{"schema", R"({"type":"struct","schema-id":0,"fields":[]})"}, {"partition-spec-id", "0"}, {"format-version", "1"},
                  {"partition-spec", R"([{"name":"category","transform":"identity","source-id":3,"field-id":1000}])"}};
    auto w = avro::container_writer::create(schema, o);
    REQUIRE(w);
    avro::record df{{avro::value(std::string("s3://b/x.parquet")), avro::value(std::string("PARQUET")),
                     avro::value(avro::record{{avro::value(std::string("x"))}}), avro::value(std::int64_t{1}),
                     avro::value(std::int64_t{874}), avro::value(std::int64_t{67108864}),
                     avro::value(avro::array{avro::value(avro::record{{avro::value(std::int32_t{1}), avro::value(std::int64_t{46})}})}),
                     avro::value(avro::array{avro::value(std::int64_t{4})})}};
    REQUIRE(w->append(avro::record{{avro::value(std::int32_t{1}), avro::value(std::int64_t{8205833995881562618}), avro::value(df)}}));
    auto file = w->finish();
    REQUIRE(file);
    auto m = read_manifest(*file);
    REQUIRE(m);
    REQUIRE(m->info.spec.fields.size() == 1);
    CHECK(m->info.spec.fields[0].result_type == "string");
    CHECK(m->info.content == "data");
    REQUIRE(m->entries.size() == 1);
    const auto& e = m->entries[0];
    CHECK(e.snapshot_id == 8205833995881562618);
    CHECK(!e.sequence_number);
    CHECK(e.file.content == file_content::data);
    CHECK(e.file.file_path == "s3://b/x.parquet");
    CHECK(*e.file.partition.at(0).get_if<std::string>() == "x");
    CHECK(e.file.file_size_in_bytes == 874);
    CHECK(e.file.column_sizes == column_counts{{1, 46}});
    CHECK(e.file.split_offsets == std::vector<std::int64_t>{4});
    CHECK(!e.file.sort_order_id);
}

TEST_CASE("mutated manifests and lists give errors or values, never crashes", "[avro][iceberg]") {
    // Run under the sanitizer build, this is a small fuzz pass over both readers.
    std::vector<manifest_entry> entries{sample_entry(3, "a"), sample_entry(4, "b")};
    write_options o;
    o.codec = avro::codec::null; // mutations reach the records rather than stopping in inflate
    auto manifest_bytes = write_manifest(sample_info(day_spec()), entries, o);
    REQUIRE(manifest_bytes);
    manifest_file mf;
    mf.manifest_path = "m";
    mf.partitions = std::vector<field_summary>{field_summary{}};
    auto list_bytes = write_manifest_list(manifest_list_info{}, std::vector<manifest_file>{mf}, o);
    REQUIRE(list_bytes);
    std::uint64_t state = 0x9e3779b97f4a7c15ULL;
    auto next = [&state] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    std::size_t errors = 0, reads = 0;
    for (int round = 0; round < 3000; ++round) {
        std::string f = round % 2 ? *manifest_bytes : *list_bytes;
        const int flips = 1 + static_cast<int>(next() % 4);
        for (int k = 0; k < flips; ++k) f[next() % f.size()] = static_cast<char>(next());
        if (round % 2) {
            auto m = read_manifest(f);
            if (!m) {
                CHECK(!m.error().message.empty());
                ++errors;
            } else {
                ++reads;
            }
        } else {
            auto l = read_manifest_list(f);
            if (!l) {
                CHECK(!l.error().message.empty());
                ++errors;
            } else {
                ++reads;
            }
        }
    }
    // Most mutations hit the schema or the records and must be caught; some land in strings.
    INFO(reads << " mutated files still read");
    CHECK(errors > 1000);
}
