// Full-jitter exponential backoff ("Exponential Backoff And Jitter", AWS Architecture Blog,
// 2015): before retry number `attempt` (0 for the first retry), wait a delay drawn uniformly
// from [0, min(cap, base * 2^attempt)). Spreading retries over the whole window keeps many
// clients that failed together from retrying together.
//
// Only the delay math lives here. What is retried, how often and under which deadline is the
// policy of each retry loop (s3::client's bounded retries, storage's flush uploads; see
// docs/retries.md). No clock and no sleeping: the loop sleeps for the delay on its own clock
// (a manual clock in tests).
//
// Not thread-safe: one object per retry loop, or per core.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>

namespace skiff {

// Same representation as skiff::runtime::duration (nanoseconds), without depending on it.
using backoff_duration = std::chrono::nanoseconds;

class full_jitter_backoff {
public:
    // Returns a number in [0, 1); values outside are clamped, NaN counts as 0. Tests inject
    // one to get exact delays.
    using random_source = std::function<double()>;

    // A seeded generator (std::mt19937_64); the default seed comes from std::random_device.
    full_jitter_backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap,
                        std::uint64_t seed = std::random_device{}());
    full_jitter_backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap, random_source source);

    // min(cap, base * 2^attempt). Saturates instead of overflowing for any attempt and for
    // millisecond values whose nanosecond count does not fit; zero for a non-positive base or
    // cap; a negative attempt counts as 0.
    static backoff_duration window(std::chrono::milliseconds base, std::chrono::milliseconds cap,
                                   int attempt) noexcept;

    // A delay drawn uniformly from [0, window(attempt)); zero when the window is empty.
    backoff_duration delay(int attempt);

    std::chrono::milliseconds base() const noexcept { return _base; }
    std::chrono::milliseconds cap() const noexcept { return _cap; }

private:
    double draw();

    std::chrono::milliseconds _base;
    std::chrono::milliseconds _cap;
    std::mt19937_64 _rng;
    random_source _source; // when set, used instead of _rng
};

} // namespace skiff
