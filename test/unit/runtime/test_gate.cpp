#include "run_task.hpp"

#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;

namespace {
task<void> background(int* counter, duration d) {
    (void)co_await sleep(d);
    ++*counter;
}
task<void> until_stopped(std::stop_token st, bool* stopped) {
    auto r = co_await sleep(1h, st);
    *stopped = !r.has_value();
}
task<void> explode() {
    (void)co_await sleep(1ms);
    throw std::runtime_error("background failure");
}
} // namespace

TEST_CASE("gate close waits for spawned background work", "[runtime][gate]") {
    auto t = []() -> task<void> {
        gate g("test");
        int done = 0;
        REQUIRE(g.spawn(background(&done, 10ms)).has_value());
        REQUIRE(g.spawn(background(&done, 20ms)).has_value());
        CHECK(g.count() == 2);
        co_await g.close();
        CHECK(done == 2);
        CHECK(g.count() == 0);
    };
    run_task(t());
}

TEST_CASE("a closed gate refuses new work", "[runtime][gate]") {
    auto t = []() -> task<void> {
        gate g;
        co_await g.close();
        int done = 0;
        auto r = g.spawn(background(&done, 1ms));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error() == make_error_code(errc::gate_closed));
        CHECK_FALSE(g.enter().has_value());
    };
    run_task(t());
}

TEST_CASE("gate close signals its stop token so long loops end", "[runtime][gate]") {
    auto t = []() -> task<void> {
        gate g;
        bool stopped = false;
        REQUIRE(g.spawn(until_stopped(g.stop_token(), &stopped)).has_value());
        auto start = reactor::local().now();
        co_await g.close();
        CHECK(stopped);
        CHECK(reactor::local().now() - start < 5s);
    };
    run_task(t());
}

TEST_CASE("an exception in background work is contained and the gate still closes", "[runtime][gate]") {
    auto t = []() -> task<void> {
        gate g;
        REQUIRE(g.spawn(explode()).has_value());
        co_await g.close();
        CHECK(g.count() == 0);
    };
    run_task(t());
}

TEST_CASE("holders keep the gate open until released; close is idempotent", "[runtime][gate]") {
    auto t = []() -> task<void> {
        gate g;
        auto h = g.enter();
        REQUIRE(h.has_value());
        auto release_later = [](gate::holder hh) -> task<void> {
            (void)co_await sleep(5ms);
            hh.release();
        };
        auto closer = [](gate* gg) -> task<void> { co_await gg->close(); };
        co_await when_all(closer(&g), closer(&g), release_later(std::move(*h)));
        CHECK(g.count() == 0);
        CHECK(g.is_closed());
    };
    run_task(t());
}
