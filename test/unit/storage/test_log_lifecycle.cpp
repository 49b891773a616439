// The partition log's lifecycle: manifests (restore from a checkpoint, stale, corrupt and
// missing ones), retention by bytes and by time, DeleteRecords, and deletes that a restart
// interrupted. Every scenario reads the log back: what is retained is all there, in order;
// what was deleted never comes back.
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/manifest_format.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::open_log;
using skiff::test::read_all;

namespace {

const partition_id pid("orders", 3);

log_config lifecycle_config() {
    auto c = skiff::test::fast_log_config();
    c.lifecycle_tick = 5ms;
    c.delete_delay = 20ms;
    c.manifest_every_segments = 1000; // only when a test asks, or at close
    c.manifest_interval = 1h;
    return c;
}

// A batch of n records whose values are "v{first}".."v{first+n-1}", timestamps at `ts`.
std::string batch_at(int first, int n, std::int64_t ts = 1'700'000'000'000) {
    std::vector<record> recs;
    for (int i = 0; i < n; ++i) recs.emplace_back(std::string("k"), fmt::format("v{}", first + i));
    batch_options o;
    o.base_timestamp = ts;
    return build_batch(0, recs, o);
}

// Appends `segments` segments of 10 records each (one flush per segment).
task<void> fill(partition_log* log, int segments, int first = 0, std::int64_t ts = 1'700'000'000'000) {
    for (int s = 0; s < segments; ++s) {
        auto b = batch_at(first + s * 10, 10, ts);
        auto r = co_await log->append(std::span<const char>(b.data(), b.size()), ack_mode::durable);
        REQUIRE(r.has_value());
    }
}

std::size_t count_with(const memory_bucket& b, std::string_view suffix) {
    std::size_t n = 0;
    for (auto& [k, _] : b.objects) n += k.size() >= suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0;
    return n;
}

std::vector<std::string> manifest_keys(const memory_bucket& b) {
    std::vector<std::string> out;
    const auto prefix = manifest_prefix(skiff::test::test_ns, pid);
    for (auto& [k, _] : b.objects) {
        if (k.rfind(prefix, 0) == 0) out.push_back(k);
    }
    return out;
}

// The values read from the log, in offset order.
std::vector<std::string> values(const std::map<std::int64_t, std::string>& m) {
    std::vector<std::string> out;
    for (auto& [_, v] : m) out.push_back(v);
    return out;
}

std::vector<std::string> expected(int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) out.push_back(fmt::format("v{}", i));
    return out;
}

} // namespace

TEST_CASE("lifecycle: a restore starts from the manifest and lists only newer segments", "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto log = co_await open_log(store, budget, pid, lifecycle_config());
            co_await fill(log.get(), 30);
            co_await log->close(); // writes the manifest
        }
        REQUIRE(manifest_keys(*b).size() == 1);
        {
            // Newer segments written by an owner that keeps no manifests.
            memory_store store(b);
            auto cfg = lifecycle_config();
            cfg.manifests = false;
            auto log = co_await open_log(store, budget, pid, cfg);
            CHECK_FALSE(log->restored().from_manifest);
            co_await fill(log.get(), 3, 300);
            co_await log->close();
        }
        REQUIRE(manifest_keys(*b).size() == 1);
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, lifecycle_config());
        const auto& rep = log->restored();
        CHECK(rep.from_manifest);
        CHECK(rep.manifest_segments == 30);
        CHECK(rep.segments == 33);
        CHECK(rep.next_offset == 330);
        // One LIST of the manifests, one of the segments after it; the manifest and the
        // newest segment's footer: two GETs, whatever the log's age.
        CHECK(store.stats().lists == 2);
        CHECK(store.stats().gets == 2);
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(0, 330));
        }
        co_await log->close();
        // The close stored a manifest that covers everything; two are kept.
        CHECK(manifest_keys(*b).size() == 2);
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: a corrupt newest manifest falls back to the one before, none to a full list",
          "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto log = co_await open_log(store, budget, pid, lifecycle_config());
            co_await fill(log.get(), 5);
            const bool stored = co_await log->checkpoint();
            CHECK(stored);
            co_await fill(log.get(), 5, 50);
            co_await log->close();
        }
        auto keys = manifest_keys(*b);
        REQUIRE(keys.size() == 2);
        b->objects[keys.back()][10] ^= 0x40; // bit rot in the newest
        {
            memory_store store(b);
            auto log = co_await open_log(store, budget, pid, lifecycle_config());
            CHECK(log->restored().from_manifest);
            CHECK(log->restored().manifests_unusable == 1);
            CHECK(log->restored().manifest_segments == 5);
            CHECK(log->restored().segments == 10);
            {
                auto got = values(co_await read_all(log.get()));
                CHECK(got == expected(0, 100));
            }
            co_await log->close();
        }
        // Every manifest unreadable: the full LIST restores the same log.
        for (auto& k : manifest_keys(*b)) b->objects[k] = "garbage";
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, lifecycle_config());
        CHECK_FALSE(log->restored().from_manifest);
        CHECK(log->restored().segments == 10);
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(0, 100));
        }
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: the check after restore drops what the manifest lists but the bucket lacks, and adopts "
          "what it missed",
          "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto log = co_await open_log(store, budget, pid, lifecycle_config());
            co_await fill(log.get(), 10);
            co_await log->close();
        }
        auto keys = manifest_keys(*b);
        REQUIRE(keys.size() == 1);
        auto& bytes = b->objects[keys.back()];
        auto m = decode_manifest(bytes);
        REQUIRE(m.has_value());
        REQUIRE(m->segments.size() == 10);
        // The manifest forgets segment 50; the bucket loses segment 70.
        m->segments.erase(m->segments.begin() + 5);
        bytes = encode_manifest(*m);
        b->objects.erase(segment_key(skiff::test::test_ns, pid, 70));
        b->objects.erase(index_key(skiff::test::test_ns, pid, 70));

        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, lifecycle_config());
        CHECK(log->restored().from_manifest);
        CHECK(log->restored().segments == 9);
        (void)co_await runtime::sleep(50ms); // the background check runs
        auto want = expected(0, 70);
        auto rest = expected(80, 100);
        want.insert(want.end(), rest.begin(), rest.end());
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == want);
        }
        co_await log->close();
        // The rewritten manifest matches the bucket: the next restore needs no correction.
        memory_store store2(b);
        auto log2 = co_await open_log(store2, budget, pid, lifecycle_config());
        CHECK(log2->restored().manifest_segments == 9);
        {
            auto got = values(co_await read_all(log2.get()));
            CHECK(got == want);
        }
        co_await log2->close();
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: retention by bytes deletes the oldest whole segments after the grace period",
          "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        memory_store store(b);
        auto cfg = lifecycle_config();
        auto log = co_await open_log(store, budget, pid, cfg);
        co_await fill(log.get(), 10);
        std::size_t newest3 = 0;
        for (int base : {70, 80, 90}) newest3 += b->objects.at(segment_key(skiff::test::test_ns, pid, base)).size();
        // Exactly room for the newest three (Kafka's rule: a segment goes while what stays
        // without it is still at least retention.bytes).
        log->set_retention(-1, static_cast<std::int64_t>(newest3));
        for (int i = 0; i < 100 && log->log_start_offset() < 70; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(log->log_start_offset() == 70);
        auto below = co_await log->read(60, 1 << 20);
        REQUIRE_FALSE(below.has_value());
        CHECK(below.error().code == storage::errc::invalid_argument);
        for (int i = 0; i < 100 && count_with(*b, ".kfs") > 3; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(count_with(*b, ".kfs") == 3);
        CHECK(count_with(*b, ".index") == 3);
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(70, 100));
        }
        co_await log->close();

        // A restart keeps the log start; nothing deleted comes back.
        memory_store store2(b);
        auto cfg2 = lifecycle_config();
        auto log2 = co_await open_log(store2, budget, pid, cfg2);
        CHECK(log2->log_start_offset() == 70);
        {
            auto got = values(co_await read_all(log2.get()));
            CHECK(got == expected(70, 100));
        }
        co_await log2->close();
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: retention by time follows the records' largest timestamp", "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto now = std::make_shared<std::atomic<std::int64_t>>(1'700'000'000'000);
    auto t = [](std::shared_ptr<memory_bucket> b, std::shared_ptr<std::atomic<std::int64_t>> clock) -> task<void> {
        io_budget budget(8, nullptr);
        memory_store store(b);
        auto cfg = lifecycle_config();
        cfg.wall_ms = [clock] { return clock->load(); };
        cfg.retention_ms = 60'000;
        auto log = co_await open_log(store, budget, pid, cfg);
        const std::int64_t t0 = 1'700'000'000'000;
        co_await fill(log.get(), 3, 0, t0 - 120'000);   // two minutes old
        co_await fill(log.get(), 3, 30, t0 - 30'000);   // half a minute old
        co_await fill(log.get(), 2, 60, t0);
        for (int i = 0; i < 100 && log->log_start_offset() < 30; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(log->log_start_offset() == 30);
        (void)co_await runtime::sleep(30ms);
        CHECK(log->log_start_offset() == 30); // the rest is younger than a minute
        clock->store(t0 + 45'000);
        for (int i = 0; i < 100 && log->log_start_offset() < 60; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(log->log_start_offset() == 60);
        for (int i = 0; i < 100 && count_with(*b, ".kfs") > 2; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(count_with(*b, ".kfs") == 2);
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(60, 80));
        }
        co_await log->close();
    };
    run_task(t(bucket, now));
}

TEST_CASE("lifecycle: DeleteRecords moves the log start inside a segment and it persists", "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto log = co_await open_log(store, budget, pid, lifecycle_config());
            co_await fill(log.get(), 5);
            auto past = co_await log->delete_records(51);
            REQUIRE_FALSE(past.has_value());
            CHECK(past.error().code == storage::errc::invalid_argument);
            auto r = co_await log->delete_records(25);
            REQUIRE(r.has_value());
            CHECK(*r == 25);
            CHECK(log->log_start_offset() == 25);
            auto lower = co_await log->delete_records(10); // never moves back
            REQUIRE(lower.has_value());
            CHECK(*lower == 25);
            auto below = co_await log->read(24, 1 << 20);
            CHECK_FALSE(below.has_value());
            auto at = co_await log->read(25, 1 << 20);
            REQUIRE(at.has_value());
            CHECK(at->log_start_offset == 25);
            for (int i = 0; i < 100 && count_with(*b, ".kfs") > 3; ++i) (void)co_await runtime::sleep(5ms);
            CHECK(count_with(*b, ".kfs") == 3); // segments 0 and 10 are gone, 20 holds 25
            co_await log->close();
        }
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, lifecycle_config());
        CHECK(log->log_start_offset() == 25);
        auto all = co_await log->delete_records(-1); // -1: up to the high watermark
        REQUIRE(all.has_value());
        CHECK(*all == 50);
        CHECK(log->log_start_offset() == log->high_watermark());
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: deletes cut short by a restart are finished by the next owner", "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto cfg = lifecycle_config();
            cfg.delete_delay = 1h; // the process stops before the grace period ends
            auto log = co_await open_log(store, budget, pid, cfg);
            co_await fill(log.get(), 6);
            auto r = co_await log->delete_records(40);
            REQUIRE(r.has_value());
            co_await log->close();
        }
        CHECK(count_with(*b, ".kfs") == 6); // stored manifest says 40, objects still there
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, lifecycle_config());
        CHECK(log->log_start_offset() == 40);
        CHECK(log->restored().segments == 2);
        for (int i = 0; i < 100 && count_with(*b, ".kfs") > 2; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(count_with(*b, ".kfs") == 2);
        CHECK(count_with(*b, ".index") == 2);
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(40, 60));
        }
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: a manifest is written after manifest_every_segments new segments", "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        memory_store store(b);
        auto cfg = lifecycle_config();
        cfg.manifest_every_segments = 4;
        auto log = co_await open_log(store, budget, pid, cfg);
        co_await fill(log.get(), 3);
        (void)co_await runtime::sleep(30ms);
        CHECK(manifest_keys(*b).empty());
        co_await fill(log.get(), 1, 30);
        for (int i = 0; i < 100 && manifest_keys(*b).empty(); ++i) (void)co_await runtime::sleep(5ms);
        REQUIRE(manifest_keys(*b).size() == 1);
        auto m = decode_manifest(b->objects.at(manifest_keys(*b).front()));
        REQUIRE(m.has_value());
        CHECK(m->covered_end == 40);
        CHECK(m->segments.size() == 4);
        CHECK(m->segments[1].base == 10);
        CHECK(m->segments[1].last == 19);
        CHECK(m->segments[1].max_timestamp == 1'700'000'000'000);
        CHECK(m->segments[1].index_size > 0);
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: a log restored by a full LIST stores a manifest even when nothing is appended",
          "[storage][lifecycle]") {
    // Regression: the restored segments were moved into the cache before the check that
    // marks the log as needing a manifest, so an idle log never got one.
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto cfg = lifecycle_config();
            cfg.manifests = false;
            auto log = co_await open_log(store, budget, pid, cfg);
            co_await fill(log.get(), 4);
            co_await log->close();
        }
        REQUIRE(manifest_keys(*b).empty());
        {
            memory_store store(b);
            auto log = co_await open_log(store, budget, pid, lifecycle_config());
            CHECK_FALSE(log->restored().from_manifest);
            co_await log->close();
        }
        REQUIRE(manifest_keys(*b).size() == 1);
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, lifecycle_config());
        CHECK(log->restored().from_manifest);
        CHECK(log->restored().manifest_segments == 4);
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: restore of 10,000 segments from a manifest costs two LISTs and two GETs",
          "[storage][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        skiff::test::write_segments(*b, pid, 10'000, [](int i) { return batch_at(i, 1); });
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto log = co_await open_log(store, budget, pid, lifecycle_config());
            CHECK(store.stats().lists == 1 + 20); // the manifests' prefix, then 20,000 keys
            co_await log->close();
        }
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, lifecycle_config());
        CHECK(log->restored().from_manifest);
        CHECK(log->restored().segments == 10'000);
        CHECK(log->next_offset() == 10'000);
        CHECK(store.stats().lists == 2);
        CHECK(store.stats().gets == 2);
        auto r = co_await log->read(7777, 100);
        REQUIRE(r.has_value());
        auto bs = split_batches(std::span<const char>(r->records.data(), r->records.size()));
        REQUIRE(bs.has_value());
        REQUIRE_FALSE(bs->empty());
        CHECK((*bs)[0].base_offset == 7777);
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("lifecycle: logs sharing a background slot send their lifecycle requests one at a time",
          "[storage][lifecycle]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        auto cfg = lifecycle_config();
        cfg.background_io = std::make_shared<runtime::semaphore>(1, "test-lifecycle-io");
        auto a = co_await open_log(store, budget, partition_id("a", 0), cfg);
        auto b = co_await open_log(store, budget, partition_id("b", 0), cfg);
        co_await fill(a.get(), 2);
        co_await fill(b.get(), 2);
        const auto puts0 = store.stats().puts;
        store.set_latency(100ms);
        bool done_a = false, done_b = false;
        auto cp = [](partition_log* l, bool* done) -> task<void> {
            (void)co_await l->checkpoint();
            *done = true;
        };
        gate g("checkpoints");
        (void)g.spawn(cp(a.get(), &done_a));
        (void)g.spawn(cp(b.get(), &done_b));
        (void)co_await runtime::sleep(50ms);
        CHECK(store.stats().puts == puts0 + 1); // the second waits for the slot
        co_await g.close();
        CHECK(done_a);
        CHECK(done_b);
        CHECK(store.stats().puts == puts0 + 2);
        store.set_latency(0ms);
        // Regression: a manifest write held its slot while deleting the older manifests,
        // which needs a slot too: with every slot held that way it waited forever.
        for (int round = 0; round < 3; ++round) {
            co_await fill(a.get(), 1, 100 + round * 10);
            const bool stored = co_await a->checkpoint();
            CHECK(stored);
        }
        std::size_t kept = 0;
        for (auto& [k, _] : store.bucket().objects) kept += k.find("/skiff~meta/a/0/manifest-") != std::string::npos;
        CHECK(kept == 2);
        co_await a->close();
        co_await b->close();
    };
    run_task(t());
}
