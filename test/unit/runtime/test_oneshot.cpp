#include "run_task.hpp"

#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;

namespace {
task<void> waiter(oneshot<std::string>* o, std::vector<std::string>* got) {
    auto r = co_await o->wait();
    got->push_back(r ? *r : "error:" + r.error().message());
}
} // namespace

TEST_CASE("oneshot: a value set before the wait is returned at once", "[runtime][oneshot]") {
    auto t = []() -> task<void> {
        oneshot<int> o;
        CHECK(o.set(7));
        CHECK(o.is_set());
        REQUIRE(o.value_if_set() != nullptr);
        CHECK(*o.value_if_set() == 7);
        auto r = co_await o.wait();
        REQUIRE(r.has_value());
        CHECK(*r == 7);
        auto again = co_await o; // any number of waits see the value
        REQUIRE(again.has_value());
        CHECK(*again == 7);
        CHECK(o.waiters() == 0);
    };
    run_task(t());
}

TEST_CASE("oneshot: set after the wait wakes every waiter on a later turn, not inline", "[runtime][oneshot]") {
    auto t = []() -> task<void> {
        oneshot<std::string> o;
        std::vector<std::string> got;
        auto setter = [](oneshot<std::string>* os, std::vector<std::string>* g) -> task<void> {
            co_await turns(3);
            CHECK(os->waiters() == 3);
            CHECK(os->set("hello"));
            // Resumption goes through the reactor: nobody has run yet.
            CHECK(g->empty());
            CHECK(os->waiters() == 0);
        };
        co_await when_all(waiter(&o, &got), waiter(&o, &got), waiter(&o, &got), setter(&o, &got));
        CHECK(got == std::vector<std::string>{"hello", "hello", "hello"});
    };
    run_task(t());
}

TEST_CASE("oneshot: only the first set counts", "[runtime][oneshot]") {
    auto t = []() -> task<void> {
        oneshot<int> o;
        auto w = [](oneshot<int>* os) -> task<int> {
            auto r = co_await os->wait();
            co_return r ? *r : -1;
        };
        auto s = [](oneshot<int>* os) -> task<void> {
            co_await turns(2);
            CHECK(os->set(1));
            CHECK_FALSE(os->set(2));
        };
        auto [got, unused] = co_await when_all(w(&o), s(&o));
        (void)unused;
        CHECK(got == 1);
        CHECK_FALSE(o.set(3));
        CHECK(*o.value_if_set() == 1);
    };
    run_task(t());
}

TEST_CASE("oneshot: a wait times out on the manual clock, and a late set does not reach it",
          "[runtime][oneshot]") {
    auto clk = std::make_shared<manual_clock>();
    reactor_config cfg;
    cfg.clk = clk;
    auto r = make_test_reactor(cfg);
    auto t = [](std::shared_ptr<manual_clock> c) -> task<void> {
        oneshot<int> o;
        std::error_code ec;
        bool done = false;
        auto w = [](oneshot<int>* os, std::error_code* e, bool* d) -> task<void> {
            auto res = co_await os->wait(100ms);
            REQUIRE_FALSE(res.has_value());
            *e = res.error();
            *d = true;
        };
        auto drive = [](std::shared_ptr<manual_clock> c2, oneshot<int>* os, bool* d) -> task<void> {
            co_await turns(3);
            c2->advance(99ms);
            co_await turns(3);
            CHECK_FALSE(*d);
            c2->advance(1ms);
            co_await turns(3);
            CHECK(*d);
            CHECK(os->waiters() == 0);
            CHECK(os->set(5)); // nobody waits any more: stored for later waits only
        };
        co_await when_all(w(&o, &ec, &done), drive(c, &o, &done));
        CHECK(ec == make_error_code(errc::timed_out));
        CHECK(reactor::local().timers_armed() == 0);
    };
    r->run_until_complete(t(clk));
}

TEST_CASE("oneshot: a set before the timeout disarms the timer", "[runtime][oneshot]") {
    auto clk = std::make_shared<manual_clock>();
    reactor_config cfg;
    cfg.clk = clk;
    auto r = make_test_reactor(cfg);
    auto t = []() -> task<void> {
        oneshot<int> o;
        auto w = [](oneshot<int>* os) -> task<int> {
            auto res = co_await os->wait(1s);
            co_return res ? *res : -1;
        };
        auto s = [](oneshot<int>* os) -> task<void> {
            co_await turns(2);
            CHECK(reactor::local().timers_armed() == 1);
            os->set(9);
            CHECK(reactor::local().timers_armed() == 0);
        };
        auto [got, unused] = co_await when_all(w(&o), s(&o));
        (void)unused;
        CHECK(got == 9);
    };
    r->run_until_complete(t());
}

TEST_CASE("oneshot: a stop cancels the wait and is never reported as a value", "[runtime][oneshot]") {
    auto t = []() -> task<void> {
        oneshot<int> o;
        std::stop_source src;
        std::error_code ec;
        auto w = [](oneshot<int>* os, std::stop_token st, std::error_code* e) -> task<void> {
            auto res = co_await os->wait(1h, st);
            REQUIRE_FALSE(res.has_value());
            *e = res.error();
        };
        auto s = [](oneshot<int>* os, std::stop_source* ss) -> task<void> {
            co_await turns(2);
            ss->request_stop();
            // The set arrives after the stop, before the waiter ran: it stays cancelled.
            CHECK(os->set(1));
        };
        co_await when_all(w(&o, src.get_token(), &ec), s(&o, &src));
        CHECK(ec == make_error_code(errc::cancelled));
        CHECK(reactor::local().timers_armed() == 0);

        // Stopped before waiting, nothing set: cancelled without suspending.
        oneshot<int> empty;
        auto res = co_await empty.wait(src.get_token());
        REQUIRE_FALSE(res.has_value());
        CHECK(res.error() == make_error_code(errc::cancelled));
        // Set before waiting: the value is there, the wait has nothing to cancel.
        auto present = co_await o.wait(src.get_token());
        REQUIRE(present.has_value());
        CHECK(*present == 1);
    };
    run_task(t());
}

TEST_CASE("oneshot: destruction wakes waiters with broken; unwaited destruction is fine",
          "[runtime][oneshot]") {
    auto t = []() -> task<void> {
        { oneshot<int> unused; }
        {
            oneshot<std::string> set_unwaited;
            set_unwaited.set("x");
        }
        auto o = std::make_unique<oneshot<int>>();
        std::error_code ec;
        auto w = [](oneshot<int>* os, std::error_code* e) -> task<void> {
            auto res = co_await os->wait(1h);
            REQUIRE_FALSE(res.has_value());
            *e = res.error();
        };
        auto d = [](std::unique_ptr<oneshot<int>>* os) -> task<void> {
            co_await turns(2);
            os->reset();
        };
        co_await when_all(w(o.get(), &ec), d(&o));
        CHECK(ec == make_error_code(errc::broken));
        CHECK(reactor::local().timers_armed() == 0);
    };
    run_task(t());
}

TEST_CASE("oneshot<void> works as a latch", "[runtime][oneshot]") {
    auto t = []() -> task<void> {
        oneshot<void> o;
        int woken = 0;
        auto w = [](oneshot<void>* os, int* n) -> task<void> {
            auto res = co_await os->wait();
            CHECK(res.has_value());
            ++*n;
        };
        auto s = [](oneshot<void>* os) -> task<void> {
            co_await turns(2);
            CHECK(os->set());
            CHECK_FALSE(os->set());
        };
        co_await when_all(w(&o, &woken), w(&o, &woken), s(&o));
        CHECK(woken == 2);
        auto late = co_await o;
        CHECK(late.has_value());
    };
    run_task(t());
}
