// Helpers shared by the avro unit tests: hex <-> bytes.
#pragma once

#include <skiff/core/hex.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace avro_test {

inline std::string unhex(std::string_view h) {
    std::string out;
    for (std::size_t i = 0; i + 1 < h.size(); i += 2)
        out.push_back(static_cast<char>(skiff::hex_digit_value(h[i]) * 16 + skiff::hex_digit_value(h[i + 1])));
    return out;
}

inline std::string hex(std::string_view s) {
    return skiff::hex_encode(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
}

} // namespace avro_test
