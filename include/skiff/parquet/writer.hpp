// The Parquet file writer: row groups of already-shredded columns in, one whole file out, in
// memory (the sink PUTs it). Data pages v1; PLAIN or RLE_DICTIONARY per column chunk (a
// dictionary when it makes the chunk smaller); levels RLE/bit-packed; UNCOMPRESSED or ZSTD
// pages; chunk statistics; field ids in the footer. Besides the bytes, finish() returns what
// an Iceberg data file entry needs (per-column sizes, counts and bounds, split offsets).
// Not thread-safe; one writer per file; any core. Pure CPU work, no I/O, no cancellation.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/column.hpp>
#include <skiff/parquet/errc.hpp>
#include <skiff/parquet/schema.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace skiff::parquet {

// Values are parquet.thrift's CompressionCodec.
enum class codec : std::uint8_t { uncompressed = 0, zstd = 6 };

struct writer_options {
    writer_options() {}
    codec compression = codec::zstd;
    int zstd_level = 3;
    // A data page is closed once its encoded size reaches this, at a row boundary.
    std::size_t page_size = 1 << 20;
    bool dictionary = true;
    // A chunk is dictionary-encoded only within these bounds and when that is smaller than PLAIN.
    std::size_t dictionary_max_entries = 1 << 16;
    std::size_t dictionary_max_bytes = 1 << 20;
    // BYTE_ARRAY min/max above this size are left out of the Parquet statistics (a footer is no
    // place for 1 MiB values); the Iceberg bounds of column_metrics are kept whole regardless.
    std::size_t max_statistics_bytes = 4096;
    std::vector<std::pair<std::string, std::string>> key_value_metadata;
    std::string created_by = "skiff version 0.1.0";
};

// One leaf column over the whole file, in Iceberg's terms.
struct column_metrics {
    std::optional<std::int32_t> field_id;
    std::string path;           // dotted
    std::int64_t on_disk_size = 0; // sum of the chunks' total_compressed_size (headers included)
    std::int64_t value_count = 0;  // level entries at this leaf, nulls (and empty lists) included
    std::int64_t null_count = 0;   // entries with no value (def < max_def)
    std::int64_t nan_count = 0;    // doubles only
    // Iceberg single-value serialization (= Parquet PLAIN without length prefix): int/date 4 bytes
    // LE, long/timestamp 8 bytes LE, double 8 bytes LE IEEE (NaN excluded; -0.0 as the lower and
    // +0.0 as the upper zero), boolean 1 byte, string/binary raw bytes compared unsigned.
    // Never truncated here: Iceberg allows truncating string/binary bounds (with the upper
    // rounded up), which is the sink's choice. nullopt when the column holds no value.
    std::optional<std::string> lower_bound;
    std::optional<std::string> upper_bound;
};

struct file_result {
    std::string bytes;
    std::int64_t row_count = 0;
    std::vector<column_metrics> columns;     // schema leaf order
    std::vector<std::int64_t> split_offsets; // start of each row group
    std::int64_t file_size() const noexcept { return static_cast<std::int64_t>(bytes.size()); }
};

class file_writer {
public:
    explicit file_writer(schema s, writer_options o = writer_options());
    ~file_writer();
    file_writer(file_writer&&) noexcept;
    file_writer& operator=(file_writer&&) noexcept;

    // Encodes one row group; the columns (one per leaf, schema order) may be reused afterwards.
    // Errors, each naming the column, leave the file as it was: errc::column_mismatch (count,
    // levels kept for a leaf whose maximum differs, different row counts), errc::level_out_of_range
    // (a level above its maximum, a first repetition level not 0, a repetition below a missing
    // list), errc::value_mismatch (values vs levels, wrong value vector, bad byte offsets,
    // fixed length), errc::compression_failed, errc::invalid_state (after finish).
    result<void, parquet_error> write_row_group(std::span<const column_data> columns);

    // Bytes so far (without the footer): for rolling files by size.
    std::size_t bytes_written() const noexcept;
    std::int64_t rows_written() const noexcept;

    // Writes the footer and hands the file over; the writer is finished afterwards.
    result<file_result, parquet_error> finish();

    struct impl;

private:
    std::unique_ptr<impl> _impl;
};

} // namespace skiff::parquet
