// Framing: size prefix, header versions per API, request/response frames, the api table and
// the dispatch by API key.
#include "hex.hpp"

#include <skiff/kafka/frame.hpp>

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <utility>
#include <variant>

using namespace skiff::kafka;
using skiff::kafka::test::hex;
using skiff::kafka::test::sp;
using skiff::kafka::test::unhex;

TEST_CASE("peek_frame_size", "[kafka][frame]") {
    auto short_buf = peek_frame_size(sp(unhex("000000")), 100);
    REQUIRE(short_buf);
    CHECK_FALSE(short_buf->has_value());
    auto ok = peek_frame_size(sp(unhex("00000010ff")), 100);
    REQUIRE(ok);
    CHECK(**ok == 16);
    CHECK_FALSE(peek_frame_size(sp(unhex("ffffffff")), 100));
    auto big = peek_frame_size(sp(unhex("00000065")), 100);
    REQUIRE_FALSE(big);
    CHECK(big.error().message == "frame size 101 exceeds the limit of 100");
}

TEST_CASE("header versions follow flexibility, with the two exceptions", "[kafka][frame]") {
    CHECK(request_header_version(18, 2) == 1);
    CHECK(request_header_version(18, 3) == 2);
    CHECK(request_header_version(18, 9) == 2); // above max: still flexible
    CHECK(request_header_version(3, 8) == 1);
    CHECK(request_header_version(3, 9) == 2);
    CHECK(request_header_version(17, 1) == 1); // SaslHandshake is never flexible
    CHECK(request_header_version(7, 0) == 0);  // ControlledShutdown v0
    CHECK(request_header_version(999, 0) == 1);
    CHECK(response_header_version(18, 3) == 0); // KIP-511
    CHECK(response_header_version(1, 11) == 0);
    CHECK(response_header_version(1, 12) == 1);
}

TEST_CASE("parse_request_header", "[kafka][frame]") {
    SECTION("unknown API key: header v1, body left alone") {
        const std::string b = unhex("03e7" "0000" "0000000b" "0001" "78" "abcd");
        auto f = parse_request_header(sp(b));
        REQUIRE(f);
        CHECK(f->header_version == 1);
        CHECK(f->header.request_api_key == 999);
        CHECK(f->header.correlation_id == 11);
        CHECK(hex(std::string(f->body.data(), f->body.size())) == "abcd");
    }
    SECTION("an unsupported ApiVersions version still yields the correlation id") {
        // A newer client: ApiVersions v7 (flexible, header v2).
        const std::string b = unhex("0012" "0007" "00000005" "0001" "78" "00" "0100");
        auto f = parse_request_header(sp(b));
        REQUIRE(f);
        CHECK(f->header_version == 2);
        CHECK(f->header.correlation_id == 5);
        CHECK(f->body.size() == 2);
        CHECK(find_api(18)->max_version < 7);
    }
    SECTION("truncated headers fail") {
        const std::string b = unhex("0012" "0003" "00000005" "0007" "72646b61666b61" "00");
        for (std::size_t n = 0; n < b.size(); ++n) {
            CHECK_FALSE(parse_request_header(std::span<const char>(b.data(), n)));
        }
        CHECK(parse_request_header(sp(b)));
    }
}

TEST_CASE("frame_response and parse_response_header", "[kafka][frame]") {
    const std::string v0 = frame_response(7, 0, "xy");
    CHECK(hex(v0) == "00000006" "00000007" "7879");
    const std::string v1 = frame_response(7, 1, "xy");
    CHECK(hex(v1) == "00000007" "00000007" "00" "7879");
    auto p = parse_response_header(sp(v1).subspan(4), 1);
    REQUIRE(p);
    CHECK(p->header.correlation_id == 7);
    CHECK(std::string(p->body.data(), p->body.size()) == "xy");
    CHECK_FALSE(parse_response_header(sp(v1).subspan(4, 4), 1)); // tagged section missing
}

TEST_CASE("encode_request and encode_response frame the same bytes as the parts", "[kafka][frame]") {
    MetadataResponse resp;
    resp.brokers.emplace_back();
    resp.brokers[0].node_id = 1;
    resp.brokers[0].host = "localhost";
    resp.brokers[0].port = 9092;
    for (std::int16_t v : {std::int16_t{1}, std::int16_t{9}, std::int16_t{12}}) {
        auto framed = encode_response(resp, v, 99);
        REQUIRE(framed);
        auto body = encode_message(resp, v);
        REQUIRE(body);
        CHECK(*framed == frame_response(99, response_header_version(3, v), *body));
    }
    MetadataRequest req;
    auto framed = encode_request(req, 12, 4, std::nullopt);
    REQUIRE(framed);
    auto f = parse_request_header(sp(*framed).subspan(4));
    REQUIRE(f);
    CHECK(f->header_version == 2);
    CHECK_FALSE(f->header.client_id.has_value());
    CHECK(f->header.request_api_version == 12);
}

TEST_CASE("the api table", "[kafka][frame]") {
    CHECK(api_table.size() == 47); // one per request schema compiled
    std::set<int> keys;
    for (const auto& a : api_table) {
        keys.insert(static_cast<int>(a.key));
        CHECK(a.min_version <= a.max_version);
        CHECK(a.flexible_from <= a.max_version + 1);
        CHECK(find_api(static_cast<std::int16_t>(a.key)) == &a);
    }
    CHECK(keys.size() == api_table.size());
    const api_info* produce = find_api(0);
    REQUIRE(produce != nullptr);
    CHECK(produce->name == "Produce");
    CHECK(produce->max_version == 11);
    CHECK(produce->flexible_from == 9);
    CHECK(find_api(17)->flexible_from == -1); // SaslHandshake
    CHECK(find_api(26)->latest_version_unstable); // EndTxn v5
    CHECK(find_api(7) == nullptr);
    CHECK(is_flexible(0, 9));
    CHECK_FALSE(is_flexible(0, 8));
    CHECK_FALSE(is_flexible(17, 1));
    CHECK(ProduceRequest::api == api_key::produce);
    CHECK(FetchResponse::flexible_from == 12);
}

namespace {

template <typename Req, typename Resp>
void check_dispatch_one(int& checked) {
    STATIC_REQUIRE(Req::api == Resp::api);
    const auto key = static_cast<std::int16_t>(Req::api);
    for (std::int16_t v = Req::min_version; v <= Req::max_version; ++v) {
        auto req = encode_message(Req{}, v);
        auto resp = encode_message(Resp{}, v);
        REQUIRE(req);
        REQUIRE(resp);
        reader rq(sp(*req));
        auto r1 = decode_request(key, v, rq);
        REQUIRE(r1);
        CHECK(std::holds_alternative<Req>(*r1));
        CHECK(rq.remaining() == 0);
        reader rs(sp(*resp));
        auto r2 = decode_response(key, v, rs);
        REQUIRE(r2);
        CHECK(std::holds_alternative<Resp>(*r2));
        CHECK(rs.remaining() == 0);
        ++checked;
    }
}

template <std::size_t... I>
int check_dispatch(std::index_sequence<I...>) {
    int checked = 0;
    (check_dispatch_one<std::variant_alternative_t<I, any_request>,
                        std::variant_alternative_t<I, any_response>>(checked),
     ...);
    return checked;
}

} // namespace

TEST_CASE("decode_request / decode_response dispatch on the API key", "[kafka][frame]") {
    const int checked = check_dispatch(std::make_index_sequence<std::variant_size_v<any_request>>{});
    int expected = 0;
    for (const auto& a : api_table) expected += a.max_version - a.min_version + 1;
    CHECK(checked == expected);
    // Direct checks.
    {
        const std::string b = unhex("0b6c696272646b61666b6106322e302e3200");
        reader rd(sp(b));
        auto r = decode_request(18, 3, rd);
        REQUIRE(r);
        REQUIRE(std::holds_alternative<ApiVersionsRequest>(*r));
        CHECK(std::get<ApiVersionsRequest>(*r).client_software_name == "librdkafka");
    }
    {
        auto enc = encode_message(FetchResponse{}, 12);
        REQUIRE(enc);
        reader rd(sp(*enc));
        auto r = decode_response(1, 12, rd);
        REQUIRE(r);
        CHECK(std::holds_alternative<FetchResponse>(*r));
    }
    {
        const std::string empty;
        reader rd(sp(empty));
        auto r = decode_request(999, 0, rd);
        REQUIRE_FALSE(r);
        CHECK(r.error().message == "unknown api key 999");
        reader rd2(sp(empty));
        CHECK_FALSE(decode_request(18, 99, rd2));
    }
}
