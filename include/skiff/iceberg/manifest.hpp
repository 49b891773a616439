// Iceberg v2 manifests and manifest lists (Iceberg spec, "Manifests" and "Manifest Lists"),
// written and read as Avro object container files with the spec's field ids and key-value
// metadata. Reading goes through the writer schema stored in the file and matches fields by
// field id (then by name), so files of other writers (Java Iceberg, with its extra or missing
// optional fields and v1 names) read too. Pure; any thread.
#pragma once

#include <skiff/avro/container.hpp>
#include <skiff/avro/errc.hpp>
#include <skiff/avro/value.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::iceberg {

// One field of a partition spec. `result_type` is the Iceberg type of the transform's result,
// which decides the Avro type of the value in data_file.partition: "int", "long", "string",
// "date" (int days, e.g. day(timestamp)), "boolean", "binary".
struct partition_field {
    std::string name;         // e.g. "timestamp_day"
    std::int32_t field_id = 0; // 1000, 1001, ...
    std::int32_t source_id = 0;
    std::string transform;    // "day", "identity", "hour", "bucket[16]" ...
    std::string result_type = "int";
};

struct partition_spec {
    std::int32_t spec_id = 0;
    std::vector<partition_field> fields; // empty: unpartitioned
};

// The spec's "fields" array, [{"name","transform","source-id","field-id"}, ...].
std::string partition_spec_fields_json(const partition_spec& spec);

enum class file_content : std::int32_t { data = 0, position_deletes = 1, equality_deletes = 2 };

using column_counts = std::vector<std::pair<std::int32_t, std::int64_t>>;     // field id -> count
using column_bounds = std::vector<std::pair<std::int32_t, avro::bytes>>;      // field id -> bound

struct data_file {
    file_content content = file_content::data;
    std::string file_path;
    std::string file_format = "PARQUET";
    // One value per partition spec field, in spec order: null, int32 (int, date), int64,
    // string, bytes or bool.
    std::vector<avro::value> partition;
    std::int64_t record_count = 0;
    std::int64_t file_size_in_bytes = 0;
    // Metrics; an empty list is written as null (not collected).
    column_counts column_sizes;
    column_counts value_counts;
    column_counts null_value_counts;
    column_counts nan_value_counts;
    column_bounds lower_bounds; // single-value serialization of the spec's Appendix D
    column_bounds upper_bounds;
    std::optional<avro::bytes> key_metadata;
    std::optional<std::vector<std::int64_t>> split_offsets;
    std::optional<std::vector<std::int32_t>> equality_ids;
    std::optional<std::int32_t> sort_order_id;
};

enum class entry_status : std::int32_t { existing = 0, added = 1, deleted = 2 };

struct manifest_entry {
    entry_status status = entry_status::added;
    std::optional<std::int64_t> snapshot_id; // null: inherited from the manifest list
    std::optional<std::int64_t> sequence_number;
    std::optional<std::int64_t> file_sequence_number;
    data_file file;
};

// What a manifest's key-value metadata says.
struct manifest_info {
    std::string schema_json;   // the table schema, as in table metadata
    std::int32_t schema_id = 0;
    partition_spec spec;
    std::string content = "data"; // "data" or "deletes"
};

struct write_options {
    write_options() {}
    avro::codec codec = avro::codec::deflate;
    std::optional<avro::sync_marker> sync; // random when unset
};

// The whole manifest file. errc::type_mismatch when a partition value does not fit its spec
// field's type or an entry's partition has the wrong number of values.
avro::result<std::string> write_manifest(const manifest_info& info, std::span<const manifest_entry> entries,
                                         const write_options& options = {});

struct manifest {
    manifest_info info;
    std::vector<manifest_entry> entries;
    avro::metadata metadata; // every header key
};

// errc::corrupt (and the other avro errors) for a file that is not a manifest of this spec.
avro::result<manifest> read_manifest(std::string_view file);

struct field_summary {
    bool contains_null = false;
    std::optional<bool> contains_nan;
    std::optional<avro::bytes> lower_bound;
    std::optional<avro::bytes> upper_bound;
};

struct manifest_file {
    std::string manifest_path;
    std::int64_t manifest_length = 0;
    std::int32_t partition_spec_id = 0;
    std::int32_t content = 0; // 0 data, 1 deletes
    std::int64_t sequence_number = 0;
    std::int64_t min_sequence_number = 0;
    std::int64_t added_snapshot_id = 0;
    std::int32_t added_files_count = 0;
    std::int32_t existing_files_count = 0;
    std::int32_t deleted_files_count = 0;
    std::int64_t added_rows_count = 0;
    std::int64_t existing_rows_count = 0;
    std::int64_t deleted_rows_count = 0;
    std::optional<std::vector<field_summary>> partitions; // one per spec field
    std::optional<avro::bytes> key_metadata;
};

struct manifest_list_info {
    std::int64_t snapshot_id = 0;
    std::optional<std::int64_t> parent_snapshot_id; // absent for a table's first snapshot
    std::int64_t sequence_number = 0;
};

avro::result<std::string> write_manifest_list(const manifest_list_info& info, std::span<const manifest_file> manifests,
                                              const write_options& options = {});

struct manifest_list {
    manifest_list_info info;
    std::vector<manifest_file> manifests;
    avro::metadata metadata;
};

avro::result<manifest_list> read_manifest_list(std::string_view file);

} // namespace skiff::iceberg
