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
        // Limit 8 (reads may hold 6, uploads 7): five reads and three uploads fill it; then a
        // read and an upload wait for the shared permits, both within their class's share.
        io_budget b(8, nullptr);
        int active = 0, peak = 0;
        std::vector<int> order;
        std::vector<task<void>> users;
        for (int i = 0; i < 5; ++i) users.push_back(user(&b, &active, &peak, io_budget::priority::normal, &order, i));
        for (int i = 0; i < 3; ++i) users.push_back(user(&b, &active, &peak, io_budget::priority::high, &order, 10 + i));
        users.push_back(user(&b, &active, &peak, io_budget::priority::normal, &order, 5));
        users.push_back(user(&b, &active, &peak, io_budget::priority::high, &order, 99));
        co_await when_all(std::move(users));
        CHECK(peak == 8);
        REQUIRE(order.size() == 10);
        // The upload asked last and is served first.
        CHECK(order[8] == 99);
        CHECK(order[9] == 5);
    };
    run_task(t());
}

TEST_CASE("io budget floors: a burst of reads never takes the permits uploads need, nor uploads all of reads'",
          "[storage][budget]") {
    auto t = []() -> task<void> {
        io_budget b(8, nullptr);
        CHECK(b.class_limit(io_budget::priority::normal) == 6);
        CHECK(b.class_limit(io_budget::priority::high) == 7);
        std::vector<io_budget::permit> reads;
        for (int i = 0; i < 6; ++i) {
            auto p = co_await b.acquire(io_budget::priority::normal, {});
            REQUIRE(p.has_value());
            reads.push_back(std::move(*p));
        }
        // A seventh read waits (its class is full) although two permits are free...
        std::stop_source src;
        auto seventh = [](io_budget* bb, std::stop_token st) -> task<bool> {
            auto p = co_await bb->acquire(io_budget::priority::normal, st);
            co_return p.has_value();
        };
        auto stopper = [](std::stop_source* s) -> task<bool> {
            (void)co_await sleep(20ms);
            s->request_stop();
            co_return true;
        };
        auto [got, _] = co_await when_all(seventh(&b, src.get_token()), stopper(&src));
        CHECK_FALSE(got);
        // ... and those two go to uploads at once.
        auto u1 = co_await b.acquire(io_budget::priority::high, {});
        auto u2 = co_await b.acquire(io_budget::priority::high, {});
        REQUIRE(u1.has_value());
        REQUIRE(u2.has_value());
        CHECK(b.in_flight() == 8);
        reads.clear();
        u1->release();
        u2->release();
        CHECK(b.in_flight() == 0);
        // Back-pressure shrinks the shares with the limit: at 4, reads 3 and uploads 3.
        b.on_throttled();
        CHECK(b.current_limit() == 4);
        CHECK(b.class_limit(io_budget::priority::normal) == 3);
        CHECK(b.class_limit(io_budget::priority::high) == 3);
        // At a limit of 1 the classes share the one permit.
        b.on_throttled();
        b.on_throttled();
        CHECK(b.current_limit() == 1);
        CHECK(b.class_limit(io_budget::priority::normal) == 1);
        CHECK(b.class_limit(io_budget::priority::high) == 1);
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
