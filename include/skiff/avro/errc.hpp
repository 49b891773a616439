// Error codes of the avro module (Avro binary encoding, object container files), and
// avro::error: a code plus one sentence saying where the input went wrong. Pure; any thread.
#pragma once

#include <skiff/core/result.hpp>

#include <string>
#include <system_error>
#include <utility>

namespace skiff::avro {

enum class errc {
    invalid_schema = 1, // the schema JSON is not a schema this module understands
    corrupt,            // the bytes do not decode (bad magic, sync, varint, union index ...)
    truncated,          // the bytes end inside a value
    too_large,          // a length, count or block beyond the input or the configured bound
    unsupported,        // a codec or schema feature this module does not implement
    type_mismatch,      // a value given to the encoder does not fit its schema
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

struct error {
    error() = default;
    error(errc c, std::string m) : code(c), message(std::move(m)) {}
    errc code = errc::corrupt;
    std::string message; // one sentence for the operator
};

template <typename T>
using result = skiff::result<T, error>;

inline failure<error> fail(errc c, std::string message) { return failure{error{c, std::move(message)}}; }

} // namespace skiff::avro

template <>
struct std::is_error_code_enum<skiff::avro::errc> : std::true_type {};
