#include <skiff/cluster/assignment.hpp>
#include <skiff/cluster/records.hpp>
#include <skiff/cluster/view.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

using namespace skiff::cluster;

namespace {
std::map<std::pair<std::string, int>, int> assign(const std::vector<std::int32_t>& live, int topics, int parts) {
    std::map<std::pair<std::string, int>, int> out;
    for (int t = 0; t < topics; ++t) {
        for (int p = 0; p < parts; ++p) {
            const std::string name = "topic-" + std::to_string(t);
            out[{name, p}] = preferred_owner(name, p, live);
        }
    }
    return out;
}
} // namespace

TEST_CASE("no live broker means no owner", "[cluster][assignment]") {
    REQUIRE(preferred_owner("t", 0, {}) == -1);
    REQUIRE(preferred_coordinator("g", {}) == -1);
}

TEST_CASE("every broker computes the same owner whatever the order of the member list", "[cluster][assignment]") {
    const std::vector<std::int32_t> a{1, 2, 3}, b{3, 1, 2};
    for (int p = 0; p < 100; ++p) REQUIRE(preferred_owner("orders", p, a) == preferred_owner("orders", p, b));
}

TEST_CASE("partitions spread evenly over the live brokers", "[cluster][assignment]") {
    const std::vector<std::int32_t> live{1, 2, 3};
    auto owners = assign(live, 20, 30); // 600 partitions
    std::map<int, int> count;
    for (auto& [_, b] : owners) ++count[b];
    REQUIRE(count.size() == 3);
    for (auto& [b, n] : count) {
        INFO("broker " << b << " owns " << n);
        REQUIRE(n > 150); // 200 each when perfectly even
        REQUIRE(n < 250);
    }
}

TEST_CASE("a joining broker takes only partitions, and about its share", "[cluster][assignment]") {
    auto before = assign({1, 2, 3}, 20, 30);
    auto after = assign({1, 2, 3, 4}, 20, 30);
    int moved = 0;
    for (auto& [k, b] : before) {
        if (after[k] != b) {
            ++moved;
            REQUIRE(after[k] == 4); // nothing moves between the old brokers
        }
    }
    INFO("moved " << moved << " of 600");
    REQUIRE(moved > 100); // 150 expected
    REQUIRE(moved < 200);
}

TEST_CASE("a leaving broker's partitions move, nothing else does", "[cluster][assignment]") {
    auto before = assign({1, 2, 3}, 20, 30);
    auto after = assign({1, 3}, 20, 30);
    for (auto& [k, b] : before) {
        if (b != 2) REQUIRE(after[k] == b);
        else REQUIRE(after[k] != 2);
    }
}

TEST_CASE("records round-trip and reject what skiff does not write", "[cluster][records]") {
    member m{7, "10.0.0.7", 9092, "rack-a"};
    auto dm = decode_member(encode(m));
    REQUIRE(dm);
    REQUIRE(dm->id == 7);
    REQUIRE(dm->host == "10.0.0.7");
    REQUIRE(dm->port == 9092);
    REQUIRE(dm->rack == "rack-a");
    REQUIRE(!decode_member(R"({"id":1,"host":"h","port":0})"));
    REQUIRE(!decode_member(R"({"id":1,"host":"h","port":70000})"));
    REQUIRE(!decode_member("not json"));

    auto o = decode_owner(encode(owner{3, 12}));
    REQUIRE(o);
    REQUIRE(o->broker == 3);
    REQUIRE(o->epoch == 12);
    REQUIRE(!decode_owner(R"({"broker":3,"epoch":-1})"));
    REQUIRE(!decode_owner(R"({"broker":3,"epoch":4294967296})"));

    auto t = decode_takeover(encode(takeover{5, true, 1234}));
    REQUIRE(t);
    REQUIRE(t->epoch == 5);
    REQUIRE(t->clean);
    REQUIRE(t->next_offset == 1234);
    REQUIRE(!decode_takeover(R"({"epoch":5,"clean":"yes","next_offset":1})"));
}

TEST_CASE("keys parse back to what they name", "[cluster][records]") {
    keys k("prod");
    REQUIRE(k.member(12) == "/skiff/prod/members/12");
    REQUIRE(k.parse_member(k.member(12)) == 12);
    REQUIRE(!k.parse_member("/skiff/prod/members/x"));
    REQUIRE(!k.parse_member("/skiff/other/members/1"));
    auto p = k.parse_owner(k.owner("a.b-c", 41));
    REQUIRE(p);
    REQUIRE(p->first == "a.b-c");
    REQUIRE(p->second == 41);
    REQUIRE(!k.parse_owner("/skiff/prod/owners/t/-1"));
    REQUIRE(!k.parse_owner("/skiff/prod/owners/0"));
    // Group slots stay inside their range for any group id.
    for (const std::string& g : std::vector<std::string>{"", "a", "consumers", std::string(300, 'x')}) {
        REQUIRE(group_slot(g) >= 0);
        REQUIRE(group_slot(g) < group_slots);
    }
}

TEST_CASE("a placement overrides the hash while its broker is live", "[cluster][records][placement]") {
    keys k("prod");
    REQUIRE(k.placement("orders", 3) == "/skiff/prod/placements/orders/3");
    auto p = k.parse_placement(k.placement("orders", 3));
    REQUIRE(p);
    CHECK(p->first == "orders");
    CHECK(p->second == 3);
    CHECK(!k.parse_placement(k.owner("orders", 3))); // owners are not placements
    CHECK(!k.parse_owner(k.placement("orders", 3)));

    view v;
    const std::vector<std::int32_t> live{1, 2, 3};
    const std::int32_t hashed = preferred_owner("orders", 3, live);
    CHECK(v.preferred_owner("orders", 3, live) == hashed);
    CHECK(v.placement_of("orders", 3) == -1);
    const std::int32_t other = hashed == 1 ? 2 : 1;
    v.placements[{"orders", 3}] = other;
    CHECK(v.placement_of("orders", 3) == other);
    CHECK(v.preferred_owner("orders", 3, live) == other);
    // The placed broker is down: the hash decides among the live ones until it returns.
    std::vector<std::int32_t> without;
    for (auto id : live) {
        if (id != other) without.push_back(id);
    }
    CHECK(v.preferred_owner("orders", 3, without) == preferred_owner("orders", 3, without));
    // Other partitions are untouched.
    CHECK(v.preferred_owner("orders", 4, live) == preferred_owner("orders", 4, live));
}
