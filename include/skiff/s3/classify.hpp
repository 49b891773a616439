// Classification of failed S3 requests at the client boundary: every failure becomes one
// s3::error (see error.hpp) carrying its class, the HTTP status and S3 code when there were
// any, and one plain sentence naming the cause. The retry loop branches on error::code only.
//
// Pure functions, no I/O; callable from any thread. Messages never contain credentials:
// userinfo in endpoints is dropped, and text echoed from the server or from libcurl is
// shortened and withheld when it looks like it carries signing material.
#pragma once

#include <string_view>

#include <skiff/s3/error.hpp>

namespace skiff::s3 {

// Classifies an HTTP response that is not a success. `body` may be empty (HEAD responses and
// some 5xx carry none) or something other than an S3 error document; the status then decides.
// `target` optionally names what was addressed ("bucket/key"), so that a bodiless 404 can say
// what was missing; it is used in messages only.
//
// Decisions worth knowing (the S3 code wins over the status when it is one of these):
//  - retryable: every 5xx except 501, 429, 408, SlowDown, InternalError, ServiceUnavailable,
//    RequestTimeout (S3 sends it as 400), OperationAborted (409: AWS says "try again"; a
//    retried conditional write then gets its definite 412 or succeeds), TemporaryRedirect,
//    and an empty or non-XML 5xx body (counted as SlowDown, as Redpanda does).
//  - not_found: 404, NoSuchKey, NoSuchBucket, NoSuchUpload.
//  - precondition_failed: 412, 409 ConditionalRequestConflict, and a 409 with no body. Other
//    409 codes (BucketNotEmpty, BucketAlreadyExists, ...) are invalid_request.
//  - signature_mismatch: SignatureDoesNotMatch, XAmzContentSHA256Mismatch, BadDigest (the body
//    the server received does not match the checksum we declared).
//  - access_denied: any other 403 (with or without body), 401, InvalidAccessKeyId,
//    RequestTimeTooSkewed, ExpiredToken (400 at AWS), InvalidToken, TokenRefreshRequired.
//  - config: PermanentRedirect / 301 and AuthorizationHeaderMalformed (wrong region or
//    endpoint: only a configuration change fixes them).
//  - invalid_request: every other 4xx, and 501 NotImplemented.
//  - bad_response: a status outside 300..599 without an error document.
error classify_http(int status, std::string_view method, std::string_view body, std::string_view target = {});

// Classifies a transfer that produced no HTTP response. `curl_code` is the numeric CURLcode,
// `curl_message` the CURLOPT_ERRORBUFFER text (or curl_easy_strerror), `endpoint` the
// configured endpoint ("http://127.0.0.1:9000" or "host:port").
//
//  - retryable: cannot connect (refused, unreachable), resets and other send/receive
//    failures, an empty reply, a short body, timeouts, HTTP/2 stream errors, and also
//    "cannot resolve host": resolver failures are often transient in clouds, and the retry
//    loop is bounded by attempts and deadline, so a mistyped host still fails promptly with
//    the same sentence.
//  - config: malformed URL, unsupported scheme, TLS certificate/verification problems, and
//    a TLS handshake with a server that does not speak TLS.
//  - cancelled: aborted by our progress callback (stop_token).
//  - bad_response: a reply curl could not parse as HTTP.
//  - invalid_request: local failures (read callback, bad option).
error classify_transport(int curl_code, std::string_view curl_message, std::string_view endpoint);

// Whether a failed request was the server asking to slow down (what an adaptive concurrency
// limit reacts to): HTTP 503, HTTP 429, or the S3 code SlowDown. Other retryable failures
// (500, resets, timeouts, refused connections) are not throttling.
bool is_throttle(const error& e) noexcept;

} // namespace skiff::s3
