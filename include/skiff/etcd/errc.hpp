// Error codes of the etcd module, and `error`: a code plus one sentence for the operator.
#pragma once

#include <string>
#include <system_error>
#include <utility>

namespace skiff::etcd {

enum class errc {
    unavailable = 1, // no endpoint answered (connection refused, reset, 5xx, etcd has no leader)
    timeout,         // the request's deadline passed
    cancelled,       // the caller's stop_token fired
    bad_response,    // an answer that is not the JSON etcd sends (or a field out of range)
    lease_not_found, // keep-alive or put on a lease that expired or was revoked
    compacted,       // a watch's start revision was compacted away
    invalid_argument,// etcd refused the request as malformed (4xx other than the above)
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

struct error {
    error() = default;
    error(errc c, std::string m) : code(c), message(std::move(m)) {}
    errc code = errc::unavailable;
    std::string message; // one sentence, no secrets
    // True for the errors a caller may retry after a pause (unavailable, timeout).
    bool retriable() const noexcept { return code == errc::unavailable || code == errc::timeout; }
};

} // namespace skiff::etcd

template <>
struct std::is_error_code_enum<skiff::etcd::errc> : std::true_type {};
