// AWS Signature Version 4: a pure signer.
//
// No I/O, no clock, no global state: the signing time is a parameter, so tests (and retries
// that must re-sign with a fresh x-amz-date) control it. Any thread or core may call it.
//
// S3 rules, which are the defaults here (see test/data/sigv4 and the S3 API Reference,
// "Signature Calculations"):
//  - the canonical URI is the encoded path exactly as sent (encoded once, by
//    encode_key_path / make_object_url) and is never normalized;
//  - x-amz-content-sha256 is sent and signed on every request;
//  - x-amz-security-token is signed when the credentials carry a session token.
// Generic AWS services differ only in normalize_path (and, for some, an unsigned token), which
// exist so the signer can be checked against AWS's generic test suites.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/s3/credentials.hpp>
#include <skiff/s3/uri.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::s3 {

inline constexpr std::string_view sigv4_algorithm = "AWS4-HMAC-SHA256";
inline constexpr std::string_view unsigned_payload = "UNSIGNED-PAYLOAD";
// SHA-256 of zero bytes: the payload hash of GET, HEAD and DELETE.
inline constexpr std::string_view empty_payload_sha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

using digest = std::array<uint8_t, 32>;

// ---- building blocks (exposed for tests and for the client's payload hashing) ----

std::string hex(std::span<const uint8_t> bytes); // lowercase
digest sha256(std::string_view bytes);
std::string sha256_hex(std::string_view bytes);
digest hmac_sha256(std::span<const uint8_t> key, std::string_view data);
digest hmac_sha256(std::string_view key, std::string_view data);

// HMAC chain "AWS4"+secret -> date (YYYYMMDD) -> region -> service -> "aws4_request".
digest derive_signing_key(std::string_view secret, std::string_view date, std::string_view region,
                          std::string_view service);

// "20150830T123600Z" (ISO 8601 basic, UTC, seconds truncated) and "20150830".
std::string amz_date(std::chrono::system_clock::time_point t);
std::string amz_day(std::chrono::system_clock::time_point t);

struct header {
    std::string name;
    std::string value;
};

// Canonical header block and signed-header list: names lowercased; values trimmed with runs
// of spaces/tabs collapsed to one space (inside quotes too); repeated names joined with ','
// in request order; sorted by name. `block` ends each header with '\n'.
struct canonical_header_set {
    std::string block;          // "host:example.com\nx-amz-date:...\n"
    std::string signed_headers; // "host;x-amz-date"
};
canonical_header_set canonical_headers(const std::vector<header>& headers);

// Generic-service path normalization (RFC 3986 dot-segment removal plus collapsing of empty
// segments) on an already encoded path. S3 must never use it: `a//b` and `a/../b` are
// distinct keys there.
std::string normalize_path(std::string_view encoded_path);

// ---- signing ----

struct signing_request {
    std::string method;       // "GET", "PUT", ...
    std::string encoded_path; // exactly as on the request line; e.g. make_object_url().encoded_path
    query_params query;       // raw (unencoded) names and values; the signer encodes them once
    std::vector<header> headers; // headers that will be sent byte-identical; must include Host
    std::string payload_hash;    // lowercase hex SHA-256 of the body, or UNSIGNED-PAYLOAD
                                 // (or a STREAMING-* value); presign: empty = UNSIGNED-PAYLOAD
};

struct signing_options {
    std::string region;
    std::string service = "s3";
    bool normalize_path = false;            // generic services only; S3 never
    bool sign_session_token = true;         // false: token is added after signing, unsigned
    bool add_content_sha256_header = true;  // S3: always send and sign x-amz-content-sha256
};

struct signed_request {
    std::string canonical_request;
    std::string string_to_sign;
    std::string signature;      // lowercase hex
    std::string signed_headers; // "host;x-amz-content-sha256;x-amz-date"
    std::string authorization;  // header auth only; empty for presign
    // Header auth: headers the caller must add to the request (x-amz-date,
    // x-amz-content-sha256, x-amz-security-token, authorization), lowercase names, minus any
    // the request already carried with the same value.
    std::vector<header> headers_to_add;
    // Presign: the X-Amz-* parameters to add (raw values, X-Amz-Signature last) and the full
    // encoded query string to put after '?': the caller's parameters plus these.
    query_params query_to_add;
    std::string query_string;
};

// Signs with an Authorization header at time `now`.
// Fails (with a sentence that never contains a secret) when: credentials are incomplete; the
// region, method or payload hash is empty; no Host header is present; encoded_path does not
// start with '/' or holds a byte that encode_key_path would have escaped (it must be encoded
// exactly once); a header name is empty or a name/value contains CR or LF; the request
// already has an Authorization header; it has an x-amz-date, x-amz-content-sha256 or
// x-amz-security-token header that disagrees with what the signer would send.
result<signed_request, std::string> sign(const signing_request& req, const credentials& creds,
                                         const signing_options& opts,
                                         std::chrono::system_clock::time_point now);

// Query-string authentication (presigned URL) valid for `expires` (1 s to 7 days). The
// request's headers (Host at least) are signed; nothing needs to be added to them. The
// payload hash defaults to UNSIGNED-PAYLOAD and x-amz-content-sha256 is not sent. Fails
// as sign() does, and when `expires` is out of range or the query already holds an X-Amz-*
// authentication parameter.
result<signed_request, std::string> presign(const signing_request& req, const credentials& creds,
                                            const signing_options& opts,
                                            std::chrono::system_clock::time_point now,
                                            std::chrono::seconds expires);

} // namespace skiff::s3
