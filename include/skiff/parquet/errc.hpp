// Error codes of the parquet module (the in-tree Parquet writer and its footer reader), and
// parquet_error: a code plus one sentence saying what was wrong. Pure; any core or thread.
#pragma once

#include <string>
#include <system_error>
#include <utility>

namespace skiff::parquet {

enum class errc {
    invalid_schema = 1, // a schema that Parquet cannot express (empty group, bad list shape, ...)
    column_mismatch,    // the columns given do not match the schema's leaves (count, kind, rows)
    level_out_of_range, // a definition or repetition level above the leaf's maximum, or inconsistent
    value_mismatch,     // the number or shape of values disagrees with the levels
    corrupt,            // bytes that do not decode (Thrift, footer, magic)
    compression_failed, // the codec library reported an error
    invalid_state,      // a call the writer's state does not allow (write after finish)
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

struct parquet_error {
    parquet_error() = default;
    parquet_error(errc c, std::string m) : code(c), message(std::move(m)) {}
    errc code = errc::corrupt;
    std::string message; // one sentence naming the column or field at fault
};

} // namespace skiff::parquet

template <>
struct std::is_error_code_enum<skiff::parquet::errc> : std::true_type {};
