// Client quotas: the spec parser, the meter's throttle arithmetic (a GCRA per client id and
// kind), the bound on distinct client ids, and one meter shared by threads losing no bytes.
#include <skiff/broker/quota.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace skiff::broker;
using namespace std::chrono_literals;

namespace {
constexpr std::int64_t ms_ns = 1'000'000;
}

TEST_CASE("client quota specs parse, and bad ones name what is wrong", "[broker][quota]") {
    quota_config c;
    CHECK(parse_client_quotas("app-1:produce=1M,fetch=2048; batch:fetch=1G", c).empty());
    REQUIRE(c.clients.size() == 2);
    CHECK(c.clients["app-1"].produce_bytes_per_second == 1024.0 * 1024);
    CHECK(c.clients["app-1"].fetch_bytes_per_second == 2048);
    CHECK(c.clients["batch"].produce_bytes_per_second == 0);
    CHECK(c.clients["batch"].fetch_bytes_per_second == 1024.0 * 1024 * 1024);
    CHECK(c.any());
    // Client ids may contain ':' (the last one separates the rates).
    CHECK(parse_client_quotas("host:1:produce=10", c).empty());
    CHECK(c.clients["host:1"].produce_bytes_per_second == 10);

    quota_config bad;
    CHECK(parse_client_quotas("app", bad).find("not CLIENT_ID") != std::string::npos);
    CHECK(parse_client_quotas("app:produce=0", bad).find("positive") != std::string::npos);
    CHECK(parse_client_quotas("app:produce=-5", bad).find("positive") != std::string::npos);
    CHECK(parse_client_quotas("app:produce=12X", bad).find("positive") != std::string::npos);
    CHECK(parse_client_quotas("app:write=10", bad).find("unknown quota 'write'") != std::string::npos);
    CHECK_FALSE(quota_config{}.any());
}

TEST_CASE("a client within its quota is never throttled; beyond the burst window it waits as long as the excess takes",
          "[broker][quota]") {
    quota_config c;
    c.defaults.produce_bytes_per_second = 1000; // 1,000 bytes per second, 1 s burst
    quota_meter m(c);
    CHECK(m.limits(quota_kind::produce));
    CHECK_FALSE(m.limits(quota_kind::fetch));
    auto& e = m.find("producer");
    const std::int64_t t0 = 1'000'000 * ms_ns;
    // 100 bytes every 100 ms is exactly the rate: never throttled.
    for (int i = 0; i < 50; ++i) CHECK(m.record(e, quota_kind::produce, 100, t0 + i * 100 * ms_ns) == 0ms);
    // A burst: 1,000 bytes at once fills the window; 500 more are 500 ms over it.
    const std::int64_t t1 = t0 + 10'000 * ms_ns;
    CHECK(m.record(e, quota_kind::produce, 1000, t1) == 0ms);
    auto over = m.record(e, quota_kind::produce, 500, t1);
    CHECK(over >= 499ms);
    CHECK(over <= 501ms);
    // Fetch is not limited for this client: no throttle however much.
    CHECK(m.record(e, quota_kind::fetch, 1 << 30, t1) == 0ms);
    // After the throttle has passed, the client is within its rate again.
    CHECK(m.record(e, quota_kind::produce, 100, t1 + 1600 * ms_ns) == 0ms);
}

TEST_CASE("quotas are per client id: a named client's own limits, others the defaults", "[broker][quota]") {
    quota_config c;
    c.defaults.produce_bytes_per_second = 1000;
    REQUIRE(parse_client_quotas("fast:produce=1M", c).empty());
    quota_meter m(c);
    const std::int64_t t0 = 5'000 * ms_ns;
    auto& slow = m.find("slow");
    auto& fast = m.find("fast");
    CHECK(&m.find("slow") == &slow); // one meter per id
    CHECK(m.record(fast, quota_kind::produce, 100'000, t0) == 0ms);
    // 100 s of bytes at once: 99 s beyond the window, answered with the cap (30 s)...
    CHECK(m.record(slow, quota_kind::produce, 100'000, t0) == c.max_throttle);
    // ... and the excess is remembered: 40 s after, still throttled.
    CHECK(m.record(slow, quota_kind::produce, 1, t0 + 40'000 * ms_ns) == c.max_throttle);
    // Another default client is not affected by "slow"'s excess.
    CHECK(m.record(m.find("other"), quota_kind::produce, 500, t0) == 0ms);
}

TEST_CASE("a client inventing ids cannot grow the meter beyond its bound", "[broker][quota]") {
    quota_config c;
    c.defaults.fetch_bytes_per_second = 10;
    quota_meter m(c);
    quota_cache cache(m);
    for (std::size_t i = 0; i < quota_meter::max_entities + 500; ++i) (void)cache.find("id-" + std::to_string(i));
    CHECK(m.entities() == quota_meter::max_entities);
    // Ids past the bound share one meter with the default limits: still throttled.
    auto& late = cache.find("id-late");
    CHECK(&late == &cache.find("id-later"));
    CHECK(m.record(late, quota_kind::fetch, 1000, 0) > 0ms);
}

TEST_CASE("one meter shared by several threads counts every byte", "[broker][quota]") {
    quota_config c;
    c.defaults.produce_bytes_per_second = 1e9; // 1 ns per byte: the clock advance is the byte count
    c.window = 0ms;
    c.max_throttle = 1000000h;
    quota_meter m(c);
    auto& e = m.find("shared");
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 10000; ++i) (void)m.record(e, quota_kind::produce, 1000, 0);
        });
    }
    for (auto& t : threads) t.join();
    // 40,000 requests of 1,000 ns each, all at time 0: the clock is 40 ms ahead, exactly.
    CHECK(e.tat[0].load() == 40'000'000);
}
