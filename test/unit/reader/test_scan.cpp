// segment_scan: records in offset order, bounds, codecs, corruption, parallel GETs, cancellation.
#include "reader_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/reader/segment_reader.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/local_store.hpp>
#include <skiff/storage/memory_store.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>

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

} // namespace

TEST_CASE("records come in offset order per partition with keys, values, headers and timestamps", "[reader][scan]") {
    auto bucket = std::make_shared<memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 3, 1000), value_batch(3, 2, 2000)});
    put_segment(*bucket, "t", 0, 5, {value_batch(5, 5, 3000)});
    put_segment(*bucket, "t", 1, 0, {value_batch(0, 2, 4000)});
    memory_store store(bucket);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        auto out = co_await scan_all(store, pl, reader::scan_bounds(), reader::scan_config());
        REQUIRE_FALSE(out.error);
        REQUIRE(out.rows.size() == 12);
        for (int i = 0; i < 10; ++i) {
            CHECK(out.rows[i].partition == 0);
            CHECK(out.rows[i].offset == i);
            CHECK(out.rows[i].value == fmt::format("v{}", i));
            CHECK(out.rows[i].key == fmt::format("k{}", i));
            CHECK(out.rows[i].header == fmt::format("{}", i));
        }
        CHECK(out.rows[0].timestamp == 1000);
        CHECK(out.rows[2].timestamp == 1002);
        CHECK(out.rows[3].timestamp == 2000);
        CHECK(out.rows[10].partition == 1);
        CHECK(out.rows[11].offset == 1);
        CHECK(out.stats.segments_read == 3);
        CHECK(out.stats.records == 12);
        CHECK(out.stats.gets == 3);
    };
    run_task(t(store));
}

TEST_CASE("a merged segment's offsets past the next base are read from the next segment, once", "[reader][scan]") {
    auto bucket = std::make_shared<memory_bucket>();
    // The merge of [0,5) and [5,10) under the first key, its source at 5 not deleted yet.
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 5), value_batch(5, 5)});
    put_segment(*bucket, "t", 0, 5, {value_batch(5, 5)});
    memory_store store(bucket);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        REQUIRE(pl.size() == 2);
        for (std::size_t part : {std::size_t{1} << 20, std::size_t{100}}) {
            reader::scan_config cfg;
            cfg.part_bytes = part;
            auto out = co_await scan_all(store, pl, reader::scan_bounds(), cfg);
            REQUIRE_FALSE(out.error);
            CHECK(offsets_of(out.rows) == range_of(0, 10));
        }
    };
    run_task(t(store));
}

TEST_CASE("offset and time bounds, with and without .kfst sidecars", "[reader][scan]") {
    for (bool kfst : {true, false}) {
        auto bucket = std::make_shared<memory_bucket>();
        seg_opts o;
        o.kfst = kfst;
        // Segment i holds offsets 10i..10i+9 with timestamps 10000i + 0..9.
        for (int i = 0; i < 5; ++i) put_segment(*bucket, "t", 0, i * 10, {value_batch(i * 10, 10, i * 10000)}, o);
        memory_store store(bucket);
        auto t = [](memory_store& store, bool kfst) -> task<void> {
            auto pl = co_await discover(store, "t");
            reader::scan_bounds off;
            off.min_offset = 13;
            off.max_offset = 31;
            auto a = co_await scan_all(store, pl, off, reader::scan_config());
            REQUIRE_FALSE(a.error);
            CHECK(offsets_of(a.rows) == range_of(13, 32));

            reader::scan_bounds tb;
            tb.min_timestamp = 20005;
            tb.max_timestamp = 30002;
            auto b = co_await scan_all(store, pl, tb, reader::scan_config());
            REQUIRE_FALSE(b.error);
            CHECK(offsets_of(b.rows) == std::vector<std::int64_t>{25, 26, 27, 28, 29, 30, 31, 32});
            // Segments 0, 1 and 4 are outside the time range: skipped by their sidecar, or read.
            CHECK(b.stats.segments_pruned == (kfst ? 3u : 0u));
            CHECK(b.stats.segments_read == (kfst ? 2u : 5u));
        };
        run_task(t(store, kfst));
    }
}

TEST_CASE("gzip, snappy, lz4 and zstd batches are decoded", "[reader][scan]") {
    auto bucket = std::make_shared<memory_bucket>();
    put_segment(*bucket, "t", 0, 0,
                {value_batch(0, 3, 1, compression_codec::gzip), value_batch(3, 3, 1, compression_codec::snappy),
                 value_batch(6, 3, 1, compression_codec::lz4), value_batch(9, 3, 1, compression_codec::zstd),
                 value_batch(12, 3, 1)});
    memory_store store(bucket);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        auto out = co_await scan_all(store, pl, reader::scan_bounds(), reader::scan_config());
        REQUIRE_FALSE(out.error);
        REQUIRE(offsets_of(out.rows) == range_of(0, 15));
        for (int i = 0; i < 15; ++i) CHECK(out.rows[i].value == fmt::format("v{}", i));
        // A decompression bound below a batch's size is too_large, not a crash or a short read.
        reader::scan_config small;
        small.max_uncompressed_batch_bytes = 8;
        auto bomb = co_await scan_all(store, pl, reader::scan_bounds(), small);
        REQUIRE(bomb.error);
        CHECK(bomb.error->code == reader::errc::too_large);
    };
    run_task(t(store));
}

TEST_CASE("a corrupt batch is an error naming the key, whole or in parts", "[reader][scan]") {
    auto bucket = std::make_shared<memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 3)});
    auto built = put_segment(*bucket, "t", 0, 3, {value_batch(3, 3), value_batch(6, 3)});
    const std::string key = segment_key(reader_ns, {"t", 0}, 3);
    bucket->objects[key][built.kfs.size() - 30] ^= 0x5a; // inside the last batch's records
    memory_store store(bucket);
    auto t = [](memory_store& store, std::string key) -> task<void> {
        auto pl = co_await discover(store, "t");
        for (std::size_t part : {std::size_t{1} << 20, std::size_t{64}}) {
            reader::scan_config cfg;
            cfg.part_bytes = part;
            auto out = co_await scan_all(store, pl, reader::scan_bounds(), cfg);
            REQUIRE(out.error);
            CHECK(out.error->code == reader::errc::corrupt);
            CHECK(out.error->message.find(key) != std::string::npos);
            // The good segment before it was delivered first, and nothing of the bad one is misread.
            CHECK(offsets_of(out.rows).size() <= 6);
            CHECK(out.rows.size() >= 3);
            // Kept for the caller to report, once.
            REQUIRE(out.findings.size() == 1);
            CHECK(out.findings[0].what == reader::finding::kind::corrupt_segment);
            CHECK(out.findings[0].key == key);
            CHECK(out.findings[0].detail == out.error->message);
        }
    };
    run_task(t(store, key));
}

TEST_CASE("a large segment is read in ranged parts, from its index entry when bounded", "[reader][scan]") {
    auto bucket = std::make_shared<memory_bucket>();
    std::vector<std::string> batches;
    for (int i = 0; i < 40; ++i) batches.push_back(value_batch(i * 5, 5));
    auto built = put_segment(*bucket, "t", 0, 0, batches);
    memory_store store(bucket);
    store.set_latency(1ms); // GETs that answer at once are never in flight together
    auto t = [](memory_store& store, std::size_t size) -> task<void> {
        auto pl = co_await discover(store, "t");
        reader::scan_config cfg;
        cfg.part_bytes = 512;
        cfg.parallel_gets = 4;
        auto all = co_await scan_all(store, pl, reader::scan_bounds(), cfg);
        REQUIRE_FALSE(all.error);
        CHECK(offsets_of(all.rows) == range_of(0, 200));
        CHECK(all.stats.gets >= size / 512);
        CHECK(all.stats.max_gets_in_flight > 1);

        reader::scan_bounds b;
        b.min_offset = 190;
        auto tail = co_await scan_all(store, pl, b, cfg);
        REQUIRE_FALSE(tail.error);
        CHECK(offsets_of(tail.rows) == range_of(190, 200));
        CHECK(tail.stats.bytes_read < size / 4); // the .index and the last parts, not the whole segment
    };
    run_task(t(store, built.kfs.size()));
}

TEST_CASE("GETs run in parallel and segments are fetched ahead of the consumer", "[reader][scan]") {
    auto bucket = std::make_shared<memory_bucket>();
    for (int i = 0; i < 24; ++i) put_segment(*bucket, "t", 0, i, {value_batch(i, 1)});
    memory_store store(bucket);
    store.set_latency(2ms);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        reader::scan_config serial;
        serial.parallel_gets = 1;
        auto one = co_await scan_all(store, pl, reader::scan_bounds(), serial);
        REQUIRE_FALSE(one.error);
        CHECK(one.stats.max_gets_in_flight == 1);
        CHECK(one.stats.read_ahead_hits == 0);

        reader::scan_config par;
        par.parallel_gets = 8;
        io_budget budget(16, nullptr);
        par.budget = &budget;
        auto many = co_await scan_all(store, pl, reader::scan_bounds(), par);
        REQUIRE_FALSE(many.error);
        CHECK(offsets_of(many.rows) == range_of(0, 24));
        CHECK(many.stats.max_gets_in_flight == 8);
        // Each window of 8 leaves 7 segments ready when the consumer gets there (21 here); GETs
        // that end on different reactor turns (a slow sanitizer build) make that fewer.
        CHECK(many.stats.read_ahead_hits >= 10);
        CHECK(budget.stats().acquired == many.stats.gets);

        // read_ahead_bytes bounds the window: with room for less than a segment, only the
        // consumer's own segment is fetched, one GET at a time.
        reader::scan_config tight;
        tight.parallel_gets = 8;
        tight.read_ahead_bytes = 1;
        auto bounded = co_await scan_all(store, pl, reader::scan_bounds(), tight);
        REQUIRE_FALSE(bounded.error);
        CHECK(bounded.stats.max_gets_in_flight == 1);
    };
    run_task(t(store));
}

TEST_CASE("a failed GET is store_failed naming the key; cancellation is never success", "[reader][scan]") {
    auto bucket = std::make_shared<memory_bucket>();
    for (int i = 0; i < 4; ++i) put_segment(*bucket, "t", 0, i, {value_batch(i, 1)});
    memory_store store(bucket);
    auto t = [](memory_store& store) -> task<void> {
        auto pl = co_await discover(store, "t");
        store.add_fault(mem_fault_rule("get", "00000000000000000002.kfs", mem_fault::fail_permanent, -1));
        auto out = co_await scan_all(store, pl, reader::scan_bounds(), reader::scan_config());
        REQUIRE(out.error);
        CHECK(out.error->code == reader::errc::store_failed);
        CHECK(out.error->message.find("segment-00000000000000000002.kfs") != std::string::npos);
        CHECK(offsets_of(out.rows) == std::vector<std::int64_t>{0, 1}); // what came before it
        store.clear_faults();

        // A segment deleted after it was planned (a merge source): not found, said so.
        const auto gone = segment_key(reader_ns, {"t", 0}, 1);
        auto kept = store.bucket().objects[gone];
        store.bucket().objects.erase(gone);
        auto deleted = co_await scan_all(store, pl, reader::scan_bounds(), reader::scan_config());
        REQUIRE(deleted.error);
        CHECK(deleted.error->code == reader::errc::store_failed);
        CHECK(deleted.error->message.find("deleted since it was listed") != std::string::npos);
        CHECK(offsets_of(deleted.rows) == std::vector<std::int64_t>{0});
        store.bucket().objects[gone] = kept;

        // A GET that never answers, stopped from outside.
        store.add_fault(mem_fault_rule("get", "", mem_fault::hang, -1));
        std::stop_source stop;
        auto scan = scan_all(store, pl, reader::scan_bounds(), reader::scan_config(), stop.get_token());
        auto stopper = [](std::stop_source* s) -> task<void> {
            auto slept = co_await sleep(5ms);
            (void)slept;
            s->request_stop();
        }(&stop);
        auto [cancelled, none] = co_await when_all(std::move(scan), std::move(stopper));
        (void)none;
        REQUIRE(cancelled.error);
        CHECK(cancelled.error->code == reader::errc::cancelled);
        CHECK(cancelled.rows.empty());
        store.clear_faults();
    };
    run_task(t(store));
}

TEST_CASE("the scan reads a local store", "[reader][scan][local]") {
    char tmpl[] = "/tmp/skiff-reader-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string dir = tmpl;
    memory_bucket src;
    put_segment(src, "t", 0, 0, {value_batch(0, 4, 1, compression_codec::zstd)});
    put_segment(src, "t", 0, 4, {value_batch(4, 4)}, [] { seg_opts o; o.index = false; o.kfst = true; return o; }());
    auto t = [](std::string dir, memory_bucket* src) -> task<void> {
        auto ls = local_store::create(dir);
        REQUIRE(ls.has_value());
        for (auto& [k, v] : src->objects) {
            std::string key = k;
            std::stop_token no_stop;
            auto p = co_await (*ls)->put(key, std::span<const char>(v.data(), v.size()), false, no_stop);
            REQUIRE(p.has_value());
        }
        auto pl = co_await discover(**ls, "t");
        REQUIRE(pl.size() == 2);
        reader::scan_bounds b;
        b.max_timestamp = 3; // timestamps 1..4, then 1700000000000..: the second segment is pruned
        auto out = co_await scan_all(**ls, pl, b, reader::scan_config());
        REQUIRE_FALSE(out.error);
        CHECK(offsets_of(out.rows) == range_of(0, 3));
        CHECK(out.stats.segments_pruned == 1);
    };
    run_task(t(dir, &src));
    std::filesystem::remove_all(dir);
}
