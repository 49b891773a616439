// Hexadecimal digits, one definition for every reader and writer of hex text (percent
// escapes, topic ids in the catalog, digests, trace ids). Whether letters may be upper case
// is the caller's choice: formats written by skiff in one case are read back strictly, so a
// hand-edited or foreign object is noticed rather than silently accepted. Pure; any core.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace skiff {

// Which letters a hex digit may use.
enum class hex_case : std::uint8_t { either, lower, upper };

// The value of one hex digit, or -1 when c is not one in the accepted case.
constexpr int hex_digit_value(char c, hex_case accept = hex_case::either) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f' && accept != hex_case::upper) return c - 'a' + 10;
    if (c >= 'A' && c <= 'F' && accept != hex_case::lower) return c - 'A' + 10;
    return -1;
}

// The digit for v (0..15) in `letters` case; hex_case::either writes lower case.
constexpr char hex_digit(unsigned v, hex_case letters = hex_case::lower) noexcept {
    return static_cast<char>(v < 10 ? '0' + v : (letters == hex_case::upper ? 'A' : 'a') + (v - 10));
}

// Appends the two digits of one byte, high nibble first.
inline void append_hex(std::string& out, std::uint8_t b, hex_case letters = hex_case::lower) {
    out.push_back(hex_digit(b >> 4u, letters));
    out.push_back(hex_digit(b & 0xfu, letters));
}

// Two digits per byte, in order (digests, ids).
inline std::string hex_encode(std::span<const std::uint8_t> bytes, hex_case letters = hex_case::lower) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (std::uint8_t b : bytes) append_hex(out, b, letters);
    return out;
}

} // namespace skiff
