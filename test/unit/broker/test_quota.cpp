// Client quotas: the spec parser, the meter's throttle arithmetic (a GCRA per client id and
// kind), the bound on distinct client ids, and one meter shared by threads losing no bytes.
#include <skiff/broker/client_quotas.hpp>
#include <skiff/broker/quota.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
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

// --- quotas set through the Kafka API (client_quotas.hpp) ---------------------------------------

namespace {
quota_entity ent(std::optional<std::optional<std::string>> user, std::optional<std::optional<std::string>> client) {
    auto part = [](const std::optional<std::optional<std::string>>& v) {
        if (!v) return quota_entity_part{};
        return *v ? quota_entity_part::named(**v) : quota_entity_part::default_entity();
    };
    return {part(user), part(client)};
}
} // namespace

TEST_CASE("client quotas resolve in Kafka's order, each key on its own, flags last", "[broker][quota]") {
    using std::nullopt;
    const std::optional<std::string> dflt = nullopt;
    quota_config flags;
    flags.defaults = {7, 8};
    flags.clients["flagged"] = {70, 0};
    client_quota_table t;
    // The levels, most specific first; each test removes the one above and sees the next.
    const std::vector<quota_entity> levels = {
        ent(std::string("ANONYMOUS"), std::string("app")), ent(std::string("ANONYMOUS"), dflt),
        ent(std::string("ANONYMOUS"), nullopt),            ent(dflt, std::string("app")),
        ent(dflt, dflt),                                   ent(dflt, nullopt),
        ent(nullopt, std::string("app")),                  ent(nullopt, dflt),
    };
    for (std::size_t i = 0; i < levels.size(); ++i) t.entries[levels[i]] = {{"producer_byte_rate", 100.0 + i}};
    for (std::size_t i = 0; i < levels.size(); ++i) {
        INFO("level " << i);
        CHECK(resolve_quota(t, flags, anonymous_user, std::string_view("app")).produce_bytes_per_second == 100.0 + i);
        t.entries.erase(levels[i]);
    }
    CHECK(resolve_quota(t, flags, anonymous_user, std::string_view("app")).produce_bytes_per_second == 7);
    CHECK(resolve_quota(t, flags, anonymous_user, std::string_view("flagged")).produce_bytes_per_second == 70);
    // Keys resolve separately: a client's own produce rate does not hide the default fetch rate.
    t.entries[ent(nullopt, std::string("app"))] = {{"producer_byte_rate", 5.0}};
    t.entries[ent(nullopt, dflt)] = {{"consumer_byte_rate", 6.0}};
    const auto l = resolve_quota(t, flags, anonymous_user, std::string_view("app"));
    CHECK(l.produce_bytes_per_second == 5);
    CHECK(l.fetch_bytes_per_second == 6);
    // Another user's entries never apply; an unnamed client (the overflow) gets the defaults.
    t.entries[ent(std::string("alice"), nullopt)] = {{"producer_byte_rate", 1.0}};
    CHECK(resolve_quota(t, flags, anonymous_user, std::string_view("other")).produce_bytes_per_second == 7);
    CHECK(resolve_quota(t, flags, anonymous_user, std::nullopt).fetch_bytes_per_second == 6);
    CHECK(resolve_quota(t, flags, anonymous_user, std::nullopt).produce_bytes_per_second == 7);
}

TEST_CASE("the stored client quotas round-trip, and malformed objects are refused with a reason", "[broker][quota]") {
    client_quota_table t;
    t.entries[ent(std::string("alice"), std::optional<std::string>())] = {{"producer_byte_rate", 1024.0}};
    t.entries[ent(std::nullopt, std::string("app"))] = {{"consumer_byte_rate", 5e6}, {"producer_byte_rate", 3.0}};
    auto back = decode_client_quotas(encode_client_quotas(t));
    REQUIRE(back.has_value());
    CHECK(*back == t);
    CHECK(encode_client_quotas(t).find("\"client-id\": null") != std::string::npos);
    CHECK(client_quotas_key("ns") == "ns/skiff~meta/quotas.json");
    auto reason = [](std::string_view json) {
        auto r = decode_client_quotas(json);
        return r ? std::string("accepted") : r.error();
    };
    CHECK(reason("[]") == "not a JSON object");
    CHECK(reason(R"({"version":2,"entries":[]})").find("version") != std::string::npos);
    CHECK(reason(R"({"version":1})") == "\"entries\" must be an array");
    CHECK(reason(R"({"version":1,"entries":[{"entity":{},"quotas":{}}]})") == "an entry's entity is empty");
    CHECK(reason(R"({"version":1,"entries":[{"entity":{"user":""},"quotas":{}}]})")
              .find("non-empty string or null") != std::string::npos);
    CHECK(reason(R"({"version":1,"entries":[{"entity":{"user":"a"},"quotas":{"producer_byte_rate":-1}}]})") ==
          "quota producer_byte_rate must be a positive number");
    CHECK(reason(R"({"version":1,"entries":[{"entity":{"user":"a"},"quotas":{"producer_byte_rate":"x"}}]})") ==
          "quota producer_byte_rate must be a positive number");
    CHECK(reason(R"({"version":1,"entries":[]})") == "accepted");
}

TEST_CASE("a quota table installed later re-limits clients already metered", "[broker][quota]") {
    quota_config c; // no command-line quotas
    quota_meter m(c);
    CHECK_FALSE(m.limits(quota_kind::produce));
    auto& app = m.find("app");
    CHECK(app.limits().produce_bytes_per_second == 0);
    auto t = std::make_shared<client_quota_table>();
    t->entries[ent(std::nullopt, std::string("app"))] = {{"producer_byte_rate", 1000.0}};
    m.set_table(t);
    CHECK(m.limits(quota_kind::produce));
    CHECK_FALSE(m.limits(quota_kind::fetch));
    CHECK(app.limits().produce_bytes_per_second == 1000);
    CHECK(m.find("other").limits().produce_bytes_per_second == 0);
    // 3000 bytes at 1000 B/s with a 1 s window: 2 s ahead of the window.
    CHECK(m.record(app, quota_kind::produce, 3000, 0) == 2000ms);
    m.set_table(std::make_shared<client_quota_table>());
    CHECK_FALSE(m.limits(quota_kind::produce));
    CHECK(app.limits().produce_bytes_per_second == 0);
    CHECK(m.record(app, quota_kind::produce, 3000, 0) == 0ms);
}

TEST_CASE("quotas are metered by authenticated user and client id", "[broker][quota]") {
    // With SASL a connection's user is its principal's name; a user quota applies to that user's
    // clients and not to another user's, or to ANONYMOUS, with the same client id.
    quota_config c;
    quota_meter m(c);
    auto t = std::make_shared<client_quota_table>();
    t->entries[ent(std::string("alice"), std::nullopt)] = {{"producer_byte_rate", 1000.0}};
    t->entries[ent(std::string("bob"), std::string("etl"))] = {{"consumer_byte_rate", 500.0}};
    m.set_table(t);
    quota_cache cache(m);
    auto& alice_app = cache.find("alice", "app");
    auto& bob_app = cache.find("bob", "app");
    auto& anon_app = cache.find("app");
    CHECK(&alice_app != &bob_app);
    CHECK(&bob_app != &anon_app);
    CHECK(&cache.find("alice", "app") == &alice_app); // cached
    CHECK(alice_app.user == "alice");
    CHECK(alice_app.limits().produce_bytes_per_second == 1000);
    CHECK(bob_app.limits().produce_bytes_per_second == 0);
    CHECK(anon_app.limits().produce_bytes_per_second == 0);
    CHECK(cache.find("bob", "etl").limits().fetch_bytes_per_second == 500);
    CHECK(cache.find("alice", "etl").limits().fetch_bytes_per_second == 0);
    // Each (user, client id) has its own clock: alice's excess does not throttle bob.
    CHECK(m.record(alice_app, quota_kind::produce, 3000, 0) == 2000ms);
    CHECK(m.record(bob_app, quota_kind::produce, 3000, 0) == 0ms);
}
