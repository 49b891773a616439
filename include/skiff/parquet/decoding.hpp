// Decoding Parquet's RLE / bit-packing hybrid (Encodings.md), the inverse of encoding.hpp:
// levels and dictionary indices. Public so hostile runs can be tested directly; the file
// reader is the other user. Untrusted input; never reads past `in`. Pure; any core or thread.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/errc.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace skiff::parquet {

// Appends exactly n values (0 <= bit_width <= 32) decoded from the runs at the start of `in`
// (no length prefix) to `out`, and returns the bytes the runs took. A bit-packed run may end
// in padding past the n-th value; runs left after the n-th value are not read.
// Errors: errc::corrupt (runs end before n values, a run beyond `in`, a bad run header),
// errc::level_out_of_range (a value above max_value). On error `out` has its old size.
result<std::size_t, parquet_error> rle_hybrid_decode(std::string_view in, int bit_width, std::size_t n,
                                                     std::uint32_t max_value, std::vector<std::uint8_t>& out);
result<std::size_t, parquet_error> rle_hybrid_decode(std::string_view in, int bit_width, std::size_t n,
                                                     std::uint32_t max_value, std::vector<std::uint32_t>& out);

} // namespace skiff::parquet
