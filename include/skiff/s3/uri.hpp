// Percent-encoding, endpoints and object URLs for S3.
//
// One rule runs through this header: an object key is percent-encoded exactly once, by
// encode_key_path(), and the resulting string is used verbatim both on the wire and as the
// SigV4 canonical URI (make_object_url() returns it as `encoded_path`). Nothing here
// normalizes `//`, `.` or `..`: they are legal parts of S3 keys.
//
// All functions are pure (no I/O, no allocation beyond the returned strings) and may be
// called from any thread or core.
#pragma once

#include <skiff/core/result.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::s3 {

// Query parameters as raw (unencoded) name/value pairs. A sub-resource such as `?uploads`
// is {"uploads", ""}.
using query_params = std::vector<std::pair<std::string, std::string>>;

// S3 UriEncode: keeps A-Z a-z 0-9 - . _ ~, turns every other byte into %XX (uppercase hex),
// so a space is %20 (never '+') and a UTF-8 character becomes one escape per byte.
// `/` is kept only when encode_slash is false (object key paths).
std::string uri_encode(std::string_view s, bool encode_slash);

// The path form of an object key: every byte except '/' encoded with uri_encode().
std::string encode_key_path(std::string_view key);

// Reverses %XX escapes. '+' stays '+' (S3 never uses it for a space). Fails on a '%' that is
// not followed by two hex digits.
result<std::string, std::string> percent_decode(std::string_view s);

// The canonical query string of SigV4, also used on the wire so the two cannot differ:
// names and values encoded with uri_encode(.., true), pairs sorted by encoded name and then
// encoded value (byte order), joined with '&'; an empty value gives `name=`.
std::string canonical_query(const query_params& params);

// Where the S3 service lives. `host` is lowercase; an IPv6 literal keeps its brackets
// ("[::1]") because that is how it appears in URLs and in the Host header.
struct endpoint {
    std::string scheme; // "http" or "https"
    std::string host;
    uint16_t port = 0;
    bool default_port = true; // port is 80 for http / 443 for https, so URLs and Host omit it
};

// Parses "http(s)://host[:port][/]". Accepts DNS names, IPv4 and bracketed IPv6 literals.
// Rejects other schemes, user info, paths other than "/", queries, fragments, empty hosts
// and ports outside 1-65535; the error is a sentence naming the problem and the input.
result<endpoint, std::string> parse_endpoint(std::string_view url);

// The value of the Host header for the endpoint: host, plus ":port" unless default.
std::string host_header(const endpoint& ep);

// True when `bucket` can be addressed as a virtual host of `ep`: a DNS-compatible bucket
// name (3-63 chars of a-z 0-9 '-'; '.' only over plain http, because a dotted name does not
// match the endpoint's *.host TLS certificate) and an endpoint that is a name, not an IP.
bool virtual_host_compatible(const endpoint& ep, std::string_view bucket);

struct object_url {
    std::string url;          // scheme://host[:port]/path[?query]
    std::string host_header;  // exactly what to send as Host, and to sign
    std::string encoded_path; // exactly what to send on the request line, and to sign
    std::string query;        // canonical_query(params); empty when there are none
};

// Builds the URL of `key` in `bucket`.
//  path style:   Host = endpoint host,          path = /bucket/encoded-key
//  virtual host: Host = bucket.endpoint-host,   path = /encoded-key
// An empty key addresses the bucket itself (path style "/bucket", virtual host "/").
// The caller decides the addressing style; check virtual_host_compatible() first.
object_url make_object_url(const endpoint& ep, std::string_view bucket, std::string_view key,
                           bool path_style, const query_params& query);

} // namespace skiff::s3
