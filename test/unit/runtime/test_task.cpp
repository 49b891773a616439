#include "run_task.hpp"

#include <skiff/runtime/task.hpp>

#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>

using namespace skiff::runtime;

namespace {
task<int> answer() { co_return 42; }
task<int> add_one(int x) {
    int v = co_await answer();
    co_return v + x;
}
task<void> thrower() {
    throw std::runtime_error("boom");
    co_return;
}
task<int> deep(int n) {
    if (n == 0) co_return 0;
    int v = co_await deep(n - 1);
    co_return v + 1;
}
struct counted {
    static inline int alive = 0;
    counted() { ++alive; }
    counted(const counted&) { ++alive; }
    ~counted() { --alive; }
};
task<int> holds(counted c) {
    (void)c;
    co_return 1;
}
} // namespace

TEST_CASE("task is lazy and returns its value", "[runtime][task]") {
    bool started = false;
    auto t = [](bool* s) -> task<int> {
        *s = true;
        co_return 7;
    }(&started);
    CHECK_FALSE(started);
    CHECK(run_task(std::move(t)) == 7);
    CHECK(started);
}

TEST_CASE("task chains values", "[runtime][task]") { CHECK(run_task(add_one(1)) == 43); }

TEST_CASE("task propagates exceptions to the awaiter", "[runtime][task]") {
    CHECK_THROWS_WITH(run_task(thrower()), "boom");
}

TEST_CASE("symmetric transfer keeps deep synchronous chains off the stack", "[runtime][task]") {
    // 100k nested synchronous completions would overflow the stack without symmetric transfer.
    CHECK(run_task(deep(100000)) == 100000);
}

TEST_CASE("destroying an unstarted task frees its frame and arguments", "[runtime][task]") {
    {
        auto t = holds(counted{});
        CHECK(counted::alive == 1);
    }
    CHECK(counted::alive == 0);
}
