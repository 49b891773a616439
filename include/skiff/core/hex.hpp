// Hexadecimal digits, one definition for every reader and writer of hex text (percent
// escapes, topic ids in the catalog, digests, trace ids). Whether letters may be upper case
// is the caller's choice: formats written by skiff in one case are read back strictly, so a
// hand-edited or foreign object is noticed rather than silently accepted. Pure; any core.
#pragma once

#include <cstdint>

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

} // namespace skiff
