// segment_scan's rolling read-ahead: GETs keep going between next() calls and past a slow
// one, and a scan closed or destroyed with GETs in flight stops them and leaves nothing behind.
#include "reader_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/reader/segment_reader.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/memory_store.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace skiff::test;
using namespace std::chrono_literals;

namespace {

task<std::vector<reader::segment_ref>> discover(object_store& store, std::string topic) {
    reader::topic_discovery d(store, reader_ns, std::move(topic));
    std::stop_token no_stop;
    auto r = co_await d.refresh(no_stop);
    REQUIRE(r.has_value());
    co_return reader::plan(d.partitions(), reader::scan_bounds());
}

std::shared_ptr<memory_bucket> segments(int n) {
    auto bucket = std::make_shared<memory_bucket>();
    for (int i = 0; i < n; ++i) put_segment(*bucket, "t", 0, i, {value_batch(i, 1)});
    return bucket;
}

// Reads two chunks; the read-ahead started by the second one hangs until stopped. True when
// GETs are left in flight (each holds a budget permit).
task<bool> next_hanging(reader::segment_scan& scan, memory_store& store) {
    std::stop_token no_stop;
    auto first = co_await scan.next(no_stop);
    REQUIRE(first.has_value());
    auto slept = co_await sleep(5ms); // the read-ahead budget fills up
    (void)slept;
    store.add_fault(mem_fault_rule("get", "", mem_fault::hang, -1));
    auto second = co_await scan.next(no_stop); // from read-ahead; frees room for a GET that hangs
    REQUIRE(second.has_value());
    REQUIRE(*second != nullptr);
    co_return scan.gets_in_flight() > 0;
}

} // namespace

TEST_CASE("read-ahead goes on while the consumer works between next() calls", "[reader][scan][window]") {
    memory_store store(segments(20));
    store.set_latency(5ms);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        reader::scan_config cfg;
        cfg.parallel_gets = 4;
        reader::segment_scan scan(store, reader_ns, pl, reader::scan_bounds(), cfg);
        std::stop_token no_stop;
        auto first = co_await scan.next(no_stop);
        REQUIRE(first.has_value());
        REQUIRE(*first != nullptr);
        const auto before = scan.stats().gets;
        CHECK(scan.gets_in_flight() > 0); // the window was refilled before next() returned
        // The consumer's own work: the reactor runs, next() is not called. Waves would leave
        // every GET idle here; the window keeps 4 in flight, 5 ms each.
        auto slept = co_await sleep(60ms);
        (void)slept;
        CHECK(scan.stats().gets >= before + 12);
        std::vector<std::int64_t> offsets{(*first)->rows[0].offset};
        for (;;) {
            auto c = co_await scan.next(no_stop);
            REQUIRE(c.has_value());
            if (*c == nullptr) break;
            for (auto& r : (*c)->rows) offsets.push_back(r.offset);
        }
        CHECK(offsets == range_of(0, 20));
        CHECK(scan.stats().read_ahead_hits >= 15);
        co_await scan.close();
    };
    run_task(t(store));
}

TEST_CASE("a slow GET does not hold back the GETs after it", "[reader][scan][window]") {
    memory_store store(segments(20));
    store.set_latency(1ms);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        store.add_fault(mem_fault_rule("get", "00000000000000000003.kfs", mem_fault::hang, -1));
        reader::scan_config cfg;
        cfg.parallel_gets = 4;
        std::stop_source stop;
        auto scan = scan_all(store, pl, reader::scan_bounds(), cfg, stop.get_token());
        auto stopper = [](std::stop_source* s) -> task<void> {
            auto slept = co_await sleep(100ms);
            (void)slept;
            s->request_stop();
        }(&stop);
        auto [out, none] = co_await when_all(std::move(scan), std::move(stopper));
        (void)none;
        REQUIRE(out.error);
        CHECK(out.error->code == reader::errc::cancelled);
        CHECK(offsets_of(out.rows) == range_of(0, 3));
        // Three slots kept rolling past the hung one: every other segment was fetched (the
        // hung GET counts too, once stopped).
        CHECK(out.stats.gets == 20);
        std::uint64_t others = 0;
        for (auto& sr : pl) others += sr.base == 3 ? 0 : sr.kfs_size;
        CHECK(out.stats.bytes_read == others);
        store.clear_faults();
    };
    run_task(t(store));
}

TEST_CASE("read-ahead stays within read_ahead_bytes", "[reader][scan][window]") {
    memory_store store(segments(30));
    store.set_latency(1ms);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        const std::size_t seg = pl.at(0).kfs_size;
        reader::scan_config cfg;
        cfg.parallel_gets = 16;
        cfg.read_ahead_bytes = 3 * seg; // three segments ahead, whatever the GET slots
        reader::segment_scan scan(store, reader_ns, pl, reader::scan_bounds(), cfg);
        std::stop_token no_stop;
        auto first = co_await scan.next(no_stop);
        REQUIRE(first.has_value());
        auto slept = co_await sleep(30ms); // plenty of time to fetch everything, were it allowed
        (void)slept;
        CHECK(scan.stats().gets <= 5);
        CHECK(scan.stats().max_gets_in_flight <= 4);
        std::size_t n = 1;
        for (;;) {
            auto c = co_await scan.next(no_stop);
            REQUIRE(c.has_value());
            if (*c == nullptr) break;
            ++n;
        }
        CHECK(n == 30);
        co_await scan.close();
    };
    run_task(t(store));
}

TEST_CASE("close() and the destructor stop the GETs in flight", "[reader][scan][window]") {
    memory_store store(segments(12));
    store.set_latency(1ms);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        std::stop_token no_stop;
        io_budget budget(32, nullptr);
        reader::scan_config cfg;
        cfg.parallel_gets = 8;
        cfg.read_ahead_bytes = 2 * pl.at(0).kfs_size;
        cfg.budget = &budget;
        {
            reader::segment_scan scan(store, reader_ns, pl, reader::scan_bounds(), cfg);
            auto first = co_await next_hanging(scan, store);
            REQUIRE(first);
            co_await scan.close();
            CHECK(budget.in_flight() == 0); // every GET task ended before close() returned
            CHECK(scan.gets_in_flight() == 0);
            auto after = co_await scan.next(no_stop);
            REQUIRE_FALSE(after.has_value());
            CHECK(after.error().code == reader::errc::cancelled);
            store.clear_faults();
        }
        {
            // Destroyed without close(): stopped at once, the tasks end on a later turn and
            // free the state they hold (the sanitizer build and valgrind check that).
            auto scan = std::make_unique<reader::segment_scan>(store, reader_ns, pl, reader::scan_bounds(), cfg);
            auto first = co_await next_hanging(*scan, store);
            REQUIRE(first);
            CHECK(budget.in_flight() > 0);
            scan.reset();
            auto turn = co_await sleep(1ms);
            (void)turn;
            CHECK(budget.in_flight() == 0);
            store.clear_faults();
        }
    };
    run_task(t(store));
}
