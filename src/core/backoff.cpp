#include <skiff/core/backoff.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace skiff {

full_jitter_backoff::full_jitter_backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap,
                                         std::uint64_t seed)
    : _base(base), _cap(cap), _rng(seed) {}

full_jitter_backoff::full_jitter_backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap,
                                         random_source source)
    : _base(base), _cap(cap), _rng(0), _source(std::move(source)) {}

namespace {

// milliseconds holds values whose nanosecond count does not fit; saturate instead of wrapping.
backoff_duration to_ns(std::chrono::milliseconds ms) noexcept {
    constexpr auto max_ms = std::chrono::duration_cast<std::chrono::milliseconds>(backoff_duration::max());
    if (ms >= max_ms) return backoff_duration::max();
    if (ms <= -max_ms) return -backoff_duration::max();
    return ms;
}

} // namespace

backoff_duration full_jitter_backoff::window(std::chrono::milliseconds base_ms, std::chrono::milliseconds cap_ms,
                                             int attempt) noexcept {
    const backoff_duration base = to_ns(base_ms);
    const backoff_duration cap = to_ns(cap_ms);
    if (base.count() <= 0 || cap.count() <= 0) return backoff_duration::zero();
    if (attempt < 0) attempt = 0;
    // base << attempt stays within cap exactly when base <= cap >> attempt; checking that
    // way round never shifts base, so nothing can overflow.
    constexpr int rep_bits = std::numeric_limits<backoff_duration::rep>::digits;
    if (attempt >= rep_bits) return cap;
    const auto limit = cap.count() >> attempt;
    if (base.count() > limit) return cap;
    return backoff_duration(base.count() << attempt);
}

double full_jitter_backoff::draw() {
    if (!_source) {
        // 53 random bits fill a double's mantissa: uniform on [0, 1), identical on every
        // compiler (std::uniform_real_distribution is not specified that tightly).
        return static_cast<double>(_rng() >> 11) * 0x1.0p-53;
    }
    const double u = _source();
    if (!(u >= 0.0)) return 0.0; // also catches NaN
    if (u >= 1.0) return std::nextafter(1.0, 0.0);
    return u;
}

backoff_duration full_jitter_backoff::delay(int attempt) {
    const backoff_duration w = window(_base, _cap, attempt);
    if (w.count() == 0) return w;
    // u < 1 and the product is truncated, so the result stays below the window.
    const auto ns = static_cast<backoff_duration::rep>(draw() * static_cast<double>(w.count()));
    return backoff_duration(std::min(ns, w.count() - 1));
}

} // namespace skiff
