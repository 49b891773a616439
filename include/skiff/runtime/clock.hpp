// The reactor's notion of time. Timers and deadlines read it through this interface so
// tests can drive retries and timeouts with a manual clock instead of sleeping.
#pragma once

#include <chrono>

namespace skiff::runtime {

using duration = std::chrono::nanoseconds;
using time_point = std::chrono::time_point<std::chrono::steady_clock, duration>;

class clock {
public:
    virtual ~clock() = default;
    virtual time_point now() const noexcept = 0;
    // A manual clock never moves by itself: the reactor must not sleep in the kernel
    // waiting for it (it would sleep forever).
    virtual bool is_manual() const noexcept { return false; }
};

class steady_clock_source final : public clock {
public:
    time_point now() const noexcept override {
        return std::chrono::time_point_cast<duration>(std::chrono::steady_clock::now());
    }
};

// Time moves only when a test says so. Used on one reactor thread only.
class manual_clock final : public clock {
public:
    explicit manual_clock(time_point start = time_point{} + std::chrono::hours(1)) : _now(start) {}
    time_point now() const noexcept override { return _now; }
    bool is_manual() const noexcept override { return true; }
    void advance(duration d) noexcept { _now += d; }
    void set(time_point t) noexcept { _now = t; }

private:
    time_point _now;
};

} // namespace skiff::runtime
