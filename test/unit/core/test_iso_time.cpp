#include <skiff/core/iso_time.hpp>

#include <catch2/catch.hpp>

using namespace std::chrono;

TEST_CASE("iso8601_utc: UTC, whole seconds, Z", "[core][time]") {
    CHECK(skiff::iso8601_utc(system_clock::time_point{}) == "1970-01-01T00:00:00Z");
    // 2026-12-06T10:00:00Z, plus 999 ms that are dropped, not rounded.
    const auto t = system_clock::time_point{seconds{1796551200}} + milliseconds{999};
    CHECK(skiff::iso8601_utc(t) == "2026-12-06T10:00:00Z");
    CHECK(skiff::iso8601_utc(system_clock::time_point{seconds{951782400}}) == "2000-02-29T00:00:00Z");
}
