#include <catch2/catch.hpp>

#include <skiff/s3/backoff.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

using namespace std::chrono_literals;
using skiff::s3::backoff;
using skiff::s3::backoff_duration;
using skiff::s3::backoff_time_point;
using skiff::s3::errc;
using skiff::s3::retry_policy;
using skiff::s3::should_retry;

namespace {

skiff::s3::error make_error(errc code) {
    skiff::s3::error e;
    e.code = code;
    return e;
}

// A fixed, positive steady-clock reading, as a manual clock would give.
const backoff_time_point t0 = backoff_time_point{} + 1h;

} // namespace

TEST_CASE("backoff window doubles from base and saturates at cap", "[s3][backoff]") {
    const retry_policy p; // 25 ms base, 2 s cap
    CHECK(backoff::window(p, 0) == 25ms);
    CHECK(backoff::window(p, 1) == 50ms);
    CHECK(backoff::window(p, 2) == 100ms);
    CHECK(backoff::window(p, 6) == 1600ms);
    CHECK(backoff::window(p, 7) == 2000ms); // 3200 ms capped
    CHECK(backoff::window(p, 8) == 2000ms);
}

TEST_CASE("backoff window never overflows", "[s3][backoff]") {
    const retry_policy p;
    for (int attempt : {30, 62, 63, 64, 65, 100, 1000, std::numeric_limits<int>::max()}) {
        INFO("attempt " << attempt);
        CHECK(backoff::window(p, attempt) == 2000ms);
    }
    CHECK(backoff::window(p, -1) == 25ms);
    CHECK(backoff::window(p, std::numeric_limits<int>::min()) == 25ms);

    retry_policy huge;
    huge.base = std::chrono::milliseconds(std::numeric_limits<std::int64_t>::max() / 4);
    huge.cap = std::chrono::milliseconds::max();
    CHECK(backoff::window(huge, 0) == backoff_duration::max());
    CHECK(backoff::window(huge, 50) == backoff_duration::max());

    retry_policy big_cap;
    big_cap.base = 1ms;
    big_cap.cap = std::chrono::hours(24 * 365 * 100);
    CHECK(backoff::window(big_cap, 10) == 1024ms);
    CHECK(backoff::window(big_cap, 62) == big_cap.cap);
    CHECK(backoff::window(big_cap, std::numeric_limits<int>::max()) == big_cap.cap);
}

TEST_CASE("backoff window degenerate policies", "[s3][backoff]") {
    retry_policy base_over_cap;
    base_over_cap.base = 5s;
    base_over_cap.cap = 1s;
    CHECK(backoff::window(base_over_cap, 0) == 1s);

    retry_policy zero_base;
    zero_base.base = 0ms;
    CHECK(backoff::window(zero_base, 5) == 0ms);

    retry_policy negative;
    negative.base = -5ms;
    CHECK(backoff::window(negative, 3) == 0ms);

    backoff b(zero_base, 1);
    CHECK(b.delay(3) == 0ms);
}

TEST_CASE("backoff delays stay within [0, window)", "[s3][backoff]") {
    backoff b(retry_policy{}, 42);
    for (int attempt = 0; attempt < 40; ++attempt) {
        const auto w = backoff::window(b.policy(), attempt);
        for (int i = 0; i < 500; ++i) {
            const auto d = b.delay(attempt);
            REQUIRE(d >= 0ns);
            REQUIRE(d < w);
        }
    }
}

TEST_CASE("backoff uses the injected random source", "[s3][backoff]") {
    double next = 0.0;
    backoff b(retry_policy{}, [&] { return next; });

    next = 0.0;
    CHECK(b.delay(0) == 0ns);
    next = 0.5;
    CHECK(b.delay(0) == 12500us);
    CHECK(b.delay(3) == 100ms);
    CHECK(b.delay(20) == 1000ms);
    next = 0.25;
    CHECK(b.delay(1) == 12500us);

    // Out-of-contract values are clamped into [0, 1).
    next = 0.999999999999;
    CHECK(b.delay(7) < 2000ms);
    next = 1.0;
    CHECK(b.delay(7) < 2000ms);
    CHECK(b.delay(7) > 1999ms);
    next = 7.0;
    CHECK(b.delay(7) < 2000ms);
    next = -3.0;
    CHECK(b.delay(7) == 0ns);
    next = std::nan("");
    CHECK(b.delay(7) == 0ns);
}

TEST_CASE("backoff is reproducible for a seed", "[s3][backoff]") {
    backoff a(retry_policy{}, 7);
    backoff b(retry_policy{}, 7);
    backoff c(retry_policy{}, 8);
    bool any_difference = false;
    for (int i = 0; i < 100; ++i) {
        const auto da = a.delay(i % 12);
        CHECK(da == b.delay(i % 12));
        any_difference = any_difference || da != c.delay(i % 12);
    }
    CHECK(any_difference);
}

TEST_CASE("backoff full jitter is uniform over the window", "[s3][backoff]") {
    backoff b(retry_policy{}, 12345);
    constexpr int draws = 40000;
    constexpr int buckets = 10;
    const auto window = backoff::window(b.policy(), 10);
    REQUIRE(window == 2000ms);

    std::array<int, buckets> histogram{};
    double sum_ms = 0;
    auto lo = backoff_duration::max();
    auto hi = backoff_duration::zero();
    for (int i = 0; i < draws; ++i) {
        const auto d = b.delay(10);
        sum_ms += std::chrono::duration<double, std::milli>(d).count();
        lo = std::min(lo, d);
        hi = std::max(hi, d);
        ++histogram[static_cast<std::size_t>(d * buckets / window)];
    }
    const double mean_ms = sum_ms / draws;
    // Uniform on [0, 2000): mean 1000, standard error of the mean about 2.9 ms.
    CHECK(mean_ms == Approx(1000.0).epsilon(0.02));
    CHECK(lo < 20ms);
    CHECK(hi > 1980ms);
    for (int count : histogram) {
        // 4000 expected per bucket, standard deviation about 60.
        CHECK(count > 3600);
        CHECK(count < 4400);
    }

    // Early attempts draw from their own, smaller window: mean half of 25 ms.
    double early_sum = 0;
    for (int i = 0; i < draws; ++i)
        early_sum += std::chrono::duration<double, std::milli>(b.delay(0)).count();
    CHECK(early_sum / draws == Approx(12.5).epsilon(0.02));
}

TEST_CASE("should_retry refuses non-retryable errors", "[s3][backoff]") {
    for (errc c : {errc::not_found, errc::precondition_failed, errc::access_denied, errc::signature_mismatch,
                   errc::invalid_request, errc::cancelled, errc::deadline_exceeded, errc::bad_response,
                   errc::config}) {
        INFO(skiff::s3::to_string(c));
        CHECK_FALSE(should_retry(make_error(c), 1, t0, t0 + 1h, 10ms));
    }
    CHECK(should_retry(make_error(errc::retryable), 1, t0, t0 + 1h, 10ms));
}

TEST_CASE("should_retry bounds the number of attempts", "[s3][backoff]") {
    const auto e = make_error(errc::retryable);
    CHECK(should_retry(e, 9, t0, t0 + 1h, 10ms));
    CHECK_FALSE(should_retry(e, 10, t0, t0 + 1h, 10ms));
    CHECK_FALSE(should_retry(e, 11, t0, t0 + 1h, 10ms));

    retry_policy three;
    three.max_attempts = 3;
    CHECK(should_retry(e, 2, t0, t0 + 1h, 10ms, three));
    CHECK_FALSE(should_retry(e, 3, t0, t0 + 1h, 10ms, three));

    retry_policy none;
    none.max_attempts = 1;
    CHECK_FALSE(should_retry(e, 1, t0, t0 + 1h, 0ms, none));
}

TEST_CASE("should_retry respects the deadline", "[s3][backoff]") {
    const auto e = make_error(errc::retryable);
    const auto deadline = t0 + 100ms;
    CHECK(should_retry(e, 1, t0, deadline, 99ms));
    CHECK_FALSE(should_retry(e, 1, t0, deadline, 100ms)); // would start exactly at the deadline
    CHECK_FALSE(should_retry(e, 1, t0, deadline, 150ms));
    CHECK_FALSE(should_retry(e, 1, deadline, deadline, 0ms));
    CHECK_FALSE(should_retry(e, 1, deadline + 1ms, deadline, 0ms));
    CHECK(should_retry(e, 1, t0, deadline, -5ms)); // a negative delay counts as none

    // No deadline: no overflow even with an absurd delay or an odd clock.
    CHECK(should_retry(e, 1, t0, backoff_time_point::max(), 24h));
    CHECK(should_retry(e, 1, t0, backoff_time_point::max(), backoff_duration::max() / 2));
    CHECK(should_retry(e, 1, backoff_time_point{} - 1h, backoff_time_point::max(), 24h));
}

TEST_CASE("a retry loop driven by a manual clock stays within attempts and deadline", "[s3][backoff]") {
    const auto e = make_error(errc::retryable);
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        backoff b(retry_policy{}, seed);
        auto now = t0;
        const auto deadline = t0 + 3s;
        int attempts = 1; // the first request failed with e
        int retries = 0;
        while (true) {
            const auto d = b.delay(retries);
            if (!should_retry(e, attempts, now, deadline, d, b.policy())) break;
            now += d; // sleep, then send again (which fails again, instantly)
            ++attempts;
            ++retries;
        }
        REQUIRE(attempts <= b.policy().max_attempts);
        REQUIRE(now < deadline);
    }
}
