// ASCII case-insensitive comparison, for protocol tokens (HTTP header names, S3 header names,
// Kafka group states): locale-independent on purpose.
#pragma once

#include <string_view>

namespace skiff {

constexpr char ascii_lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    }
    return true;
}

} // namespace skiff
