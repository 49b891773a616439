#include "run_task.hpp"

#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;

namespace {
struct tracked {
    std::thread::id destroyed_on{};
    std::thread::id* out;
    explicit tracked(std::thread::id* o) : out(o) {}
    tracked(tracked&& o) noexcept : out(std::exchange(o.out, nullptr)) {}
    ~tracked() {
        if (out) *out = std::this_thread::get_id();
    }
};
} // namespace

TEST_CASE("submit_to runs work on the target core and returns to the caller's core", "[runtime][smp]") {
    auto s = make_test_smp(2);
    std::atomic<int> checks_failed{0};
    std::thread::id core0_thread, remote_thread, caller_after, fn_destroyed_on;
    int value = 0;
    s->run([&](unsigned core) -> task<void> {
        if (core != 0) co_return;
        core0_thread = std::this_thread::get_id();
        {
            tracked tr(&fn_destroyed_on);
            value = co_await submit_to(1, [&remote_thread, t = std::move(tr)]() {
                remote_thread = std::this_thread::get_id();
                return reactor::local().core_id() == 1 ? 41 : -1;
            });
        }
        caller_after = std::this_thread::get_id();
        if (reactor::local().core_id() != 0) ++checks_failed;
    });
    CHECK(checks_failed == 0);
    CHECK(value == 41);
    CHECK(remote_thread != core0_thread);
    CHECK(caller_after == core0_thread);
    // The work item (with its captures) is destroyed on the calling core.
    CHECK(fn_destroyed_on == core0_thread);
}

TEST_CASE("submit_to awaits a remote task and carries exceptions back", "[runtime][smp]") {
    auto s = make_test_smp(2);
    int got = 0;
    bool caught = false;
    s->run([&](unsigned core) -> task<void> {
        if (core != 0) co_return;
        got = co_await submit_to(1, []() -> task<int> {
            (void)co_await sleep(2ms);
            co_return static_cast<int>(reactor::local().core_id()) + 100;
        });
        try {
            co_await submit_to(1, []() -> int { throw std::runtime_error("remote"); });
        } catch (const std::runtime_error&) {
            caught = true;
        }
    });
    CHECK(got == 101);
    CHECK(caught);
}

TEST_CASE("many concurrent cross-core calls in both directions", "[runtime][smp]") {
    auto s = make_test_smp(2);
    std::atomic<long> total{0};
    s->run([&](unsigned core) -> task<void> {
        unsigned other = 1 - core;
        std::vector<task<int>> calls;
        for (int i = 0; i < 500; ++i) {
            calls.push_back(submit_to(other, [i] { return i; }));
        }
        auto results = co_await when_all(std::move(calls));
        long sum = 0;
        for (int v : results) sum += v;
        total += sum;
    });
    CHECK(total == 2 * (499L * 500L / 2));
}
