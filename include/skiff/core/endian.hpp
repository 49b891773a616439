// Big-endian (network order) integers in byte buffers: every wire and file format skiff reads
// (Kafka protocol, record batches, segment and index files) stores integers this way.
// The caller checks that the bytes are there; these only move them. Any core or thread.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

namespace skiff::be {

// The generic forms; the named ones below are what format code reads best with.
template <std::unsigned_integral T>
constexpr T read(const char* p) noexcept {
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>((v << 8) | static_cast<std::uint8_t>(p[i]));
    return v;
}
template <std::unsigned_integral T>
constexpr void write(char* p, T v) noexcept {
    for (std::size_t i = sizeof(T); i-- > 0;) {
        p[i] = static_cast<char>(v & 0xffu);
        v = static_cast<T>(v >> 8);
    }
}
template <std::unsigned_integral T>
void append(std::string& out, T v) {
    char b[sizeof(T)];
    write(b, v);
    out.append(b, sizeof(T));
}

constexpr std::uint8_t u8(const char* p) noexcept { return static_cast<std::uint8_t>(*p); }
constexpr std::uint16_t read_u16(const char* p) noexcept { return read<std::uint16_t>(p); }
constexpr std::uint32_t read_u32(const char* p) noexcept { return read<std::uint32_t>(p); }
constexpr std::uint64_t read_u64(const char* p) noexcept { return read<std::uint64_t>(p); }
// Two's complement conversions are well defined in C++20.
constexpr std::int8_t read_i8(const char* p) noexcept { return static_cast<std::int8_t>(u8(p)); }
constexpr std::int16_t read_i16(const char* p) noexcept { return static_cast<std::int16_t>(read_u16(p)); }
constexpr std::int32_t read_i32(const char* p) noexcept { return static_cast<std::int32_t>(read_u32(p)); }
constexpr std::int64_t read_i64(const char* p) noexcept { return static_cast<std::int64_t>(read_u64(p)); }

constexpr void write_u16(char* p, std::uint16_t v) noexcept { write(p, v); }
constexpr void write_u32(char* p, std::uint32_t v) noexcept { write(p, v); }
constexpr void write_u64(char* p, std::uint64_t v) noexcept { write(p, v); }
constexpr void write_i16(char* p, std::int16_t v) noexcept { write(p, static_cast<std::uint16_t>(v)); }
constexpr void write_i32(char* p, std::int32_t v) noexcept { write(p, static_cast<std::uint32_t>(v)); }
constexpr void write_i64(char* p, std::int64_t v) noexcept { write(p, static_cast<std::uint64_t>(v)); }

inline void append_u16(std::string& out, std::uint16_t v) { append(out, v); }
inline void append_u32(std::string& out, std::uint32_t v) { append(out, v); }
inline void append_u64(std::string& out, std::uint64_t v) { append(out, v); }
inline void append_i16(std::string& out, std::int16_t v) { append(out, static_cast<std::uint16_t>(v)); }
inline void append_i32(std::string& out, std::int32_t v) { append(out, static_cast<std::uint32_t>(v)); }
inline void append_i64(std::string& out, std::int64_t v) { append(out, static_cast<std::uint64_t>(v)); }

} // namespace skiff::be
