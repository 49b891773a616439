// The S3 concurrency budget. Every store request of a core takes a permit: a unit of that
// core's semaphore (shared by all of the core's partitions) and a token of the process-wide
// cap (shared by all cores). Flush uploads ask with priority::high and go ahead of prefetch.
//
// Floors: each class (high = flush uploads, normal = reads and the rest) may hold at most the
// limit minus the other class's floor, so a burst of catch-up reads never takes the permits a
// produce's upload needs, nor a flood of uploads every permit a reader needs. The flush floor
// is a quarter of the limit, the read floor an eighth (at least 1 each from a limit of 2; at a
// limit of 1 the classes share the one permit, high first).
//
// The core's limit adapts to back-pressure (AIMD): a throttling answer (SlowDown, 503, 429)
// halves it at the request that got it (the store's throttle observer, see listen_to and
// object_store.hpp), a run of successes grows it by one, never above the configured limit.
// Other failures (resets, 500s, timeouts) leave it alone: they say nothing about our rate.
//
// The global cap is a lock-free counter; a core that finds it full polls with a short sleep
// instead of queueing on another core, so no core ever waits on another core's lock.
//
// Metrics (registered at construction on this core unless metrics::metrics_enabled() is off;
// several budgets on one core add up): skiff_io_budget_acquired_total, _waits_total,
// _global_waits_total, _throttled_total, skiff_io_budget_wait_duration_seconds, and the gauges
// skiff_io_budget_waiting (queue depth), skiff_io_budget_in_flight, skiff_io_budget_limit.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/task.hpp>

#include <atomic>
#include <cstdint>
#include <stop_token>
#include <system_error>

namespace skiff::storage {

class object_store;
class put_rate;
class hedge_policy;

class global_io_cap {
public:
    explicit global_io_cap(std::int64_t cap) : _cap(cap) {}
    bool try_take() noexcept;
    void give() noexcept { _in_use.fetch_sub(1, std::memory_order_acq_rel); }
    std::int64_t in_use() const noexcept { return _in_use.load(std::memory_order_relaxed); }
    std::int64_t cap() const noexcept { return _cap; }

private:
    std::atomic<std::int64_t> _in_use{0};
    const std::int64_t _cap;
};

struct io_budget_stats {
    std::uint64_t acquired = 0;
    std::uint64_t waited = 0;        // acquisitions that could not be served at once
    std::uint64_t global_waits = 0;  // polls while the global cap was full
    std::uint64_t throttled = 0;     // back-pressure signals received
    std::uint64_t decreases = 0;
    std::uint64_t increases = 0;
};

class io_budget {
public:
    using priority = runtime::semaphore::priority;

    class permit {
    public:
        permit() = default;
        // `in_flight` (optional) is decremented once when the permit is released.
        // `cls` (optional): the unit of the request's class (see "Floors" above).
        permit(runtime::semaphore::units u, global_io_cap* g, metrics::gauge in_flight = {},
               runtime::semaphore::units cls = {}) noexcept
            : _units(std::move(u)), _class(std::move(cls)), _global(g), _in_flight(in_flight), _held(true) {}
        permit(permit&& o) noexcept
            : _units(std::move(o._units)), _class(std::move(o._class)), _global(std::exchange(o._global, nullptr)),
              _in_flight(o._in_flight), _held(std::exchange(o._held, false)) {}
        permit& operator=(permit&& o) noexcept {
            if (this != &o) {
                release();
                _units = std::move(o._units);
                _class = std::move(o._class);
                _global = std::exchange(o._global, nullptr);
                _in_flight = o._in_flight;
                _held = std::exchange(o._held, false);
            }
            return *this;
        }
        ~permit() { release(); }
        void release() noexcept {
            if (_global) std::exchange(_global, nullptr)->give();
            _units.release();
            _class.release();
            if (std::exchange(_held, false)) _in_flight.sub(1);
        }

    private:
        runtime::semaphore::units _units;
        runtime::semaphore::units _class;
        global_io_cap* _global = nullptr;
        metrics::gauge _in_flight;
        bool _held = false;
    };

    // `limit`: the most requests this core may have in flight; `global` may be null.
    io_budget(std::size_t limit, global_io_cap* global);
    // Permits must be released before the budget is destroyed.
    ~io_budget();
    io_budget(const io_budget&) = delete;
    io_budget& operator=(const io_budget&) = delete;

    // Waits for a permit. errc::cancelled when `st` fires, errc::broken after shutdown().
    runtime::task<result<permit>> acquire(priority p, std::stop_token st);

    // Back-pressure from the store: halve the limit (not below 1).
    void on_throttled() noexcept;
    // Makes `store`'s throttle observer call on_throttled(): how the budget hears every
    // throttled request of that store, at that request. Call once where both are built, on
    // their core; the budget must outlive the store's requests.
    void listen_to(object_store& store);
    // A request succeeded: after `limit` successes in a row, grow the limit by one.
    void on_success() noexcept;
    // Fail current and future waiters.
    void shutdown() noexcept {
        _sem.broken();
        _high.broken();
        _normal.broken();
    }
    // The process-wide request budget flush uploads pace themselves by (put_rate.hpp); null
    // or unlimited: none. Must outlive the budget's users.
    void set_put_rate(put_rate* r) noexcept { _put_rate = r; }
    put_rate* rate() const noexcept { return _put_rate; }
    // The core's hedging policies for segment PUTs and segment GETs (hedge.hpp); null: none.
    // Must outlive the budget's users.
    void set_hedges(hedge_policy* put, hedge_policy* get) noexcept {
        _put_hedge = put;
        _get_hedge = get;
    }
    hedge_policy* put_hedge() const noexcept { return _put_hedge; }
    hedge_policy* get_hedge() const noexcept { return _get_hedge; }

    std::size_t current_limit() const noexcept { return _sem.capacity(); }
    // The most permits a class may hold at the current limit (see "Floors").
    std::size_t class_limit(priority p) const noexcept {
        return p == priority::high ? _high.capacity() : _normal.capacity();
    }
    std::size_t max_limit() const noexcept { return _max; }
    std::size_t waiting() const noexcept { return _sem.waiters(); }
    std::int64_t in_flight() const noexcept {
        return static_cast<std::int64_t>(_sem.capacity()) - _sem.available();
    }
    const io_budget_stats& stats() const noexcept { return _stats; }

private:
    void resize(std::size_t limit) noexcept;

    runtime::semaphore _sem;
    runtime::semaphore _high;   // flush uploads: the limit minus the read floor
    runtime::semaphore _normal; // everything else: the limit minus the flush floor
    global_io_cap* _global;
    put_rate* _put_rate = nullptr;
    hedge_policy* _put_hedge = nullptr;
    hedge_policy* _get_hedge = nullptr;
    std::size_t _max;
    std::size_t _successes = 0;
    io_budget_stats _stats;
    struct instruments {
        metrics::counter acquired, waits, global_waits, throttled;
        metrics::histogram wait;
        metrics::gauge waiting, in_flight, limit;
    } _m;
};

} // namespace skiff::storage
