// CRC-32C (Castagnoli), the checksum of Kafka record batches, of .kfs segment bodies and of
// S3's x-amz-checksum-crc32c. Uses the SSE4.2 crc32 instruction when the CPU has it and a
// slicing-by-8 table otherwise. Check value: crc32c("123456789") == 0xE3069283.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace skiff {

// Continues a running CRC: crc32c(b, crc32c(a)) == crc32c(a + b). Start with 0.
std::uint32_t crc32c(const void* data, std::size_t len, std::uint32_t crc = 0) noexcept;

inline std::uint32_t crc32c(std::string_view s, std::uint32_t crc = 0) noexcept {
    return crc32c(s.data(), s.size(), crc);
}

// The CRC of a + b from crc32c(a), crc32c(b) and b's length, without reading b: O(log len_b).
std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::size_t len_b) noexcept;

// The portable path alone, so tests can compare it with the hardware path.
std::uint32_t crc32c_portable(const void* data, std::size_t len, std::uint32_t crc = 0) noexcept;

} // namespace skiff
