// core/backoff.hpp: the full-jitter delay math shared by s3's and storage's retry loops.
// Every delay is checked with an injected random source or a fixed seed; no clock involved.
#include <catch2/catch.hpp>

#include <skiff/core/backoff.hpp>

#include <cmath>
#include <limits>

using namespace std::chrono_literals;
using skiff::backoff_duration;
using skiff::full_jitter_backoff;

TEST_CASE("full jitter window doubles from base and saturates at cap", "[core][backoff]") {
    CHECK(full_jitter_backoff::window(20ms, 2000ms, 0) == 20ms);
    CHECK(full_jitter_backoff::window(20ms, 2000ms, 1) == 40ms);
    CHECK(full_jitter_backoff::window(20ms, 2000ms, 6) == 1280ms);
    CHECK(full_jitter_backoff::window(20ms, 2000ms, 7) == 2000ms); // 2560 ms capped
    CHECK(full_jitter_backoff::window(20ms, 2000ms, 1000) == 2000ms);
    CHECK(full_jitter_backoff::window(20ms, 2000ms, std::numeric_limits<int>::max()) == 2000ms);
    CHECK(full_jitter_backoff::window(20ms, 2000ms, -3) == 20ms);
}

TEST_CASE("full jitter window: degenerate and huge inputs", "[core][backoff]") {
    CHECK(full_jitter_backoff::window(5s, 1s, 0) == 1s);
    CHECK(full_jitter_backoff::window(0ms, 1s, 4) == 0ms);
    CHECK(full_jitter_backoff::window(-5ms, 1s, 4) == 0ms);
    CHECK(full_jitter_backoff::window(1ms, 0ms, 4) == 0ms);
    CHECK(full_jitter_backoff::window(std::chrono::milliseconds::max(), std::chrono::milliseconds::max(), 3) ==
          backoff_duration::max());
    for (int attempt : {62, 63, 64, 100}) {
        INFO("attempt " << attempt);
        CHECK(full_jitter_backoff::window(1ms, std::chrono::hours(24 * 365), attempt) == std::chrono::hours(24 * 365));
    }
}

TEST_CASE("full jitter delay follows the injected random source", "[core][backoff]") {
    double u = 0.0;
    full_jitter_backoff b(20ms, 2000ms, [&] { return u; });
    CHECK(b.delay(0) == 0ns);
    u = 0.5;
    CHECK(b.delay(0) == 10ms);
    CHECK(b.delay(2) == 40ms);
    CHECK(b.delay(30) == 1000ms);
    u = 0.25;
    CHECK(b.delay(1) == 10ms);
    // Out-of-contract values are clamped into [0, 1): never the window itself.
    u = 1.0;
    CHECK(b.delay(30) < 2000ms);
    CHECK(b.delay(30) > 1999ms);
    u = 42.0;
    CHECK(b.delay(0) < 20ms);
    u = -1.0;
    CHECK(b.delay(5) == 0ns);
    u = std::nan("");
    CHECK(b.delay(5) == 0ns);

    full_jitter_backoff none(0ms, 2000ms, [] { return 0.5; });
    CHECK(none.delay(3) == 0ns);
}

TEST_CASE("full jitter delays stay in [0, window) and repeat for a seed", "[core][backoff]") {
    full_jitter_backoff a(3ms, 700ms, 99);
    full_jitter_backoff b(3ms, 700ms, 99);
    full_jitter_backoff c(3ms, 700ms, 100);
    bool any_difference = false;
    for (int attempt = 0; attempt < 30; ++attempt) {
        const auto w = full_jitter_backoff::window(3ms, 700ms, attempt);
        for (int i = 0; i < 200; ++i) {
            const auto d = a.delay(attempt);
            REQUIRE(d >= 0ns);
            REQUIRE(d < w);
            REQUIRE(d == b.delay(attempt));
            any_difference = any_difference || d != c.delay(attempt);
        }
    }
    CHECK(any_difference);
}

TEST_CASE("full jitter delays are spread over the whole window", "[core][backoff]") {
    full_jitter_backoff b(1ms, 1000ms, 2024);
    constexpr int draws = 20000;
    double sum_ms = 0;
    int low = 0, high = 0;
    for (int i = 0; i < draws; ++i) {
        const auto d = b.delay(20);
        sum_ms += std::chrono::duration<double, std::milli>(d).count();
        if (d < 100ms) ++low;
        if (d >= 900ms) ++high;
    }
    // Uniform on [0, 1000): mean 500 (standard error about 2 ms), a tenth in each end.
    CHECK(sum_ms / draws == Approx(500.0).epsilon(0.02));
    CHECK(low > 1700);
    CHECK(high > 1700);
}
