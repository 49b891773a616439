// Reading a Parquet file's footer (FileMetaData) back: what skiff needs to inspect files it
// wrote (tests, fsck-style checks, the sink's recovery): schema elements with field ids, row
// groups, column chunk metadata and statistics. Untrusted input; never reads past `file`.
// Pure; any core or thread.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/errc.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::parquet {

struct schema_element_info {
    std::string name;
    std::optional<std::int32_t> type;
    std::optional<std::int32_t> type_length;
    std::optional<std::int32_t> repetition;
    std::optional<std::int32_t> num_children;
    std::optional<std::int32_t> converted_type;
    std::optional<std::int32_t> field_id;
    std::optional<std::int16_t> logical_type; // the id of the LogicalType union's member
};

struct column_chunk_info {
    std::int64_t file_offset = 0;
    std::int32_t type = 0;
    std::vector<std::int32_t> encodings;
    std::vector<std::string> path;
    std::int32_t codec = 0;
    std::int64_t num_values = 0;
    std::int64_t total_uncompressed_size = 0;
    std::int64_t total_compressed_size = 0;
    std::int64_t data_page_offset = 0;
    std::optional<std::int64_t> dictionary_page_offset;
    std::optional<std::string> min_value;
    std::optional<std::string> max_value;
    std::optional<std::int64_t> null_count;
};

struct row_group_info {
    std::int64_t num_rows = 0;
    std::int64_t total_byte_size = 0;
    std::optional<std::int64_t> file_offset;
    std::vector<column_chunk_info> columns;
};

struct file_metadata {
    std::int32_t version = 0;
    std::int64_t num_rows = 0;
    std::vector<schema_element_info> schema;
    std::vector<row_group_info> row_groups;
    std::vector<std::pair<std::string, std::string>> key_value_metadata;
    std::string created_by;
    std::size_t column_orders = 0;
};

// Errors: errc::corrupt (no PAR1 at either end, footer length beyond the file, Thrift that
// does not decode, required fields missing).
result<file_metadata, parquet_error> read_footer(std::string_view file);

} // namespace skiff::parquet
