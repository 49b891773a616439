// S3 client: one request per operation attempt, signed with SigV4, sent through this core's
// http::client, classified at the boundary, and retried with full-jitter backoff under the
// operation's deadline.
//
// Layers (Redpanda's split): sigv4/uri sign and address (pure); this client makes requests,
// classifies outcomes and retries them a bounded number of times (or once, when the caller
// owns the retry loop: request_options::max_attempts); the storage engine above decides what
// to retry at the domain level. Who retries what: docs/retries.md.
//
// A client belongs to the reactor (core) that created it. Every operation takes a
// stop_token; a cancelled operation resolves errc::cancelled, never success.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/http/client.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/s3/backoff.hpp>
#include <skiff/s3/credential_provider.hpp>
#include <skiff/s3/credentials.hpp>
#include <skiff/s3/error.hpp>
#include <skiff/s3/uri.hpp>
#include <skiff/s3/xml.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::s3 {

struct client_config {
    // "http://127.0.0.1:9000"; empty: https://s3.<region>.amazonaws.com
    std::string endpoint;
    std::string region = "us-east-1";
    bool path_style = false; // true for MinIO, moto and most local servers
    credentials creds;
    // Temporary credentials (docs/credentials.md): when set, every request is signed with the
    // provider's current snapshot instead of `creds`, and an ExpiredToken / InvalidToken answer
    // makes the client ask for new ones and send the request once more. Shared by every core.
    std::shared_ptr<credential_provider> provider;
    // Where `creds` came from ("environment", "~/.aws/credentials [default]"), for describe_credentials.
    std::string creds_source;
    // Send UNSIGNED-PAYLOAD instead of hashing the body (sensible only over https).
    bool unsigned_payload = false;
    retry_policy retry{};
    std::chrono::milliseconds attempt_timeout{30000};     // one HTTP request
    std::chrono::milliseconds operation_deadline{120000}; // all attempts of one operation
    http::client_config http{};
    // Wall clock for SigV4 dates; injectable for tests.
    std::function<std::chrono::system_clock::time_point()> wall_clock;
    std::uint64_t backoff_seed = 0; // 0: random
    // S3 Express One Zone (directory buckets, names ending in "--x-s3"; docs/s3-express.md):
    // a session is created (CreateSession) per bucket and renewed this long before it expires.
    std::chrono::seconds express_refresh_before{60};
};

// What --print-config shows: the source and, for static keys, describe(creds); never a secret.
std::string describe_credentials(const client_config& cfg);

// A directory bucket's name: "base--azid--x-s3" (e.g. "logs--use1-az4--x-s3").
bool is_directory_bucket(std::string_view bucket) noexcept;
// Its zone id ("use1-az4"); empty for any other name.
std::string_view directory_bucket_zone(std::string_view bucket) noexcept;

// Byte range for GET. first..last inclusive; from(first) to the end; suffix(n): last n bytes.
struct byte_range {
    enum class kind : std::uint8_t { bounded, from, suffix } k = kind::bounded;
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::uint64_t suffix_length = 0;

    static byte_range between(std::uint64_t first, std::uint64_t last) { return {kind::bounded, first, last, 0}; }
    static byte_range starting_at(std::uint64_t first) { return {kind::from, first, 0, 0}; }
    static byte_range suffix(std::uint64_t n) { return {kind::suffix, 0, 0, n}; }
    std::string header_value() const; // "bytes=0-9", "bytes=5-", "bytes=-4"
};

// del_many is DeleteObjects (one request for up to 1000 keys): its own op, so that a request
// that removes a thousand objects does not read as one DELETE in latency and byte metrics.
enum class op_kind : std::uint8_t { put, get, head, del, list, del_many, count_ };

// What the client tells an attempt observer after each request of an operation, once its
// answer is classified and before any backoff.
struct attempt_outcome {
    op_kind op = op_kind::put;
    int attempt = 1;                // 1 for the operation's first request
    const error* failure = nullptr; // null when the attempt succeeded
    bool throttled = false;         // the server asked to slow down (is_throttle in classify.hpp)
};
// Called on the client's core, synchronously, once per request that was answered or failed
// in transport (not for one cut short by cancellation or the deadline, nor when signing
// failed and nothing was sent); it must not call back into the client. This is how the
// storage engine's io budget hears SlowDown at the attempt that got it, also when the client
// retries it (docs/retries.md).
using attempt_observer = std::function<void(const attempt_outcome&)>;

// Option structs passed to coroutines are deliberately not aggregates (they declare a
// constructor): g++ 12 destroys an aggregate prvalue argument created inside a co_await
// expression twice (`co_await c.put_object(..., {})` frees a string twice). Non-aggregates
// are handled correctly, and designated initializers, which would bring the bug back, do not
// compile.
struct request_options {
    request_options() = default;
    // The `kind` label of this operation's metrics: the caller knows what its keys name (the
    // storage engine says "kfs" / "index"); empty means "other". Must stay valid until the
    // operation completes (a literal). A client keeps at most max_metric_kinds labels; any
    // further one counts as "other". Ignored for list (always "none").
    std::string_view kind;
    // Requests this operation may send: 0 uses client_config::retry.max_attempts; 1 sends one
    // request and leaves retrying to the caller. Never more than the configured policy allows.
    int max_attempts = 0;
    attempt_observer on_attempt; // optional
};

struct put_options : request_options {
    put_options() = default;
    bool if_none_match = false;           // If-None-Match: * (fails precondition_failed if the key exists)
    std::optional<std::uint32_t> crc32c;  // sent as x-amz-checksum-crc32c (base64 of big-endian value)
    std::string content_type;
};

struct put_result {
    std::string etag;
};

struct object_meta {
    std::uint64_t size = 0;
    std::string etag;
    std::string last_modified;
};

struct get_result {
    std::string body;
    std::uint64_t object_size = 0; // whole object (from Content-Range when ranged)
    std::string etag;
};

struct list_request {
    list_request() = default;
    explicit list_request(std::string p) : prefix(std::move(p)) {}
    std::string prefix;
    std::string start_after;
    std::string continuation_token;
    int max_keys = 1000;
};

// DeleteObjects' limit on keys per request (S3 API reference, DeleteObjects).
inline constexpr std::size_t max_delete_keys = 1000;

// A key DeleteObjects did not delete, with S3's per-key <Error>.
struct delete_failure {
    std::string key;     // as the server echoed it
    errc code{};         // retryable (InternalError, SlowDown, ...), access_denied, or invalid_request
    std::string s3_code; // e.g. "AccessDenied"; empty if the entry had none
    std::string message; // S3's sentence, shortened and printable
};

struct delete_objects_result {
    // Keys the server did not delete. Empty when every key is gone; the request is sent in
    // quiet mode, so deleted keys are not listed.
    std::vector<delete_failure> failed;
};

// The most distinct `kind` labels one client registers metrics for ("other" included).
inline constexpr std::size_t max_metric_kinds = 8;

struct op_stats {
    std::uint64_t operations = 0;
    std::uint64_t requests = 0;   // attempts sent
    std::uint64_t retries = 0;
    std::uint64_t failures = 0;   // operations that ended in an error
    std::uint64_t bytes_sent = 0;
    std::uint64_t bytes_received = 0;
};

struct client_stats {
    std::array<op_stats, static_cast<std::size_t>(op_kind::count_)> by_op{};
    // Final errors by class, indexed by errc value.
    std::array<std::uint64_t, 16> errors_by_class{};
    const op_stats& of(op_kind k) const { return by_op[static_cast<std::size_t>(k)]; }
};

// Metrics (docs/observability.md, "S3 client"): registered on the creating core's registry by
// create() unless metrics::metrics_enabled() is off; per HTTP request (attempt) and per
// operation, labelled op = put | get | get_range | head | delete | list and kind = the
// caller's request_options::kind, "other" when it gives none ("none" for list); errors by
// class. DeleteObjects counts as op = delete_many. Never a URL, query string, header or credential.
class client {
public:
    // Fails with a sentence when the endpoint is malformed or credentials are incomplete.
    static result<std::unique_ptr<client>, std::string> create(client_config cfg);
    ~client();

    runtime::task<result<put_result, error>> put_object(std::string_view bucket, std::string_view key,
                                                        std::span<const char> body, put_options opts = {},
                                                        std::stop_token st = {});
    runtime::task<result<get_result, error>> get_object(std::string_view bucket, std::string_view key,
                                                        std::optional<byte_range> range = std::nullopt,
                                                        request_options opts = {}, std::stop_token st = {});
    runtime::task<result<object_meta, error>> head_object(std::string_view bucket, std::string_view key,
                                                          request_options opts = {}, std::stop_token st = {});
    // Deleting a missing key succeeds (S3 semantics).
    runtime::task<result<void, error>> delete_object(std::string_view bucket, std::string_view key,
                                                     request_options opts = {}, std::stop_token st = {});
    // DeleteObjects (POST /?delete): removes up to max_delete_keys keys in one request, sent
    // in quiet mode with Content-MD5 (S3 refuses a DeleteObjects body without a checksum).
    // A missing key counts as deleted (S3 semantics). The whole request is retried like any
    // other operation; keys the server refuses one by one come back in
    // delete_objects_result::failed and are not retried here (the caller decides).
    // Errors: errc::invalid_request, without sending anything, for more than max_delete_keys
    // keys or an empty key (callers split larger sets: storage::s3_store::remove_many);
    // bad_response when the answer is not a DeleteResult (or is a 200 carrying an <Error>,
    // then classified by its code); otherwise as the other operations. No keys: success
    // without a request. Cancellable through `st`, which resolves errc::cancelled.
    runtime::task<result<delete_objects_result, error>> delete_objects(std::string_view bucket,
                                                                       std::vector<std::string> keys,
                                                                       request_options opts = {},
                                                                       std::stop_token st = {});
    runtime::task<result<list_page, error>> list_objects_v2(std::string_view bucket, list_request req,
                                                            request_options opts = {}, std::stop_token st = {});

    // Registers the metric series of `kind` now (for every op), so operators see them at zero
    // before the first request. Optional: a new kind is registered at its first request.
    void declare_metric_kind(std::string_view kind);

    const client_stats& stats() const noexcept { return _stats; }
    const client_config& config() const noexcept { return _cfg; }
    const endpoint& resolved_endpoint() const noexcept { return _ep; }

    // S3 Express: CreateSession requests sent (first sessions and renewals).
    std::uint64_t express_sessions_created() const noexcept { return _sessions_created; }

private:
    struct attempt_spec;
    struct instruments;
    struct express_session {
        credentials creds; // the session's key id, secret and token
        std::chrono::system_clock::time_point obtained, expires;
    };
    struct session_slot {
        std::optional<express_session> session;
        std::unique_ptr<runtime::semaphore> lock; // one CreateSession at a time per bucket
    };
    // The bucket's live session, created or renewed when missing or about to expire.
    runtime::task<result<credentials, error>> session_for(std::string_view bucket, std::stop_token st);
    runtime::task<result<express_session, error>> create_session(std::string_view bucket, std::stop_token st);
    // Where requests for `bucket` go: the configured endpoint, or a directory bucket's zonal one.
    const endpoint& endpoint_for(std::string_view bucket);
    client(client_config cfg, endpoint ep);
    runtime::task<result<http::response, error>> execute(op_kind kind, const attempt_spec& spec,
                                                         const request_options& opts, std::stop_token st);

    client_config _cfg;
    endpoint _ep;
    std::unique_ptr<http::client> _http;
    backoff _backoff;
    client_stats _stats;
    std::unique_ptr<instruments> _m; // null when metrics were off at create()
    std::map<std::string, session_slot, std::less<>> _sessions;
    std::map<std::string, endpoint, std::less<>> _zonal;
    std::uint64_t _sessions_created = 0;
};

} // namespace skiff::s3
