// Small text helpers of the sql module: UTF-8 checks, JSON strings, Postgres text output.
// Any thread.
#pragma once

#include <string>
#include <string_view>

namespace skiff::sql {

bool valid_utf8(std::string_view s) noexcept;
// Appends `s` as a JSON string (quotes included); bytes of invalid UTF-8 become \u00XX.
void append_json_string(std::string& out, std::string_view s);
// Postgres bytea hex output: "\x" then two lower-case hex digits per byte.
std::string bytea_hex(std::string_view s);
// float8 text output: shortest round-trip digits, "Infinity", "-Infinity", "NaN".
std::string float8_text(double d);

} // namespace skiff::sql
