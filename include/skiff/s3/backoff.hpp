// Retry policy for S3 requests: how many attempts, the backoff window (the delay math is
// core/backoff.hpp's full jitter, shared with storage) and the decision whether another
// attempt is allowed.
//
// No clock and no sleeping here: the retry loop passes `now` from the reactor's clock (a
// manual clock in tests) and sleeps for the delay itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>

#include <skiff/core/backoff.hpp>
#include <skiff/s3/error.hpp>

namespace skiff::s3 {

struct retry_policy {
    int max_attempts = 10;               // requests per operation, the first one included
    std::chrono::milliseconds base{25};  // window of the first retry
    std::chrono::milliseconds cap{2000}; // the window never grows beyond this
};

// Same representation as skiff::runtime::time_point and duration (steady clock, nanoseconds),
// without making this layer depend on the runtime.
using backoff_duration = skiff::backoff_duration;
using backoff_time_point = std::chrono::time_point<std::chrono::steady_clock, backoff_duration>;

// Draws retry delays for a retry_policy (full_jitter_backoff over its base and cap). Not
// thread-safe: one object per retry loop (or per core).
class backoff {
public:
    // Returns a uniformly distributed number in [0, 1); values outside are clamped.
    using random_source = full_jitter_backoff::random_source;

    // Seeded generator; the default seed comes from std::random_device.
    explicit backoff(retry_policy policy = {}, std::uint64_t seed = std::random_device{}());
    backoff(retry_policy policy, random_source source);

    // The jitter window before retry number `attempt` (0 for the first retry):
    // min(cap, base * 2^attempt). Saturates instead of overflowing for any attempt; zero for
    // a non-positive base or cap; negative attempts count as 0.
    static backoff_duration window(const retry_policy& policy, int attempt) noexcept;

    // A delay drawn uniformly from [0, window(attempt)).
    backoff_duration delay(int attempt);

    const retry_policy& policy() const noexcept { return _policy; }

private:
    retry_policy _policy;
    full_jitter_backoff _jitter;
};

// Whether to send another request after `e`, given that `attempts_so_far` requests were
// already sent and the next one would start after `next_delay`. Refuses when the error is
// not retryable, when `policy.max_attempts` requests were sent, or when `now + next_delay`
// reaches `deadline` (a request starting at its deadline cannot finish in time). Use
// backoff_time_point::max() for "no deadline"; the comparison does not overflow.
bool should_retry(const error& e, int attempts_so_far, backoff_time_point now, backoff_time_point deadline,
                  backoff_duration next_delay, const retry_policy& policy = {});

} // namespace skiff::s3
