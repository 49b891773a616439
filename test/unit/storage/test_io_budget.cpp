#include "run_task.hpp"

#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/io_budget.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;

namespace {
task<void> user(io_budget* b, int* active, int* peak, io_budget::priority p, std::vector<int>* order, int id) {
    auto permit = co_await b->acquire(p, {});
    REQUIRE(permit.has_value());
    order->push_back(id);
    ++*active;
    if (*active > *peak) *peak = *active;
    (void)co_await sleep(2ms);
    --*active;
}
} // namespace

TEST_CASE("io budget bounds a core's requests and serves high priority first", "[storage][budget]") {
    auto t = []() -> task<void> {
        io_budget b(2, nullptr);
        int active = 0, peak = 0;
        std::vector<int> order;
        std::vector<task<void>> users;
        for (int i = 0; i < 4; ++i) users.push_back(user(&b, &active, &peak, io_budget::priority::normal, &order, i));
        users.push_back(user(&b, &active, &peak, io_budget::priority::high, &order, 99));
        co_await when_all(std::move(users));
        CHECK(peak == 2);
        // The two first users got the permits at once; the high-priority one is next.
        REQUIRE(order.size() == 5);
        CHECK(order[2] == 99);
    };
    run_task(t());
}

TEST_CASE("the global cap bounds requests across budgets", "[storage][budget]") {
    auto t = []() -> task<void> {
        global_io_cap cap(3);
        io_budget a(4, &cap), b(4, &cap);
        int active = 0, peak = 0;
        std::vector<int> order;
        std::vector<task<void>> users;
        for (int i = 0; i < 6; ++i) users.push_back(user(i % 2 ? &a : &b, &active, &peak, io_budget::priority::normal, &order, i));
        co_await when_all(std::move(users));
        CHECK(peak == 3);
        CHECK(cap.in_use() == 0);
        CHECK(a.stats().global_waits + b.stats().global_waits > 0);
    };
    run_task(t());
}

TEST_CASE("back-pressure halves the limit and successes grow it back (AIMD)", "[storage][budget]") {
    auto t = []() -> task<void> {
        io_budget b(16, nullptr);
        b.on_throttled();
        CHECK(b.current_limit() == 8);
        b.on_throttled();
        b.on_throttled();
        b.on_throttled();
        b.on_throttled();
        CHECK(b.current_limit() == 1);
        for (int i = 0; i < 1; ++i) b.on_success();
        CHECK(b.current_limit() == 2);
        for (int i = 0; i < 2; ++i) b.on_success();
        CHECK(b.current_limit() == 3);
        for (int i = 0; i < 1000; ++i) b.on_success();
        CHECK(b.current_limit() == 16);
        co_return;
    };
    run_task(t());
}

TEST_CASE("shutdown breaks waiters; cancellation is not success", "[storage][budget]") {
    auto t = []() -> task<void> {
        io_budget b(1, nullptr);
        auto held = co_await b.acquire(io_budget::priority::normal, {});
        REQUIRE(held.has_value());
        std::stop_source src;
        src.request_stop();
        auto c = co_await b.acquire(io_budget::priority::normal, src.get_token());
        REQUIRE_FALSE(c.has_value());
        CHECK(c.error() == make_error_code(errc::cancelled));
        auto breaker = [](io_budget* bb) -> task<int> {
            (void)co_await sleep(1ms);
            bb->shutdown();
            co_return 0;
        };
        auto waiter = [](io_budget* bb) -> task<int> {
            auto p = co_await bb->acquire(io_budget::priority::high, {});
            co_return p.has_value() ? 1 : (p.error() == make_error_code(errc::broken) ? -1 : -2);
        };
        auto [w, _] = co_await when_all(waiter(&b), breaker(&b));
        CHECK(w == -1);
    };
    run_task(t());
}
