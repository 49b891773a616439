// topic_discovery, list_topics and plan: pairing, orphans, strays, log start, incremental LIST.
#include "reader_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/reader/segment_reader.hpp>
#include <skiff/storage/manifest_format.hpp>
#include <skiff/storage/memory_store.hpp>

#include <catch2/catch.hpp>

#include <algorithm>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace skiff::test;

namespace {

bool has_finding(const reader::topic_discovery& d, reader::finding::kind k, const std::string& key) {
    auto& f = d.findings();
    return std::any_of(f.begin(), f.end(), [&](const reader::finding& x) { return x.what == k && x.key == key; });
}

} // namespace

TEST_CASE("discovery pairs segments by base and reports orphans and strays", "[reader][discovery]") {
    auto bucket = std::make_shared<memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 3)});
    put_segment(*bucket, "t", 0, 3, {value_batch(3, 2)}, [] { seg_opts o; o.index = false; return o; }());
    // An .index whose .kfs never arrived, below a later segment: an orphan.
    auto orphan = put_segment(*bucket, "t", 0, 5, {value_batch(5, 2)});
    bucket->objects.erase(segment_key(reader_ns, {"t", 0}, 5));
    put_segment(*bucket, "t", 0, 7, {value_batch(7, 1)}, [] { seg_opts o; o.kfst = true; return o; }());
    put_segment(*bucket, "t", 2, 0, {value_batch(0, 1)});
    bucket->objects["default/t/0/notes.txt"] = "x";
    bucket->objects["default/t/README"] = "x";
    bucket->objects["default/t2/0/segment-00000000000000000000.kfs"] = "not this topic";
    memory_store store(bucket);

    auto t = [](memory_store& store) -> task<void> {
        reader::topic_discovery d(store, reader_ns, "t");
        std::stop_token no_stop;
        auto r = co_await d.refresh(no_stop);
        REQUIRE(r.has_value());
        auto& parts = d.partitions();
        REQUIRE(parts.size() == 2);
        auto& p0 = parts.at(0).segments;
        REQUIRE(p0.size() == 3);
        CHECK(p0[0].base == 0);
        CHECK(p0[0].end == 3);
        CHECK(p0[0].has_index);
        CHECK(p0[1].base == 3);
        CHECK(p0[1].end == 7); // the orphan .index at 5 is not a segment
        CHECK_FALSE(p0[1].has_index);
        CHECK(p0[2].base == 7);
        CHECK(p0[2].end == -1);
        CHECK(p0[2].has_time_index);
        CHECK(p0[2].kfs_size > 0);
        CHECK(parts.at(2).segments.size() == 1);
        CHECK(has_finding(d, reader::finding::kind::orphan_index, index_key(reader_ns, {"t", 0}, 5)));
        CHECK(has_finding(d, reader::finding::kind::missing_index, segment_key(reader_ns, {"t", 0}, 3)));
        CHECK(has_finding(d, reader::finding::kind::stray_key, "default/t/0/notes.txt"));
        CHECK(has_finding(d, reader::finding::kind::stray_key, "default/t/README"));
        CHECK(d.findings().size() == 4);
        // A second refresh with nothing new reports nothing twice.
        auto again = co_await d.refresh(no_stop);
        REQUIRE(again.has_value());
        CHECK(d.findings().size() == 4);

        // Every segment is read once, in order; the orphan's offsets are a gap.
        auto pl = reader::plan(d.partitions(), reader::scan_bounds(), {0});
        auto out = co_await scan_all(store, pl, reader::scan_bounds(), reader::scan_config());
        REQUIRE_FALSE(out.error);
        CHECK(offsets_of(out.rows) == std::vector<std::int64_t>{0, 1, 2, 3, 4, 7});
    };
    run_task(t(store));
    (void)orphan;
}

TEST_CASE("refresh lists only keys after the last one seen", "[reader][discovery]") {
    auto bucket = std::make_shared<memory_bucket>();
    for (int i = 0; i < 5; ++i) put_segment(*bucket, "t", 0, i * 2, {value_batch(i * 2, 2)});
    for (int i = 0; i < 5; ++i) put_segment(*bucket, "t", 1, i * 2, {value_batch(i * 2, 2)});
    memory_store store(bucket);
    auto t = [](memory_store& store, memory_bucket& bucket) -> task<void> {
        reader::topic_discovery d(store, reader_ns, "t");
        std::stop_token no_stop;
        auto r = co_await d.refresh(no_stop);
        REQUIRE(r.has_value());
        CHECK(d.stats().keys_listed == 20); // 10 segments, 10 indexes; no manifests
        CHECK(d.stats().list_requests == 2); // the topic, the manifests
        const auto lists = store.stats().lists;

        put_segment(bucket, "t", 0, 10, {value_batch(10, 3)});
        auto r2 = co_await d.refresh(no_stop);
        REQUIRE(r2.has_value());
        // Only the two new keys; one LIST per partition, one for manifests, one probe for a new partition.
        CHECK(d.stats().keys_listed == 22);
        CHECK(store.stats().lists - lists == 4);
        CHECK(d.partitions().at(0).segments.size() == 6);
        CHECK(d.partitions().at(0).segments[4].end == 10);
        CHECK(d.partitions().at(0).segments[5].end == -1);

        // A new partition without a catalog: found by the probe.
        put_segment(bucket, "t", 2, 0, {value_batch(0, 1)});
        auto r3 = co_await d.refresh(no_stop);
        REQUIRE(r3.has_value());
        REQUIRE(d.partitions().count(2) == 1);
        CHECK(d.stats().keys_listed == 22 + 1 /* probe */ + 2);

        // With a catalog, its partition count says where to look (partition 3 empty, 4 none).
        bucket.objects["default/skiff~meta/topics/t.json"] = R"({"version":1,"name":"t","partitions":5})";
        put_segment(bucket, "t", 4, 0, {value_batch(0, 1)});
        auto r4 = co_await d.refresh(no_stop);
        REQUIRE(r4.has_value());
        CHECK(d.partitions().count(4) == 1);
        CHECK(d.partitions().count(3) == 0);
    };
    run_task(t(store, *bucket));
}

TEST_CASE("the newest manifest's log start hides deleted offsets", "[reader][discovery]") {
    auto bucket = std::make_shared<memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 4)});
    put_segment(*bucket, "t", 0, 4, {value_batch(4, 4)});
    put_segment(*bucket, "t", 0, 8, {value_batch(8, 4)});
    manifest m;
    m.partition = partition_id("t", 0);
    m.log_start = 6;
    m.covered_end = 12;
    m.seq = 2;
    bucket->objects[manifest_key(reader_ns, m.partition, 0, 2)] = encode_manifest(m);
    // An older manifest, and a newer one that does not decode: skipped for the good one.
    manifest older = m;
    older.seq = 1;
    older.log_start = 0;
    bucket->objects[manifest_key(reader_ns, m.partition, 0, 1)] = encode_manifest(older);
    bucket->objects[manifest_key(reader_ns, m.partition, 0, 3)] = "garbage";
    memory_store store(bucket);
    auto t = [](memory_store& store) -> task<void> {
        reader::topic_discovery d(store, reader_ns, "t");
        std::stop_token no_stop;
        auto r = co_await d.refresh(no_stop);
        REQUIRE(r.has_value());
        auto& p0 = d.partitions().at(0);
        CHECK(p0.log_start == 6);
        // The segment at 0 ends at 4 <= 6: gone.
        REQUIRE(p0.segments.size() == 2);
        CHECK(p0.segments[0].base == 4);
        auto pl = reader::plan(d.partitions(), reader::scan_bounds());
        auto out = co_await scan_all(store, pl, reader::scan_bounds(), reader::scan_config());
        REQUIRE_FALSE(out.error);
        CHECK(offsets_of(out.rows) == range_of(6, 12));
    };
    run_task(t(store));
}

TEST_CASE("plan prunes by offset and partition; list_topics finds topics with segments", "[reader][discovery]") {
    auto bucket = std::make_shared<memory_bucket>();
    for (int i = 0; i < 4; ++i) put_segment(*bucket, "orders", 0, i * 10, {value_batch(i * 10, 10)});
    put_segment(*bucket, "orders", 1, 0, {value_batch(0, 10)});
    put_segment(*bucket, "clicks", 0, 0, {value_batch(0, 1)});
    bucket->objects["default/skiff~meta/topics/orders.json"] = "{}";
    bucket->objects["default/onlyjunk/0/x"] = "x";
    memory_store store(bucket);
    auto t = [](memory_store& store) -> task<void> {
        std::stop_token no_stop;
        auto topics = co_await reader::list_topics(store, reader_ns, no_stop);
        REQUIRE(topics.has_value());
        CHECK(*topics == std::vector<std::string>{"clicks", "orders"});
        reader::topic_discovery d(store, reader_ns, "orders");
        auto r = co_await d.refresh(no_stop);
        REQUIRE(r.has_value());
        reader::scan_bounds b;
        b.min_offset = 15;
        b.max_offset = 25;
        auto pl = reader::plan(d.partitions(), b, {0});
        REQUIRE(pl.size() == 2);
        CHECK(pl[0].base == 10);
        CHECK(pl[1].base == 20);
        CHECK(reader::plan(d.partitions(), b).size() == 3); // partition 1's only segment is newest (end -1)
        auto out = co_await scan_all(store, pl, b, reader::scan_config());
        REQUIRE_FALSE(out.error);
        CHECK(offsets_of(out.rows) == range_of(15, 26));
    };
    run_task(t(store));
}

TEST_CASE("a bad topic name is invalid_argument", "[reader][discovery]") {
    memory_store store;
    auto t = [](memory_store& store) -> task<void> {
        reader::topic_discovery d(store, reader_ns, "a/b");
        std::stop_token no_stop;
        auto r = co_await d.refresh(no_stop);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == reader::errc::invalid_argument);
    };
    run_task(t(store));
}
