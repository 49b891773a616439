// Error codes of the reader module (reading topics straight from the bucket), and
// reader_error: a code plus one sentence for the operator. Any core or thread.
#pragma once

#include <string>
#include <system_error>
#include <utility>

namespace skiff::reader {

enum class errc {
    store_failed = 1, // a LIST or GET failed after the store's retries
    corrupt,          // a segment or batch does not decode, or its CRC is wrong
    too_large,        // a segment or decompressed batch beyond the configured bound
    cancelled,        // stop_token fired
    invalid_argument, // bad bounds, bad topic name
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

struct reader_error {
    reader_error() = default;
    reader_error(errc c, std::string m) : code(c), message(std::move(m)) {}
    errc code = errc::corrupt;
    std::string message; // one sentence, no secrets
};

} // namespace skiff::reader

template <>
struct std::is_error_code_enum<skiff::reader::errc> : std::true_type {};
