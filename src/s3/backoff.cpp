#include <skiff/s3/backoff.hpp>

#include <utility>

namespace skiff::s3 {

backoff::backoff(retry_policy policy, std::uint64_t seed) : _policy(policy), _jitter(policy.base, policy.cap, seed) {}

backoff::backoff(retry_policy policy, random_source source)
    : _policy(policy), _jitter(policy.base, policy.cap, std::move(source)) {}

backoff_duration backoff::window(const retry_policy& policy, int attempt) noexcept {
    return full_jitter_backoff::window(policy.base, policy.cap, attempt);
}

backoff_duration backoff::delay(int attempt) { return _jitter.delay(attempt); }

bool should_retry(const error& e, int attempts_so_far, backoff_time_point now, backoff_time_point deadline,
                  backoff_duration next_delay, const retry_policy& policy) {
    if (!e.retryable()) return false;
    if (attempts_so_far >= policy.max_attempts) return false;
    if (now >= deadline) return false;
    if (next_delay < backoff_duration::zero()) next_delay = backoff_duration::zero();
    // deadline > now, so the difference is positive; it overflows only for a far deadline and
    // a negative clock reading, and then no finite delay reaches the deadline.
    backoff_duration::rep remaining = 0;
    if (__builtin_sub_overflow(deadline.time_since_epoch().count(), now.time_since_epoch().count(),
                               &remaining)) {
        return true;
    }
    return next_delay.count() < remaining;
}

} // namespace skiff::s3
