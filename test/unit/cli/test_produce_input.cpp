// skiff produce's input parsing and partitioner (src/cli/produce_input.*) and skiff consume's
// record output (src/cli/records_format.*).
#include "produce_input.hpp"
#include "records_format.hpp"

#include <catch2/catch.hpp>

using namespace skiff::cli;

TEST_CASE("murmur2 matches Kafka's Utils.murmur2 test vectors", "[cli][produce]") {
    // org.apache.kafka.common.utils.UtilsTest#testMurmur2 (also kafkajs' murmur2).
    CHECK(murmur2("21") == -973932308);
    CHECK(murmur2("foobar") == -790332482);
    CHECK(murmur2("a-little-bit-long-string") == -985981536);
    CHECK(murmur2("a-little-bit-longer-string") == -1486304829);
    CHECK(murmur2("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971);
    CHECK(murmur2("abc") == 479470107);
    CHECK(murmur2("") == 275646681);
}

TEST_CASE("keyed records go where Kafka's default partitioner puts them", "[cli][produce]") {
    // (-973932308 & 0x7fffffff) % 7 etc., computed by hand.
    CHECK(partition_for_key("21", 7) == static_cast<std::int32_t>((static_cast<std::uint32_t>(-973932308) & 0x7fffffffu) % 7));
    CHECK(partition_for_key("key-1", 3) == 193331640 % 3);
    CHECK(partition_for_key("anything", 1) == 0);
    CHECK(partition_for_key("anything", 0) == 0);
}

TEST_CASE("headers are NAME=VALUE, split at the first '='", "[cli][produce]") {
    auto h = parse_header("trace=a=b");
    REQUIRE(h);
    CHECK(h->key == "trace");
    CHECK(h->value == "a=b");
    auto empty = parse_header("k=");
    REQUIRE(empty);
    CHECK(empty->value == "");
    auto null = parse_header("flag");
    REQUIRE(null);
    CHECK(!null->value);
    CHECK(!parse_header("=v"));
}

TEST_CASE("lines: value only, or key SEP value", "[cli][produce]") {
    std::vector<skiff::storage::record_header> hs{skiff::storage::record_header("h", std::string("1"))};
    auto plain = parse_line("hello:world", "", {});
    REQUIRE(plain);
    CHECK(!plain->key);
    CHECK(plain->value == "hello:world");
    CHECK(plain->headers.empty());
    auto kv = parse_line("k1:v:with:colons\r", ":", hs);
    REQUIRE(kv);
    CHECK(kv->key == "k1");
    CHECK(kv->value == "v:with:colons");
    REQUIRE(kv->headers.size() == 1);
    CHECK(kv->headers[0].key == "h");
    auto multi = parse_line("a::b", "::", {});
    REQUIRE(multi);
    CHECK(multi->key == "a");
    CHECK(multi->value == "b");
    auto empty_key = parse_line(":v", ":", {});
    REQUIRE(empty_key);
    CHECK(empty_key->key == "");
    auto missing = parse_line("no separator", ":", {});
    REQUIRE(!missing);
    CHECK(missing.error().find("separator") != std::string::npos);
}

TEST_CASE("consumed records as JSON lines", "[cli][consume]") {
    consumed_record r;
    r.topic = "t";
    r.partition = 2;
    r.offset = 7;
    r.timestamp = 1700000000000;
    r.key = "k\"1";
    r.value = "v\n";
    r.headers.emplace_back("h", std::string("x"));
    r.headers.emplace_back("n", std::nullopt);
    CHECK(to_json_line(r) ==
          R"({"topic":"t","partition":2,"offset":7,"timestamp":1700000000000,"timestamp_type":"CreateTime",)"
          R"("key":"k\"1","value":"v\n","headers":[{"key":"h","value":"x"},{"key":"n","value":null}]})");
    r.key.reset();
    r.value = std::string("\xff\x00", 2);
    r.headers.clear();
    r.log_append_time = true;
    CHECK(to_json_line(r) ==
          R"({"topic":"t","partition":2,"offset":7,"timestamp":1700000000000,"timestamp_type":"LogAppendTime",)"
          R"("key":null,"value_base64":"/wA=","headers":[]})");
}

TEST_CASE("consumed records as text", "[cli][consume]") {
    consumed_record r;
    r.key = "k";
    r.value = "v";
    CHECK(to_text(r, std::nullopt) == "v");
    CHECK(to_text(r, std::string_view("\t")) == "k\tv");
    r.key.reset();
    r.value.reset();
    CHECK(to_text(r, std::string_view(":")) == ":");
}

TEST_CASE("UTF-8 validation", "[cli][consume]") {
    CHECK(valid_utf8("plain"));
    CHECK(valid_utf8("h\xc3\xa9llo \xf0\x9f\x98\x80"));
    CHECK(!valid_utf8("\xc0\xaf"));         // overlong
    CHECK(!valid_utf8("\xed\xa0\x80"));     // surrogate
    CHECK(!valid_utf8("\xe2\x82"));         // truncated
    CHECK(!valid_utf8("\xf4\x90\x80\x80")); // above U+10FFFF
}
