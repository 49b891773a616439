#include <skiff/runtime/timer.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/object_store.hpp>

#include <algorithm>
#include <chrono>

namespace skiff::storage {

bool global_io_cap::try_take() noexcept {
    std::int64_t cur = _in_use.load(std::memory_order_relaxed);
    while (cur < _cap) {
        if (_in_use.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) return true;
    }
    return false;
}

namespace {
std::size_t flush_floor(std::size_t limit) { return limit >= 2 ? std::max<std::size_t>(1, limit / 4) : 0; }
std::size_t read_floor(std::size_t limit) { return limit >= 2 ? std::max<std::size_t>(1, limit / 8) : 0; }
} // namespace

io_budget::io_budget(std::size_t limit, global_io_cap* global)
    : _sem(limit == 0 ? 1 : limit, "s3-io"), _high(1, "s3-io-flush"), _normal(1, "s3-io-read"), _global(global),
      _max(limit == 0 ? 1 : limit) {
    resize(_max);
    if (metrics::metrics_enabled()) {
        auto& reg = metrics::registry::local();
        _m.acquired = reg.counter("skiff_io_budget_acquired_total", "Store request permits granted.");
        _m.waits = reg.counter("skiff_io_budget_waits_total",
                               "Store request permits that could not be granted at once (semaphore waits).");
        _m.global_waits = reg.counter("skiff_io_budget_global_waits_total",
                                      "Polls while the process-wide cap on store requests was full.");
        _m.throttled = reg.counter("skiff_io_budget_throttled_total",
                                   "Back-pressure signals from the store (each halves the core's limit).");
        _m.wait = reg.histogram("skiff_io_budget_wait_duration_seconds",
                                "Time from asking for a store request permit to getting it.", metrics::unit::seconds);
        _m.waiting = reg.gauge("skiff_io_budget_waiting", "Store requests waiting for a permit (queue depth).");
        _m.in_flight = reg.gauge("skiff_io_budget_in_flight", "Store request permits held.");
        _m.limit = reg.gauge("skiff_io_budget_limit", "Current adaptive limit on store requests in flight (AIMD).");
        _m.limit.add(static_cast<std::int64_t>(_sem.capacity()));
    }
}

void io_budget::resize(std::size_t limit) noexcept {
    _sem.set_capacity(limit);
    _high.set_capacity(limit - read_floor(limit));
    _normal.set_capacity(limit - flush_floor(limit));
}

io_budget::~io_budget() { _m.limit.sub(static_cast<std::int64_t>(_sem.capacity())); }

runtime::task<result<io_budget::permit>> io_budget::acquire(priority p, std::stop_token st) {
    const bool timed = static_cast<bool>(_m.wait);
    const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    runtime::semaphore& cls = p == priority::high ? _high : _normal;
    if (_sem.available() <= 0 || _sem.waiters() > 0 || cls.available() <= 0 || cls.waiters() > 0) {
        ++_stats.waited;
        _m.waits.inc();
    }
    // Visible to a scrape only while this coroutine is suspended, i.e. really waiting.
    _m.waiting.add(1);
    // The class first: a request over its class's share waits there, out of the shared queue,
    // so it cannot hold a place the other class needs.
    auto cls_units = co_await cls.acquire(1, st);
    if (!cls_units) {
        _m.waiting.sub(1);
        co_return failure{cls_units.error()};
    }
    auto units = co_await _sem.acquire(1, st, p);
    if (!units) {
        _m.waiting.sub(1);
        co_return failure{units.error()};
    }
    if (_global) {
        // The global cap is shared with other cores: poll rather than queue across cores.
        while (!_global->try_take()) {
            ++_stats.global_waits;
            _m.global_waits.inc();
            auto slept = co_await runtime::sleep(std::chrono::milliseconds(1), st);
            if (!slept) {
                _m.waiting.sub(1);
                co_return failure{slept.error()};
            }
        }
    }
    _m.waiting.sub(1);
    ++_stats.acquired;
    _m.acquired.inc();
    if (timed) _m.wait.record(std::chrono::steady_clock::now() - t0);
    _m.in_flight.add(1);
    co_return permit(std::move(*units), _global, _m.in_flight, std::move(*cls_units));
}

void io_budget::on_throttled() noexcept {
    ++_stats.throttled;
    _m.throttled.inc();
    _successes = 0;
    const std::size_t cur = _sem.capacity();
    const std::size_t next = cur / 2 == 0 ? 1 : cur / 2;
    if (next < cur) {
        resize(next);
        _m.limit.sub(static_cast<std::int64_t>(cur - next));
        ++_stats.decreases;
    }
}

void io_budget::listen_to(object_store& store) {
    store.set_throttle_observer([this] { on_throttled(); });
}

void io_budget::on_success() noexcept {
    const std::size_t cur = _sem.capacity();
    if (cur >= _max) return;
    if (++_successes >= cur) {
        _successes = 0;
        resize(cur + 1);
        _m.limit.add(1);
        ++_stats.increases;
    }
}

} // namespace skiff::storage
