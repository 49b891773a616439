// The gateway's JSON both ways, with answers captured from etcd 3.4 (no etcd needed here).
#include "gateway_json.hpp"

#include <catch2/catch.hpp>

using namespace skiff::etcd;
namespace detail = skiff::etcd::detail;
using detail::json;

TEST_CASE("gateway JSON: request bodies", "[etcd][json]") {
    // Keys and values are base64; int64 fields are strings.
    CHECK(json::parse(detail::put_body("foo", "bar", 0)) == json::parse(R"({"key":"Zm9v","value":"YmFy"})"));
    CHECK(json::parse(detail::put_body("foo", "bar", 42)) ==
          json::parse(R"({"key":"Zm9v","value":"YmFy","lease":"42"})"));
    // A prefix is [prefix, prefix_end); the empty prefix is the whole keyspace ("\0", "\0").
    CHECK(json::parse(detail::range_body("/a/", true)) == json::parse(R"({"key":"L2Ev","range_end":"L2Ew"})"));
    CHECK(json::parse(detail::range_body("", true)) == json::parse(R"({"key":"AA==","range_end":"AA=="})"));
    CHECK(json::parse(detail::watch_body("foo", false, 7)) ==
          json::parse(R"({"create_request":{"key":"Zm9v","start_revision":"7"}})"));
    CHECK(json::parse(detail::watch_body("foo", false, 0)) == json::parse(R"({"create_request":{"key":"Zm9v"}})"));

    txn_request t;
    t.compares.push_back(compare::absent("foo"));
    t.compares.push_back(compare::value_is("foo", "bar"));
    t.success.push_back(put_op{"foo", "bar", 0});
    t.failure.push_back(range_op{"foo", false});
    t.failure.push_back(delete_op{"f", true});
    CHECK(json::parse(detail::txn_body(t)) == json::parse(R"({
        "compare":[{"key":"Zm9v","target":"CREATE","result":"EQUAL","create_revision":"0"},
                   {"key":"Zm9v","target":"VALUE","result":"EQUAL","value":"YmFy"}],
        "success":[{"request_put":{"key":"Zm9v","value":"YmFy"}}],
        "failure":[{"request_range":{"key":"Zm9v"}},
                   {"request_delete_range":{"key":"Zg==","range_end":"Zw=="}}]})"));
}

TEST_CASE("gateway JSON: answers", "[etcd][json]") {
    auto range = detail::parse_range(json::parse(
        R"({"header":{"cluster_id":"15118495548433857066","revision":"2","raft_term":"2"},
            "kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"})"));
    REQUIRE(range);
    CHECK(range->revision == 2);
    REQUIRE(range->kvs.size() == 1);
    CHECK(range->kvs[0].key == "foo");
    CHECK(range->kvs[0].value == "bar");
    CHECK(range->kvs[0].version == 1);

    auto txn = detail::parse_txn(json::parse(
        R"({"header":{"revision":"4"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"4"}}},
            {"response_range":{"header":{"revision":"4"},"kvs":[{"key":"Zm9v","create_revision":"4",
            "mod_revision":"4","version":"1","value":"YmFy"}],"count":"1"}}]})"));
    REQUIRE(txn);
    CHECK(txn->succeeded);
    CHECK(txn->revision == 4);
    REQUIRE(txn->ranges.size() == 1);
    CHECK(txn->ranges[0].kvs[0].create_revision == 4);
    // A failed compare: "succeeded" is left out.
    auto lost = detail::parse_txn(json::parse(R"({"header":{"revision":"4"},"responses":[{"response_range":{"header":{"revision":"4"}}}]})"));
    REQUIRE(lost);
    CHECK_FALSE(lost->succeeded);
    REQUIRE(lost->ranges.size() == 1);
    CHECK(lost->ranges[0].kvs.empty());

    auto grant = detail::parse_grant(json::parse(R"({"header":{"revision":"2"},"ID":"4111120450440311304","TTL":"2"})"));
    REQUIRE(grant);
    CHECK(grant->id == 4111120450440311304);
    CHECK(grant->ttl == std::chrono::seconds(2));

    auto alive = detail::parse_keepalive(json::parse(R"({"result":{"header":{"revision":"2"},"ID":"5","TTL":"5"}})"));
    REQUIRE(alive);
    CHECK(*alive == std::chrono::seconds(5));
    auto gone = detail::parse_keepalive(json::parse(R"({"result":{"header":{"revision":"2"},"ID":"1234"}})"));
    REQUIRE_FALSE(gone);
    CHECK(gone.error().code == errc::lease_not_found);
}

TEST_CASE("gateway JSON: malformed answers are bad_response", "[etcd][json]") {
    auto not_number = detail::parse_range(json::parse(R"({"header":{"revision":"two"}})"));
    REQUIRE_FALSE(not_number);
    CHECK(not_number.error().code == errc::bad_response);
    auto not_base64 = detail::parse_range(json::parse(R"({"header":{"revision":"2"},"kvs":[{"key":"!!"}]})"));
    REQUIRE_FALSE(not_base64);
    CHECK(not_base64.error().code == errc::bad_response);
    auto wrong_shape = detail::parse_txn(json::parse(R"({"header":{"revision":"2"},"responses":{"a":1}})"));
    REQUIRE_FALSE(wrong_shape);
    CHECK(wrong_shape.error().code == errc::bad_response);
    auto not_object = detail::parse_revision(json::parse("[1]"));
    REQUIRE_FALSE(not_object);
    CHECK(not_object.error().code == errc::bad_response);
}

TEST_CASE("gateway JSON: watch messages", "[etcd][json]") {
    auto created = detail::parse_watch_message(json::parse(R"({"result":{"header":{"revision":"4"},"created":true}})"));
    REQUIRE(created);
    CHECK(created->empty());
    auto events = detail::parse_watch_message(json::parse(
        R"({"result":{"header":{"revision":"4"},"events":[{"kv":{"key":"Zm9v","create_revision":"2","mod_revision":"2",
            "version":"1","value":"YmFy"}},{"type":"DELETE","kv":{"key":"Zm9v","mod_revision":"3"}}]}})"));
    REQUIRE(events);
    REQUIRE(events->size() == 2);
    CHECK((*events)[0].type == event::kind::put);
    CHECK((*events)[0].kv.value == "bar");
    CHECK((*events)[1].type == event::kind::del);
    CHECK((*events)[1].kv.mod_revision == 3);
    auto compacted = detail::parse_watch_message(
        json::parse(R"({"result":{"header":{"raft_term":"2"},"canceled":true,"compact_revision":"4"}})"));
    REQUIRE_FALSE(compacted);
    CHECK(compacted.error().code == errc::compacted);
    auto stream_error = detail::parse_watch_message(
        json::parse(R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}})"));
    REQUIRE_FALSE(stream_error);
    CHECK(stream_error.error().code == errc::unavailable);
    auto garbage = detail::parse_watch_message(json::parse(R"({"result":{"events":[{"type":"MOVE","kv":{}}]}})"));
    REQUIRE_FALSE(garbage);
    CHECK(garbage.error().code == errc::bad_response);
}

TEST_CASE("gateway JSON: error answers", "[etcd][json]") {
    auto lease = detail::classify_failure(
        404, R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})",
        "/v3/lease/revoke");
    CHECK(lease.code == errc::lease_not_found);
    CHECK(lease.message.find("requested lease not found") != std::string::npos);
    auto compacted = detail::classify_failure(
        400, R"({"error":"etcdserver: mvcc: required revision has been compacted","code":11})", "/v3/kv/range");
    CHECK(compacted.code == errc::compacted);
    CHECK(detail::classify_failure(503, R"({"message":"etcdserver: no leader","code":14})", "x").code == errc::unavailable);
    CHECK(detail::classify_failure(504, "", "x").code == errc::timeout);
    CHECK(detail::classify_failure(400, R"({"message":"invalid character","code":3})", "x").code == errc::invalid_argument);
    CHECK(detail::classify_failure(404, "Not Found\n", "x").code == errc::invalid_argument);
    // Control bytes from the server never reach a log line.
    CHECK(detail::classify_failure(500, "bad\nline", "x").message.find('\n') == std::string::npos);
}
