// Records to Parquet data files for a topic's table: the Parquet schema of the table's Iceberg
// schema (field ids on every column), rows shredded into reusable column buffers, row groups
// closed by bytes, one file per partition value (day or Kafka partition), and each file's
// Iceberg entry (partition value, counts, bounds, sizes). Pure CPU work; one core.
#pragma once

#include "projector.hpp"

#include <skiff/iceberg/errc.hpp>
#include <skiff/iceberg/manifest.hpp>
#include <skiff/iceberg/schema.hpp>
#include <skiff/parquet/writer.hpp>
#include <skiff/reader/segment_reader.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace skiff::iceberg {

struct data_file_options {
    data_file_options() {}
    std::size_t row_group_bytes = 32u << 20; // shredded bytes per row group
    bool zstd = true;
};

// One finished file: its bytes and its manifest entry (file_path left for the caller).
struct built_file {
    std::string bytes;
    data_file entry;
    std::int32_t partition_value = 0; // the day or the Kafka partition; 0 when unpartitioned
};

class data_file_builder {
public:
    // `schema`: the table's current Iceberg schema (fixed columns + projections, schema.hpp);
    // `projections`: those of its columns to fill (by name; others stay null).
    static result<data_file_builder, iceberg_error> make(const nlohmann::json& schema, partitioning p,
                                                         std::vector<projection> projections, data_file_options o = {});
    data_file_builder(data_file_builder&&) noexcept;
    data_file_builder& operator=(data_file_builder&&) noexcept;
    ~data_file_builder();

    // Adds one record. Errors only for a bug-level mismatch (the Parquet writer's sentence).
    result<void, iceberg_error> add(const reader::record_row& r);
    // Bytes added (keys, values, headers and the fixed columns) since the last take_files().
    std::size_t pending_bytes() const noexcept;
    std::uint64_t dead_letters() const noexcept;
    // Closes every open file and returns them (the builder is empty afterwards).
    result<std::vector<built_file>, iceberg_error> take_files();

    // The Iceberg partition spec the manifests describe.
    const partition_spec& spec() const noexcept;

    struct impl;

private:
    explicit data_file_builder(std::unique_ptr<impl> i);
    std::unique_ptr<impl> _impl;
};

// The manifest entry (data_file, file_path left empty) of a finished Parquet file of `schema`:
// counts, sizes and bounds by field id (byte-string bounds longer than 16 bytes keep a cut
// lower bound and no upper bound; none for fields inside lists).
data_file describe_file(const parquet::schema& schema, const parquet::file_result& fin, std::vector<avro::value> partition);

// Parquet schema for an Iceberg schema made by schema.hpp (primitive columns of the types
// projections use, and the headers list). errc::invalid_metadata for anything else.
result<parquet::schema, iceberg_error> parquet_schema_of(const nlohmann::json& iceberg_schema);

} // namespace skiff::iceberg
