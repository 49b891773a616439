// Redaction of request data before it reaches a log line, an error message or a metric.
//
// Signatures, session tokens and secret keys must never be logged: a signature alone lets
// anyone replay the request until x-amz-date is 15 minutes old, a token or secret for much
// longer. Pure functions; any thread or core.
#pragma once

#include <skiff/s3/credentials.hpp>

#include <string>
#include <string_view>

namespace skiff::s3 {

inline constexpr std::string_view redacted = "<redacted>";

// The value of header `name` (any case) as it may be logged:
//  - authorization: a SigV4 value keeps algorithm, Credential (access key id and scope) and
//    SignedHeaders, and its Signature becomes <redacted>; any other scheme keeps only its
//    first word ("Basic <redacted>");
//  - proxy-authorization, x-amz-security-token, x-amz-s3session-token, cookie: <redacted>;
//  - everything else: unchanged.
std::string redact_header(std::string_view name, std::string_view value);

// A URL (or query string) with the values of X-Amz-Signature, X-Amz-Security-Token and
// X-Amz-S3session-Token replaced, so presigned URLs can be logged.
std::string redact_url(std::string_view url);

// `text` with every occurrence of the secret key or session token of `creds`, raw or
// percent-encoded, replaced by <redacted>. For free-form text such as a server's error body
// or a libcurl verbose trace.
std::string redact_text(std::string_view text, const credentials& creds);

} // namespace skiff::s3
