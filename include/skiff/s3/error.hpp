// The S3 client's error taxonomy. Every failure is classified once, at the client boundary,
// into one of these classes; callers above (retry loop, storage engine, CLI) branch on the
// class, never on raw HTTP statuses or curl codes.
#pragma once

#include <string>
#include <system_error>

namespace skiff::s3 {

enum class errc {
    retryable = 1,       // 5xx, SlowDown, RequestTimeout, empty 5xx body, reset, refused, timeouts
    not_found,           // 404 NoSuchKey / NoSuchBucket
    precondition_failed, // 412 (If-None-Match: * on an existing key), 409 ConditionalRequestConflict
    access_denied,       // 403 AccessDenied, InvalidAccessKeyId, RequestTimeTooSkewed, ...
    signature_mismatch,  // 403 SignatureDoesNotMatch, 400 XAmzContentSHA256Mismatch
    invalid_request,     // other 4xx: the request itself is wrong; retrying will not help
    cancelled,           // the caller's stop_token fired; never reported as success
    deadline_exceeded,   // the operation's overall deadline passed (after retries)
    bad_response,        // the server answered something we cannot parse
    config,              // bad endpoint, missing credentials, bad URL
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

// A classified failure. `message` is a plain sentence for operators; it never contains
// credentials or signatures.
struct error {
    errc code{};
    int http_status = 0;       // 0 when no HTTP response arrived
    std::string s3_code;       // e.g. "SlowDown", "NoSuchKey"; empty when none
    std::string message;       // human-readable cause
    int attempts = 1;          // how many requests were sent for this operation

    bool retryable() const noexcept { return code == errc::retryable; }
};

} // namespace skiff::s3

template <>
struct std::is_error_code_enum<skiff::s3::errc> : std::true_type {};
