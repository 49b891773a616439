#include <skiff/storage/hedge.hpp>

#include <algorithm>
#include <vector>

namespace skiff::storage {

std::optional<runtime::duration> hedge_policy::delay() const noexcept {
    if (!_cfg.enabled) return std::nullopt;
    if (_cfg.after) return std::chrono::duration_cast<runtime::duration>(*_cfg.after);
    if (_count < min_samples || _p99_ns <= 0) return std::nullopt;
    return std::max(runtime::duration(_p99_ns), std::chrono::duration_cast<runtime::duration>(_cfg.min_delay));
}

void hedge_policy::on_request() noexcept {
    ++_stats.requests;
    // A burst of slow requests may spend what was saved, never more than a few at once.
    _tokens = std::min(_tokens + _cfg.max_ratio, 4.0);
}

void hedge_policy::record(runtime::duration d) noexcept {
    _samples[_count % window] = d.count();
    ++_count;
    if (_count >= min_samples && _count % 32 == 0) {
        const std::size_t n = std::min(_count, window);
        std::vector<std::int64_t> v(_samples.begin(), _samples.begin() + static_cast<std::ptrdiff_t>(n));
        const std::size_t k = (n * 99) / 100;
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
        _p99_ns = v[k];
    }
}

bool hedge_policy::try_hedge() noexcept {
    if (_tokens < 1.0) return false;
    _tokens -= 1.0;
    ++_stats.hedges;
    return true;
}

} // namespace skiff::storage
