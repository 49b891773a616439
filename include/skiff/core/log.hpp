// Minimal leveled logging to stderr, prefixed with the core. Log lines never carry secrets:
// callers pass credentials only through s3::redact helpers.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace skiff::log {

enum class level { trace = 0, debug, info, warn, error, off };

level current_level() noexcept;
void set_level(level l) noexcept;
// Accepts trace|debug|info|warn|error|off; false on anything else.
bool set_level(std::string_view name) noexcept;
void write(level l, std::string_view msg) noexcept;

template <typename... Args>
void emit(level l, fmt::format_string<Args...> f, Args&&... args) {
    if (l < current_level()) return;
    write(l, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... a) { emit(level::debug, f, std::forward<Args>(a)...); }
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... a) { emit(level::info, f, std::forward<Args>(a)...); }
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... a) { emit(level::warn, f, std::forward<Args>(a)...); }
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... a) { emit(level::error, f, std::forward<Args>(a)...); }

} // namespace skiff::log
