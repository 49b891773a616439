// Internal to the parquet module: checking and encoding one column chunk.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/column.hpp>
#include <skiff/parquet/errc.hpp>
#include <skiff/parquet/schema.hpp>
#include <skiff/parquet/writer.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct ZSTD_CCtx_s;

namespace skiff::parquet::detail {

// Encoding ids of parquet.thrift.
constexpr std::int32_t enc_plain = 0;
constexpr std::int32_t enc_rle = 3;
constexpr std::int32_t enc_rle_dictionary = 8;

struct chunk_stats {
    std::optional<std::string> min; // PLAIN bytes without length prefix
    std::optional<std::string> max;
    std::int64_t null_count = 0;
    std::int64_t nan_count = 0;
};

struct chunk_meta {
    std::int64_t start = 0; // first byte of the chunk (dictionary page, else first data page)
    std::int64_t num_values = 0;
    std::int64_t total_uncompressed = 0;
    std::int64_t total_compressed = 0;
    std::int64_t data_page_offset = 0;
    std::optional<std::int64_t> dictionary_page_offset;
    bool has_levels = false;
    bool dictionary = false;
    chunk_stats stats;
};

// Reused buffers, so encoding allocates only while they grow.
struct scratch {
    scratch();
    ~scratch();
    scratch(const scratch&) = delete;
    scratch& operator=(const scratch&) = delete;
    std::string page;
    std::string compressed;
    std::string header;
    std::string dict_page;
    std::vector<std::uint32_t> indices;
    std::vector<std::uint32_t> slots;
    std::vector<std::uint64_t> dict_keys;
    std::vector<std::string_view> dict_views;
    ZSTD_CCtx_s* cctx = nullptr;
};

// Checks one column against its leaf and returns its row count.
result<std::int64_t, parquet_error> validate(const leaf& l, const column_data& c);

// Appends the chunk's pages to out (starting at out.size()). The column was validated.
result<chunk_meta, parquet_error> write_chunk(const leaf& l, const column_data& c, const writer_options& o,
                                              scratch& s, std::string& out);

// Orders two PLAIN-encoded statistics values of a leaf's type (<0, 0, >0).
int compare_plain(physical_type t, std::string_view a, std::string_view b) noexcept;

} // namespace skiff::parquet::detail
