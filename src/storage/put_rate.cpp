#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/put_rate.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace skiff::storage {

put_rate::put_rate(double per_second, int burst) : _per_second(per_second > 0 ? per_second : 0) {
    if (_per_second > 0) {
        _interval_ns = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(1e9 / _per_second)));
        _tolerance_ns = _interval_ns * std::max(0, burst - 1);
    }
}

runtime::time_point put_rate::reserve(int n, runtime::time_point now) noexcept {
    _granted.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    if (!limited() || n <= 0) return now;
    const std::int64_t t = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    std::int64_t tat = _tat.load(std::memory_order_relaxed);
    std::int64_t start = 0;
    for (;;) {
        // The slot timeline never lags `now` by more than the burst: idle time is not banked.
        const std::int64_t base = std::max(tat, t - _tolerance_ns);
        start = base;
        const std::int64_t next = base + _interval_ns * n;
        if (_tat.compare_exchange_weak(tat, next, std::memory_order_acq_rel, std::memory_order_relaxed)) break;
    }
    if (start <= t) return now;
    _delayed.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    return now + std::chrono::nanoseconds(start - t);
}

runtime::task<bool> put_rate::acquire(int n, std::stop_token st) {
    auto& r = runtime::reactor::local();
    const auto now = r.now();
    const auto at = reserve(n, now);
    if (at <= now) co_return !st.stop_requested();
    auto slept = co_await runtime::sleep_until(at, st);
    co_return static_cast<bool>(slept);
}

} // namespace skiff::storage
