// Reading back the Parquet files skiff's writer makes (Iceberg maintenance rewrites small data
// files into larger ones): the schema rebuilt from the footer, and whole row groups decoded into
// column_data exactly as the writer took them, so they can be written again unchanged.
// Reads data pages v1 and v2, PLAIN and dictionary (PLAIN_DICTIONARY / RLE_DICTIONARY)
// values, RLE/bit-packed levels; UNCOMPRESSED, ZSTD, SNAPPY and GZIP pages.
// Untrusted input: never reads past the file; allocations are bounded by reader_options.
// The file's bytes are not copied: they must outlive the reader. Not thread-safe (one reader
// per thread); any core. Pure CPU work, no I/O, no cancellation.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/column.hpp>
#include <skiff/parquet/errc.hpp>
#include <skiff/parquet/footer.hpp>
#include <skiff/parquet/schema.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::parquet {

struct reader_options {
    reader_options() {}
    // A page whose uncompressed size is above this is refused (the writer's pages are ~1 MiB;
    // a single huge value makes a page as big as the value).
    std::size_t max_page_bytes = std::size_t{256} << 20;
    // Level entries in one page: RLE lets a few bytes claim billions of them.
    std::size_t max_page_values = std::size_t{64} << 20;
    // Level entries in one column chunk: bounds the levels and values of many small pages.
    std::size_t max_chunk_values = std::size_t{1} << 28;
    // Decoded byte-array bytes of one column chunk: dictionary indices can repeat a large entry.
    std::size_t max_chunk_bytes = std::size_t{1} << 30;
};

struct row_group_summary {
    std::int64_t num_rows = 0;
    std::int64_t total_byte_size = 0; // uncompressed, as the footer says
};

class file_reader {
public:
    // Parses the footer and rebuilds the schema. Errors: errc::corrupt (magic, footer length,
    // Thrift, a column chunk whose type or path does not match its leaf), errc::invalid_schema
    // (schema elements Parquet or skiff's schema cannot express, e.g. INT96 or FLOAT).
    static result<file_reader, parquet_error> open(std::string_view file_bytes, reader_options o = reader_options());

    file_reader(file_reader&&) noexcept;
    file_reader& operator=(file_reader&&) noexcept;
    ~file_reader();

    const parquet::schema& schema() const noexcept;
    std::int64_t num_rows() const noexcept;
    const std::vector<row_group_summary>& row_groups() const noexcept;
    const std::vector<std::pair<std::string, std::string>>& key_value_metadata() const noexcept;
    const file_metadata& metadata() const noexcept;

    // Decodes every column chunk of row group i into out (resized to one per leaf, schema
    // order; the buffers' capacity is reused). Errors, naming the column: errc::corrupt (pages
    // that do not decode, sizes beyond the chunk or the limits, dictionary indices out of range,
    // value counts that disagree), errc::level_out_of_range (a level above the leaf's maximum),
    // errc::compression_failed (codec errors, unsupported codecs), errc::invalid_state (i out
    // of range). On error the contents of out are unspecified.
    result<void, parquet_error> read_row_group(std::size_t i, std::vector<column_data>& out);

    struct impl;

private:
    explicit file_reader(std::unique_ptr<impl> p) noexcept;
    std::unique_ptr<impl> _impl;
};

} // namespace skiff::parquet
