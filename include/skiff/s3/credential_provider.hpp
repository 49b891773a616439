// Temporary AWS credentials as deployments hand them out, and their refresh (docs/credentials.md).
//
// The chain, in the AWS SDKs' default order (resolve_credential_chain):
//   1. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (static, as load_credentials);
//   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (EKS), STS
//      AssumeRoleWithWebIdentity (AWS_ENDPOINT_URL_STS, else https://sts.<region>.amazonaws.com);
//   3. shared files: the profile's keys (static), or its `web_identity_token_file` + `role_arn`,
//      or its `credential_process`;
//   4. container: AWS_CONTAINER_CREDENTIALS_FULL_URI, or _RELATIVE_URI against http://169.254.170.2,
//      with AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE);
//   5. EC2 instance metadata (IMDSv2), unless AWS_EC2_METADATA_DISABLED=true; probed with a 1 s
//      timeout only when nothing else is configured.
//
// Static credentials need no provider (client_config::creds, as before). A temporary source is
// run by a credential_provider: one per process, shared by every core's S3 client through
// client_config::provider. The provider owns one thread with its own reactor and http::client
// (no core ever blocks on a credential fetch; credential_process runs on a further short-lived
// thread); it fetches at start, refreshes ahead of expiry (refresh_before, or at 80% of a
// shorter lifetime), retries failures with full-jitter backoff while the current credentials
// are still valid, and publishes each result as an immutable snapshot. Signers read the
// snapshot under a mutex (thread-safe, never blocking on I/O).
//
// Secrets (secret keys, session tokens, web identity and container authorization tokens)
// never appear in logs, errors or describe(): messages name the source and the failure.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/http/client.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/s3/credentials.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace skiff::runtime {
class reactor;
template <typename T>
class oneshot;
} // namespace skiff::runtime

namespace skiff::s3 {

using wall_time = std::chrono::system_clock::time_point;
using wall_clock_fn = std::function<wall_time()>;

// What one fetch returns. No expiration: the credentials never expire and are not refreshed.
struct fetched_credentials {
    fetched_credentials() = default;
    credentials creds;
    std::optional<wall_time> expires;
};

// One temporary source. fetch() runs on the provider's own thread (a reactor, never a core),
// with that thread's http::client; it is cancellable through `st` (cancelled: any error).
// Errors are one sentence naming the source, never a secret.
class credential_source {
public:
    virtual ~credential_source() = default;
    // "container endpoint http://127.0.0.1:9/creds": what --print-config shows.
    virtual std::string describe() const = 0;
    virtual runtime::task<result<fetched_credentials, std::string>> fetch(http::client& http, std::stop_token st) = 0;
};

// "2026-12-06T23:10:00Z" (also with fractional seconds or a numeric offset); nullopt otherwise.
std::optional<wall_time> parse_aws_time(std::string_view text);

// The JSON of the container endpoint and of IMDS (AccessKeyId, SecretAccessKey, Token,
// Expiration; IMDS also Code = "Success"). `what` names the source in errors.
result<fetched_credentials, std::string> parse_credentials_json(std::string_view body, std::string_view what);
// credential_process output (Version 1, AccessKeyId, SecretAccessKey, SessionToken, Expiration).
result<fetched_credentials, std::string> parse_process_output(std::string_view out, std::string_view what);
// STS AssumeRoleWithWebIdentity answer (any status: an <ErrorResponse> becomes its code and message).
result<fetched_credentials, std::string> parse_assume_role_with_web_identity(int status, std::string_view body);

// IMDSv2 at `endpoint` (http://169.254.169.254): PUT /latest/api/token, then the role name and
// the role's credentials with X-aws-ec2-metadata-token. Each request at most `timeout`.
std::unique_ptr<credential_source> make_imds_source(std::string endpoint, std::chrono::milliseconds timeout);
// GET `url` with "Authorization: <token>" when a token (or a token file, read at every fetch) is given.
std::unique_ptr<credential_source> make_container_source(std::string url, std::string auth_token,
                                                         std::string auth_token_file);
struct web_identity_settings {
    web_identity_settings() = default;
    std::string role_arn;
    std::string token_file;   // read at every fetch: the platform rotates it
    std::string session_name; // empty: "skiff-<unix seconds>"
    std::string sts_endpoint; // e.g. "https://sts.eu-west-1.amazonaws.com"
    std::chrono::milliseconds timeout{10000};
};
std::unique_ptr<credential_source> make_web_identity_source(web_identity_settings s);
// Runs `command` with /bin/sh -c, reads its stdout (at most 64 KiB, within `timeout`).
std::unique_ptr<credential_source> make_process_source(std::string command, std::string profile,
                                                       std::chrono::milliseconds timeout = std::chrono::seconds(60));

// One published set of credentials. generation counts successful fetches from 1.
struct credential_snapshot {
    credential_snapshot() = default;
    credentials creds;
    std::optional<wall_time> expires;
    wall_time obtained{};
    std::uint64_t generation = 0;
};

struct provider_options {
    provider_options() = default;
    wall_clock_fn wall_clock; // null: system_clock::now; tests inject a manual one
    // Refresh this long before expiry, or at 80% of a lifetime shorter than 5 × this.
    std::chrono::seconds refresh_before{300};
    // Failed fetches are retried after a full-jitter delay in [0, min(cap, base·2ⁿ)).
    std::chrono::milliseconds retry_base{1000};
    std::chrono::milliseconds retry_cap{60000};
    std::uint64_t backoff_seed = 0; // 0: random
    // A signer without usable credentials waits at most this long for a fetch to finish.
    std::chrono::milliseconds wait_timeout{15000};
    // Without usable credentials, a fetch that failed less than this ago answers signers at
    // once (no new fetch per request); otherwise a waiting signer makes the next fetch start now.
    std::chrono::milliseconds min_retry_interval{1000};
};

class credential_provider {
public:
    // Starts the provider's thread, which fetches at once. Fails when no reactor can be created.
    static result<std::shared_ptr<credential_provider>, std::string> start(std::unique_ptr<credential_source> source,
                                                                         provider_options opts = {});
    // Stops the thread (a fetch in flight is cancelled, a credential_process killed) and joins it.
    ~credential_provider();
    credential_provider(const credential_provider&) = delete;
    credential_provider& operator=(const credential_provider&) = delete;

    // Blocks the calling thread (never a reactor core) until the first fetch finished: ok, or
    // its error. Fails after `timeout` with a sentence naming the source.
    result<void, std::string> wait_ready(std::chrono::milliseconds timeout);

    // On a reactor thread: usable credentials (not expired, not refused by S3). Within the
    // refresh window it returns the current ones at once and wakes the refresher. Without
    // usable ones it waits (at most wait_timeout) for the next fetch and fails with one
    // sentence when that fails; cancellable through `st` (fired on this thread).
    runtime::task<result<std::shared_ptr<const credential_snapshot>, std::string>> get(std::stop_token st = {});

    // S3 answered ExpiredToken / InvalidToken to a request signed with `generation`: those
    // credentials are no longer used and a fetch starts now. Thread-safe.
    void refused(std::uint64_t generation);

    // Thread-safe reads.
    std::shared_ptr<const credential_snapshot> current() const;
    std::string describe() const; // the source, never a secret
    std::uint64_t fetch_attempts() const;
    std::uint64_t fetch_successes() const;
    std::uint64_t fetch_failures() const; // fetches that finished with an error
    std::string last_error() const;

private:
    struct waiter {
        runtime::reactor* home = nullptr;
        std::shared_ptr<runtime::oneshot<void>> latch;
    };
    credential_provider(std::unique_ptr<credential_source> source, provider_options opts);
    void thread_main();
    runtime::task<void> run(std::stop_token st);
    void kick();
    bool usable_locked(wall_time now) const;
    bool fetch_due_locked(wall_time now, wall_time& next) const;
    wall_time refresh_at(const credential_snapshot& s) const;
    std::string unusable_reason_locked(wall_time now) const;
    void notify_locked(std::vector<waiter>& out);

    std::unique_ptr<credential_source> _source;
    provider_options _opts;
    std::string _describe;

    mutable std::mutex _mu;
    std::condition_variable _cv;
    std::shared_ptr<const credential_snapshot> _current;
    std::uint64_t _refused_generation = 0;
    std::uint64_t _attempts = 0;
    std::uint64_t _successes = 0;
    std::uint64_t _failures = 0;
    int _failures_in_row = 0;
    std::string _last_error;
    std::optional<wall_time> _last_failure_at;
    wall_time _retry_at{};
    std::vector<waiter> _waiters;
    runtime::reactor* _reactor = nullptr; // the provider's thread's reactor, while it runs
    bool _thread_done = false;
    std::string _thread_error;

    std::atomic<bool> _kick_pending{false};
    // Refresher-thread only.
    runtime::oneshot<void>* _wake = nullptr;
    std::stop_source _stop;
    std::thread _thread;
};

// What the chain found (resolve_credential_chain).
struct credential_chain {
    credential_chain() = default;
    std::optional<credentials> static_creds;   // environment or profile keys
    std::unique_ptr<credential_source> source; // else a temporary source
    std::string region;                        // AWS_REGION, AWS_DEFAULT_REGION or the profile's
    std::string source_name;                   // "environment", "/home/u/.aws/credentials [default]", ...
    bool imds_fallback = false;                // nothing configured: IMDS is the source
};

// Picks the first configured source as listed at the top. Reads files (not on a core). Fails
// with one sentence on a half-filled or broken configuration, or when nothing is configured
// and IMDS is disabled. Does not fetch: IMDS is then the source, and its first fetch says
// whether it answers.
result<credential_chain, std::string> resolve_credential_chain(const env_lookup& env);

// Credentials for an S3 client: static ones, or a started provider whose first fetch succeeded.
struct client_credentials {
    client_credentials() = default;
    credentials creds;                             // static only
    std::shared_ptr<credential_provider> provider; // temporary only
    std::string region;
    std::string source; // what --print-config shows
};

// resolve_credential_chain, then for a temporary source a provider and its first fetch
// (blocking, at most `first_fetch_timeout`). For the CLI, before any reactor runs on this thread.
result<client_credentials, std::string> load_client_credentials(
    const env_lookup& env, std::chrono::milliseconds first_fetch_timeout = std::chrono::seconds(20));

} // namespace skiff::s3
