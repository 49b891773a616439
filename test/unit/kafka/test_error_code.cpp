// Error-code fields of the generated messages are kafka::error_code, and a code this broker does
// not know (a newer Kafka's, or garbage) is data like any other: it decodes, keeps its value,
// and encodes back to the same bytes. Inline, nested and tagged error-code fields are covered.
#include "hex.hpp"

#include <skiff/kafka/frame.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <type_traits>

using namespace skiff::kafka;
using skiff::kafka::test::hex;
using skiff::kafka::test::sp;
using skiff::kafka::test::unhex;

// Every field named ErrorCode, or an int16 named *ErrorCode, carries the type.
static_assert(std::is_same_v<decltype(InitProducerIdResponse::error_code), error_code>);
static_assert(std::is_same_v<decltype(ProduceResponse::PartitionProduceResponse::error_code), error_code>);
static_assert(std::is_same_v<decltype(AddPartitionsToTxnResponse::AddPartitionsToTxnPartitionResult::partition_error_code),
                             error_code>);
static_assert(std::is_same_v<decltype(CreateTopicsResponse::CreatableTopicResult::topic_config_error_code), error_code>);

TEST_CASE("an unknown error code survives decode and encode", "[kafka][errors]") {
    // InitProducerIdResponse v0: throttle_time_ms, error_code 9999 (0x270f), producer_id,
    // producer_epoch.
    const std::string body = unhex("00000000" "270f" "0000000000000007" "0003");
    auto r = decode_message<InitProducerIdResponse>(sp(body), 0);
    REQUIRE(r);
    CHECK(to_wire(r->error_code) == 9999);
    CHECK(r->error_code == from_wire(9999));
    CHECK(name(r->error_code) == "UNKNOWN");
    CHECK_FALSE(is_retriable(r->error_code));
    CHECK(r->producer_id == 7);
    auto again = encode_message(*r, 0);
    REQUIRE(again);
    CHECK(hex(*again) == hex(body));
}

TEST_CASE("a negative unknown error code survives decode and encode", "[kafka][errors]") {
    // InitProducerIdResponse v2 (flexible): the same fields, then an empty tagged-field section.
    const std::string body = unhex("00000000" "fffe" "0000000000000007" "0003" "00");
    auto r = decode_message<InitProducerIdResponse>(sp(body), 2);
    REQUIRE(r);
    CHECK(to_wire(r->error_code) == -2);
    CHECK(name(r->error_code) == "UNKNOWN");
    auto again = encode_message(*r, 2);
    REQUIRE(again);
    CHECK(hex(*again) == hex(body));
}

TEST_CASE("unknown error codes in nested and tagged fields survive decode and encode", "[kafka][errors]") {
    // CreateTopicsResponse v5: throttle_time_ms, one topic "t" with error_code 9999, a null
    // error_message, num_partitions 1, replication_factor 1, no configs, and the tagged
    // topic_config_error_code (tag 0, 2 bytes) 9998; then the message's empty tag section.
    const std::string body = unhex("00000000" "02" "0274" "270f" "00" "00000001" "0001" "01"
                                   "01" "00" "02" "270e"
                                   "00");
    auto r = decode_message<CreateTopicsResponse>(sp(body), 5);
    REQUIRE(r);
    REQUIRE(r->topics.size() == 1);
    const auto& t = r->topics[0];
    CHECK(t.name == "t");
    CHECK(to_wire(t.error_code) == 9999);
    CHECK(to_wire(t.topic_config_error_code) == 9998);
    CHECK(t.num_partitions == 1);
    auto again = encode_message(*r, 5);
    REQUIRE(again);
    CHECK(hex(*again) == hex(body));
}

TEST_CASE("a known error code goes on the wire as Kafka's int16", "[kafka][errors]") {
    ProduceResponse resp;
    auto& topic = resp.responses.emplace_back();
    topic.name = "t";
    auto& part = topic.partition_responses.emplace_back();
    part.index = 0;
    part.error_code = error_code::not_leader_or_follower;
    auto enc = encode_message(resp, 3);
    REQUIRE(enc);
    // v3: topic array (1), name "t", partition array (1), index 0, error_code 6, then offsets.
    CHECK(hex(*enc).rfind("00000001" "000174" "00000001" "00000000" "0006", 0) == 0);
    auto back = decode_message<ProduceResponse>(sp(*enc), 3);
    REQUIRE(back);
    CHECK(back->responses[0].partition_responses[0].error_code == error_code::not_leader_or_follower);
}
