// The request budget: a process-wide limit on flush PUTs per second, shared by every partition
// of every core (docs/flush-scheduling.md).
//
// A generic cell-rate algorithm over one atomic: each PUT reserves the next free slot on a
// timeline advancing 1/rate per PUT, and starts when its slot comes. Reservations are taken in
// the order they are asked for, whichever core asks, so partitions and cores share the budget
// first come first served, and nobody waits on another core's lock. A burst of `burst` PUTs may
// start at once after an idle spell; beyond that, starts are spaced 1/rate apart, so any window
// of T seconds holds at most rate * T + burst PUTs.
//
// The flush scheduler reserves a segment's two PUTs before it seals the segment: while it
// waits, appends keep joining the buffer, so under the budget segments grow before latency
// does. Retries reserve one slot per attempt; a cancelled wait forfeits its slot (the budget
// errs on the side of fewer requests).
#pragma once

#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/task.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stop_token>

namespace skiff::storage {

class put_rate {
public:
    // `per_second` <= 0: unlimited (acquire() never waits). `burst` >= 1.
    explicit put_rate(double per_second = 0, int burst = 2);
    put_rate(const put_rate&) = delete;
    put_rate& operator=(const put_rate&) = delete;

    bool limited() const noexcept { return _interval_ns > 0; }
    double per_second() const noexcept { return _per_second; }

    // Reserves `n` PUTs asked for at `now`: the time the first may start (`now` when the
    // budget has room). Any thread.
    runtime::time_point reserve(int n, runtime::time_point now) noexcept;
    // Reserves `n` PUTs and sleeps until they may start, on the calling reactor's clock.
    // False when `st` fired first (the reservation is forfeited). Never waits when unlimited.
    runtime::task<bool> acquire(int n, std::stop_token st = {});

    // PUTs granted, and those that had to wait for their slot.
    std::uint64_t granted() const noexcept { return _granted.load(std::memory_order_relaxed); }
    std::uint64_t delayed() const noexcept { return _delayed.load(std::memory_order_relaxed); }

    // Every segment-upload PUT sent, limited or not, and the bytes it carried: the request
    // cost per GB the broker reports. Any thread.
    void record_put(std::size_t bytes) noexcept {
        _puts.fetch_add(1, std::memory_order_relaxed);
        _bytes.fetch_add(bytes, std::memory_order_relaxed);
    }
    std::uint64_t puts() const noexcept { return _puts.load(std::memory_order_relaxed); }
    std::uint64_t put_bytes() const noexcept { return _bytes.load(std::memory_order_relaxed); }

private:
    double _per_second = 0;
    std::int64_t _interval_ns = 0;  // 0: unlimited
    std::int64_t _tolerance_ns = 0; // (burst - 1) intervals
    std::atomic<std::int64_t> _tat{0}; // theoretical arrival time of the next PUT, ns on the clock
    std::atomic<std::uint64_t> _granted{0}, _delayed{0}, _puts{0}, _bytes{0};
};

} // namespace skiff::storage
