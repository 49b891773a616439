// Kafka's produce validation, rule by rule (src/broker/produce_validation.cpp), and the topic
// policy built from topic configs.
#include "produce_validation.hpp"

#include <skiff/core/crc32c.hpp>
#include <skiff/storage/compression.hpp>

#include <catch2/catch.hpp>

using namespace skiff;
using namespace skiff::broker;
using skiff::kafka::error_code;
namespace st = skiff::storage;

namespace {

constexpr std::int64_t now = 1'700'000'000'000;

std::span<const char> span_of(const std::string& s) { return {s.data(), s.size()}; }

std::string batch(std::vector<st::record> recs, st::batch_options o = st::batch_options()) {
    if (o.base_timestamp == 0) o.base_timestamp = now;
    return st::build_batch(0, recs, o);
}

std::vector<st::record> keyed(int n) {
    std::vector<st::record> out;
    for (int i = 0; i < n; ++i) out.emplace_back(std::string("k") + std::to_string(i), std::string("value"));
    return out;
}

topic_policy policy_of(std::map<std::string, std::string> configs) {
    auto p = make_topic_policy(configs, topic_policy());
    REQUIRE(p);
    return *p;
}

error_code code_of(const result<validated_batch, produce_rejection>& r) {
    REQUIRE_FALSE(r);
    return r.error().code;
}

} // namespace

TEST_CASE("a valid batch passes untouched, its view into the request", "[broker][validation]") {
    const auto b = batch(keyed(3));
    auto r = validate_produce(span_of(b), topic_policy(), now);
    REQUIRE(r);
    CHECK(r->owned.empty());
    CHECK(r->view.bytes.data() == b.data());
    CHECK(r->view.size() == b.size());
    CHECK(r->view.record_count == 3);
    // Its CRC was checked, so the segment builder may combine it instead of reading again.
    CHECK(r->view.crc_verified);
}

TEST_CASE("one magic-2 batch per partition", "[broker][validation]") {
    CHECK(code_of(validate_produce({}, topic_policy(), now)) == error_code::invalid_record);
    const auto two = batch(keyed(1)) + batch(keyed(1));
    CHECK(code_of(validate_produce(span_of(two), topic_policy(), now)) == error_code::invalid_record);
    auto v1 = batch(keyed(1));
    v1[st::batch_field::magic] = 1;
    CHECK(code_of(validate_produce(span_of(v1), topic_policy(), now)) == error_code::unsupported_for_message_format);
    auto v0 = batch(keyed(1));
    v0[st::batch_field::magic] = 0;
    CHECK(code_of(validate_produce(span_of(v0), topic_policy(), now)) == error_code::unsupported_for_message_format);
    auto v7 = batch(keyed(1));
    v7[st::batch_field::magic] = 7;
    CHECK(code_of(validate_produce(span_of(v7), topic_policy(), now)) == error_code::corrupt_message);
    const auto cut = batch(keyed(2)).substr(0, 70);
    CHECK(code_of(validate_produce(span_of(cut), topic_policy(), now)) == error_code::corrupt_message);
}

TEST_CASE("a CRC mismatch is CORRUPT_MESSAGE, also in a compressed batch", "[broker][validation]") {
    auto b = batch(keyed(2));
    b.back() ^= 1;
    CHECK(code_of(validate_produce(span_of(b), topic_policy(), now)) == error_code::corrupt_message);
    st::batch_options o;
    o.compress = st::compression_codec::gzip;
    auto c = batch(keyed(2), o);
    c[st::batch_header_size + 3] ^= 0x40;
    CHECK(code_of(validate_produce(span_of(c), topic_policy(), now)) == error_code::corrupt_message);
}

TEST_CASE("a compressed body that does not decompress is CORRUPT_MESSAGE", "[broker][validation]") {
    st::batch_options o;
    o.attributes = static_cast<std::int16_t>(st::compression_codec::lz4);
    o.raw_records = std::string(40, '\x11'); // a correct CRC over garbage
    const auto b = batch(keyed(1), o);
    auto r = validate_produce(span_of(b), topic_policy(), now);
    CHECK(code_of(r) == error_code::corrupt_message);
    o.attributes = 6; // no such codec
    const auto u = batch(keyed(1), o);
    CHECK(code_of(validate_produce(span_of(u), topic_policy(), now)) == error_code::corrupt_message);
}

TEST_CASE("count and records that disagree with the header are INVALID_RECORD (as Kafka)", "[broker][validation]") {
    for (auto codec : {st::compression_codec::none, st::compression_codec::snappy, st::compression_codec::zstd}) {
        INFO(st::to_string(codec));
        st::batch_options o;
        o.compress = codec;
        // Header says 3 records (offsets agree), the body holds 2.
        o.record_count = 3;
        o.last_offset_delta = 2;
        const auto fewer = batch(keyed(2), o);
        auto r = validate_produce(span_of(fewer), topic_policy(), now);
        CHECK(code_of(r) == error_code::invalid_record);
        // Header says 1, the body holds 2: bytes left over.
        o.record_count = 1;
        o.last_offset_delta = 0;
        const auto more = batch(keyed(2), o);
        CHECK(code_of(validate_produce(span_of(more), topic_policy(), now)) == error_code::invalid_record);
        // Count and offsets disagree.
        o.record_count = 2;
        o.last_offset_delta = 5;
        const auto gap = batch(keyed(2), o);
        CHECK(code_of(validate_produce(span_of(gap), topic_policy(), now)) == error_code::invalid_record);
    }
    // A record whose length prefix is longer than its contents.
    std::string rec;
    rec.push_back('\0');
    st::varint::append_varlong(rec, 0);
    st::varint::append_varint(rec, 0);
    st::varint::append_varint(rec, -1);
    st::varint::append_varint(rec, 1);
    rec += "v";
    st::varint::append_varint(rec, 0);
    std::string body;
    st::varint::append_varint(body, static_cast<std::int32_t>(rec.size() + 2));
    body += rec + "xx";
    st::batch_options o;
    o.raw_records = body;
    const auto padded = batch({"v"}, o);
    CHECK(code_of(validate_produce(span_of(padded), topic_policy(), now)) == error_code::invalid_record);
    // Zero records.
    st::batch_options z;
    z.record_count = 0;
    const auto none = batch({}, z);
    CHECK(code_of(validate_produce(span_of(none), topic_policy(), now)) == error_code::invalid_record);
}

TEST_CASE("an idempotent batch without a sequence is INVALID_RECORD", "[broker][validation]") {
    st::batch_options o;
    o.producer_id = 7;
    o.producer_epoch = 0;
    o.base_sequence = -1;
    const auto b = batch(keyed(1), o);
    CHECK(code_of(validate_produce(span_of(b), topic_policy(), now)) == error_code::invalid_record);
}

TEST_CASE("control batches and transactional batches without a producer are refused", "[broker][validation]") {
    st::batch_options o;
    o.attributes = st::attr_control | st::attr_transactional;
    o.producer_id = 1;
    o.producer_epoch = 0;
    o.base_sequence = -1;
    CHECK(code_of(validate_produce(span_of(batch(keyed(1), o)), topic_policy(), now)) == error_code::invalid_record);
    st::batch_options t;
    t.attributes = st::attr_transactional;
    CHECK(code_of(validate_produce(span_of(batch(keyed(1), t)), topic_policy(), now)) == error_code::invalid_record);
    // A transactional batch of a producer passes: the produce handler checks its transaction.
    t.producer_id = 1;
    t.producer_epoch = 0;
    t.base_sequence = 0;
    CHECK(validate_produce(span_of(batch(keyed(1), t)), topic_policy(), now));
}

TEST_CASE("max.message.bytes: as sent, and after recompression", "[broker][validation]") {
    const auto b = batch(keyed(10));
    auto p = policy_of({{"max.message.bytes", std::to_string(b.size())}});
    CHECK(validate_produce(span_of(b), p, now));
    p.max_message_bytes = static_cast<std::int64_t>(b.size()) - 1;
    auto r = validate_produce(span_of(b), p, now);
    CHECK(code_of(r) == error_code::message_too_large);
    // The broker default applies when the topic sets none.
    topic_policy broker;
    broker.max_message_bytes = 100;
    auto q = make_topic_policy({}, broker);
    REQUIRE(q);
    CHECK(code_of(validate_produce(span_of(b), *q, now)) == error_code::message_too_large);
    // A compressed batch under the limit that grows past it once stored uncompressed.
    std::vector<st::record> big{st::record(std::string("k"), std::string(5000, 'a'))};
    st::batch_options o;
    o.compress = st::compression_codec::zstd;
    const auto small = batch(big, o);
    auto u = policy_of({{"compression.type", "uncompressed"}, {"max.message.bytes", "1000"}});
    REQUIRE(small.size() < 1000);
    auto ru = validate_produce(span_of(small), u, now);
    CHECK(code_of(ru) == error_code::message_too_large);
}

TEST_CASE("a decompression bomb is refused with MESSAGE_TOO_LARGE", "[broker][validation]") {
    std::vector<st::record> big{st::record(std::string("k"), std::string(4u << 20, '\0'))};
    st::batch_options o;
    o.compress = st::compression_codec::gzip;
    const auto b = batch(big, o);
    topic_policy p;
    p.max_uncompressed_bytes = 1u << 20;
    CHECK(code_of(validate_produce(span_of(b), p, now)) == error_code::message_too_large);
    p.max_uncompressed_bytes = 8u << 20;
    CHECK(validate_produce(span_of(b), p, now));
}

TEST_CASE("compacted topics: keyless records are INVALID_RECORD with record_errors", "[broker][validation]") {
    std::vector<st::record> recs{st::record(std::string("a"), std::string("1")), st::record(std::nullopt, std::string("2")),
                                 st::record(std::string("c"), std::string("3")), st::record(std::nullopt, std::string("4"))};
    const auto b = batch(recs);
    CHECK(validate_produce(span_of(b), topic_policy(), now)); // delete policy: keys optional
    for (auto cp : {"compact", "delete,compact", "compact, delete"}) {
        auto r = validate_produce(span_of(b), policy_of({{"cleanup.policy", cp}}), now);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == error_code::invalid_record);
        REQUIRE(r.error().record_errors.size() == 2);
        CHECK(r.error().record_errors[0].batch_index == 1);
        CHECK(r.error().record_errors[1].batch_index == 3);
        CHECK(r.error().message.find("2 record errors") != std::string::npos);
    }
    // Also inside a compressed batch.
    st::batch_options o;
    o.compress = st::compression_codec::lz4;
    const auto c = batch(recs, o);
    auto rc = validate_produce(span_of(c), policy_of({{"cleanup.policy", "compact"}}), now);
    REQUIRE_FALSE(rc);
    CHECK(rc.error().record_errors.size() == 2);
}

TEST_CASE("timestamps beyond message.timestamp.difference.max.ms are INVALID_TIMESTAMP", "[broker][validation]") {
    std::vector<st::record> recs{st::record(std::string("a"), std::string("1")),
                                 st::record(std::string("b"), std::string("2"), {}, 5000),
                                 st::record(std::string("c"), std::string("3"), {}, -5000)};
    const auto b = batch(recs); // base timestamp = now
    CHECK(validate_produce(span_of(b), topic_policy(), now));
    auto p = policy_of({{"message.timestamp.difference.max.ms", "1000"}});
    auto r = validate_produce(span_of(b), p, now);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == error_code::invalid_timestamp);
    REQUIRE(r.error().record_errors.size() == 2);
    CHECK(r.error().record_errors[0].batch_index == 1);
    CHECK(r.error().record_errors[1].batch_index == 2);
    CHECK_FALSE(validate_produce(span_of(b), p, now + 4500));
    CHECK(validate_produce(span_of(b), policy_of({{"message.timestamp.difference.max.ms", "5000"}}), now));
    // Timestamps are not checked on a LogAppendTime topic, nor when a record has none (-1).
    CHECK(validate_produce(span_of(b),
                           policy_of({{"message.timestamp.difference.max.ms", "1000"},
                                      {"message.timestamp.type", "LogAppendTime"}}),
                           now));
    st::batch_options none;
    none.base_timestamp = -1;
    const auto untimed = st::build_batch(0, keyed(1), none);
    CHECK(validate_produce(span_of(untimed), p, now));
    // A key error wins over a timestamp error on the same record; the batch is still
    // INVALID_TIMESTAMP when any record has one.
    std::vector<st::record> mixed{st::record(std::nullopt, std::string("1"), {}, 99999),
                                  st::record(std::string("b"), std::string("2"), {}, 99999)};
    const auto m = batch(mixed);
    auto rm = validate_produce(span_of(m),
                               policy_of({{"message.timestamp.difference.max.ms", "1000"}, {"cleanup.policy", "compact"}}),
                               now);
    REQUIRE_FALSE(rm);
    CHECK(rm.error().code == error_code::invalid_timestamp);
    REQUIRE(rm.error().record_errors.size() == 2);
    CHECK(rm.error().record_errors[0].message.find("without key") != std::string::npos);
}

TEST_CASE("LogValidator.validateTimestamp: message.timestamp.before.max.ms and after.max.ms, each replacing the "
          "difference on its side",
          "[broker][validation]") {
    std::vector<st::record> recs{st::record(std::string("a"), std::string("1")),
                                 st::record(std::string("b"), std::string("2"), {}, 5000),   // 5 s ahead
                                 st::record(std::string("c"), std::string("3"), {}, -5000)}; // 5 s old
    const auto b = batch(recs);
    // Only the past is bounded: the record 5 s old is refused, the one 5 s ahead is not.
    auto before = validate_produce(span_of(b), policy_of({{"message.timestamp.before.max.ms", "1000"}}), now);
    REQUIRE_FALSE(before);
    REQUIRE(before.error().record_errors.size() == 1);
    CHECK(before.error().record_errors[0].batch_index == 2);
    CHECK_THAT(before.error().record_errors[0].message,
               Catch::Contains("should be within [1699999999000, 9223372036854775807]"));
    auto after = validate_produce(span_of(b), policy_of({{"message.timestamp.after.max.ms", "1000"}}), now);
    REQUIRE_FALSE(after);
    REQUIRE(after.error().record_errors.size() == 1);
    CHECK(after.error().record_errors[0].batch_index == 1);
    // The deprecated difference still bounds the side left at its default.
    auto both = validate_produce(span_of(b),
                                 policy_of({{"message.timestamp.before.max.ms", "10000"},
                                            {"message.timestamp.difference.max.ms", "1000"}}),
                                 now);
    REQUIRE_FALSE(both);
    REQUIRE(both.error().record_errors.size() == 1);
    CHECK(both.error().record_errors[0].batch_index == 1);
    CHECK(validate_produce(span_of(b),
                           policy_of({{"message.timestamp.before.max.ms", "5000"}, {"message.timestamp.after.max.ms", "5000"}}),
                           now));
}

TEST_CASE("a producer may not send LogAppendTime batches", "[broker][validation]") {
    st::batch_options o;
    o.attributes = st::attr_log_append_time;
    const auto b = batch(keyed(2), o);
    auto r = validate_produce(span_of(b), topic_policy(), now);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == error_code::invalid_timestamp);
    CHECK(r.error().record_errors.size() == 2);
}

TEST_CASE("LogAppendTime: attribute bit and max timestamp become the broker's, CRC recomputed", "[broker][validation]") {
    const auto p = policy_of({{"message.timestamp.type", "LogAppendTime"}});
    for (auto codec : {st::compression_codec::none, st::compression_codec::gzip}) {
        st::batch_options o;
        o.compress = codec;
        o.base_timestamp = 1000;
        const auto b = batch(keyed(3), o);
        auto r = validate_produce(span_of(b), p, now);
        REQUIRE(r);
        REQUIRE_FALSE(r->owned.empty());
        auto v = st::parse_batch(std::span<const char>(r->owned.data(), r->owned.size()), true);
        REQUIRE(v);
        CHECK(v->log_append_time());
        CHECK(v->max_timestamp == now);
        CHECK(v->base_timestamp == 1000);
        CHECK(v->compression() == codec);
        CHECK(r->view.bytes.data() == r->owned.data());
        // The records themselves are kept byte for byte.
        auto orig = st::parse_batch(span_of(b));
        REQUIRE(orig);
        CHECK(std::string(v->records().data(), v->records().size()) ==
              std::string(orig->records().data(), orig->records().size()));
        // Moving the result keeps the view valid.
        validated_batch moved = std::move(*r);
        CHECK(moved.view.bytes.data() == moved.owned.data());
    }
}

TEST_CASE("the max timestamp is recomputed from the records, as Kafka does", "[broker][validation]") {
    st::batch_options o;
    o.max_timestamp = now + 123; // wrong: the records' largest is now
    const auto b = batch(keyed(2), o);
    auto r = validate_produce(span_of(b), topic_policy(), now);
    REQUIRE(r);
    REQUIRE_FALSE(r->owned.empty());
    CHECK(r->view.max_timestamp == now);
    CHECK(st::parse_batch(std::span<const char>(r->owned.data(), r->owned.size()), true));
}

TEST_CASE("compression.type recompresses to the topic's codec", "[broker][validation]") {
    using c = st::compression_codec;
    const std::vector<c> all{c::none, c::gzip, c::snappy, c::lz4, c::zstd};
    const std::vector<std::pair<std::string, c>> topic{
        {"uncompressed", c::none}, {"gzip", c::gzip}, {"snappy", c::snappy}, {"lz4", c::lz4}, {"ZSTD", c::zstd}};
    for (auto from : all) {
        st::batch_options o;
        o.compress = from;
        o.producer_id = 5;
        o.producer_epoch = 1;
        o.base_sequence = 10;
        const auto b = batch(keyed(4), o);
        auto orig = st::parse_batch(span_of(b));
        REQUIRE(orig);
        for (auto& [name, to] : topic) {
            INFO(st::to_string(from) << " -> " << name);
            auto r = validate_produce(span_of(b), policy_of({{"compression.type", name}}), now);
            REQUIRE(r);
            CHECK(r->view.compression() == to);
            CHECK(r->owned.empty() == (from == to));
            auto v = st::parse_batch(r->view.bytes, true);
            REQUIRE(v);
            CHECK(v->producer_id == 5);
            CHECK(v->base_sequence == 10);
            CHECK(v->record_count == 4);
            CHECK(v->last_offset_delta == 3);
            auto d = st::decode_records(*v, 1u << 20);
            REQUIRE(d);
            REQUIRE(d->records.size() == 4);
            CHECK(d->records[3].key == std::optional<std::string_view>("k3"));
        }
        // "producer" keeps what was sent.
        auto keep = validate_produce(span_of(b), policy_of({{"compression.type", "producer"}}), now);
        REQUIRE(keep);
        CHECK(keep->owned.empty());
    }
}

TEST_CASE("make_topic_policy reads the configs and refuses bad values", "[broker][validation]") {
    topic_policy defaults;
    defaults.max_message_bytes = 5000;
    auto p = make_topic_policy({{"retention.ms", "1"}}, defaults);
    REQUIRE(p);
    CHECK(p->max_message_bytes == 5000);
    CHECK_FALSE(p->compact);
    CHECK_FALSE(p->log_append_time);
    CHECK_FALSE(p->compression);
    auto q = make_topic_policy({{"max.message.bytes", "77"},
                                {"cleanup.policy", "compact"},
                                {"message.timestamp.type", "LogAppendTime"},
                                {"message.timestamp.difference.max.ms", "60000"},
                                {"compression.type", "lz4"}},
                               defaults);
    REQUIRE(q);
    CHECK(q->max_message_bytes == 77);
    CHECK(q->compact);
    CHECK(q->log_append_time);
    CHECK(q->timestamp_difference_max_ms == 60000);
    CHECK(q->compression == st::compression_codec::lz4);
    // Kafka's ValidList takes the empty cleanup.policy: neither deleted nor compacted.
    auto neither = make_topic_policy({{"cleanup.policy", ""}}, defaults);
    REQUIRE(neither);
    CHECK_FALSE(neither->compact);
    CHECK_FALSE(neither->deletes);
    for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"max.message.bytes", "-1"},
             {"max.message.bytes", "12x"},
             {"max.message.bytes", "99999999999"},
             {"cleanup.policy", "compacted"},
             {"message.timestamp.type", "createtime"},
             {"message.timestamp.difference.max.ms", "-5"},
             {"compression.type", "brotli"}}) {
        INFO(k << "=" << v);
        auto bad = make_topic_policy({{k, v}}, defaults);
        REQUIRE_FALSE(bad);
        CHECK(bad.error().find(k) != std::string::npos);
    }
}
