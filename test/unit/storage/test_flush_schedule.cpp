// The flush scheduler on a manual clock (docs/flush-scheduling.md): an idle partition uploads
// in the reactor turn of its append; behind an upload in flight, appends gather into one
// segment until a slot frees, the oldest waiter's bound passes, or the segment is full; under
// a request budget, segments grow instead of PUTs. And the request budget itself.
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/put_rate.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::batch_of;
using skiff::test::open_log;
using skiff::test::outcome;

namespace {

const partition_id pid("orders", 0);


log_config adaptive_config() {
    auto c = skiff::test::fast_log_config();
    c.linger.reset();
    c.max_age = 10s; // only the scheduler under test cuts segments
    c.time_index = false; // the tests count the pair's PUTs; the sidecar is test_time_index.cpp's
    c.append_timeout = 60s;
    // Only segment PUTs are counted here, and on a manual clock a manifest PUT at close would
    // wait for time nobody advances.
    c.manifests = false;
    return c;
}

struct producer_result {
    outcome out;
    bool done = false;
    std::uint64_t append_turn = 0;
};

task<void> produce_into(partition_log* log, std::string set, producer_result* r) {
    r->append_turn = reactor::local().loop_turns();
    r->out = co_await skiff::test::produce(log, std::move(set));
    r->done = true;
}

// A reactor on a manual clock, for one test body.
template <typename F>
void on_manual_clock(F body) {
    auto clk = std::make_shared<manual_clock>();
    reactor_config rc;
    rc.clk = clk;
    auto r = make_test_reactor(rc);
    r->run_until_complete(body(clk));
}

std::size_t acked(const std::vector<std::unique_ptr<producer_result>>& rs) {
    std::size_t n = 0;
    for (auto& r : rs) n += r->done && r->out.acked ? 1 : 0;
    return n;
}

} // namespace

TEST_CASE("flush schedule: an idle partition starts its upload in the reactor turn of the append",
          "[storage][flush]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        auto log = co_await open_log(store, budget, pid, adaptive_config());
        std::uint64_t put_turn = 0;
        store.before_put = [&put_turn](const std::string&) {
            if (put_turn == 0) put_turn = reactor::local().loop_turns();
            return true;
        };
        gate g("producers");
        producer_result r;
        (void)g.spawn(produce_into(log.get(), batch_of(0, 1), &r));
        co_await turns(4);
        // No time passed on the clock: no linger was waited.
        CHECK(put_turn != 0);
        CHECK(put_turn == r.append_turn);
        CHECK(r.done);
        CHECK(r.out.acked);
        co_await g.close();
        co_await log->close();
        (void)clk;
    });
}

TEST_CASE("flush schedule: a fixed linger waits for its time where adaptive does not", "[storage][flush]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        auto cfg = adaptive_config();
        cfg.linger = 2ms;
        auto log = co_await open_log(store, budget, pid, cfg);
        const auto puts0 = store.stats().puts;
        gate g("producers");
        producer_result r;
        (void)g.spawn(produce_into(log.get(), batch_of(0, 1), &r));
        co_await turns(4);
        CHECK(store.stats().puts == puts0);
        clk->advance(1ms);
        co_await turns(4);
        CHECK(store.stats().puts == puts0);
        clk->advance(1ms);
        co_await turns(4);
        CHECK(store.stats().puts == puts0 + 2);
        CHECK(r.done);
        co_await g.close();
        co_await log->close();
    });
}

TEST_CASE("flush schedule: appends behind an upload in flight leave as one segment when the slot frees",
          "[storage][flush]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        auto cfg = adaptive_config();
        cfg.max_inflight_flushes = 1; // no second slot: only the first upload's end lets them go
        auto log = co_await open_log(store, budget, pid, cfg);
        store.set_latency(10ms);
        const auto puts0 = store.stats().puts;
        gate g("producers");
        std::vector<std::unique_ptr<producer_result>> rs;
        rs.push_back(std::make_unique<producer_result>());
        (void)g.spawn(produce_into(log.get(), batch_of(0, 1), rs.back().get()));
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 2); // the first segment is uploading
        for (int i = 1; i <= 100; ++i) {
            rs.push_back(std::make_unique<producer_result>());
            (void)g.spawn(produce_into(log.get(), batch_of(i, 1), rs.back().get()));
        }
        co_await turns(3);
        clk->advance(5ms); // past the waiters' bound, but no slot is free
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 2);
        CHECK(acked(rs) == 0);
        clk->advance(5ms); // the first upload lands: its slot frees
        co_await turns(6);
        CHECK(acked(rs) == 1);
        CHECK(store.stats().puts == puts0 + 4); // the 100 appends: one segment, one pair of PUTs
        clk->advance(10ms);
        co_await turns(6);
        CHECK(acked(rs) == 101);
        CHECK(log->stats().flushes == 2);
        std::set<std::int64_t> offsets;
        for (auto& r : rs) offsets.insert(r->out.base);
        CHECK(offsets.size() == 101);
        CHECK(*offsets.rbegin() == 100);
        co_await g.close();
        co_await log->close();
    });
}

TEST_CASE("flush schedule: the oldest waiter's bound follows the round trip and cuts a segment",
          "[storage][flush]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        auto log = co_await open_log(store, budget, pid, adaptive_config());
        store.set_latency(20ms);
        gate g("producers");
        std::vector<std::unique_ptr<producer_result>> rs;
        auto spawn_one = [&](int seq) {
            rs.push_back(std::make_unique<producer_result>());
            (void)g.spawn(produce_into(log.get(), batch_of(seq, 1), rs.back().get()));
        };
        // A first upload teaches the scheduler the round trip: 20 ms, so waiters behind an
        // upload are held at most 5 ms.
        spawn_one(0);
        co_await turns(3);
        clk->advance(20ms);
        co_await turns(6);
        REQUIRE(acked(rs) == 1);
        const auto puts0 = store.stats().puts;
        spawn_one(1); // idle: goes at once
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 2);
        spawn_one(2); // behind it: waits for the bound
        spawn_one(3);
        co_await turns(3);
        clk->advance(4900us);
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 2);
        clk->advance(100us);
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 4); // cut by the bound, the first still in flight
        CHECK(acked(rs) == 1);
        clk->advance(20ms);
        co_await turns(8);
        CHECK(acked(rs) == 4);
        CHECK(log->stats().flushes == 3);
        co_await g.close();
        co_await log->close();
    });
}

TEST_CASE("flush schedule: a full segment is cut at once, whatever is in flight", "[storage][flush]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        auto cfg = adaptive_config();
        cfg.segment_bytes = 1500;
        auto log = co_await open_log(store, budget, pid, cfg);
        store.set_latency(10ms);
        const auto puts0 = store.stats().puts;
        gate g("producers");
        std::vector<std::unique_ptr<producer_result>> rs;
        rs.push_back(std::make_unique<producer_result>());
        (void)g.spawn(produce_into(log.get(), batch_of(0, 1), rs.back().get()));
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 2);
        // Batches of 20 records (a few hundred bytes each) until the buffer passes 1500 bytes.
        for (int i = 0; i < 6; ++i) {
            rs.push_back(std::make_unique<producer_result>());
            (void)g.spawn(produce_into(log.get(), batch_of(100 + 20 * i, 20), rs.back().get()));
        }
        co_await turns(4);
        CHECK(store.stats().puts >= puts0 + 4); // cut by size with no time passing
        // The rest goes when its oldest waiter's bound passes; uploads take 10 ms.
        for (int i = 0; i < 30 && acked(rs) < rs.size(); ++i) {
            clk->advance(1ms);
            co_await turns(4);
        }
        CHECK(acked(rs) == 7);
        CHECK(log->stats().flushes == 3);
        co_await g.close();
        co_await log->close();
    });
}

TEST_CASE("request budget: reservations are spaced 1/rate apart after a burst, across callers", "[storage][flush]") {
    put_rate unlimited;
    CHECK_FALSE(unlimited.limited());
    const time_point t0 = time_point{} + std::chrono::hours(1);
    CHECK(unlimited.reserve(1000, t0) == t0);

    put_rate r(100, 2); // one PUT per 10 ms, bursts of 2
    CHECK(r.limited());
    CHECK(r.reserve(2, t0) == t0);          // the burst
    CHECK(r.reserve(2, t0) == t0 + 10ms);   // then one slot per 10 ms
    CHECK(r.reserve(1, t0) == t0 + 30ms);
    CHECK(r.reserve(1, t0 + 5ms) == t0 + 40ms);
    CHECK(r.granted() == 6);
    CHECK(r.delayed() == 4);
    // Idle time is not banked beyond the burst.
    const time_point later = t0 + 10s;
    CHECK(r.reserve(2, later) == later);
    CHECK(r.reserve(1, later) == later + 10ms);
    // Over any long window: at most rate * T + burst.
    put_rate w(1000, 2);
    int within_second = 0;
    for (int i = 0; i < 5000; ++i) {
        if (w.reserve(1, t0) < t0 + 1s) ++within_second;
    }
    CHECK(within_second <= 1000 + 2);
    CHECK(within_second >= 1000);
}

TEST_CASE("flush schedule: under a request budget segments grow and nothing is lost", "[storage][flush]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        put_rate rate(100, 2); // 50 segments a second
        budget.set_put_rate(&rate);
        auto log = co_await open_log(store, budget, pid, adaptive_config());
        store.set_latency(1ms);
        const auto puts0 = store.stats().puts;
        gate g("producers");
        std::vector<std::unique_ptr<producer_result>> rs;
        // 200 producers, one every 0.5 ms, for 100 ms.
        for (int i = 0; i < 200; ++i) {
            rs.push_back(std::make_unique<producer_result>());
            (void)g.spawn(produce_into(log.get(), batch_of(i, 1), rs.back().get()));
            co_await turns(2);
            clk->advance(500us);
            co_await turns(2);
        }
        for (int i = 0; i < 100 && acked(rs) < rs.size(); ++i) {
            clk->advance(1ms);
            co_await turns(3);
        }
        CHECK(acked(rs) == 200);
        const auto puts = store.stats().puts - puts0;
        // 100 ms of producing plus the drain: about 12 segment pairs fit the budget.
        INFO("PUTs " << puts << ", segments " << log->stats().flushes);
        CHECK(puts <= 2 * 14);
        CHECK(log->stats().flushes <= 14);
        CHECK(rate.delayed() > 0);
        std::set<std::int64_t> offsets;
        for (auto& r : rs) offsets.insert(r->out.base);
        CHECK(offsets.size() == 200);
        co_await g.close();
        co_await log->close();
    });
}

TEST_CASE("flush schedule: behind an upload, a segment goes once every producer the last commit released is back",
          "[storage][flush]") {
    on_manual_clock([](std::shared_ptr<manual_clock> clk) -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        auto log = co_await open_log(store, budget, pid, adaptive_config());
        store.set_latency(20ms);
        gate g("producers");
        std::vector<std::unique_ptr<producer_result>> rs;
        auto spawn_one = [&](int seq) {
            rs.push_back(std::make_unique<producer_result>());
            (void)g.spawn(produce_into(log.get(), batch_of(seq, 1), rs.back().get()));
        };
        // Three producers in one turn: one segment; its commit releases all three.
        for (int i = 0; i < 3; ++i) spawn_one(i);
        co_await turns(3);
        clk->advance(20ms);
        co_await turns(6);
        REQUIRE(acked(rs) == 3);
        const auto puts0 = store.stats().puts;
        spawn_one(3); // the first one back finds the partition idle: it goes at once
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 2);
        spawn_one(4); // the second is held behind that upload (the bound is 5 ms) ...
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 2);
        spawn_one(5); // ... until the third is back too: no time passed
        co_await turns(3);
        CHECK(store.stats().puts == puts0 + 4);
        clk->advance(20ms);
        co_await turns(8);
        CHECK(acked(rs) == 6);
        co_await g.close();
        co_await log->close();
    });
}
