// The persisted form of committed offsets, pinned byte for byte: brokers restart over buckets
// that earlier versions wrote, so these known answers may only change together with a format
// version bump (and a reader for the old version).
#include "group/offsets_format.hpp"

#include <skiff/broker/group_coordinator.hpp>
#include <skiff/storage/object_store.hpp>

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::broker;
using namespace skiff::broker::groups;

namespace {

committed_offset off(std::int64_t o, std::int32_t epoch, std::string md, std::int64_t ts) {
    committed_offset c;
    c.offset = o;
    c.leader_epoch = epoch;
    c.metadata = std::move(md);
    c.commit_timestamp_ms = ts;
    return c;
}

std::string parse_error(std::string_view body) {
    auto r = parse_offsets(body);
    REQUIRE_FALSE(r.has_value());
    return r.error();
}

} // namespace

TEST_CASE("offsets object: known answer, version 1", "[broker][group][offsets][format]") {
    offset_map m;
    m["orders"][0] = off(42, -1, "", 1700000000000);
    m["orders"][3] = off(7, 5, "md", 1700000000001);
    m["audit"][1] = off(0, 0, "x y", 1);
    // nlohmann's objects keep keys sorted, so the field order is alphabetical; topics and
    // partitions come in map order.
    const std::string expected =
        R"({"group_id":"my-group","offsets":[)"
        R"({"partitions":[{"commit_timestamp_ms":1,"leader_epoch":0,"metadata":"x y","offset":0,"partition":1}],"topic":"audit"},)"
        R"({"partitions":[{"commit_timestamp_ms":1700000000000,"leader_epoch":-1,"metadata":"","offset":42,"partition":0},)"
        R"({"commit_timestamp_ms":1700000000001,"leader_epoch":5,"metadata":"md","offset":7,"partition":3}],"topic":"orders"}],)"
        R"("version":1})";
    CHECK(serialize_offsets("my-group", m) == expected);

    auto back = parse_offsets(expected);
    REQUIRE(back.has_value());
    CHECK(back->group_id == "my-group");
    CHECK(back->offsets == m);
}

TEST_CASE("offsets object: bytes that are not UTF-8 are stored as base64", "[broker][group][offsets][format]") {
    offset_map m;
    m["t"][0] = off(1, -1, std::string("\x80\x81", 2), 2);
    const std::string expected =
        R"({"group_id_base64":"/w==","offsets":[{"partitions":[{"commit_timestamp_ms":2,"leader_epoch":-1,)"
        R"("metadata_base64":"gIE=","offset":1,"partition":0}],"topic":"t"}],"version":1})";
    CHECK(serialize_offsets("\xff", m) == expected);
    auto back = parse_offsets(expected);
    REQUIRE(back.has_value());
    CHECK(back->group_id == "\xff");
    CHECK(back->offsets == m);

    // An empty group: no offsets, still a valid object.
    CHECK(serialize_offsets("g", offset_map{}) == R"({"group_id":"g","offsets":[],"version":1})");
    auto empty = parse_offsets(R"({"group_id":"g","offsets":[],"version":1})");
    REQUIRE(empty.has_value());
    CHECK(empty->offsets.empty());
}

TEST_CASE("offsets object: readers accept any field order, extra fields and missing optional ones",
          "[broker][group][offsets][format]") {
    const std::string body = R"({"version":1,"future":true,"offsets":[{"topic":"t","partitions":[)"
                             R"({"offset":9,"partition":2},)"
                             R"({"partition":4,"offset":-1,"leader_epoch":99999999999,"metadata":"m"}]}],)"
                             R"("group_id":"g"})";
    auto r = parse_offsets(body);
    REQUIRE(r.has_value());
    CHECK(r->group_id == "g");
    REQUIRE(r->offsets.size() == 1);
    const auto& parts = r->offsets.at("t");
    CHECK(parts.at(2) == off(9, -1, "", -1));
    CHECK(parts.at(4) == off(-1, -1, "m", -1)); // an epoch outside int32 reads as unknown
}

TEST_CASE("offsets object: malformed input gets a clear reason", "[broker][group][offsets][format]") {
    CHECK(parse_error("") == "not valid JSON");
    CHECK(parse_error("{\"version\":1,") == "not valid JSON");
    CHECK(parse_error("[1,2]") == "not a JSON object");
    CHECK(parse_error(R"({"group_id":"g","offsets":[]})") == "no version field");
    CHECK(parse_error(R"({"version":"1","group_id":"g","offsets":[]})") == "no version field");
    CHECK(parse_error(R"({"version":2,"group_id":"g","offsets":[]})") == "unsupported version 2");
    CHECK(parse_error(R"({"version":1,"offsets":[]})") == "no group_id");
    CHECK(parse_error(R"({"version":1,"group_id":5,"offsets":[]})") == "no group_id");
    CHECK(parse_error(R"({"version":1,"group_id_base64":"*","offsets":[]})") == "no group_id");
    CHECK(parse_error(R"({"version":1,"group_id":"g"})") == "no offsets array");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":{}})") == "no offsets array");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[1]})") == "a topic entry is not an object");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t"}]})") ==
          "a topic entry lacks topic/partitions");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":1,"partitions":[]}]})") ==
          "a topic entry lacks topic/partitions");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t","partitions":["x"]}]})") ==
          "a partition entry is not an object");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t","partitions":[{"partition":0}]}]})") ==
          "a partition entry lacks partition/offset");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t","partitions":[{"partition":0,"offset":1.5}]}]})") ==
          "a partition entry lacks partition/offset");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t","partitions":[{"partition":-1,"offset":1}]}]})") ==
          "a partition index is out of range");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t","partitions":[{"partition":2147483648,"offset":1}]}]})") ==
          "a partition index is out of range");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t","partitions":[{"partition":0,"offset":1,"leader_epoch":"3"}]}]})") ==
          "leader_epoch is not an integer");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t","partitions":[{"partition":0,"offset":1,"metadata":3}]}]})") ==
          "metadata is not a string");
    CHECK(parse_error(R"({"version":1,"group_id":"g","offsets":[{"topic":"t","partitions":[{"partition":0,"offset":1,"metadata_base64":"%%"}]}]})") ==
          "metadata is not a string");
}

TEST_CASE("valid_utf8 rejects overlong forms, surrogates and truncation", "[broker][group][offsets][format]") {
    CHECK(valid_utf8(""));
    CHECK(valid_utf8("plain ascii"));
    CHECK(valid_utf8("\xc3\xa9"));         // é
    CHECK(valid_utf8("\xe2\x82\xac"));     // €
    CHECK(valid_utf8("\xf0\x9f\x98\x80")); // U+1F600
    CHECK(valid_utf8(std::string("a\0b", 3)));
    CHECK_FALSE(valid_utf8("\xc0\xaf"));         // overlong '/'
    CHECK_FALSE(valid_utf8("\xe0\x80\xaf"));     // overlong, 3 bytes
    CHECK_FALSE(valid_utf8("\xed\xa0\x80"));     // U+D800, a surrogate
    CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80")); // past U+10FFFF
    CHECK_FALSE(valid_utf8("\xe2\x82"));         // truncated
    CHECK_FALSE(valid_utf8("\x80"));             // a lone continuation byte
    CHECK_FALSE(valid_utf8("\xff"));
}

TEST_CASE("group offsets keys are valid store keys and distinct", "[broker][group][offsets]") {
    std::vector<std::string> ids{"g", ".", "..", ".tmp.x", "a/b", "a%2Fb", "sp ace", std::string(1, '\0'),
                                 std::string(300, 'x'), std::string(299, 'x') + "y", std::string(100, '/'),
                                 "\xff\xfe", "~", "-_.ok"};
    std::set<std::string> keys;
    for (const auto& id : ids) {
        auto k = group_offsets_key("ns", id);
        INFO(k);
        CHECK_FALSE(storage::check_key(k).has_value());
        CHECK(k.rfind("ns/skiff~meta/groups/", 0) == 0);
        CHECK(k.size() < 260);
        keys.insert(k);
    }
    CHECK(keys.size() == ids.size());
    CHECK(group_offsets_key("ns", "plain-id_1.x") == "ns/skiff~meta/groups/plain-id_1.x/offsets.json");
    CHECK(group_offsets_key("ns", "a/b") == "ns/skiff~meta/groups/a%2Fb/offsets.json");
}

TEST_CASE("group offsets keys: known answers and the way back", "[broker][group][offsets][format]") {
    CHECK(groups_prefix("ns") == "ns/skiff~meta/groups/");
    CHECK(group_offsets_key("ns", ".hidden.g") == "ns/skiff~meta/groups/%2Ehidden.g/offsets.json");
    CHECK(group_offsets_key("ns", "sp ace~\xff") == "ns/skiff~meta/groups/sp%20ace%7E%FF/offsets.json");
    CHECK(group_offsets_key("ns", "") == "ns/skiff~meta/groups/%/offsets.json");
    // Long ids: a 160-byte escaped prefix, '~' and the FNV-1a 64 hash of the raw id (checked
    // against an independent FNV-1a implementation).
    CHECK(group_offsets_key("ns", std::string(300, 'x')) ==
          "ns/skiff~meta/groups/" + std::string(160, 'x') + "~e78ddf9f1ba85555/offsets.json");
    // The cut never splits a %XX escape.
    auto k = group_offsets_key("ns", std::string(159, 'a') + std::string(60, '/'));
    CHECK(k.rfind("ns/skiff~meta/groups/" + std::string(159, 'a') + "~", 0) == 0);

    auto plain = classify_offsets_key("ns", "ns/skiff~meta/groups/sp%20ace%7E%FF/offsets.json");
    CHECK(plain.kind == offsets_key_kind::plain);
    CHECK(plain.group_id == "sp ace~\xff");
    CHECK(classify_offsets_key("ns", group_offsets_key("ns", std::string(300, 'x'))).kind == offsets_key_kind::hashed);
    CHECK(classify_offsets_key("ns", "ns/skiff~meta/groups/%/offsets.json").kind == offsets_key_kind::malformed);
    CHECK(classify_offsets_key("ns", "ns/skiff~meta/groups/%4/offsets.json").kind == offsets_key_kind::malformed);
    CHECK(classify_offsets_key("ns", "ns/skiff~meta/groups/%zz/offsets.json").kind == offsets_key_kind::malformed);
    CHECK(classify_offsets_key("ns", "ns/skiff~meta/groups/g/other.json").kind == offsets_key_kind::other);
    CHECK(classify_offsets_key("ns", "ns/skiff~meta/groups/a/b/offsets.json").kind == offsets_key_kind::other);
    CHECK(classify_offsets_key("ns", "ns/skiff~meta/groups//offsets.json").kind == offsets_key_kind::other);
    CHECK(classify_offsets_key("ns", "other/skiff~meta/groups/g/offsets.json").kind == offsets_key_kind::other);
    for (std::string id : {"g", "a/b", ".x", "\xff\xfe"}) {
        auto c = classify_offsets_key("ns", group_offsets_key("ns", id));
        CHECK(c.kind == offsets_key_kind::plain);
        CHECK(c.group_id == id);
    }
}
