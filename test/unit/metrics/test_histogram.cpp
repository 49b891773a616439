#include <skiff/metrics/histogram.hpp>
#include <skiff/metrics/registry.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

using namespace skiff::metrics;

// Allocation counting for the hot-path test: every operator new in this binary goes through
// here (the counter is only read around code that must not allocate). Sanitizers bring their
// own operator new, so under them the count is not available.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SKIFF_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SKIFF_TEST_SANITIZED 1
#endif

namespace {
std::atomic<std::uint64_t> g_allocations{0};
}
#ifndef SKIFF_TEST_SANITIZED
constexpr bool counting_allocations = true;
void* operator new(std::size_t n) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete" // the pairs above/below are matched
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#else
constexpr bool counting_allocations = false;
#endif

namespace {

std::uint64_t exact_quantile(std::vector<std::uint64_t> sorted, double q) {
    // Same rank definition as the histogram: the ceil(q * n)-th smallest value (1-based).
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
    if (rank == 0) rank = 1;
    return sorted[rank - 1];
}

void check_accuracy(const std::vector<std::uint64_t>& values) {
    histogram_cell cell;
    for (auto v : values) cell.record(v);
    auto sorted = values;
    std::sort(sorted.begin(), sorted.end());
    const auto snap = cell.snapshot();
    CHECK(snap.count == values.size());
    CHECK(snap.min == sorted.front());
    CHECK(snap.max == sorted.back());
    std::uint64_t sum = 0;
    for (auto v : values) sum += v;
    CHECK(snap.sum == sum);
    for (double q : {0.5, 0.9, 0.99, 0.999}) {
        const double exact = static_cast<double>(exact_quantile(sorted, q));
        const double est = snap.quantile(q);
        // The estimate is the midpoint of the bucket holding the exact value: within half a
        // bucket, and buckets are at most 1/32 of their lower bound wide.
        const double tolerance = std::max(1.0, exact / 64.0 + 1.0);
        INFO("q=" << q << " exact=" << exact << " estimate=" << est);
        CHECK(std::fabs(est - exact) <= tolerance);
    }
    CHECK(snap.quantile(1.0) == static_cast<double>(sorted.back()));
}

} // namespace

TEST_CASE("bucket layout: contiguous, exact powers of two, at most 1/32 wide", "[metrics][histogram]") {
    CHECK(hist::bucket_index(0) == 0);
    CHECK(hist::bucket_index(1) == 0);
    CHECK(hist::bucket_lower(0) == 0);
    for (std::size_t i = 0; i + 1 < hist::bucket_count; ++i) {
        REQUIRE(hist::bucket_upper(i) + 1 == hist::bucket_lower(i + 1));
        REQUIRE(hist::bucket_upper(i) >= hist::bucket_lower(i));
    }
    CHECK(hist::bucket_upper(hist::bucket_count - 1) == std::numeric_limits<std::uint64_t>::max());
    CHECK(hist::bucket_index(std::numeric_limits<std::uint64_t>::max()) == hist::bucket_count - 1);
    // Every power of two is the inclusive upper bound of a bucket (Prometheus `le`).
    for (int k = 0; k < 64; ++k) {
        const std::uint64_t p = std::uint64_t{1} << k;
        REQUIRE(hist::bucket_upper(hist::bucket_index(p)) == p);
    }
    std::mt19937_64 rng(7);
    for (int i = 0; i < 200000; ++i) {
        const std::uint64_t v = rng() >> (rng() % 64);
        const auto idx = hist::bucket_index(v);
        REQUIRE(idx < hist::bucket_count);
        REQUIRE(hist::bucket_lower(idx) <= v);
        REQUIRE(v <= hist::bucket_upper(idx));
        if (v > 64) {
            const auto width = hist::bucket_upper(idx) - hist::bucket_lower(idx) + 1;
            REQUIRE(static_cast<double>(width) <= static_cast<double>(hist::bucket_lower(idx)) / 32.0 + 1e-9);
        } else {
            REQUIRE(hist::bucket_upper(idx) - hist::bucket_lower(idx) <= 1);
        }
    }
}

TEST_CASE("quantiles match exact quantiles within the bucket precision", "[metrics][histogram]") {
    std::mt19937_64 rng(42);
    SECTION("uniform 1 .. 10^6") {
        std::uniform_int_distribution<std::uint64_t> d(1, 1'000'000);
        std::vector<std::uint64_t> v(100000);
        for (auto& x : v) x = d(rng);
        check_accuracy(v);
    }
    SECTION("log-normal latencies in nanoseconds (median ~20 ms, long tail)") {
        std::lognormal_distribution<double> d(std::log(20e6), 1.0);
        std::vector<std::uint64_t> v(100000);
        for (auto& x : v) x = static_cast<std::uint64_t>(d(rng));
        check_accuracy(v);
    }
    SECTION("small integers are exact") {
        std::uniform_int_distribution<std::uint64_t> d(0, 60);
        std::vector<std::uint64_t> v(5000);
        for (auto& x : v) x = d(rng);
        check_accuracy(v);
    }
    SECTION("bimodal sizes with outliers near 2^63") {
        std::vector<std::uint64_t> v;
        for (int i = 0; i < 9000; ++i) v.push_back(4096 + rng() % 100);
        for (int i = 0; i < 990; ++i) v.push_back(8u << 20);
        for (int i = 0; i < 10; ++i) v.push_back((std::uint64_t{1} << 63) + rng() % 1000);
        check_accuracy(v);
    }
    SECTION("a single value") {
        check_accuracy({123456789});
    }
}

TEST_CASE("an empty histogram reports zeros", "[metrics][histogram]") {
    histogram_cell cell;
    auto s = cell.snapshot();
    CHECK(s.count == 0);
    CHECK(s.min == 0);
    CHECK(s.max == 0);
    CHECK(s.quantile(0.5) == 0.0);
    CHECK(s.mean() == 0.0);
    CHECK(s.buckets.empty());
}

TEST_CASE("merging snapshots equals recording everything in one histogram", "[metrics][histogram]") {
    std::mt19937_64 rng(3);
    histogram_cell a, b, all;
    for (int i = 0; i < 20000; ++i) {
        const std::uint64_t v = rng() % 5'000'000;
        (i % 3 ? a : b).record(v);
        all.record(v);
    }
    auto merged = a.snapshot();
    merged.merge(b.snapshot());
    const auto expect = all.snapshot();
    CHECK(merged.count == expect.count);
    CHECK(merged.sum == expect.sum);
    CHECK(merged.min == expect.min);
    CHECK(merged.max == expect.max);
    CHECK(merged.buckets == expect.buckets);
    for (double q : {0.5, 0.9, 0.99, 0.999}) CHECK(merged.quantile(q) == expect.quantile(q));
    // Merging into or from an empty snapshot.
    histogram_snapshot empty;
    empty.merge(expect);
    CHECK(empty.buckets == expect.buckets);
    CHECK(empty.min == expect.min);
    auto copy = expect;
    copy.merge(histogram_snapshot{});
    CHECK(copy.buckets == expect.buckets);
}

TEST_CASE("count_at_or_below is exact at powers of two", "[metrics][histogram]") {
    histogram_cell cell;
    for (std::uint64_t v = 0; v <= 5000; ++v) cell.record(v);
    const auto s = cell.snapshot();
    for (int k = 0; k <= 12; ++k) {
        const std::uint64_t p = std::uint64_t{1} << k;
        CHECK(s.count_at_or_below(p) == p + 1); // 0..p inclusive
    }
}

TEST_CASE("recording is allocation-free, non-throwing and O(1)", "[metrics][histogram]") {
    registry reg;
    auto h = reg.histogram("skiff_test_hot_path_seconds", "hot path", unit::seconds);
    auto c = reg.counter("skiff_test_hot_path_total", "hot path");
    auto g = reg.gauge("skiff_test_hot_path_bytes", "hot path", {}, unit::bytes);
    static_assert(noexcept(h.record(std::uint64_t{1})));
    static_assert(noexcept(c.inc()));
    static_assert(noexcept(g.add(1)));
    std::mt19937_64 rng(1);
    std::vector<std::uint64_t> values(100000);
    for (auto& v : values) v = rng() >> (rng() % 64);
    const auto before = g_allocations.load();
    for (auto v : values) {
        h.record(v);
        h.record(std::chrono::microseconds(static_cast<long>(v % 1000)));
        c.inc();
        g.add(1);
    }
    const auto after = g_allocations.load();
    CHECK(after == before);
    if (!counting_allocations) WARN("allocation counting is off under sanitizers");
    CHECK(h.count() == 2 * values.size());
    CHECK(c.value() == values.size());
    // Inert handles are no-ops, not crashes.
    histogram none;
    none.record(5);
    counter nc;
    nc.inc();
    CHECK(none.count() == 0);
    CHECK(nc.value() == 0);
}
