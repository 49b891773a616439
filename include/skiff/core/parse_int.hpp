// Strict parsing of unsigned decimal numbers from protocol text (headers, XML, flags): the
// whole input must be digits, no sign, no space, no overflow. Pure; any core or thread.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string_view>

namespace skiff {

// nullopt on an empty input, any non-digit (including a sign or surrounding space), or a value
// beyond T. Callers that accept surrounding whitespace trim it first.
template <std::unsigned_integral T>
std::optional<T> parse_unsigned(std::string_view s) noexcept {
    T v{};
    if (s.empty()) return std::nullopt;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
    return v;
}

inline std::optional<std::uint64_t> parse_u64(std::string_view s) noexcept {
    return parse_unsigned<std::uint64_t>(s);
}

} // namespace skiff
