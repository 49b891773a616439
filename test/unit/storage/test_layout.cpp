// The bucket key grammar, both ways.
#include <skiff/storage/layout.hpp>

#include <catch2/catch.hpp>

using namespace skiff::storage;

TEST_CASE("layout: keys of a partition's objects", "[storage][layout]") {
    const partition_id p("orders", 3);
    CHECK(partition_prefix("default", p) == "default/orders/3/");
    CHECK(segment_key("default", p, 0) == "default/orders/3/segment-00000000000000000000.kfs");
    CHECK(index_key("ns", p, 1234) == "ns/orders/3/segment-00000000000000001234.index");
    CHECK(object_key("ns", p, 7, object_kind::index) == index_key("ns", p, 7));
    CHECK(time_index_key("ns", p, 1234) == "ns/orders/3/segment-00000000000000001234.kfst");
    CHECK(object_key("ns", p, 7, object_kind::kfst) == time_index_key("ns", p, 7));
    // Restore starts a LIST after the .kfst key of a base to skip all three of its objects.
    CHECK(index_key("ns", p, 7) < segment_key("ns", p, 7));
    CHECK(segment_key("ns", p, 7) < time_index_key("ns", p, 7));
    CHECK(time_index_key("ns", p, 7) < index_key("ns", p, 8));
}

TEST_CASE("layout: segment names parse back, and nothing else does", "[storage][layout]") {
    auto kfs = parse_segment_name("segment-00000000000000001234.kfs");
    REQUIRE(kfs.has_value());
    CHECK(kfs->base == 1234);
    CHECK(kfs->kind == object_kind::kfs);
    auto idx = parse_segment_name("segment-09223372036854775807.index");
    REQUIRE(idx.has_value());
    CHECK(idx->base == 9223372036854775807);
    CHECK(idx->kind == object_kind::index);

    CHECK_FALSE(parse_segment_name("segment-0000000000000001234.kfs"));   // 19 digits
    CHECK_FALSE(parse_segment_name("segment-000000000000000001234.kfs")); // 21 digits
    auto kfst = parse_segment_name("segment-00000000000000001234.kfst");
    REQUIRE(kfst.has_value());
    CHECK(kfst->base == 1234);
    CHECK(kfst->kind == object_kind::kfst);
    CHECK_FALSE(parse_segment_name("segment-00000000000000001234.kfstx"));
    CHECK_FALSE(parse_segment_name("segment-00000000000000001234.kfs.tmp"));
    CHECK_FALSE(parse_segment_name("segment-00000000000000001234.kf"));
    CHECK_FALSE(parse_segment_name("segment-00000000000000001234"));
    CHECK_FALSE(parse_segment_name("segment-0000000000000000123x.kfs"));
    CHECK_FALSE(parse_segment_name("segment-99999999999999999999.kfs")); // past INT64_MAX
    CHECK_FALSE(parse_segment_name(".tmp.segment-00000000000000001234.kfs"));
    CHECK_FALSE(parse_segment_name(""));
}

TEST_CASE("layout: whole keys below the namespace parse back", "[storage][layout]") {
    const partition_id p("my.topic-1", 12);
    const std::string key = segment_key("ns", p, 42);
    auto a = parse_object_key(std::string_view(key).substr(3)); // without "ns/"
    REQUIRE(a.has_value());
    CHECK(a->partition.topic == "my.topic-1");
    CHECK(a->partition.partition == 12);
    CHECK(a->name.base == 42);
    CHECK(a->name.kind == object_kind::kfs);

    CHECK_FALSE(parse_object_key("t/0/notes.txt"));
    CHECK_FALSE(parse_object_key("/0/segment-00000000000000000001.kfs"));   // no topic
    CHECK_FALSE(parse_object_key("t/x/segment-00000000000000000001.kfs"));  // partition not a number
    CHECK_FALSE(parse_object_key("t/-1/segment-00000000000000000001.kfs")); // negative partition
    CHECK_FALSE(parse_object_key("t/segment-00000000000000000001.kfs"));    // no partition level
    CHECK_FALSE(parse_object_key("t/0/x/segment-00000000000000000001.kfs")); // one level too deep
}
