// ASCII case-insensitive comparison, for protocol tokens (HTTP header names, S3 header names,
// Kafka group states): locale-independent on purpose.
#pragma once

#include <string>
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

inline std::string ascii_lowercase(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = ascii_lower(c);
    return out;
}

// Whether `needle` occurs in `hay`, ignoring ASCII case (an empty needle always does).
constexpr bool icontains(std::string_view hay, std::string_view needle) noexcept {
    if (needle.size() > hay.size()) return false;
    for (std::size_t i = 0; i + needle.size() <= hay.size(); ++i) {
        if (iequals(hay.substr(i, needle.size()), needle)) return true;
    }
    return false;
}

} // namespace skiff
