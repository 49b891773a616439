#include "run_task.hpp"

#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;

namespace {
task<void> worker(semaphore* s, int* active, int* peak, std::vector<int>* order, int id) {
    auto u = co_await s->acquire(1);
    REQUIRE(u.has_value());
    ++*active;
    if (*active > *peak) *peak = *active;
    order->push_back(id);
    (void)co_await sleep(2ms);
    --*active;
}
task<int> acquire_result(semaphore* s, std::stop_token st, semaphore::priority p, std::vector<int>* order, int id) {
    auto u = co_await s->acquire(1, st, p);
    if (!u) co_return u.error() == make_error_code(errc::cancelled) ? -1 : -2;
    order->push_back(id);
    co_return 1;
}
} // namespace

TEST_CASE("semaphore bounds concurrency and serves waiters FIFO", "[runtime][semaphore]") {
    auto t = []() -> task<void> {
        semaphore s(3, "budget");
        int active = 0, peak = 0;
        std::vector<int> order;
        std::vector<task<void>> ws;
        for (int i = 0; i < 12; ++i) ws.push_back(worker(&s, &active, &peak, &order, i));
        co_await when_all(std::move(ws));
        CHECK(peak == 3);
        std::vector<int> expected;
        for (int i = 0; i < 12; ++i) expected.push_back(i);
        CHECK(order == expected);
        CHECK(s.available() == 3);
        CHECK(s.waiters() == 0);
        CHECK(s.waits_total() == 9);
    };
    run_task(t());
}

TEST_CASE("units return on destruction and try_acquire respects waiters", "[runtime][semaphore]") {
    auto t = []() -> task<void> {
        semaphore s(2);
        {
            auto a = s.try_acquire(2);
            REQUIRE(a.has_value());
            CHECK(s.available() == 0);
            CHECK_FALSE(s.try_acquire(1).has_value());
        }
        CHECK(s.available() == 2);
        co_return;
    };
    run_task(t());
}

TEST_CASE("cancelling a waiter resolves cancelled and lets the next one through", "[runtime][semaphore]") {
    auto t = []() -> task<void> {
        semaphore s(1);
        auto held = s.try_acquire(1);
        REQUIRE(held.has_value());
        std::stop_source first;
        std::vector<int> order;
        auto canceller = [](std::stop_source* src, std::optional<semaphore::units>* h) -> task<int> {
            (void)co_await sleep(1ms);
            src->request_stop();
            (void)co_await sleep(1ms);
            h->reset(); // give the unit back: waiter 2 must get it, not the cancelled one
            co_return 0;
        };
        auto [a, b, c] = co_await when_all(acquire_result(&s, first.get_token(), semaphore::priority::normal, &order, 1),
                                           acquire_result(&s, {}, semaphore::priority::normal, &order, 2),
                                           canceller(&first, &held));
        CHECK(a == -1);
        CHECK(b == 1);
        CHECK(order == std::vector<int>{2});
        CHECK(s.available() == 1);
        (void)c;
    };
    run_task(t());
}

TEST_CASE("broken semaphore fails current and future waiters", "[runtime][semaphore]") {
    auto t = []() -> task<void> {
        semaphore s(0);
        std::vector<int> order;
        auto breaker = [](semaphore* sp) -> task<int> {
            (void)co_await sleep(1ms);
            sp->broken();
            co_return 0;
        };
        auto [a, b, _] = co_await when_all(acquire_result(&s, {}, semaphore::priority::normal, &order, 1),
                                           acquire_result(&s, {}, semaphore::priority::high, &order, 2), breaker(&s));
        CHECK(a == -2);
        CHECK(b == -2);
        auto late = co_await s.acquire(1);
        REQUIRE_FALSE(late.has_value());
        CHECK(late.error() == make_error_code(errc::broken));
    };
    run_task(t());
}

TEST_CASE("high priority waiters go ahead of normal ones", "[runtime][semaphore]") {
    auto t = []() -> task<void> {
        semaphore s(1);
        auto held = s.try_acquire(1);
        std::vector<int> order;
        auto release = [](std::optional<semaphore::units>* h) -> task<int> {
            (void)co_await sleep(1ms);
            h->reset();
            co_return 0;
        };
        co_await when_all(acquire_result(&s, {}, semaphore::priority::normal, &order, 1),
                          acquire_result(&s, {}, semaphore::priority::normal, &order, 2),
                          acquire_result(&s, {}, semaphore::priority::high, &order, 3), release(&held));
        CHECK(order == std::vector<int>{3, 1, 2});
    };
    run_task(t());
}

TEST_CASE("capacity can grow and shrink at run time", "[runtime][semaphore]") {
    auto t = []() -> task<void> {
        semaphore s(1);
        auto a = s.try_acquire(1);
        s.set_capacity(3);
        CHECK(s.available() == 2);
        auto b = s.try_acquire(2);
        REQUIRE(b.has_value());
        s.set_capacity(1); // shrink below what is out: available goes negative
        CHECK(s.available() == -2);
        a.reset();
        b.reset();
        CHECK(s.available() == 1);
        CHECK(s.capacity() == 1);
        co_return;
    };
    run_task(t());
}
