#include <skiff/runtime/timer.hpp>
#include <skiff/storage/io_budget.hpp>

#include <chrono>

namespace skiff::storage {

bool global_io_cap::try_take() noexcept {
    std::int64_t cur = _in_use.load(std::memory_order_relaxed);
    while (cur < _cap) {
        if (_in_use.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) return true;
    }
    return false;
}

io_budget::io_budget(std::size_t limit, global_io_cap* global)
    : _sem(limit == 0 ? 1 : limit, "s3-io"), _global(global), _max(limit == 0 ? 1 : limit) {}

runtime::task<result<io_budget::permit>> io_budget::acquire(priority p, std::stop_token st) {
    if (_sem.available() <= 0 || _sem.waiters() > 0) ++_stats.waited;
    auto units = co_await _sem.acquire(1, st, p);
    if (!units) co_return failure{units.error()};
    if (_global) {
        // The global cap is shared with other cores: poll rather than queue across cores.
        while (!_global->try_take()) {
            ++_stats.global_waits;
            auto slept = co_await runtime::sleep(std::chrono::milliseconds(1), st);
            if (!slept) co_return failure{slept.error()};
        }
    }
    ++_stats.acquired;
    co_return permit(std::move(*units), _global);
}

void io_budget::on_throttled() noexcept {
    ++_stats.throttled;
    _successes = 0;
    const std::size_t cur = _sem.capacity();
    const std::size_t next = cur / 2 == 0 ? 1 : cur / 2;
    if (next < cur) {
        _sem.set_capacity(next);
        ++_stats.decreases;
    }
}

void io_budget::on_success() noexcept {
    const std::size_t cur = _sem.capacity();
    if (cur >= _max) return;
    if (++_successes >= cur) {
        _successes = 0;
        _sem.set_capacity(cur + 1);
        ++_stats.increases;
    }
}

} // namespace skiff::storage
