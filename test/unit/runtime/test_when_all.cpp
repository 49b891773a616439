#include "run_task.hpp"

#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>
#include <string>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;

namespace {
task<int> value_after(duration d, int v) {
    (void)co_await sleep(d);
    co_return v;
}
task<int> immediate(int v) { co_return v; }
task<void> fail_after(duration d) {
    (void)co_await sleep(d);
    throw std::runtime_error("child failed");
}
task<void> mark_after(duration d, bool* flag) {
    (void)co_await sleep(d);
    *flag = true;
}
} // namespace

TEST_CASE("when_all runs children concurrently and returns all results in order", "[runtime][when_all]") {
    auto t = []() -> task<void> {
        auto start = reactor::local().now();
        auto [a, b, c] = co_await when_all(value_after(30ms, 1), value_after(30ms, 2), immediate(3));
        CHECK(a == 1);
        CHECK(b == 2);
        CHECK(c == 3);
        // Concurrent: about one 30 ms wait, not two.
        CHECK(reactor::local().now() - start < 55ms);
    };
    run_task(t());
}

TEST_CASE("when_all with only synchronous children does not suspend forever", "[runtime][when_all]") {
    auto t = []() -> task<int> {
        auto [a, b] = co_await when_all(immediate(1), immediate(2));
        co_return a + b;
    };
    CHECK(run_task(t()) == 3);
}

TEST_CASE("when_all waits for every child even when one fails", "[runtime][when_all]") {
    auto t = []() -> task<void> {
        bool slow_finished = false;
        try {
            co_await when_all(fail_after(1ms), mark_after(30ms, &slow_finished));
            FAIL("expected an exception");
        } catch (const std::runtime_error& e) {
            CHECK(std::string(e.what()) == "child failed");
        }
        // The failing child did not cut the slow one short: it ran to the end.
        CHECK(slow_finished);
    };
    run_task(t());
}

TEST_CASE("when_all over a vector keeps input order", "[runtime][when_all]") {
    auto t = []() -> task<void> {
        std::vector<task<int>> v;
        for (int i = 0; i < 50; ++i) v.push_back(value_after(std::chrono::milliseconds(50 - i), i));
        auto out = co_await when_all(std::move(v));
        REQUIRE(out.size() == 50);
        for (int i = 0; i < 50; ++i) CHECK(out[static_cast<std::size_t>(i)] == i);
        std::vector<task<int>> empty;
        auto none = co_await when_all(std::move(empty));
        CHECK(none.empty());
    };
    run_task(t());
}

TEST_CASE("when_all of result-returning children reports each outcome", "[runtime][when_all]") {
    auto ok_task = []() -> task<result<int>> { co_return 5; };
    auto err_task = []() -> task<result<int>> { co_return errc::broken; };
    auto t = [](auto a, auto b) -> task<void> {
        auto [x, y] = co_await when_all(a(), b());
        CHECK(x.has_value());
        CHECK(*x == 5);
        CHECK_FALSE(y.has_value());
    };
    run_task(t(ok_task, err_task));
}
