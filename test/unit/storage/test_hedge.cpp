// Hedged store requests (hedge.hpp, hedged.hpp) on a manual clock: the policy's delay (the
// recent p99, or a fixed one) and its bound on extra requests; a PUT stalled in the store is
// sent again and the twin's success acknowledges the append; a stalled segment GET is too;
// a failure before the delay is the answer, without a hedge.
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include "../../../src/storage/hedged.hpp"

#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/storage/hedge.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::batch_of;
using skiff::test::open_log;
using skiff::test::outcome;

namespace {

template <typename F>
void on_manual_clock(F body) {
    auto clk = std::make_shared<manual_clock>();
    reactor_config rc;
    rc.clk = clk;
    auto r = make_test_reactor(rc);
    r->run_until_complete(body(clk));
}

struct producer_result {
    outcome out;
    bool done = false;
};

task<void> produce_into(partition_log* log, std::string set, producer_result* r) {
    r->out = co_await skiff::test::produce(log, std::move(set));
    r->done = true;
}

} // namespace

TEST_CASE("hedge policy: the delay is the recent p99 once known, and hedges stay within their share",
          "[storage][hedge]") {
    hedge_policy p;
    CHECK_FALSE(p.delay().has_value()); // nothing known yet
    for (int i = 0; i < 99; ++i) p.record(10ms);
    p.record(200ms);
    for (int i = 0; i < 28; ++i) p.record(10ms); // 128 samples: p99 recomputed
    REQUIRE(p.delay().has_value());
    CHECK(*p.delay() >= 10ms);
    CHECK(*p.delay() <= 200ms);

    hedge_config fixed;
    fixed.after = 30ms;
    CHECK(hedge_policy(fixed).delay() == runtime::duration(30ms));
    hedge_config off;
    off.enabled = false;
    off.after = 30ms;
    CHECK_FALSE(hedge_policy(off).delay().has_value());

    // 1,000 requests earn 5% of hedges (plus the one it starts with).
    hedge_policy q;
    int hedges = 0;
    for (int i = 0; i < 1000; ++i) {
        q.on_request();
        if (q.try_hedge()) ++hedges;
    }
    CHECK(hedges <= 51);
    CHECK(hedges >= 49);
    CHECK(q.stats().hedges == static_cast<std::uint64_t>(hedges));
}

TEST_CASE("hedged request: a stalled PUT is sent again and the twin's success is the answer", "[storage][hedge]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        store.set_latency(5ms);
        store.add_fault(mem_fault_rule("put", "k", mem_fault::hang, 1));
        hedge_config cfg;
        cfg.after = 20ms;
        hedge_policy policy(cfg);
        gate g("hedge");
        auto body = std::make_shared<const std::string>("bytes");
        storage::detail::hedge_attempt<void> put_one = [&store, body](std::stop_token st) {
            return store.put_once("k", std::span<const char>(body->data(), body->size()), true, st);
        };
        bool hedged = false;
        std::optional<result<void, store_error>> got;
        auto run = [](hedge_policy* p, gate* gg, storage::detail::hedge_attempt<void> a, bool* h,
                      std::optional<result<void, store_error>>* out) -> task<void> {
            *out = co_await storage::detail::run_hedged<void>(p, *gg, std::move(a), {}, h);
        };
        gate outer("test");
        (void)outer.spawn(run(&policy, &g, put_one, &hedged, &got));
        co_await turns(3);
        clk->advance(19ms);
        co_await turns(3);
        CHECK_FALSE(got.has_value());
        CHECK(store.stats().puts == 1);
        clk->advance(1ms); // the delay: the twin goes
        co_await turns(3);
        CHECK(store.stats().puts == 2);
        clk->advance(5ms); // the twin's round trip
        co_await turns(5);
        REQUIRE(got.has_value());
        CHECK(got->has_value());
        CHECK(hedged);
        CHECK(policy.stats().hedges == 1);
        CHECK(policy.stats().wins == 1);
        CHECK(store.bucket().objects.count("k") == 1);
        co_await outer.close();
        co_await g.close(); // the stalled first attempt was stopped
    });
}

TEST_CASE("hedged request: a failure before the delay is the answer, without a hedge", "[storage][hedge]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        store.set_latency(5ms);
        store.add_fault(mem_fault_rule("put", "k", mem_fault::fail_reset, 1));
        hedge_config cfg;
        cfg.after = 20ms;
        hedge_policy policy(cfg);
        gate g("hedge");
        storage::detail::hedge_attempt<void> put_one = [&store](std::stop_token st) {
            static const std::string body = "bytes";
            return store.put_once("k", std::span<const char>(body.data(), body.size()), true, st);
        };
        std::optional<result<void, store_error>> got;
        auto run = [](hedge_policy* p, gate* gg, storage::detail::hedge_attempt<void> a,
                      std::optional<result<void, store_error>>* out) -> task<void> {
            *out = co_await storage::detail::run_hedged<void>(p, *gg, std::move(a), {});
        };
        gate outer("test");
        (void)outer.spawn(run(&policy, &g, put_one, &got));
        co_await turns(2);
        clk->advance(5ms);
        co_await turns(5);
        REQUIRE(got.has_value());
        CHECK_FALSE(got->has_value());
        CHECK(got->error().code == storage::errc::transient);
        CHECK(policy.stats().hedges == 0);
        CHECK(store.stats().puts == 1);
        co_await outer.close();
        co_await g.close();
    });
}

TEST_CASE("hedged flush: an append behind a stalled segment PUT is acknowledged through the twin",
          "[storage][hedge]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        hedge_config cfg;
        cfg.after = 30ms;
        hedge_policy put_hedge(cfg), get_hedge(cfg);
        budget.set_hedges(&put_hedge, &get_hedge);
        auto lcfg = skiff::test::fast_log_config();
        lcfg.linger.reset();
        lcfg.append_timeout = 60s;
        lcfg.manifests = false; // its PUT at close would wait on the manual clock
        auto log = co_await open_log(store, budget, partition_id("orders", 0), lcfg);
        store.set_latency(10ms);
        store.add_fault(mem_fault_rule("put", ".kfs", mem_fault::hang, 1));
        gate g("producers");
        producer_result r;
        (void)g.spawn(produce_into(log.get(), batch_of(0, 3), &r));
        for (int i = 0; i < 100 && !r.done; ++i) {
            clk->advance(1ms);
            co_await turns(4);
        }
        CHECK(r.done);
        CHECK(r.out.acked);
        CHECK(put_hedge.stats().hedges == 1);
        CHECK(put_hedge.stats().wins == 1);
        CHECK(log->high_watermark() == 3);

        // A segment GET that stalls is hedged the same way (the cache is dropped by a reopen).
        co_await log->close();
        store.set_latency(0ms); // the manual clock stands still while the restore runs
        auto again = co_await open_log(store, budget, partition_id("orders", 0), lcfg);
        store.set_latency(10ms);
        store.add_fault(mem_fault_rule("get", ".kfs", mem_fault::hang, 1));
        std::optional<bool> read_ok;
        auto reader = [](partition_log* l, std::optional<bool>* ok) -> task<void> {
            auto rr = co_await l->read(0, 1 << 20);
            *ok = rr.has_value() && !rr->records.empty();
        };
        (void)g.spawn(reader(again.get(), &read_ok));
        for (int i = 0; i < 100 && !read_ok; ++i) {
            clk->advance(1ms);
            co_await turns(4);
        }
        REQUIRE(read_ok.has_value());
        CHECK(*read_ok);
        CHECK(get_hedge.stats().hedges >= 1);
        co_await g.close();
        co_await again->close();
    });
}
