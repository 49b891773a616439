#include "run_task.hpp"

#include <skiff/storage/fsck.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;

namespace {
void put_segment(memory_bucket& b, const partition_id& p, std::int64_t base, int records, bool with_index = true) {
    std::vector<record> recs;
    for (int i = 0; i < records; ++i) recs.emplace_back(std::string("v"));
    segment_builder sb(base);
    auto batch = build_batch(0, recs);
    REQUIRE(sb.append(std::span<const char>(batch.data(), batch.size())).has_value());
    auto built = std::move(sb).finish(1700000000000);
    b.objects[segment_key("default", p, base)] = built.kfs;
    if (with_index) b.objects[index_key("default", p, base)] = built.index;
}
} // namespace

TEST_CASE("fsck finds orphans, gaps and corrupt objects, and repair rebuilds indexes", "[storage][fsck]") {
    auto bucket = std::make_shared<memory_bucket>();
    partition_id p0("t", 0), p1("t", 1);
    put_segment(*bucket, p0, 0, 5);
    put_segment(*bucket, p0, 5, 5, false);  // orphan .kfs
    put_segment(*bucket, p0, 20, 5);        // gap 10..19
    bucket->objects[index_key("default", p0, 30)] = "stale";  // orphan .index
    put_segment(*bucket, p1, 0, 3);
    put_segment(*bucket, p1, 3, 3);
    bucket->objects[segment_key("default", p1, 3)][40] ^= 0x01; // corrupt body (CRC)
    bucket->objects["default/manifest.json"] = "{}";            // foreign, left alone

    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        auto r = co_await fsck(store, "default", false);
        REQUIRE(r.has_value());
        CHECK(r->foreign_keys == 1);
        REQUIRE(r->partitions.size() == 2);
        auto& a = r->partitions[0];
        CHECK(a.segments.size() == 3);
        CHECK(a.orphan_kfs == std::vector<std::int64_t>{5});
        CHECK(a.orphan_index == std::vector<std::int64_t>{30});
        REQUIRE(a.gaps.size() == 1);
        CHECK(a.gaps[0].first == 10);
        CHECK(a.gaps[0].last == 19);
        auto& c = r->partitions[1];
        CHECK(c.segments.size() == 1);
        REQUIRE(c.corrupt.size() == 1);
        CHECK_THAT(c.corrupt[0], Catch::Contains("segment-00000000000000000003.kfs"));
        CHECK_FALSE(r->clean());
        auto text = format_fsck_report(*r, "mem://");
        CHECK_THAT(text, Catch::Contains("orphan .kfs (no .index): segment 5"));
        CHECK_THAT(text, Catch::Contains("gap (warning): offsets 10..19"));

        auto fixed = co_await fsck(store, "default", true);
        REQUIRE(fixed.has_value());
        CHECK(fixed->partitions[0].repaired == std::vector<std::int64_t>{5});
        auto again = co_await fsck(store, "default", false);
        REQUIRE(again.has_value());
        CHECK(again->partitions[0].orphan_kfs.empty());
    };
    run_task(t(bucket));
    CHECK(bucket->objects.count(index_key("default", p0, 5)) == 1);
}

TEST_CASE("fsck: an .index from another segment with the same base is corrupt, and repair rebuilds it",
          "[storage][fsck]") {
    auto bucket = std::make_shared<memory_bucket>();
    partition_id p("t", 0);
    // Ours: one batch of 30 records. Theirs, same base: two small batches, an entry for each;
    // its second position lies inside our batch, so the index fits our size but not our
    // layout.
    put_segment(*bucket, p, 0, 30);
    segment_builder other(0, 1);
    for (int i = 0; i < 2; ++i) {
        auto batch = build_batch(0, {record(std::string("x"))});
        REQUIRE(other.append(std::span<const char>(batch.data(), batch.size())).has_value());
    }
    bucket->objects[index_key("default", p, 0)] = std::move(other).finish(1700000000000).index;

    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        auto r = co_await fsck(store, "default", false);
        REQUIRE(r.has_value());
        REQUIRE(r->partitions.size() == 1);
        REQUIRE(r->partitions[0].corrupt.size() == 1);
        CHECK_THAT(r->partitions[0].corrupt[0], Catch::Contains("is not a batch start"));
        auto fixed = co_await fsck(store, "default", true);
        REQUIRE(fixed.has_value());
        CHECK(fixed->partitions[0].repaired == std::vector<std::int64_t>{0});
        auto again = co_await fsck(store, "default", false);
        REQUIRE(again.has_value());
        CHECK(again->clean());
    };
    run_task(t(bucket));
}

TEST_CASE("fsck: gaps are warnings, overlapping segments are problems", "[storage][fsck]") {
    auto bucket = std::make_shared<memory_bucket>();
    partition_id gapped("t", 0), overlapping("t", 1);
    put_segment(*bucket, gapped, 0, 5);
    put_segment(*bucket, gapped, 100, 5); // a takeover gap: 5..99
    put_segment(*bucket, overlapping, 0, 5);
    put_segment(*bucket, overlapping, 3, 5); // 3..4 twice

    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        auto r = co_await fsck(store, "default", false);
        REQUIRE(r.has_value());
        REQUIRE(r->partitions.size() == 2);
        auto& g = r->partitions[0];
        REQUIRE(g.gaps.size() == 1);
        CHECK(g.gaps[0].first == 5);
        CHECK(g.gaps[0].last == 99);
        CHECK(g.clean());
        auto& o = r->partitions[1];
        REQUIRE(o.overlaps.size() == 1);
        CHECK(o.overlaps[0].first == 3);
        CHECK(o.overlaps[0].last == 4);
        CHECK_FALSE(o.clean());
        CHECK_FALSE(r->clean());
        CHECK_THAT(format_fsck_report(*r, "mem://"), Catch::Contains("overlap: offsets 3..4"));
    };
    run_task(t(bucket));
}
