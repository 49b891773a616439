// How `skiff consume` prints a record: one JSON object per line (--json), or the value, preceded
// by the key and a separator with -K, as kcat prints them. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::cli {

struct consumed_record {
    consumed_record() = default;
    std::string topic;
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int64_t timestamp = 0;
    bool log_append_time = false;
    std::optional<std::string> key;
    std::optional<std::string> value;
    std::vector<std::pair<std::string, std::optional<std::string>>> headers;
};

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool valid_utf8(std::string_view s) noexcept;

// {"topic","partition","offset","timestamp","timestamp_type","key","value","headers":[{"key",
// "value"}]} on one line, no newline. Keys and values are JSON strings, null for null; bytes
// that are not UTF-8 cannot be a JSON string, so such a key or value is given base64-encoded
// under "key_base64" / "value_base64" instead (and a header's as "value_base64").
std::string to_json_line(const consumed_record& r);

// The default text form: [key + key_separator] + value (a null prints as empty).
std::string to_text(const consumed_record& r, std::optional<std::string_view> key_separator);

} // namespace skiff::cli
