// The topics catalog: names, the stored format, and loading from a store with junk in it.
#include <skiff/broker/catalog.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/storage/memory_store.hpp>

#include "run_task.hpp"

#include <catch2/catch.hpp>

using namespace skiff;
using namespace skiff::broker;

TEST_CASE("catalog: Kafka's topic name rules") {
    CHECK_FALSE(invalid_topic_name("orders"));
    CHECK_FALSE(invalid_topic_name("a.b_c-D9"));
    CHECK(invalid_topic_name(""));
    CHECK(invalid_topic_name("."));
    CHECK(invalid_topic_name(".."));
    CHECK(invalid_topic_name("a/b"));
    CHECK(invalid_topic_name("a~b"));
    CHECK(invalid_topic_name(std::string(250, 'x')));
    CHECK_FALSE(invalid_topic_name(std::string(249, 'x')));
}

TEST_CASE("catalog: topic objects round-trip and reject junk") {
    topic_info t;
    t.name = "orders";
    t.id = random_uuid();
    t.partitions = 12;
    t.configs["retention.ms"] = "1000";
    t.created_ms = 1700000000000;
    auto back = decode_topic(encode_topic(t));
    REQUIRE(back);
    CHECK(back->name == "orders");
    CHECK(back->id == t.id);
    CHECK(back->partitions == 12);
    CHECK(back->configs.at("retention.ms") == "1000");
    CHECK(back->created_ms == 1700000000000);

    CHECK_FALSE(decode_topic("not json"));
    CHECK_FALSE(decode_topic("[]"));
    CHECK_FALSE(decode_topic(R"({"version":2,"name":"a","id":"00000000000000000000000000000001","partitions":1})"));
    CHECK_FALSE(decode_topic(R"({"version":1,"name":"a/b","id":"00000000000000000000000000000001","partitions":1})"));
    CHECK_FALSE(decode_topic(R"({"version":1,"name":"a","id":"zz","partitions":1})"));
    // Ids are written in lower case and read back only so.
    CHECK(decode_topic(R"({"version":1,"name":"a","id":"0000000000000000000000000000000a","partitions":1})"));
    CHECK_FALSE(decode_topic(R"({"version":1,"name":"a","id":"0000000000000000000000000000000A","partitions":1})"));
    CHECK_FALSE(decode_topic(R"({"version":1,"name":"a","id":"00000000000000000000000000000001","partitions":0})"));
    CHECK_FALSE(decode_topic(R"({"version":1,"name":"a","id":"00000000000000000000000000000001","partitions":"x"})"));
}

TEST_CASE("catalog: topic keys cannot collide with segment keys") {
    // '~' is not allowed in topic names, so no topic's prefix is "{ns}/skiff~meta/".
    CHECK(topic_key("default", "orders") == "default/skiff~meta/topics/orders.json");
    CHECK(invalid_topic_name("skiff~meta"));
}

TEST_CASE("catalog: load skips corrupt and misplaced objects") {
    auto r = runtime::make_test_reactor();
    storage::memory_store store;
    topic_info a;
    a.name = "a";
    a.id = random_uuid();
    a.partitions = 2;
    topic_info b = a;
    b.name = "b";
    b.id = random_uuid();
    const std::string ea = encode_topic(a), eb = encode_topic(b), junk = "{not json";
    auto put = [&](std::string key, const std::string& body) {
        auto res = r->run_until_complete(store.put(std::move(key), body, false, {}));
        REQUIRE(res);
    };
    put(topic_key("ns", "a"), ea);
    put(topic_key("ns", "junk"), junk);
    put(topic_key("ns", "c"), eb);     // names another topic than its key: not trusted
    put(topic_key("other", "b"), eb);  // another namespace: invisible
    auto cat = r->run_until_complete(load_catalog(store, "ns", {}));
    REQUIRE(cat);
    CHECK(cat->topics.size() == 1);
    REQUIRE(cat->find("a"));
    CHECK(cat->find("a")->partitions == 2);
    CHECK(cat->find(a.id) == cat->find("a"));
    CHECK_FALSE(cat->find("b"));
}
