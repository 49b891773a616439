// Kafka's variable-length integers: unsigned LEB128 (7 bits a byte, low group first, high bit
// = more follows), and the zig-zag signed forms (varint <= 5 bytes, varlong <= 10 bytes) used
// by the record format and the flexible protocol versions. Input is untrusted: a read never
// goes past the span and rejects encodings that do not fit. Pure; any core or thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace skiff::varint {

constexpr std::size_t max_bytes32 = 5;
constexpr std::size_t max_bytes64 = 10;

constexpr std::uint32_t zigzag_encode(std::int32_t v) noexcept {
    // Arithmetic right shift of a negative value is defined in C++20.
    return (static_cast<std::uint32_t>(v) << 1) ^ static_cast<std::uint32_t>(v >> 31);
}
constexpr std::uint64_t zigzag_encode(std::int64_t v) noexcept {
    return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
constexpr std::int32_t zigzag_decode(std::uint32_t z) noexcept {
    return static_cast<std::int32_t>((z >> 1) ^ (~(z & 1) + 1));
}
constexpr std::int64_t zigzag_decode(std::uint64_t z) noexcept {
    return static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

// Writes the unsigned LEB128 form of v into buf (room for max_bytes64) and returns its length.
std::size_t encode_unsigned(char* buf, std::uint64_t v) noexcept;
void append_unsigned(std::string& out, std::uint64_t v);
// Zig-zag varint (<= 5 bytes) / varlong (<= 10 bytes).
void append_varint(std::string& out, std::int32_t v);
void append_varlong(std::string& out, std::int64_t v);

// Why a read failed, for decoders that report it.
enum class read_status : std::uint8_t {
    ok,
    truncated, // the bytes end before the last byte of the value
    overflow,  // the value does not fit 32 / 64 bits (or the encoding is longer than 5 / 10 bytes)
};

// Reads one unsigned value at in[pos]. On ok, sets out and moves pos past it; otherwise out
// is untouched and pos points at the byte where reading stopped.
read_status read_unsigned32(std::span<const char> in, std::size_t& pos, std::uint32_t& out) noexcept;
read_status read_unsigned64(std::span<const char> in, std::size_t& pos, std::uint64_t& out) noexcept;

// The zig-zag forms; nullopt (pos unspecified) on any failure above.
std::optional<std::int32_t> read_varint(std::span<const char> in, std::size_t& pos) noexcept;
std::optional<std::int64_t> read_varlong(std::span<const char> in, std::size_t& pos) noexcept;

} // namespace skiff::varint
