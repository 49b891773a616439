// The partition log under failure: every scenario ends with the same audit — every
// acknowledged record is readable, in order, once per offset, and nothing unacknowledged was
// reported acknowledged.
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/cache_budget.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::audit;
using skiff::test::batch_of;
using skiff::test::outcome;
using skiff::test::produce;
using skiff::test::read_all;
using skiff::test::open_log;

namespace {

const partition_id pid("orders", 3);

log_config test_config() { return skiff::test::fast_log_config(); }

// A record set with one batch of `n` records whose values name the producer's sequence.

} // namespace

TEST_CASE("durable appends are acknowledged, readable, and survive a restart", "[storage][log]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        std::vector<task<outcome>> ps;
        std::vector<int> seqs;
        for (int i = 0; i < 20; ++i) {
            ps.push_back(produce(log.get(), batch_of(i * 10, 10)));
            seqs.push_back(i * 10);
        }
        auto outs = co_await when_all(std::move(ps));
        for (auto& o : outs) CHECK(o.acked);
        CHECK(log->high_watermark() == 200);
        audit(outs, seqs, co_await read_all(log.get()));
        co_await log->close();

        // A fresh process on the same bucket.
        memory_store store2(b);
        auto log2 = co_await open_log(store2, budget, pid, test_config());
        CHECK(log2->next_offset() == 200);
        CHECK(log2->high_watermark() == 200);
        CHECK(log2->restored().orphan_kfs == 0);
        audit(outs, seqs, co_await read_all(log2.get()));
        auto more = co_await produce(log2.get(), batch_of(1000, 5));
        CHECK(more.acked);
        CHECK(more.base == 200);
        co_await log2->close();
    };
    run_task(t(bucket));
    // Keys follow the KafScale layout.
    CHECK(bucket->objects.count("default/orders/3/segment-00000000000000000000.kfs") == 1);
    CHECK(bucket->objects.count("default/orders/3/segment-00000000000000000000.index") == 1);
}

TEST_CASE("parallel mode has both PUTs of a flush in flight at once; sequential never does", "[storage][log]") {
    for (auto mode : {upload_mode::parallel, upload_mode::sequential}) {
        auto t = [](upload_mode m) -> task<std::int64_t> {
            memory_store store;
            store.set_latency(5ms);
            io_budget budget(8, nullptr);
            auto cfg = test_config();
            cfg.mode = m;
            cfg.max_inflight_flushes = 1;
            cfg.time_index = false; // the pair alone (the sidecar's overlap: test_time_index.cpp)
            auto log = co_await open_log(store, budget, pid, cfg);
            for (int i = 0; i < 3; ++i) {
                auto o = co_await produce(log.get(), batch_of(i, 1));
                CHECK(o.acked);
            }
            co_await log->close();
            co_return store.stats().max_concurrent_puts;
        };
        auto peak = run_task(t(mode));
        CHECK(peak == (mode == upload_mode::parallel ? 2 : 1));
    }
}

TEST_CASE("a failing .kfs PUT, a failing .index PUT, or both are retried before acknowledging", "[storage][log][faults]") {
    struct scenario {
        const char* name;
        std::vector<mem_fault_rule> rules;
    };
    std::vector<scenario> scenarios = {
        {"kfs fails, index succeeds", {mem_fault_rule("put", ".kfs", mem_fault::fail_transient, 3)}},
        {"index fails, kfs succeeds", {mem_fault_rule("put", ".index", mem_fault::fail_transient, 3)}},
        {"both fail", {mem_fault_rule("put", ".kfs", mem_fault::fail_transient, 2),
                       mem_fault_rule("put", ".index", mem_fault::fail_transient, 4)}},
        {"SlowDown burst on everything", {mem_fault_rule("put", "", mem_fault::fail_transient, 10)}},
        {"lost answers (applied, reported failed)", {mem_fault_rule("put", "", mem_fault::lost_answer, 3)}},
    };
    for (auto& sc : scenarios) {
        SECTION(sc.name) {
            auto bucket = std::make_shared<memory_bucket>();
            auto t = [](std::shared_ptr<memory_bucket> b, std::vector<mem_fault_rule> rules) -> task<void> {
                memory_store store(b);
                for (auto& r : rules) store.add_fault(r);
                io_budget budget(8, nullptr);
                auto log = co_await open_log(store, budget, pid, test_config());
                std::vector<task<outcome>> ps;
                std::vector<int> seqs;
                for (int i = 0; i < 6; ++i) {
                    ps.push_back(produce(log.get(), batch_of(i * 3, 3)));
                    seqs.push_back(i * 3);
                }
                auto outs = co_await when_all(std::move(ps));
                for (auto& o : outs) CHECK(o.acked);
                CHECK(log->stats().upload_retries > 0);
                audit(outs, seqs, co_await read_all(log.get()));
                co_await log->close();
                memory_store again(b);
                auto log2 = co_await open_log(again, budget, pid, test_config());
                CHECK(log2->restored().orphan_kfs == 0);
                CHECK(log2->restored().orphan_index == 0);
                audit(outs, seqs, co_await read_all(log2.get()));
                co_await log2->close();
            };
            run_task(t(bucket, sc.rules));
        }
    }
}

TEST_CASE("an outage times appends out as retriable errors, never as success; data lands later",
          "[storage][log][faults]") {
    auto t = []() -> task<void> {
        memory_store store;
        store.add_fault(mem_fault_rule("put", "", mem_fault::fail_transient, -1));
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        cfg.append_timeout = 100ms;
        auto log = co_await open_log(store, budget, pid, cfg);
        auto o = co_await produce(log.get(), batch_of(0, 4));
        CHECK_FALSE(o.acked);
        REQUIRE(o.error.has_value());
        CHECK(*o.error == append_errc::timed_out);
        CHECK(log->high_watermark() == 0);
        // The store recovers: the data kept being retried and now commits.
        store.clear_faults();
        auto ok = co_await log->wait_for_data(0, 5s);
        CHECK(ok);
        CHECK(log->high_watermark() == 4);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("regression: a producer behind a failed flush is not told success (KafScale's lost ack)",
          "[storage][log][faults]") {
    // Flush 1 (.kfs) keeps failing; flush 2 uploads fine. The producer of flush 2 must wait
    // for flush 1, since acknowledging it would expose offsets above an uncommitted hole.
    auto t = []() -> task<void> {
        memory_store store;
        store.add_fault(mem_fault_rule("put", "segment-00000000000000000000.kfs", mem_fault::fail_transient, 30));
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        cfg.max_inflight_flushes = 4;
        auto log = co_await open_log(store, budget, pid, cfg);
        auto first = [](partition_log* l) -> task<outcome> { co_return co_await produce(l, batch_of(0, 2)); };
        auto second = [](partition_log* l, memory_store* s) -> task<outcome> {
            (void)co_await sleep(10ms); // lands in the next segment
            auto o = co_await produce(l, batch_of(2, 2));
            // When we are acknowledged, segment 0 must already be stored.
            CHECK(s->bucket().objects.count("default/orders/3/segment-00000000000000000000.kfs") == 1);
            co_return o;
        };
        auto [a, b] = co_await when_all(first(log.get()), second(log.get(), &store));
        CHECK(a.acked);
        CHECK(b.acked);
        CHECK(b.base == 2);
        CHECK(log->high_watermark() == 4);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("a stop between the two PUTs leaves an orphan .kfs that restore serves and repairs",
          "[storage][log][faults]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        std::vector<outcome> outs;
        std::vector<int> seqs;
        {
            memory_store store(b);
            io_budget budget(8, nullptr);
            auto cfg = test_config();
            cfg.mode = upload_mode::sequential; // .kfs lands, then "the process dies"
            cfg.close_timeout = 100ms;
            auto log = co_await open_log(store, budget, pid, cfg);
            auto ok1 = co_await produce(log.get(), batch_of(0, 5));
            CHECK(ok1.acked);
            outs.push_back(ok1);
            seqs.push_back(0);
            store.before_put = [](const std::string& key) { return key.find(".index") == std::string::npos; };
            auto doomed = [](partition_log* l) -> task<outcome> { co_return co_await produce(l, batch_of(5, 5)); };
            auto killer = [](partition_log* l) -> task<outcome> {
                (void)co_await sleep(30ms);
                co_await l->close();
                co_return outcome{};
            };
            auto [d, _] = co_await when_all(doomed(log.get()), killer(log.get()));
            CHECK_FALSE(d.acked); // never acknowledged: its .index never landed
            REQUIRE(d.error.has_value());
            CHECK(*d.error == append_errc::shutting_down);
        }
        CHECK(b->objects.count("default/orders/3/segment-00000000000000000005.kfs") == 1);
        CHECK(b->objects.count("default/orders/3/segment-00000000000000000005.index") == 0);

        memory_store store2(b);
        io_budget budget2(8, nullptr);
        auto log2 = co_await open_log(store2, budget2, pid, test_config());
        CHECK(log2->restored().orphan_kfs == 1);
        CHECK(log2->next_offset() == 10); // from the orphan's own footer
        auto all = co_await read_all(log2.get());
        audit(outs, seqs, all);
        CHECK(all.size() == 10); // the orphan's records are served by walking it
        co_await log2->close();  // waits for the repair under the gate
        CHECK(log2->restored().repaired == 1);
    };
    run_task(t(bucket));
    CHECK(bucket->objects.count("default/orders/3/segment-00000000000000000005.index") == 1);
}

TEST_CASE("an orphan .index is ignored and its base offset never reused", "[storage][log][faults]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        {
            memory_store store(b);
            io_budget budget(8, nullptr);
            auto log = co_await open_log(store, budget, pid, test_config());
            auto done3 = co_await produce(log.get(), batch_of(0, 3));
            CHECK(done3.acked);
            co_await log->close();
        }
        b->objects["default/orders/3/segment-00000000000000000003.index"] = "stale index bytes";
        memory_store store2(b);
        io_budget budget2(8, nullptr);
        auto log2 = co_await open_log(store2, budget2, pid, test_config());
        CHECK(log2->restored().orphan_index == 1);
        CHECK(log2->next_offset() == 4);
        auto o = co_await produce(log2.get(), batch_of(3, 2));
        CHECK(o.acked);
        CHECK(o.base == 4);
        auto all = co_await read_all(log2.get());
        CHECK(all.size() == 5); // 0,1,2 then the gap at 3 is skipped, 4,5
        CHECK(all.count(3) == 0);
        co_await log2->close();
    };
    run_task(t(bucket));
}

TEST_CASE("a .kfs with a wrong footer is reported and never served", "[storage][log][faults]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        {
            memory_store store(b);
            io_budget budget(8, nullptr);
            auto log = co_await open_log(store, budget, pid, test_config());
            auto done4 = co_await produce(log.get(), batch_of(0, 3));
            CHECK(done4.acked);
            auto done5 = co_await produce(log.get(), batch_of(3, 3));
            CHECK(done5.acked);
            co_await log->close();
        }
        // Truncate the newest segment: its footer is gone.
        auto& newest = b->objects["default/orders/3/segment-00000000000000000003.kfs"];
        newest.resize(newest.size() - 7);
        memory_store store2(b);
        io_budget budget2(8, nullptr);
        auto log2 = co_await open_log(store2, budget2, pid, test_config());
        CHECK(log2->restored().corrupt == 1);
        auto all = co_await read_all(log2.get());
        CHECK(all.size() == 3);
        CHECK(all.count(3) == 0);
        // New data never reuses the corrupt segment's base offset.
        auto o = co_await produce(log2.get(), batch_of(100, 1));
        CHECK(o.acked);
        CHECK(o.base > 3);
        co_await log2->close();
    };
    run_task(t(bucket));
}

TEST_CASE("pipelining: several flushes in flight commit in offset order", "[storage][log]") {
    auto t = []() -> task<void> {
        memory_store store;
        store.set_latency(20ms);
        io_budget budget(16, nullptr);
        auto cfg = test_config();
        cfg.max_inflight_flushes = 4;
        cfg.segment_bytes = 1; // every append is its own segment
        auto log = co_await open_log(store, budget, pid, cfg);
        std::vector<task<outcome>> ps;
        std::vector<int> seqs;
        for (int i = 0; i < 8; ++i) {
            ps.push_back(produce(log.get(), batch_of(i, 1)));
            seqs.push_back(i);
        }
        auto outs = co_await when_all(std::move(ps));
        for (auto& o : outs) CHECK(o.acked);
        CHECK(store.stats().max_concurrent_puts >= 4); // more than one flush uploading
        CHECK(log->stats().flushes == 8);
        audit(outs, seqs, co_await read_all(log.get()));
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("memory is bounded: at the bound appends wait", "[storage][log]") {
    auto t = []() -> task<void> {
        memory_store store;
        store.add_fault(mem_fault_rule("put", "", mem_fault::hang, 2));
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        auto one = batch_of(0, 1);
        cfg.max_pending_bytes = one.size() * 2;
        cfg.append_timeout = 10s;
        auto log = co_await open_log(store, budget, pid, cfg);
        // Two buffered appends fill the budget (acks=1: buffered, not yet durable).
        for (int i = 0; i < 2; ++i) {
            auto r = co_await log->append(std::span<const char>(one.data(), one.size()), ack_mode::leader);
            REQUIRE(r.has_value());
        }
        CHECK(log->stats().pending_bytes == one.size() * 2);
        std::stop_source src;
        auto third = [](partition_log* l, std::string set, std::stop_token st) -> task<bool> {
            auto r = co_await l->append(std::span<const char>(set.data(), set.size()), ack_mode::leader, st);
            co_return r.has_value();
        };
        auto stopper = [](std::stop_source* s) -> task<bool> {
            (void)co_await sleep(50ms);
            s->request_stop();
            co_return true;
        };
        auto [appended, _] = co_await when_all(third(log.get(), one, src.get_token()), stopper(&src));
        CHECK_FALSE(appended); // it waited for room, then was cancelled
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("admission: at the bound an append waits up to its room timeout; none in time is no_room, nothing written",
          "[storage][log][admission]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        auto one = batch_of(0, 1);
        cfg.max_pending_bytes = one.size() * 2;
        auto log = co_await open_log(store, budget, pid, cfg);
        store.set_latency(150ms); // every upload takes 150 ms: the store is behind
        const std::span<const char> set(one.data(), one.size());
        for (int i = 0; i < 2; ++i) {
            auto r = co_await log->append(set, ack_mode::leader);
            REQUIRE(r.has_value());
            CHECK(r->room_wait == 0ns); // room was there
        }
        // Both sets hold their room until stored: the age trigger (50 ms) starts their upload.
        auto batches = split_batches(set);
        REQUIRE(batches.has_value());
        // No room within 20 ms: refused, and nothing of it was appended.
        auto refused = co_await log->append(std::span<const batch_view>(*batches), ack_mode::leader, {}, 20ms);
        REQUIRE_FALSE(refused.has_value());
        CHECK(refused.error().code == append_errc::no_room);
        CHECK(refused.error().last_offset == -1);
        CHECK(refused.error().room_wait >= 20ms);
        // Room comes back when the upload lands: a longer timeout gets it and says it waited.
        auto batches2 = split_batches(set);
        REQUIRE(batches2.has_value());
        auto waited = co_await log->append(std::span<const batch_view>(*batches2), ack_mode::durable, {}, 5s);
        REQUIRE(waited.has_value());
        CHECK(waited->base_offset == 2); // the refused set took no offsets
        CHECK(waited->room_wait >= 50ms);
        CHECK(waited->room_wait < 5s);
        store.set_latency(0ns);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("admission: logs sharing one bytes bound wait on each other's uploads", "[storage][log][admission]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        auto one = batch_of(0, 1);
        cfg.shared_memory = std::make_shared<semaphore>(one.size() * 2, "shared");
        auto a = co_await open_log(store, budget, partition_id("orders", 1), cfg);
        auto b = co_await open_log(store, budget, partition_id("orders", 2), cfg);
        store.set_latency(150ms);
        const std::span<const char> set(one.data(), one.size());
        for (int i = 0; i < 2; ++i) {
            auto r = co_await a->append(set, ack_mode::leader);
            REQUIRE(r.has_value());
        }
        CHECK(cfg.shared_memory->available() == 0);
        // Partition b has room of its own (64 MiB) but the shared bound is full.
        auto batches = split_batches(set);
        REQUIRE(batches.has_value());
        auto refused = co_await b->append(std::span<const batch_view>(*batches), ack_mode::leader, {}, 20ms);
        REQUIRE_FALSE(refused.has_value());
        CHECK(refused.error().code == append_errc::no_room);
        auto waited = co_await b->append(std::span<const batch_view>(*batches), ack_mode::durable, {}, 5s);
        REQUIRE(waited.has_value());
        CHECK(waited->base_offset == 0);
        CHECK(waited->room_wait >= 50ms);
        store.set_latency(0ns);
        co_await a->close();
        co_await b->close();
        // Everything stored gave its room back.
        CHECK(cfg.shared_memory->available() == static_cast<std::int64_t>(one.size() * 2));
    };
    run_task(t());
}

TEST_CASE("readers at the high watermark are woken by the commit", "[storage][log]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        auto reader = [](partition_log* l) -> task<bool> { co_return co_await l->wait_for_data(0, 5s); };
        auto writer = [](partition_log* l) -> task<bool> {
            (void)co_await sleep(5ms);
            co_return (co_await produce(l, batch_of(0, 1))).acked;
        };
        auto [woke, wrote] = co_await when_all(reader(log.get()), writer(log.get()));
        CHECK(woke);
        CHECK(wrote);
        auto done6 = co_await log->wait_for_data(1, 20ms);
        CHECK_FALSE(done6); // nothing more: times out
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("reads span segments, honour max_bytes and the high watermark, reject bad offsets", "[storage][log]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        cfg.segment_bytes = 1;
        cfg.cache_bytes = 0; // force reads through the store (index + range GET)
        auto log = co_await open_log(store, budget, pid, cfg);
        for (int i = 0; i < 5; ++i) {
            auto done7 = co_await produce(log.get(), batch_of(i * 2, 2));
            CHECK(done7.acked);
        }
        auto all = co_await log->read(0, 1 << 20);
        REQUIRE(all.has_value());
        auto batches = split_batches(std::span<const char>(all->records.data(), all->records.size()));
        REQUIRE(batches.has_value());
        CHECK(batches->size() == 5);
        auto one = co_await log->read(3, 1); // tiny max_bytes still returns one whole batch
        REQUIRE(one.has_value());
        auto b1 = split_batches(std::span<const char>(one->records.data(), one->records.size()));
        REQUIRE(b1->size() == 1);
        CHECK((*b1)[0].base_offset == 2); // the batch holding offset 3
        auto at_end = co_await log->read(10, 1000);
        REQUIRE(at_end.has_value());
        CHECK(at_end->records.empty());
        auto beyond = co_await log->read(11, 1000);
        REQUIRE_FALSE(beyond.has_value());
        CHECK(beyond.error().code == storage::errc::invalid_argument);
        CHECK(store.stats().gets > 0);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("corrupt and old-format record sets are rejected", "[storage][log]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        auto good = batch_of(0, 2);
        auto bad = good;
        bad[bad.size() - 1] ^= 0x40; // breaks the CRC
        auto r = co_await log->append(std::span<const char>(bad.data(), bad.size()), ack_mode::durable);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == append_errc::corrupt_message);
        auto two = good + bad; // every batch is checked, not only the first
        auto r2 = co_await log->append(std::span<const char>(two.data(), two.size()), ack_mode::durable);
        REQUIRE_FALSE(r2.has_value());
        auto old = good;
        old[16] = 1; // magic 1
        auto r3 = co_await log->append(std::span<const char>(old.data(), old.size()), ack_mode::durable);
        REQUIRE_FALSE(r3.has_value());
        CHECK(r3.error().code == append_errc::unsupported_version);
        CHECK(log->next_offset() == 0);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("restore of many segments costs the LIST pages and O(1) GETs", "[storage][log]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        // 1,500 tiny segments straight into the bucket.
        skiff::test::write_segments(*b, pid, 1500, [](int i) { return batch_of(i, 1); });
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        CHECK(log->next_offset() == 1500);
        CHECK(log->restored().segments == 1500);
        // No manifest yet: the manifests' LIST, then 3,000 keys at 1,000 per page.
        CHECK(store.stats().lists == 4);
        CHECK(store.stats().gets == 1);  // only the newest footer
        auto r = co_await log->read(777, 100);
        REQUIRE(r.has_value());
        auto bs = split_batches(std::span<const char>(r->records.data(), r->records.size()));
        REQUIRE_FALSE(bs->empty());
        CHECK((*bs)[0].base_offset == 777);
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("concurrent readers share one GET per range, and sequential reads prefetch the next segment",
          "[storage][log]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        {
            memory_store store(b);
            io_budget budget(8, nullptr);
            auto cfg = test_config();
            cfg.segment_bytes = 1;
            auto log = co_await open_log(store, budget, pid, cfg);
            for (int i = 0; i < 3; ++i) {
                auto o = co_await produce(log.get(), batch_of(i * 2, 2));
                CHECK(o.acked);
            }
            co_await log->close();
        }
        memory_store store(b); // a new process: nothing cached
        store.set_latency(5ms);
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        auto reader = [](partition_log* l) -> task<std::size_t> {
            auto r = co_await l->read(0, 1);
            REQUIRE(r.has_value());
            co_return r->records.size();
        };
        auto [a, c] = co_await when_all(reader(log.get()), reader(log.get()));
        CHECK(a > 0);
        CHECK(a == c);
        const auto seg0 = segment_key("default", pid, 0), seg2 = segment_key("default", pid, 2);
        CHECK(store.stats().gets_by_key.at(seg0) == 1); // single flight
        // Read-ahead fetched segment 2 in the background; reading it costs no new GET.
        (void)co_await sleep(50ms);
        CHECK(store.stats().gets_by_key.count(seg2) == 1);
        auto r2 = co_await log->read(2, 1);
        REQUIRE(r2.has_value());
        CHECK_FALSE(r2->records.empty());
        CHECK(store.stats().gets_by_key.at(seg2) == 1);
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("the age trigger flushes on a real timer, with no further appends", "[storage][log]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        cfg.max_age = 20ms;
        auto log = co_await open_log(store, budget, pid, cfg);
        auto set = batch_of(0, 3);
        auto r = co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::leader);
        REQUIRE(r.has_value());
        CHECK(log->high_watermark() == 0); // buffered, nobody waits: no linger flush
        (void)co_await sleep(5ms);
        CHECK(log->high_watermark() == 0);
        auto landed = co_await log->wait_for_data(2, 2s);
        CHECK(landed);
        CHECK(log->high_watermark() == 3);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("close flushes what is buffered (graceful drain)", "[storage][log]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        cfg.max_age = std::chrono::hours(1);
        auto log = co_await open_log(store, budget, pid, cfg);
        auto set = batch_of(0, 7);
        auto r = co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::leader);
        REQUIRE(r.has_value());
        co_await log->close();
        CHECK(log->high_watermark() == 7);
    };
    run_task(t(bucket));
    CHECK(bucket->objects.count(segment_key("default", pid, 0)) == 1);
}

TEST_CASE("a cache budget shared by logs evicts the oldest segment of any of them; evicted ones are fetched again",
          "[storage][log][cache]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        auto one = batch_of(0, 20);
        // Room for one committed segment (each holds one set), not two.
        cfg.shared_cache = std::make_shared<cache_budget>(one.size() + one.size() / 2 + 200);
        auto a = co_await open_log(store, budget, partition_id("orders", 1), cfg);
        auto b = co_await open_log(store, budget, partition_id("orders", 2), cfg);
        const std::span<const char> set(one.data(), one.size());
        auto ra = co_await a->append(set, ack_mode::durable);
        REQUIRE(ra.has_value());
        CHECK(cfg.shared_cache->entries() == 1);
        const auto gets_before = store.stats().gets;
        auto read_a = co_await a->read(0, 1 << 20);
        REQUIRE(read_a.has_value());
        CHECK(store.stats().gets == gets_before); // a's segment is cached
        // b's commit pushes a's segment out of the shared budget.
        auto rb = co_await b->append(set, ack_mode::durable);
        REQUIRE(rb.has_value());
        CHECK(cfg.shared_cache->entries() == 1);
        CHECK(cfg.shared_cache->evictions() == 1);
        CHECK(cfg.shared_cache->used() <= cfg.shared_cache->limit());
        auto read_b = co_await b->read(0, 1 << 20);
        REQUIRE(read_b.has_value());
        CHECK(store.stats().gets == gets_before); // b's is the cached one now
        auto again = co_await a->read(0, 1 << 20);
        REQUIRE(again.has_value());
        CHECK(again->records == read_a->records);
        CHECK(store.stats().gets > gets_before); // a's was fetched from the store again
        co_await a->close();
        co_await b->close();
        a.reset();
        b.reset();
        // Closed logs leave nothing counted in the budget.
        CHECK(cfg.shared_cache->entries() == 0);
        CHECK(cfg.shared_cache->used() == 0);
    };
    run_task(t());
}
