// Internal to the parquet module: decoding one column chunk's pages into column_data.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/column.hpp>
#include <skiff/parquet/errc.hpp>
#include <skiff/parquet/footer.hpp>
#include <skiff/parquet/reader.hpp>
#include <skiff/parquet/schema.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct ZSTD_DCtx_s;

namespace skiff::parquet::detail {

// Reused buffers, so reading allocates only while they grow (never per value).
struct read_scratch {
    read_scratch();
    ~read_scratch();
    read_scratch(const read_scratch&) = delete;
    read_scratch& operator=(const read_scratch&) = delete;
    std::string page;                   // a decompressed page
    std::string dict;                   // the chunk's dictionary, PLAIN values
    std::vector<std::size_t> dict_ends; // byte_array dictionary: end of entry k in dict
    std::size_t dict_count = 0;
    std::vector<std::uint32_t> indices;
    ZSTD_DCtx_s* dctx = nullptr;
};

// Decodes the chunk c (of a row group of `rows` rows) of `file` into out, which is cleared and
// given the leaf's maxima first.
result<void, parquet_error> read_chunk(std::string_view file, const leaf& l, const column_chunk_info& c,
                                       std::int64_t rows, const reader_options& o, read_scratch& s,
                                       column_data& out);

} // namespace skiff::parquet::detail
