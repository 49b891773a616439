// JSON projections: typed values, nulls for missing members, dead letters for the rest; the day
// transform and ISO-8601 instants.
#include "../../../src/iceberg/projector.hpp"

#include <catch2/catch.hpp>

using namespace skiff::iceberg;

TEST_CASE("projections take typed values from JSON values", "[iceberg][projector]") {
    std::vector<projection> ps{{"amount", "double", "$.order.amount"}, {"customer", "string", "$.customer"},
                               {"qty", "long", "$.order.qty"},         {"paid", "boolean", "$.paid"},
                               {"at", "timestamptz", "$.at"}};
    projector pr(ps);
    std::vector<projected_value> out;
    CHECK(pr.project(R"({"order":{"amount":12.5,"qty":3},"customer":"ann","paid":true,"at":1700000000123})", out));
    REQUIRE(out.size() == 5);
    CHECK(std::get<double>(out[0]) == 12.5);
    CHECK(std::get<std::string>(out[1]) == "ann");
    CHECK(std::get<std::int64_t>(out[2]) == 3);
    CHECK(std::get<bool>(out[3]));
    CHECK(std::get<std::int64_t>(out[4]) == 1700000000123000);
    // Missing members and JSON nulls are nulls, not dead letters; an integral double is a long.
    CHECK(pr.project(R"({"order":{"qty":4.0},"customer":null})", out));
    CHECK(std::holds_alternative<std::monostate>(out[0]));
    CHECK(std::holds_alternative<std::monostate>(out[1]));
    CHECK(std::get<std::int64_t>(out[2]) == 4);
    // Wrong types: null in that column and a dead letter; the other columns still filled.
    CHECK_FALSE(pr.project(R"({"order":{"amount":"12"},"customer":"bo","paid":1})", out));
    CHECK(std::holds_alternative<std::monostate>(out[0]));
    CHECK(std::get<std::string>(out[1]) == "bo");
    CHECK(std::holds_alternative<std::monostate>(out[3]));
    CHECK_FALSE(pr.project(R"({"order":{"qty":2.5}})", out));
    CHECK_FALSE(pr.project(R"({"at":"yesterday"})", out));
    CHECK_FALSE(pr.project(R"({"at":9223372036854775807})", out)); // would overflow in micros
    // Not JSON at all: a dead letter with every column null. No value (tombstone): nothing wrong.
    CHECK_FALSE(pr.project("\x01\x02 binary", out));
    CHECK(std::all_of(out.begin(), out.end(), [](auto& v) { return std::holds_alternative<std::monostate>(v); }));
    CHECK(pr.project(std::nullopt, out));
    // A path through something that is not an object is a missing member.
    CHECK(pr.project(R"({"order":[1,2]})", out));
}

TEST_CASE("the day transform floors, before 1970 too", "[iceberg][projector]") {
    CHECK(day_of(0) == 0);
    CHECK(day_of(86'399'999) == 0);
    CHECK(day_of(86'400'000) == 1);
    CHECK(day_of(-1) == -1);
    CHECK(day_of(-86'400'000) == -1);
    CHECK(day_of(-86'400'001) == -2);
    CHECK(day_of(1'700'000'000'000) == 19675); // 2023-11-14
}

TEST_CASE("ISO-8601 instants with a zone parse to microseconds", "[iceberg][projector]") {
    CHECK(parse_iso_micros("1970-01-01T00:00:00Z") == 0);
    CHECK(parse_iso_micros("2023-11-14T22:13:20.123Z") == 1'700'000'000'123'000);
    CHECK(parse_iso_micros("2023-11-14T23:13:20.123456+01:00") == 1'700'000'000'123'456);
    CHECK(parse_iso_micros("1969-12-31T23:59:59Z") == -1'000'000);
    CHECK_FALSE(parse_iso_micros("2023-11-14T22:13:20"));   // no zone: not an instant
    CHECK_FALSE(parse_iso_micros("2023-13-14T22:13:20Z"));
    CHECK_FALSE(parse_iso_micros("2023-11-14T22:13:20.Z"));
    CHECK_FALSE(parse_iso_micros("2023-11-14T22:13:20Zjunk"));
    CHECK_FALSE(parse_iso_micros(""));
}
