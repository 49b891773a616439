// The S3 client's error classes. Every failure is classified once, at the client boundary
// (classify.hpp), into one of these; callers above (retry loop, storage engine, CLI) branch on
// the class, never on raw HTTP statuses or curl codes. Category name "skiff.s3".
#pragma once

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
// The class's name as in metrics labels ("retryable", "not_found", ...); "unknown" otherwise.
const char* to_string(errc e) noexcept;

} // namespace skiff::s3

template <>
struct std::is_error_code_enum<skiff::s3::errc> : std::true_type {};
