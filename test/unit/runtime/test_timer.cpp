#include "run_task.hpp"

#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;

namespace {
task<std::vector<int>> sleepers_in_order(std::shared_ptr<manual_clock> clk) {
    std::vector<int> order;
    auto sleeper = [](std::vector<int>* out, duration d, int id) -> task<void> {
        auto r = co_await sleep(d);
        REQUIRE(r.has_value());
        out->push_back(id);
    };
    auto driver = [](std::shared_ptr<manual_clock> c) -> task<void> {
        // Let the sleepers arm, then move time in steps.
        for (int i = 0; i < 5; ++i) {
            (void)co_await sleep(0ms);
            c->advance(10ms);
        }
    };
    co_await when_all(sleeper(&order, 30ms, 3), sleeper(&order, 10ms, 1), sleeper(&order, 20ms, 2),
                      driver(clk));
    co_return order;
}
} // namespace

TEST_CASE("timers fire in deadline order on a manual clock", "[runtime][timer]") {
    auto clk = std::make_shared<manual_clock>();
    reactor_config cfg;
    cfg.clk = clk;
    auto r = make_test_reactor(cfg);
    auto order = r->run_until_complete(sleepers_in_order(clk));
    CHECK(order == std::vector<int>{1, 2, 3});
    CHECK(r->timers_armed() == 0);
}

TEST_CASE("a manual-clock sleep does not finish until time is advanced", "[runtime][timer]") {
    auto clk = std::make_shared<manual_clock>();
    reactor_config cfg;
    cfg.clk = clk;
    auto r = make_test_reactor(cfg);
    bool done = false;
    auto t = [](bool* d, std::shared_ptr<manual_clock> c) -> task<void> {
        auto s = [](bool* d2) -> task<void> {
            auto res = co_await sleep(1s);
            CHECK(res.has_value());
            *d2 = true;
        };
        auto check = [](bool* d2, std::shared_ptr<manual_clock> c2) -> task<void> {
            for (int i = 0; i < 10; ++i) (void)co_await sleep(0ms); // many loop turns
            CHECK_FALSE(*d2);
            c2->advance(999ms);
            for (int i = 0; i < 10; ++i) (void)co_await sleep(0ms);
            CHECK_FALSE(*d2);
            c2->advance(1ms);
        };
        co_await when_all(s(d), check(d, c));
    }(&done, clk);
    r->run_until_complete(std::move(t));
    CHECK(done);
}

TEST_CASE("real-clock sleep waits at least its duration via the kernel timeout", "[runtime][timer]") {
    auto t = []() -> task<duration> {
        auto start = reactor::local().now();
        auto r = co_await sleep(20ms);
        CHECK(r.has_value());
        co_return reactor::local().now() - start;
    };
    auto elapsed = run_task(t());
    CHECK(elapsed >= 20ms);
    CHECK(elapsed < 2s);
}

TEST_CASE("sleep cancelled by a stop_token reports cancelled, not success", "[runtime][timer]") {
    auto t = []() -> task<void> {
        std::stop_source src;
        auto sleeper = [](std::stop_token st) -> task<result<void>> { co_return co_await sleep(10s, st); };
        auto stopper = [](std::stop_source* s) -> task<void> {
            (void)co_await sleep(1ms);
            s->request_stop();
        };
        auto start = reactor::local().now();
        auto [res, _] = co_await when_all(sleeper(src.get_token()), stopper(&src));
        REQUIRE_FALSE(res.has_value());
        CHECK(res.error() == make_error_code(errc::cancelled));
        CHECK(reactor::local().now() - start < 5s);
        CHECK(reactor::local().timers_armed() == 0);
    };
    run_task(t());
}

TEST_CASE("sleep with an already-stopped token is cancelled at once", "[runtime][timer]") {
    auto t = []() -> task<void> {
        std::stop_source src;
        src.request_stop();
        auto r = co_await sleep(10s, src.get_token());
        CHECK(r.error() == make_error_code(errc::cancelled));
    };
    run_task(t());
}

TEST_CASE("with_timeout turns a cancelled operation into timed_out", "[runtime][timer]") {
    auto clk = std::make_shared<manual_clock>();
    reactor_config cfg;
    cfg.clk = clk;
    auto r = make_test_reactor(cfg);
    auto t = [](std::shared_ptr<manual_clock> c) -> task<void> {
        auto slow = [](std::stop_token st) -> task<result<void>> { co_return co_await sleep(1h, st); };
        auto fast = [](std::stop_token st) -> task<result<void>> { co_return co_await sleep(1ms, st); };
        auto advance = [](std::shared_ptr<manual_clock> c2) -> task<void> {
            (void)co_await sleep(0ms);
            c2->advance(100ms);
        };
        auto [a, _] = co_await when_all(with_timeout(50ms, slow), advance(c));
        REQUIRE_FALSE(a.has_value());
        CHECK(a.error() == make_error_code(errc::timed_out));
        auto [b, _2] = co_await when_all(with_timeout(50ms, fast), advance(c));
        CHECK(b.has_value());
    };
    r->run_until_complete(t(clk));
}

TEST_CASE("with_timeout keeps a parent's cancellation as cancelled", "[runtime][timer]") {
    auto t = []() -> task<void> {
        std::stop_source parent;
        parent.request_stop();
        auto op = [](std::stop_token st) -> task<result<void>> { co_return co_await sleep(1h, st); };
        auto r = co_await with_timeout(1h, op, parent.get_token());
        CHECK(r.error() == make_error_code(errc::cancelled));
    };
    run_task(t());
}

TEST_CASE("callback timer can be re-armed and cancelled", "[runtime][timer]") {
    auto clk = std::make_shared<manual_clock>();
    reactor_config cfg;
    cfg.clk = clk;
    auto r = make_test_reactor(cfg);
    auto t = [](std::shared_ptr<manual_clock> c) -> task<int> {
        int fired = 0;
        timer tm([&fired] { ++fired; });
        tm.arm_after(10ms);
        tm.arm_after(30ms); // re-arm replaces the first deadline
        c->advance(20ms);
        (void)co_await sleep(0ms);
        CHECK(fired == 0);
        c->advance(20ms);
        (void)co_await sleep(0ms);
        CHECK(fired == 1);
        tm.arm_after(10ms);
        tm.cancel();
        c->advance(20ms);
        (void)co_await sleep(0ms);
        co_return fired;
    };
    CHECK(r->run_until_complete(t(clk)) == 1);
}

namespace {
struct owned_timer {
    int fired = 0;
    std::unique_ptr<fn_timer> t;
};
void destroy_on_fire(void* ctx) {
    auto* o = static_cast<owned_timer*>(ctx);
    ++o->fired;
    o->t.reset(); // the timer is destroyed from inside its own fire()
}
void count_fire(void* ctx) { ++*static_cast<int*>(ctx); }
} // namespace

TEST_CASE("fn_timer re-arms, cancels, and may be destroyed by its own function", "[runtime][timer]") {
    auto clk = std::make_shared<manual_clock>();
    reactor_config cfg;
    cfg.clk = clk;
    auto r = make_test_reactor(cfg);
    auto t = [](std::shared_ptr<manual_clock> c) -> task<void> {
        int fired = 0;
        fn_timer tm(&count_fire, &fired);
        tm.cancel(); // never armed: a no-op
        tm.arm_after(10ms);
        tm.arm_after(30ms); // replaces the first deadline
        c->advance(20ms);
        (void)co_await sleep(0ms);
        CHECK(fired == 0);
        c->advance(20ms);
        (void)co_await sleep(0ms);
        CHECK(fired == 1);
        CHECK_FALSE(tm.armed());
        tm.arm_after(10ms);
        tm.cancel();
        CHECK_FALSE(tm.armed());
        c->advance(20ms);
        (void)co_await sleep(0ms);
        CHECK(fired == 1);

        owned_timer o;
        o.t = std::make_unique<fn_timer>(&destroy_on_fire, &o);
        o.t->arm_after(5ms);
        c->advance(5ms);
        (void)co_await sleep(0ms);
        CHECK(o.fired == 1);
        CHECK(o.t == nullptr);
        {
            // Destroying an armed timer disarms it.
            fn_timer gone(&count_fire, &fired);
            gone.arm_after(5ms);
        }
        c->advance(10ms);
        (void)co_await sleep(0ms);
        CHECK(fired == 1);
        CHECK(reactor::local().timers_armed() == 0);
    };
    r->run_until_complete(t(clk));
}
