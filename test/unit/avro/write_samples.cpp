// Writes a sample Iceberg manifest (manifest.avro) and the manifest list that names it
// (snap.avro) into a directory, for independent decoders (test/clients/test_avro_manifests.py
// runs avsc on them). Usage: avro_write_samples <dir> [null|deflate]
#include <skiff/iceberg/manifest.hpp>

#include <cstdio>
#include <fstream>
#include <string>

using namespace skiff;
using namespace skiff::iceberg;

namespace {

bool write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(out);
}

avro::bytes le64(std::int64_t v) {
    avro::bytes b(8);
    for (std::size_t i = 0; i < 8; ++i) b[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * i));
    return b;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s <dir> [null|deflate]\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    write_options opts;
    opts.codec = argc > 2 && std::string(argv[2]) == "null" ? avro::codec::null : avro::codec::deflate;

    manifest_info info;
    info.schema_json = R"({"type":"struct","schema-id":0,"fields":[{"id":1,"name":"partition","required":true,"type":"int"},)"
                       R"({"id":2,"name":"offset","required":true,"type":"long"},)"
                       R"({"id":3,"name":"timestamp","required":true,"type":"timestamptz"}]})";
    info.schema_id = 0;
    info.spec.spec_id = 0;
    info.spec.fields.push_back(partition_field{"timestamp_day", 1000, 3, "day", "date"});

    std::vector<manifest_entry> entries;
    for (int i = 0; i < 3; ++i) {
        manifest_entry e;
        e.status = entry_status::added;
        e.snapshot_id = 3051729675574597004;
        e.sequence_number = 5;
        e.file_sequence_number = 5;
        e.file.file_path = "s3://bucket/warehouse/topic/data/timestamp_day=2024-01-0" + std::to_string(i + 1) + "/" + std::to_string(i) + ".parquet";
        e.file.partition = {avro::value(std::int32_t{19723 + i})};
        e.file.record_count = 1000 * (i + 1);
        e.file.file_size_in_bytes = 65536 + i;
        e.file.column_sizes = {{1, 100}, {2, 4000}};
        e.file.value_counts = {{1, e.file.record_count}, {2, e.file.record_count}};
        e.file.null_value_counts = {{1, 0}, {2, 0}};
        e.file.lower_bounds = {{2, le64(1000 * i)}};
        e.file.upper_bounds = {{2, le64(1000 * i + 999)}};
        e.file.split_offsets = std::vector<std::int64_t>{4};
        e.file.sort_order_id = 0;
        entries.push_back(std::move(e));
    }
    entries[2].file.key_metadata = avro::bytes{0xde, 0xad};
    auto manifest_bytes = write_manifest(info, entries, opts);
    if (!manifest_bytes) {
        std::fprintf(stderr, "write_manifest: %s\n", manifest_bytes.error().message.c_str());
        return 1;
    }
    const std::string manifest_path = dir + "/manifest.avro";
    if (!write_file(manifest_path, *manifest_bytes)) return 1;

    manifest_file mf;
    mf.manifest_path = manifest_path;
    mf.manifest_length = static_cast<std::int64_t>(manifest_bytes->size());
    mf.partition_spec_id = 0;
    mf.content = 0;
    mf.sequence_number = 5;
    mf.min_sequence_number = 5;
    mf.added_snapshot_id = 3051729675574597004;
    mf.added_files_count = 3;
    mf.added_rows_count = 6000;
    auto day = [](std::int32_t d) {
        avro::bytes b(4);
        for (std::size_t i = 0; i < 4; ++i) b[i] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(d) >> (8 * i));
        return b;
    };
    mf.partitions = std::vector<field_summary>{field_summary{false, std::nullopt, day(19723), day(19725)}};
    manifest_list_info li;
    li.snapshot_id = 3051729675574597004;
    li.parent_snapshot_id = 3051729675574597003;
    li.sequence_number = 5;
    auto list_bytes = write_manifest_list(li, std::vector<manifest_file>{mf}, opts);
    if (!list_bytes) {
        std::fprintf(stderr, "write_manifest_list: %s\n", list_bytes.error().message.c_str());
        return 1;
    }
    if (!write_file(dir + "/snap.avro", *list_bytes)) return 1;
    std::printf("%s\n%s/snap.avro\n", manifest_path.c_str(), dir.c_str());
    return 0;
}
