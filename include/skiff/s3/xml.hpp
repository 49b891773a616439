// Parsers for the two XML documents the S3 client reads: a ListObjectsV2 page and an S3
// error body. Pure functions, no I/O; safe on any core and from any thread.
//
// The input is whatever came over the wire, so every parser treats it as hostile: garbage,
// truncated or oversized documents, missing fields and out-of-range numbers yield an error
// (or nullopt), never a crash or an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <skiff/core/result.hpp>
#include <skiff/s3/error.hpp>

namespace skiff::s3 {

// Documents larger than this are refused: a full ListObjectsV2 page (1000 keys of at most
// 1024 bytes each, plus metadata) stays far below it.
inline constexpr std::size_t max_xml_document_size = 16 * 1024 * 1024;

struct object_info {
    std::string key; // decoded when the response used EncodingType=url
    std::uint64_t size = 0;
    std::string etag;          // as S3 sends it, quotes included (same form as the ETag header)
    std::string last_modified; // ISO 8601 as sent, e.g. "2024-05-01T12:00:00.000Z"
};

struct list_page {
    std::vector<object_info> objects;
    std::vector<std::string> common_prefixes; // decoded like keys
    bool is_truncated = false;
    std::string next_continuation_token; // non-empty whenever is_truncated
    std::string start_after;             // decoded like keys
    int key_count = 0;                   // objects + common prefixes on this page
};

// Parses a ListObjectsV2 response body. Keys, common prefixes and StartAfter are
// percent-decoded when the document says <EncodingType>url</EncodingType> (S3 then encodes a
// space as '+', as in a form; '%20' is accepted too).
// Errors: errc::bad_response with a message that names what is wrong, for anything that is
// not a well-formed ListBucketResult, a <Contents> without <Key> or with a <Size> that is not
// a non-negative 64-bit integer, a bad <KeyCount>, or IsTruncated=true without a
// NextContinuationToken (the caller could not fetch the next page).
result<list_page, error> parse_list_objects_v2(std::string_view body);

struct s3_error_body {
    std::string code;    // e.g. "NoSuchKey"; may be empty if the document lacks it
    std::string message; // S3's own sentence, untrusted
    std::string request_id;
    std::string resource;
    // Present only for some codes; empty otherwise.
    std::string bucket_name;  // NoSuchBucket
    std::string key;          // NoSuchKey
    std::string endpoint;     // PermanentRedirect / TemporaryRedirect
    std::string region;       // AuthorizationHeaderMalformed
    std::string request_time; // RequestTimeTooSkewed
    std::string server_time;  // RequestTimeTooSkewed
};

// Parses an S3 error document (<Error><Code>…</Code>…</Error>). Returns nullopt for an empty
// body, anything that is not XML, a document whose root is not <Error>, or one larger than
// 1 MiB. Elements the signer echoes back (StringToSign, CanonicalRequest, AWSAccessKeyId,
// SignatureProvided) are deliberately not extracted.
std::optional<s3_error_body> parse_error_body(std::string_view body);

// S3 Express One Zone: a CreateSession answer's temporary credentials.
struct session_credentials {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;
    std::string expiration; // ISO 8601 as sent, e.g. "2026-12-05T13:05:00Z"
};

// Parses <CreateSessionResult><Credentials>…</Credentials></CreateSessionResult>. Errors:
// errc::bad_response (without quoting any secret) when it is not that document or a field is
// missing or empty.
result<session_credentials, error> parse_create_session(std::string_view body);

} // namespace skiff::s3
