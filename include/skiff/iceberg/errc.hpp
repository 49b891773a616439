// Error codes of the iceberg module (tables written from topics), and iceberg_error: a code
// plus one sentence for the operator. Any core or thread.
#pragma once

#include <string>
#include <system_error>
#include <utility>

namespace skiff::iceberg {

enum class errc {
    store_failed = 1, // a request to the object store failed after its retries
    not_found,        // no table (no metadata file) under the location
    conflict,         // another writer committed the version this commit wanted
    invalid_metadata, // a metadata file, manifest or data file does not parse or breaks the spec
    invalid_argument, // bad configuration or call
    cancelled,        // stop_token fired
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

struct iceberg_error {
    iceberg_error() = default;
    iceberg_error(errc c, std::string m) : code(c), message(std::move(m)) {}
    errc code = errc::invalid_metadata;
    std::string message; // one sentence, no secrets
};

} // namespace skiff::iceberg

template <>
struct std::is_error_code_enum<skiff::iceberg::errc> : std::true_type {};
