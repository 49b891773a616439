// Error codes of the storage module (object stores, formats read back, the partition log), and
// store_error: a code plus one sentence for the operator. Any core or thread.
#pragma once

#include <string>
#include <system_error>
#include <utility>

namespace skiff::storage {

enum class errc {
    not_found = 1,       // no object under that key
    precondition_failed, // put with if_absent on an existing key
    transient,           // may succeed if tried again (S3 5xx, SlowDown, timeouts, resets)
    permanent,           // will not succeed by retrying (access denied, bad key, EIO on a local disk)
    corrupt,             // data read back is malformed (formats, footers, CRCs)
    cancelled,           // stop_token fired
    deadline_exceeded,
    invalid_argument,    // bad key, bad range
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

struct store_error {
    store_error() = default;
    store_error(errc c, std::string m, bool throttle = false) : code(c), message(std::move(m)), throttled(throttle) {}
    errc code = errc::permanent;
    std::string message;    // one sentence, no secrets
    // transient, and the backend asked to slow down (object_store.hpp, "Throttling")
    bool throttled = false;
};

} // namespace skiff::storage

template <>
struct std::is_error_code_enum<skiff::storage::errc> : std::true_type {};
