// Golden bytes: requests captured from real clients (librdkafka 2.0.2 through kcat 1.7.1, kafkajs
// 2.2.4, both against a socket that recorded what they sent), an ApiVersions v0 response from a
// Kafka broker (kafkajs' fixture src/protocol/requests/apiVersions/fixtures/v0_response.json),
// and hand-assembled frames for the versions those clients do not send, annotated field by
// field from the schemas. Each is decoded, checked field by field, and re-encoded to the same
// bytes.
#include "hex.hpp"

#include <skiff/kafka/frame.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace skiff::kafka;
using skiff::kafka::test::hex;
using skiff::kafka::test::sp;
using skiff::kafka::test::unhex;

namespace {

// The 73-byte record batch (magic 2, one record "hello") librdkafka 2.0.2 produced.
const std::string rdkafka_batch = unhex(
    "0000000000000000" "0000003d" "00000000" "02" "acd4f99f" "0000" "00000000"
    "000001a236a1d37b" "000001a236a1d37b" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
    "16000000010a68656c6c6f00");

// Parses a framed request: size prefix, header, body of Msg.
template <typename Msg>
Msg parse_request(const std::string& framed, std::int16_t expect_header_version,
                  request_frame& frame_out) {
    auto size = peek_frame_size(sp(framed), 1 << 20);
    REQUIRE(size);
    REQUIRE(size->has_value());
    REQUIRE(**size == framed.size() - 4);
    auto frame = parse_request_header(sp(framed).subspan(4));
    REQUIRE(frame);
    CHECK(frame->header_version == expect_header_version);
    CHECK(frame->header.request_api_key == static_cast<std::int16_t>(Msg::api));
    auto body = decode_message<Msg>(frame->body, frame->header.request_api_version);
    if (!body) FAIL(body.error().message);
    frame_out = *frame;
    return *body;
}

// Re-encodes and compares with the captured frame.
template <typename Msg>
void check_reencode(const Msg& msg, const request_frame& f, const std::string& framed) {
    auto again = encode_request(msg, f.header.request_api_version, f.header.correlation_id,
                                f.header.client_id);
    REQUIRE(again);
    CHECK(hex(*again) == hex(framed));
}

} // namespace

TEST_CASE("ApiVersionsRequest v3 from librdkafka 2.0.2", "[kafka][golden]") {
    const std::string framed = unhex(
        "00000024"                        // size 36
        "0012" "0003" "00000001"          // ApiVersions v3, correlation id 1
        "0007" "72646b61666b61"           // client id "rdkafka": int16 length even in header v2
        "00"                              // header tagged fields
        "0b" "6c696272646b61666b61"       // compact "librdkafka"
        "06" "322e302e32"                 // compact "2.0.2"
        "00");                            // body tagged fields
    request_frame f;
    auto req = parse_request<ApiVersionsRequest>(framed, 2, f);
    CHECK(f.header.request_api_version == 3);
    CHECK(f.header.correlation_id == 1);
    CHECK(f.header.client_id == "rdkafka");
    CHECK(req.client_software_name == "librdkafka");
    CHECK(req.client_software_version == "2.0.2");
    check_reencode(req, f, framed);

    SECTION("unknown tagged fields are skipped") {
        const std::string body = unhex("0b6c696272646b61666b61 06322e302e32 02 07 01 ff 2a 00");
        auto r = decode_message<ApiVersionsRequest>(sp(body), 3);
        REQUIRE(r);
        CHECK(r->client_software_version == "2.0.2");
    }
}

TEST_CASE("ApiVersionsRequest v2 from kafkajs 2.2.4", "[kafka][golden]") {
    const std::string framed = unhex(
        "00000011" "0012" "0002" "00000000" "0007" "6b61666b616a73"); // empty body
    request_frame f;
    auto req = parse_request<ApiVersionsRequest>(framed, 1, f);
    CHECK(f.header.client_id == "kafkajs");
    CHECK(f.body.empty());
    CHECK(req == ApiVersionsRequest{});
    check_reencode(req, f, framed);
}

TEST_CASE("ApiVersionsResponse v0 from a broker", "[kafka][golden]") {
    const std::string body = unhex(
        "0000" "00000015"
        "000000000002" "000100000003" "000200000001" "000300000002" "000400000000"
        "000500000000" "000600000003" "000700010001" "000800000002" "000900000002"
        "000a00000000" "000b00000001" "000c00000000" "000d00000000" "000e00000000"
        "000f00000000" "001000000000" "001100000000" "001200000000" "001300000001"
        "001400000000");
    auto r = decode_message<ApiVersionsResponse>(sp(body), 0);
    REQUIRE(r);
    CHECK(r->error_code == error_code::none);
    REQUIRE(r->api_keys.size() == 21);
    CHECK(r->api_keys[1].api_key == 1);
    CHECK(r->api_keys[1].max_version == 3);
    CHECK(r->api_keys[7].min_version == 1);
    CHECK(r->api_keys[20].api_key == 20);
    auto again = encode_message(*r, 0);
    REQUIRE(again);
    CHECK(hex(*again) == hex(body));
    // In a response frame the header is always v0 for ApiVersions (KIP-511).
    auto framed = encode_response(*r, 0, 42);
    REQUIRE(framed);
    CHECK(hex(framed->substr(0, 8)) == "000000880000002a");
}

TEST_CASE("ApiVersionsResponse v3 with tagged fields", "[kafka][golden]") {
    const std::string body = unhex(
        "0000"                                  // error code
        "04"                                    // 3 api keys (compact)
        "0000" "0000" "000b" "00"               // Produce 0-11, no tags
        "0001" "0000" "0011" "00"               // Fetch 0-17
        "0012" "0000" "0004" "00"               // ApiVersions 0-4
        "00000000"                              // throttle time
        "02"                                    // 2 tagged fields
        "00" "17"                               // tag 0 SupportedFeatures, 23 bytes
        "02" "11" "6d657461646174612e76657273696f6e" "0001" "0014" "00"
        "01" "08" "0000000000000005");          // tag 1 FinalizedFeaturesEpoch = 5
    auto r = decode_message<ApiVersionsResponse>(sp(body), 3);
    if (!r) FAIL(r.error().message);
    CHECK(r->api_keys.size() == 3);
    CHECK(r->api_keys[2].api_key == 18);
    CHECK(r->api_keys[2].max_version == 4);
    REQUIRE(r->supported_features.size() == 1);
    CHECK(r->supported_features[0].name == "metadata.version");
    CHECK(r->supported_features[0].min_version == 1);
    CHECK(r->supported_features[0].max_version == 20);
    CHECK(r->finalized_features_epoch == 5);
    CHECK(r->finalized_features.empty());
    CHECK_FALSE(r->zk_migration_ready);
    auto again = encode_message(*r, 3);
    REQUIRE(again);
    CHECK(hex(*again) == hex(body));

    auto framed = encode_response(*r, 3, 7);
    REQUIRE(framed);
    CHECK(hex(framed->substr(4, 4)) == "00000007"); // header v0: no tagged fields after the id
    CHECK(framed->substr(8) == body);
}

TEST_CASE("MetadataRequest v1 and v4 from librdkafka, v1 from kafkajs", "[kafka][golden]") {
    request_frame f;
    SECTION("v1, no topics (librdkafka's broker-only request)") {
        const std::string framed =
            unhex("00000015" "0003" "0001" "00000002" "0007" "72646b61666b61" "00000000");
        auto req = parse_request<MetadataRequest>(framed, 1, f);
        REQUIRE(req.topics.has_value());
        CHECK(req.topics->empty());
        check_reencode(req, f, framed);
    }
    SECTION("v1, topic t") {
        const std::string framed =
            unhex("00000018" "0003" "0001" "00000003" "0007" "72646b61666b61" "00000001" "000174");
        auto req = parse_request<MetadataRequest>(framed, 1, f);
        REQUIRE(req.topics.has_value());
        REQUIRE(req.topics->size() == 1);
        CHECK((*req.topics)[0].name == "t");
        check_reencode(req, f, framed);
    }
    SECTION("v1 from kafkajs") {
        const std::string framed =
            unhex("00000018" "0003" "0001" "00000001" "0007" "6b61666b616a73" "00000001" "000174");
        auto req = parse_request<MetadataRequest>(framed, 1, f);
        CHECK(f.header.client_id == "kafkajs");
        REQUIRE(req.topics.has_value());
        CHECK((*req.topics)[0].name == "t");
        check_reencode(req, f, framed);
    }
    SECTION("v4, all topics, auto-create") {
        const std::string framed = unhex(
            "00000016" "0003" "0004" "00000003" "0007" "72646b61666b61" "ffffffff" "01");
        auto req = parse_request<MetadataRequest>(framed, 1, f);
        CHECK_FALSE(req.topics.has_value()); // null = all topics
        CHECK(req.allow_auto_topic_creation);
        check_reencode(req, f, framed);
    }
    SECTION("v4, no topics, no auto-create") {
        const std::string framed = unhex(
            "00000016" "0003" "0004" "00000002" "0007" "72646b61666b61" "00000000" "00");
        auto req = parse_request<MetadataRequest>(framed, 1, f);
        CHECK(req.topics->empty());
        CHECK_FALSE(req.allow_auto_topic_creation);
        check_reencode(req, f, framed);
    }
}

TEST_CASE("MetadataRequest v9 (flexible)", "[kafka][golden]") {
    const std::string framed = unhex(
        "00000017"
        "0003" "0009" "00000007" "0004" "74657374" "00"  // header v2, client "test"
        "02" "0274" "00"                                // topics: [{name "t"}]
        "01"                                            // allow auto topic creation
        "00"                                            // include cluster authorized ops
        "01"                                            // include topic authorized ops
        "00");                                          // tagged fields
    request_frame f;
    auto req = parse_request<MetadataRequest>(framed, 2, f);
    REQUIRE(req.topics.has_value());
    REQUIRE(req.topics->size() == 1);
    CHECK((*req.topics)[0].name == "t");
    CHECK(req.allow_auto_topic_creation);
    CHECK_FALSE(req.include_cluster_authorized_operations);
    CHECK(req.include_topic_authorized_operations);
    check_reencode(req, f, framed);
}

TEST_CASE("ProduceRequest v7 from librdkafka and kafkajs, v3 and v9", "[kafka][golden]") {
    request_frame f;
    SECTION("v7 from librdkafka") {
        const std::string framed = unhex(
            "00000075" "0000" "0007" "00000004" "0007" "72646b61666b61"
            "ffff"        // transactional id: null
            "ffff"        // acks -1
            "00007530"    // timeout 30000 ms
            "00000001" "000174" "00000001" "00000000"
            "00000049") + rdkafka_batch;
        auto req = parse_request<ProduceRequest>(framed, 1, f);
        CHECK_FALSE(req.transactional_id.has_value());
        CHECK(req.acks == -1);
        CHECK(req.timeout_ms == 30000);
        REQUIRE(req.topic_data.size() == 1);
        CHECK(req.topic_data[0].name == "t");
        REQUIRE(req.topic_data[0].partition_data.size() == 1);
        CHECK(req.topic_data[0].partition_data[0].index == 0);
        CHECK(req.topic_data[0].partition_data[0].records == rdkafka_batch);
        check_reencode(req, f, framed);
    }
    SECTION("records borrowed from the frame when asked, copied otherwise") {
        const std::string framed = unhex(
            "00000075" "0000" "0007" "00000004" "0007" "72646b61666b61"
            "ffff" "ffff" "00007530" "00000001" "000174" "00000001" "00000000"
            "00000049") + rdkafka_batch;
        auto hdr = parse_request_header(sp(framed).subspan(4));
        REQUIRE(hdr);
        const std::span<const char> body = hdr->body;
        skiff::kafka::reader borrowing(body);
        borrowing.borrow_records(true);
        auto lent = ProduceRequest::decode(borrowing, 7);
        REQUIRE(lent);
        const auto& r = lent->topic_data.at(0).partition_data.at(0).records;
        REQUIRE(r.has_value());
        CHECK(r->borrowed());
        CHECK(*r == rdkafka_batch);
        // The view lies inside the frame: nothing was copied.
        CHECK(r->data() >= body.data());
        CHECK(r->data() + r->size() <= body.data() + body.size());
        // Re-encoding a borrowed record set writes the same bytes.
        auto again = encode_request(*lent, 7, hdr->header.correlation_id, hdr->header.client_id);
        REQUIRE(again);
        CHECK(hex(*again) == hex(framed));

        skiff::kafka::reader copying(body);
        auto owned = ProduceRequest::decode(copying, 7);
        REQUIRE(owned);
        auto& o = owned->topic_data.at(0).partition_data.at(0).records;
        REQUIRE(o.has_value());
        CHECK_FALSE(o->borrowed());
        CHECK(*o == rdkafka_batch);
        CHECK((o->data() < body.data() || o->data() >= body.data() + body.size()));
        // own() turns a borrowed value into a copy that outlives the frame.
        auto keep = *r;
        std::string& mine = keep.own();
        CHECK_FALSE(keep.borrowed());
        CHECK(mine == rdkafka_batch);
        CHECK((keep.data() < body.data() || keep.data() >= body.data() + body.size()));
    }
    SECTION("v7 from kafkajs") {
        const std::string framed = unhex(
            "00000075000000070000000200076b61666b616a73ffffffff00007530000000010001740000000100"
            "0000000000004900000000000000000000003d0000000002a9caa743000000000000000001a236a1f5"
            "8b000001a236a1f58bffffffffffffffff0000000000000000000116000000010a68656c6c6f00");
        auto req = parse_request<ProduceRequest>(framed, 1, f);
        CHECK(req.acks == -1);
        REQUIRE(req.topic_data[0].partition_data[0].records.has_value());
        CHECK(req.topic_data[0].partition_data[0].records->size() == 73);
        check_reencode(req, f, framed);
    }
    SECTION("v3: the same body layout as v7") {
        const std::string framed = unhex(
            "00000075" "0000" "0003" "00000004" "0007" "72646b61666b61"
            "ffff" "0001" "00001388" "00000001" "000174" "00000001" "00000002"
            "00000049") + rdkafka_batch;
        auto req = parse_request<ProduceRequest>(framed, 1, f);
        CHECK(req.acks == 1);
        CHECK(req.timeout_ms == 5000);
        CHECK(req.topic_data[0].partition_data[0].index == 2);
        CHECK(req.topic_data[0].partition_data[0].records == rdkafka_batch);
        check_reencode(req, f, framed);
    }
    SECTION("v9 (flexible), transactional") {
        const std::string framed = unhex(
            "00000071" "0000" "0009" "00000004" "0007" "72646b61666b61" "00"
            "04" "747831"          // transactional id "tx1" (compact)
            "ffff" "00007530"
            "02" "0274"            // 1 topic, "t"
            "02" "00000000"        // 1 partition, index 0
            "4a") + rdkafka_batch + // records: compact length 73 + 1
            unhex("00" "00" "00");  // partition, topic, request tagged fields
        auto req = parse_request<ProduceRequest>(framed, 2, f);
        CHECK(req.transactional_id == "tx1");
        CHECK(req.topic_data[0].partition_data[0].records == rdkafka_batch);
        check_reencode(req, f, framed);
    }
    SECTION("null records") {
        const std::string body = unhex("ffff" "0001" "00000000" "00000001" "000174" "00000001"
                                       "00000000" "ffffffff");
        auto req = decode_message<ProduceRequest>(sp(body), 3);
        REQUIRE(req);
        CHECK_FALSE(req->topic_data[0].partition_data[0].records.has_value());
    }
}

TEST_CASE("FetchResponse v4 and v12", "[kafka][golden]") {
    SECTION("v4") {
        const std::string body = unhex(
            "00000000"                          // throttle time
            "00000001" "000174"                 // 1 topic, "t"
            "00000001"                          // 1 partition
            "00000000" "0000"                   // index 0, no error
            "000000000000000a"                  // high watermark 10
            "0000000000000009"                  // last stable offset 9
            "ffffffff"                          // aborted transactions: null
            "00000049") + rdkafka_batch;        // records
        auto r = decode_message<FetchResponse>(sp(body), 4);
        if (!r) FAIL(r.error().message);
        REQUIRE(r->responses.size() == 1);
        CHECK(r->responses[0].topic == "t");
        const auto& p = r->responses[0].partitions.at(0);
        CHECK(p.high_watermark == 10);
        CHECK(p.last_stable_offset == 9);
        CHECK(p.log_start_offset == -1); // absent in v4: the default
        CHECK_FALSE(p.aborted_transactions.has_value());
        CHECK(p.records == rdkafka_batch);
        auto again = encode_message(*r, 4);
        REQUIRE(again);
        CHECK(hex(*again) == hex(body));
        auto framed = encode_response(*r, 4, 9);
        REQUIRE(framed);
        CHECK(hex(framed->substr(0, 8)) == "0000007a00000009");
    }
    SECTION("v12 with a tagged CurrentLeader") {
        const std::string body = unhex(
            "00000000" "0000" "00000000"        // throttle, error, session id
            "02" "0274"                         // 1 topic, compact "t"
            "02"                                // 1 partition
            "00000000" "0000"
            "000000000000000a" "000000000000000a" "0000000000000000"
            "00"                                // aborted transactions: null (compact)
            "ffffffff"                          // preferred read replica -1
            "4a") + rdkafka_batch + unhex(      // records
            "01" "01" "09" "00000001" "00000005" "00" // tag 1 CurrentLeader {1, epoch 5}, its tags
            "00"                                // topic tagged fields
            "00");                              // response tagged fields
        auto r = decode_message<FetchResponse>(sp(body), 12);
        if (!r) FAIL(r.error().message);
        const auto& p = r->responses.at(0).partitions.at(0);
        CHECK(p.current_leader.leader_id == 1);
        CHECK(p.current_leader.leader_epoch == 5);
        CHECK(p.diverging_epoch.epoch == -1); // absent tag: the default
        CHECK(p.records == rdkafka_batch);
        CHECK(p.preferred_read_replica == -1);
        auto again = encode_message(*r, 12);
        REQUIRE(again);
        CHECK(hex(*again) == hex(body));
        // Response header v1 for a flexible Fetch: correlation id + empty tagged fields.
        auto framed = encode_response(*r, 12, 3);
        REQUIRE(framed);
        CHECK(hex(framed->substr(4, 5)) == "0000000300");
    }
}

TEST_CASE("RequestHeader v0, v1 and v2", "[kafka][golden]") {
    SECTION("v1 with a null client id") {
        const std::string b = unhex("0003" "0001" "00000002" "ffff");
        auto h = decode_message<RequestHeader>(sp(b), 1);
        REQUIRE(h);
        CHECK(h->request_api_key == 3);
        CHECK(h->correlation_id == 2);
        CHECK_FALSE(h->client_id.has_value());
        auto again = encode_message(*h, 1);
        REQUIRE(again);
        CHECK(hex(*again) == hex(b));
    }
    SECTION("v2 with an unknown tagged field") {
        const std::string b = unhex("0012" "0003" "00000001" "0001" "63" "01" "05" "02" "aabb");
        auto h = decode_message<RequestHeader>(sp(b), 2);
        REQUIRE(h);
        CHECK(h->client_id == "c");
    }
    SECTION("v0 has no client id") {
        const std::string b = unhex("0007" "0000" "00000005");
        auto h = decode_message<RequestHeader>(sp(b), 0);
        REQUIRE(h);
        CHECK(h->request_api_key == 7);
        CHECK(h->client_id == std::string{}); // the default
        auto frame = parse_request_header(sp(b));
        REQUIRE(frame);
        CHECK(frame->header_version == 0);
    }
    SECTION("ResponseHeader v0 and v1") {
        const std::string v0 = unhex("0000002a");
        const std::string v1 = unhex("0000002a00");
        auto h0 = decode_message<ResponseHeader>(sp(v0), 0);
        auto h1 = decode_message<ResponseHeader>(sp(v1), 1);
        REQUIRE(h0);
        REQUIRE(h1);
        CHECK(h0->correlation_id == 42);
        CHECK(h1->correlation_id == 42);
    }
}
