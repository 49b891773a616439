// Parquet's RLE / bit-packing hybrid (Encodings.md, "Run Length Encoding / Bit-Packing Hybrid"),
// used for definition and repetition levels and for dictionary indices. Public so the golden
// bytes can be tested; the writer is the only other user. Pure; any core or thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace skiff::parquet {

// Bits needed for values 0..max_value (0 for max_value 0).
int bit_width(std::uint32_t max_value) noexcept;

// Appends the hybrid runs (no length prefix) for `values`, each below 2^bit_width
// (1 <= bit_width <= 32). A run of 8 or more equal values becomes an RLE run; the rest go into
// bit-packed runs of groups of 8 values, LSB first; only the last group is padded (with zeros).
void rle_hybrid_append(std::string& out, std::span<const std::uint8_t> values, int bit_width);
void rle_hybrid_append(std::string& out, std::span<const std::uint32_t> values, int bit_width);

// Data page v1 levels: a 4-byte little-endian length, then the hybrid runs.
void append_levels_v1(std::string& out, std::span<const std::uint8_t> levels, int bit_width);

} // namespace skiff::parquet
