// skiff group reset-offsets planning (src/cli/group_reset.*) and the time parsing it shares with
// skiff consume (src/cli/records_time.*).
#include "group_reset.hpp"
#include "records_time.hpp"

#include <catch2/catch.hpp>

using namespace skiff::cli;

namespace {
std::vector<partition_state> three_partitions() {
    std::vector<partition_state> v;
    v.emplace_back("t", 0, 10, 100);
    v.back().committed = 50;
    v.emplace_back("t", 1, 0, 0); // empty log, nothing committed
    v.emplace_back("t", 2, 5, 20);
    v.back().committed = 20;
    return v;
}
} // namespace

TEST_CASE("to-earliest and to-latest take the log bounds", "[cli][group]") {
    auto e = plan_reset(three_partitions(), reset_spec(reset_mode::to_earliest, 0));
    REQUIRE(e);
    REQUIRE(e->size() == 3);
    CHECK((*e)[0].target == 10);
    CHECK((*e)[0].current == 50);
    CHECK((*e)[1].target == 0);
    CHECK(!(*e)[1].current);
    CHECK((*e)[2].target == 5);
    auto l = plan_reset(three_partitions(), reset_spec(reset_mode::to_latest, 0));
    REQUIRE(l);
    CHECK((*l)[0].target == 100);
    CHECK((*l)[2].target == 20);
    CHECK((*l)[2].topic == "t");
    CHECK((*l)[2].partition == 2);
}

TEST_CASE("to-offset is clamped to [log start, log end] as Kafka's tool does", "[cli][group]") {
    auto p = plan_reset(three_partitions(), reset_spec(reset_mode::to_offset, 15));
    REQUIRE(p);
    CHECK((*p)[0].target == 15);
    CHECK((*p)[1].target == 0);
    CHECK((*p)[2].target == 15);
    auto low = plan_reset(three_partitions(), reset_spec(reset_mode::to_offset, 0));
    REQUIRE(low);
    CHECK((*low)[0].target == 10);
    auto high = plan_reset(three_partitions(), reset_spec(reset_mode::to_offset, 1000));
    REQUIRE(high);
    CHECK((*high)[0].target == 100);
    CHECK((*high)[2].target == 20);
}

TEST_CASE("shift-by moves the committed offset and is clamped", "[cli][group]") {
    std::vector<partition_state> v = three_partitions();
    v.erase(v.begin() + 1); // the partition without a committed offset
    auto back = plan_reset(v, reset_spec(reset_mode::shift_by, -30));
    REQUIRE(back);
    CHECK((*back)[0].target == 20);
    CHECK((*back)[1].target == 5); // 20 - 30 clamped to the log start
    auto fwd = plan_reset(v, reset_spec(reset_mode::shift_by, 7));
    REQUIRE(fwd);
    CHECK((*fwd)[0].target == 57);
    CHECK((*fwd)[1].target == 20); // already at the end
    auto huge = plan_reset(v, reset_spec(reset_mode::shift_by, INT64_MAX));
    REQUIRE(huge);
    CHECK((*huge)[0].target == 100);
}

TEST_CASE("shift-by without a committed offset names the partition", "[cli][group]") {
    auto p = plan_reset(three_partitions(), reset_spec(reset_mode::shift_by, 1));
    REQUIRE(!p);
    CHECK(p.error().find("t-1") != std::string::npos);
}

TEST_CASE("to-datetime uses ListOffsets' answer, the log end when there is none", "[cli][group]") {
    auto v = three_partitions();
    v[0].offset_for_time = 42;
    v[2].offset_for_time = 3; // below the log start (deleted records): clamped
    auto p = plan_reset(v, reset_spec(reset_mode::to_datetime, 1700000000000));
    REQUIRE(p);
    CHECK((*p)[0].target == 42);
    CHECK((*p)[1].target == 0);
    CHECK((*p)[2].target == 5);
}

TEST_CASE("lag is log end minus committed, never negative", "[cli][group]") {
    CHECK(lag(50, 100) == 50);
    CHECK(lag(100, 100) == 0);
    CHECK(lag(120, 100) == 0);
    CHECK(!lag(std::nullopt, 100));
}

TEST_CASE("times: ISO-8601 with and without zones, Unix ms", "[cli][time]") {
    CHECK(parse_time_ms("1700000000000") == 1700000000000);
    CHECK(parse_time_ms("1970-01-01") == 0);
    CHECK(parse_time_ms("1970-01-01T00:00:01Z") == 1000);
    CHECK(parse_time_ms("2023-11-14T22:13:20Z") == 1700000000000);
    CHECK(parse_time_ms("2023-11-14T22:13:20.123Z") == 1700000000123);
    CHECK(parse_time_ms("2023-11-14T22:13:20.5") == 1700000000500);
    CHECK(parse_time_ms("2023-11-14 22:13") == 1700000000000 - 20000);
    CHECK(parse_time_ms("2023-11-15T00:13:20+02:00") == 1700000000000);
    CHECK(parse_time_ms("2023-11-14T21:13:20-0100") == 1700000000000);
    CHECK(parse_time_ms("2024-02-29") == 1709164800000);
    std::string why;
    CHECK(!parse_time_ms("2023-02-29", &why));
    CHECK(why == "day out of range");
    CHECK(!parse_time_ms("2023-13-01"));
    CHECK(!parse_time_ms("2023-11-14T25:00"));
    CHECK(!parse_time_ms("yesterday"));
    CHECK(!parse_time_ms("2023-11-14Tx"));
    CHECK(!parse_time_ms("2023-11-14T22:13:20Zjunk"));
    CHECK(!parse_time_ms(""));
    CHECK(format_time_ms(1700000000123) == "2023-11-14T22:13:20.123Z");
    CHECK(format_time_ms(0) == "1970-01-01T00:00:00.000Z");
    CHECK(parse_time_ms(format_time_ms(1709164799999)) == 1709164799999);
}

TEST_CASE("positions for --from / --to", "[cli][time]") {
    using k = position::kind;
    CHECK(parse_position("beginning")->what == k::beginning);
    CHECK(parse_position("end")->what == k::end);
    auto o = parse_position("42");
    REQUIRE(o);
    CHECK(o->what == k::offset);
    CHECK(o->value == 42);
    auto r = parse_position("-5");
    REQUIRE(r);
    CHECK(r->what == k::from_end);
    CHECK(r->value == 5);
    auto t = parse_position("@2023-11-14T22:13:20Z");
    REQUIRE(t);
    CHECK(t->what == k::time);
    CHECK(t->value == 1700000000000);
    auto tm = parse_position("@1700000000001");
    REQUIRE(tm);
    CHECK(tm->value == 1700000000001);
    CHECK(!parse_position("12x"));
    CHECK(!parse_position(""));
    CHECK(!parse_position("-"));
    CHECK(!parse_position("@nope"));
}
