#include <skiff/metrics/histogram.hpp>

#include <algorithm>
#include <cmath>

namespace skiff::metrics {

void histogram_snapshot::merge(const histogram_snapshot& o) {
    if (o.count == 0) return;
    if (count == 0) {
        min = o.min;
        max = o.max;
    } else {
        min = std::min(min, o.min);
        max = std::max(max, o.max);
    }
    count += o.count;
    sum += o.sum;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> out;
    out.reserve(buckets.size() + o.buckets.size());
    auto a = buckets.begin();
    auto b = o.buckets.begin();
    while (a != buckets.end() || b != o.buckets.end()) {
        if (b == o.buckets.end() || (a != buckets.end() && a->first < b->first)) {
            out.push_back(*a++);
        } else if (a == buckets.end() || b->first < a->first) {
            out.push_back(*b++);
        } else {
            out.emplace_back(a->first, a->second + b->second);
            ++a;
            ++b;
        }
    }
    buckets = std::move(out);
}

double histogram_snapshot::quantile(double q) const noexcept {
    if (count == 0) return 0.0;
    if (!(q < 1.0)) return static_cast<double>(max);
    if (!(q > 0.0)) return static_cast<double>(min);
    // The rank of the q-quantile among `count` sorted values (1-based): ceil(q * count).
    auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count)));
    if (rank == 0) rank = 1;
    std::uint64_t seen = 0;
    for (const auto& [idx, n] : buckets) {
        seen += n;
        if (seen >= rank) {
            const double lo = static_cast<double>(hist::bucket_lower(idx));
            const double hi = static_cast<double>(hist::bucket_upper(idx));
            const double mid = lo + (hi - lo) / 2.0;
            return std::clamp(mid, static_cast<double>(min), static_cast<double>(max));
        }
    }
    return static_cast<double>(max);
}

std::uint64_t histogram_snapshot::count_at_or_below(std::uint64_t bound) const noexcept {
    std::uint64_t n = 0;
    for (const auto& [idx, c] : buckets) {
        if (hist::bucket_upper(idx) > bound) break;
        n += c;
    }
    return n;
}

histogram_snapshot histogram_cell::snapshot() const {
    histogram_snapshot s;
    s.count = _count;
    s.sum = _sum;
    s.min = _count ? _min : 0;
    s.max = _max;
    if (_count == 0) return s;
    // Only the range between min and max can hold counts.
    const std::size_t first = hist::bucket_index(s.min);
    const std::size_t last = hist::bucket_index(s.max);
    for (std::size_t i = first; i <= last; ++i) {
        if (_buckets[i]) s.buckets.emplace_back(static_cast<std::uint32_t>(i), _buckets[i]);
    }
    return s;
}

void histogram_cell::reset() noexcept {
    std::fill_n(_buckets.get(), hist::bucket_count, std::uint64_t{0});
    _count = 0;
    _sum = 0;
    _min = std::numeric_limits<std::uint64_t>::max();
    _max = 0;
}

} // namespace skiff::metrics
