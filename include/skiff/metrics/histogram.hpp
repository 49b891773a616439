// Log-bucketed histograms: the bucket math, the per-core recording cell and the snapshot a
// scrape carries between cores.
//
// Buckets follow HdrHistogram's layout with 32 linear sub-buckets per power of two, so a
// bucket is never wider than 1/32 (3.1 %) of the values it holds and the midpoint reported
// for a quantile is within 1.6 % of every value in it. Values 0..64 have exact buckets. The
// whole uint64 range is covered (1920 buckets, 15 KiB per histogram per core), so nothing is
// ever clamped. Every bucket is a half-open range (lo, hi]: powers of two are exact bucket
// upper bounds, which the Prometheus exposition uses as its `le` boundaries.
//
// record() is a count-leading-zeros, a shift, one increment and a min/max/sum update: no
// allocation, no lock, no atomic. A cell belongs to one core and is only touched there.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace skiff::metrics {

namespace hist {

inline constexpr unsigned sub_bucket_bits = 5;
inline constexpr std::uint64_t sub_buckets = std::uint64_t{1} << sub_bucket_bits; // 32
inline constexpr std::size_t bucket_count = (64 - sub_bucket_bits + 1) * sub_buckets; // 1920

// Index of the bucket holding v. Buckets are (lo, hi]; 0 and 1 share bucket 0.
constexpr std::size_t bucket_index(std::uint64_t v) noexcept {
    const std::uint64_t x = v == 0 ? 0 : v - 1;
    if (x < sub_buckets) return static_cast<std::size_t>(x);
    const unsigned e = 63u - static_cast<unsigned>(std::countl_zero(x)); // floor(log2 x) >= 5
    return static_cast<std::size_t>((e - sub_bucket_bits) * sub_buckets + (x >> (e - sub_bucket_bits)));
}

// Smallest and largest value a bucket holds (inclusive). bucket_lower(0) is 0.
constexpr std::uint64_t bucket_upper(std::size_t i) noexcept {
    if (i < 2 * sub_buckets) return i + 1;
    const unsigned e = static_cast<unsigned>(i / sub_buckets) + sub_bucket_bits - 1;
    const std::uint64_t s = i % sub_buckets + sub_buckets;
    const unsigned shift = e - sub_bucket_bits;
    if (s + 1 == 2 * sub_buckets && e == 63) return std::numeric_limits<std::uint64_t>::max();
    return (s + 1) << shift; // x-space upper bound (exclusive) == v-space upper bound (inclusive)
}
constexpr std::uint64_t bucket_lower(std::size_t i) noexcept {
    if (i == 0) return 0;
    return bucket_upper(i - 1) + 1;
}

} // namespace hist

// What a scrape carries: counts of non-empty buckets (sparse) plus exact count/sum/min/max.
// Plain value type; merging is bucket-wise and exact.
struct histogram_snapshot {
    std::uint64_t count = 0;
    std::uint64_t sum = 0; // wraps after 2^64 (584 years of nanoseconds)
    std::uint64_t min = 0; // 0 when empty
    std::uint64_t max = 0;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> buckets; // (index, count), ascending

    void merge(const histogram_snapshot& o);
    // Value at quantile q in [0, 1]: the midpoint of the bucket holding the rank
    // ceil(q * count) (at least 1), clamped to [min, max]. 0 when empty. q >= 1 gives max.
    double quantile(double q) const noexcept;
    double mean() const noexcept { return count ? static_cast<double>(sum) / static_cast<double>(count) : 0.0; }
    // Values <= bound (bound should be a bucket upper bound, e.g. a power of two, to be exact).
    std::uint64_t count_at_or_below(std::uint64_t bound) const noexcept;
};

// The per-core cell a histogram handle points at. Allocated once at registration.
class histogram_cell {
public:
    histogram_cell() : _buckets(new std::uint64_t[hist::bucket_count]()) {}

    void record(std::uint64_t v) noexcept {
        ++_buckets[hist::bucket_index(v)];
        ++_count;
        _sum += v;
        if (v > _max) _max = v;
        if (v < _min) _min = v;
    }
    std::uint64_t count() const noexcept { return _count; }
    histogram_snapshot snapshot() const;
    void reset() noexcept;

private:
    std::unique_ptr<std::uint64_t[]> _buckets;
    std::uint64_t _count = 0;
    std::uint64_t _sum = 0;
    std::uint64_t _min = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t _max = 0;
};

} // namespace skiff::metrics
