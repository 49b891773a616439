// An in-process fake S3 server for tests, in the spirit of Redpanda's s3_imposter.
//
// It is a test peer, not part of skiff: plain POSIX sockets and std::thread (one thread
// accepts, one thread serves each connection), never the reactor. It listens on
// 127.0.0.1, port 0 (the kernel picks a free port), speaks HTTP/1.1 with keep-alive and
// pipelining, answers `Expect: 100-continue`, and reads Content-Length and chunked bodies.
//
// S3 subset, path-style only (`/bucket/key`): PUT object (If-None-Match: *, If-Match,
// x-amz-checksum-crc32c stored and verified), GET object with Range (206/416), HEAD (no body,
// also for errors, as S3 does), DELETE (204), DeleteObjects (POST /bucket?delete: at most
// 1000 keys; Content-MD5 or x-amz-checksum-crc32c required and verified, 400
// MissingContentMD5 / InvalidDigest / BadDigest otherwise; Quiet honoured), ListObjectsV2
// with prefix, delimiter, start-after, continuation-token, max-keys and encoding-type=url,
// bucket create / head / delete, ListBuckets. Errors are S3 XML documents (NoSuchKey,
// NoSuchBucket, ...).
// Every request must carry x-amz-content-sha256 (400 InvalidRequest otherwise); a hex value
// must equal SHA-256 of the body (400 XAmzContentSHA256Mismatch); UNSIGNED-PAYLOAD and
// STREAMING-* are accepted as they are. Signatures are not verified. Not supported:
// multipart uploads, copy, virtual-hosted-style addressing, aws-chunked decoding (such bodies
// are stored still encoded).
//
// Faults are injected by rules that the test may change at any time, from any thread.
// All public member functions are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::test {

enum class fault_action {
    status_503_slowdown,   // 503 with an S3 SlowDown document
    status_500,            // 500 with an S3 InternalError document
    status_500_empty_body, // 500 with Content-Length: 0
    reset,                 // close with SO_LINGER 0: the client sees a TCP RST
    hang,                  // never answer; hold the connection until the client closes it or the server stops
    delay,                 // wait fault_rule::delay, then answer normally
    access_denied,         // 403 with an S3 AccessDenied document
};

enum class fault_when {
    before, // the request is not applied (a failed PUT stored nothing)
    after,  // the request is applied, only the answer is lost or replaced
};

// Inside DeleteObjects (POST /bucket?delete) every key is also matched against the rules whose
// method is exactly "DELETE", as if it were deleted alone: the first match leaves the key in
// place and answers it with a per-key <Error> (SlowDown, InternalError or AccessDenied from
// the action; `when` does not apply; rules with reset, hang or delay are passed over). The
// POST itself is matched like any request, so "*" rules can fail it as a whole.
struct fault_rule {
    std::string method = "*"; // "GET", "PUT", "HEAD", "DELETE", ...; "*" or "" for any
    // ECMAScript regex, searched (std::regex_search) in the decoded object key and in the
    // request line "METHOD /path?query" as sent; either match counts. ".*" matches all.
    std::string pattern = ".*";
    fault_action action = fault_action::status_503_slowdown;
    fault_when when = fault_when::before;
    int count = 1;                      // fail the next `count` matching requests; -1 = always
    std::chrono::milliseconds delay{0}; // for fault_action::delay
    // Fail only every `every`-th matching request (the 2nd, 4th, ... for 2): a deterministic
    // share of the traffic; `count` counts the failures. The others go on to later rules.
    int every = 1;
};

// One request as the server saw it.
struct request_record {
    std::string method;
    std::string target; // request target as sent: percent-encoded path and query
    std::string bucket;
    std::string key; // decoded; empty for bucket-level requests
    int status = 0;  // status sent; 0 when no answer was sent (reset, hang, shutdown)
    bool faulted = false;
    std::map<std::string, std::string> headers; // names in lower case
    std::size_t body_size = 0;
};

struct fake_s3_stats {
    std::uint64_t requests = 0;             // requests received (parsed), faults included
    std::uint64_t connections_accepted = 0; // compare with requests to see keep-alive reuse
    std::uint64_t faults_injected = 0;
    std::map<std::string, std::uint64_t> by_method;
    std::map<std::string, std::uint64_t> by_key; // decoded object key; "" for bucket requests
    std::map<int, std::uint64_t> by_status;
    std::uint64_t sessions_created = 0; // express: CreateSession answered
    std::uint64_t auth_failures = 0;    // express: requests refused for their signature or token
    // DeleteObjects: the number of keys of each request whose body was accepted, in order.
    std::vector<std::size_t> delete_objects_keys;
};

struct stored_object {
    std::string body;
    std::string etag;            // quoted hex MD5 of the body, as S3 gives for a single PUT
    std::string checksum_crc32c; // base64 as received in x-amz-checksum-crc32c; empty if none
    std::string content_type;
    std::chrono::system_clock::time_point last_modified;
};

// S3 Express One Zone (directory buckets): the session flow. CreateSession (GET /bucket?session)
// must be SigV4-signed for the service "s3express" with the long-term keys below and answers
// temporary session credentials valid for `session_ttl`. Every other request must carry
// x-amz-s3session-token naming a live session, signed (the token among the signed headers)
// with that session's secret for "s3express": 403 AccessDenied / SignatureDoesNotMatch /
// InvalidAccessKeyId otherwise, 400 ExpiredToken once the session expired. Signatures are
// recomputed with skiff's own signer (test vectors check that one against AWS's).
struct fake_express_options {
    std::string access_key_id;
    std::string secret_access_key;
    std::chrono::seconds session_ttl{300};
};

struct fake_s3_options {
    std::vector<std::string> buckets{"test-bucket"}; // created at start
    std::optional<fake_express_options> express;     // set: every bucket is a directory bucket
    bool require_content_sha256 = true;
    std::size_t max_body_size = std::size_t{256} << 20; // larger bodies get 413 and a close
};

class fake_s3 {
public:
    // Binds 127.0.0.1:0 and starts serving. Throws std::system_error if it cannot listen.
    explicit fake_s3(fake_s3_options options = {});
    // Stops: see stop().
    ~fake_s3();
    fake_s3(const fake_s3&) = delete;
    fake_s3& operator=(const fake_s3&) = delete;

    std::uint16_t port() const noexcept;
    std::string endpoint() const; // "http://127.0.0.1:<port>"

    // Closes the listening socket, wakes hung and delayed connections, shuts down every open
    // connection and joins all threads. Idempotent. Requests in flight get no answer.
    void stop();

    // --- faults --------------------------------------------------------------------------
    // Rules are checked in the order they were added; the first active matching rule fires
    // and uses up one of its count. Returns an id. Throws std::regex_error for a bad pattern.
    int add_rule(fault_rule rule);
    bool remove_rule(int id);
    void clear_rules();
    // Matching requests the rule will still fail: -1 for "always", 0 once used up or removed.
    int rule_remaining(int id) const;

    // --- state, bypassing HTTP -----------------------------------------------------------
    void create_bucket(std::string_view bucket);
    bool has_bucket(std::string_view bucket) const;
    // Creates the bucket if needed.
    void put_object(std::string_view bucket, std::string_view key, std::string body);
    std::optional<std::string> get_object(std::string_view bucket, std::string_view key) const;
    std::optional<stored_object> stat_object(std::string_view bucket, std::string_view key) const;
    bool has_object(std::string_view bucket, std::string_view key) const;
    bool delete_object(std::string_view bucket, std::string_view key);
    // Keys in S3 order (bytewise), optionally limited to a prefix.
    std::vector<std::string> list_keys(std::string_view bucket, std::string_view prefix = {}) const;

    // --- observation ---------------------------------------------------------------------
    fake_s3_stats stats() const;
    // Express: every session issued so far expires now (the next request with one gets 400
    // ExpiredToken), as if the clock had passed their lifetime.
    void expire_sessions();
    std::vector<request_record> request_log() const;
    void reset_stats(); // zeroes the counters and clears the log
    std::size_t open_connections() const;
    // Waits until at least `n` requests were received in total (since the last reset).
    bool wait_for_requests(std::uint64_t n, std::chrono::milliseconds timeout) const;

private:
    struct impl;
    std::unique_ptr<impl> _impl;
};

} // namespace skiff::test
