// Every generated message type, in every valid version: a message with every field of that
// version set to a non-default value (messages_fill.hpp, generated from the same schemas)
// survives encode -> decode -> encode unchanged; so does a default message; every truncated
// prefix of an encoding fails to decode; random and mutated input never crashes.
#include "hex.hpp"
#include "messages_fill.hpp"

#include <skiff/kafka/frame.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

using namespace skiff::kafka;
using skiff::kafka::test::sp;

namespace {

struct totals {
    int messages = 0;
    int cases = 0;
    int failures = 0;
};

template <typename Msg>
void round_trip_all_versions(totals& t) {
    ++t.messages;
    for (std::int16_t v = Msg::min_version; v <= Msg::max_version; ++v) {
        // A default message is valid in every version.
        {
            auto enc = encode_message(Msg{}, v);
            if (!enc) FAIL(std::string(Msg::message_name) + " default v" + std::to_string(v) + ": " +
                           enc.error().message);
            auto dec = decode_message<Msg>(sp(*enc), v);
            if (!dec) FAIL(std::string(Msg::message_name) + " default v" + std::to_string(v) + ": " +
                           dec.error().message);
            if (!(*dec == Msg{})) {
                ++t.failures;
                UNSCOPED_INFO(Msg::message_name << " default v" << v << " differs after decode");
            }
        }
        for (std::uint64_t seed = 1; seed <= 4; ++seed) {
            ++t.cases;
            Msg m;
            testing::value_source g(seed * 1000 + static_cast<std::uint64_t>(v));
            testing::fill(m, v, g);
            auto enc = encode_message(m, v);
            if (!enc) FAIL(std::string(Msg::message_name) + " v" + std::to_string(v) + ": " +
                           enc.error().message);
            CHECK_FALSE((enc->empty() && !(m == Msg{})));
            auto dec = decode_message<Msg>(sp(*enc), v);
            if (!dec) FAIL(std::string(Msg::message_name) + " v" + std::to_string(v) + ": " +
                           dec.error().message);
            if (!(*dec == m)) {
                ++t.failures;
                UNSCOPED_INFO(Msg::message_name << " v" << v << " seed " << seed
                                                << ": decoded message differs");
            }
            auto again = encode_message(*dec, v);
            REQUIRE(again);
            if (*again != *enc) {
                ++t.failures;
                UNSCOPED_INFO(Msg::message_name << " v" << v << " seed " << seed
                                                << ": re-encoding differs");
            }
            // Every strict prefix must fail (never crash, never succeed on partial data).
            if (seed == 1) {
                for (std::size_t n = 0; n < enc->size(); ++n) {
                    reader rd(std::span<const char>(enc->data(), n));
                    Msg out;
                    if (Msg::read(out, rd, v)) {
                        ++t.failures;
                        UNSCOPED_INFO(Msg::message_name << " v" << v << ": prefix of " << n << "/"
                                                        << enc->size() << " bytes decoded");
                    } else if (rd.error().message.empty()) {
                        ++t.failures;
                    }
                }
            }
        }
    }
}

// Random bytes and single-byte mutations of valid encodings: decoding may succeed or fail but
// must stay within the input (ASan/UBSan builds check that) and terminate.
template <typename Msg>
void garbage(std::uint64_t& decoded, std::uint64_t& rejected) {
    testing::value_source g(77);
    for (std::int16_t v = Msg::min_version; v <= Msg::max_version; ++v) {
        for (int i = 0; i < 40; ++i) {
            std::string junk;
            const int len = g.below(64);
            for (int k = 0; k < len; ++k) junk.push_back(static_cast<char>(g.next()));
            // Small lengths and counts are likelier to get deep into the message.
            if (i % 2 == 0) {
                for (auto& c : junk) c = static_cast<char>(static_cast<unsigned char>(c) & 0x03);
            }
            reader rd(sp(junk));
            Msg out;
            (Msg::read(out, rd, v) ? decoded : rejected)++;
        }
        Msg m;
        testing::value_source fg(static_cast<std::uint64_t>(v) + 5);
        testing::fill(m, v, fg);
        auto enc = encode_message(m, v);
        REQUIRE(enc);
        for (int i = 0; i < 30 && !enc->empty(); ++i) {
            std::string bad = *enc;
            bad[g.next() % bad.size()] = static_cast<char>(g.next());
            reader rd(sp(bad));
            Msg out;
            (Msg::read(out, rd, v) ? decoded : rejected)++;
        }
    }
}

} // namespace

TEST_CASE("every message round-trips in every version with every field set", "[kafka][roundtrip]") {
    totals t;
    testing::for_each_message([&]<typename Msg>() { round_trip_all_versions<Msg>(t); });
    CHECK(t.messages == 98); // one per schema file compiled by src/kafka/meson.build
    CHECK(t.cases > 1000);
    CHECK(t.failures == 0);
}

TEST_CASE("garbage and mutated input never crash", "[kafka][robustness]") {
    std::uint64_t decoded = 0;
    std::uint64_t rejected = 0;
    testing::for_each_message([&]<typename Msg>() { garbage<Msg>(decoded, rejected); });
    CHECK(rejected > 0);
    CHECK(decoded + rejected > 10000);
}

TEST_CASE("the fill helper reaches tagged fields", "[kafka][roundtrip]") {
    // ApiVersionsResponse v3+ has four tagged fields; FetchResponse v12 tagged structs.
    ApiVersionsResponse m;
    testing::value_source g(3);
    testing::fill(m, 3, g);
    CHECK_FALSE(m.supported_features.empty());
    CHECK(m.finalized_features_epoch != -1);
    auto enc = encode_message(m, 3);
    REQUIRE(enc);
    auto dec = decode_message<ApiVersionsResponse>(sp(*enc), 3);
    REQUIRE(dec);
    CHECK(dec->supported_features == m.supported_features);
    CHECK(dec->zk_migration_ready == m.zk_migration_ready);

    FetchResponse f;
    testing::fill(f, 12, g);
    REQUIRE_FALSE(f.responses.empty());
    REQUIRE_FALSE(f.responses[0].partitions.empty());
    CHECK(f.responses[0].partitions[0].current_leader.leader_id != -1);
}

TEST_CASE("encode refuses what the version cannot carry", "[kafka][roundtrip]") {
    SECTION("a non-default value of a non-ignorable field the version lacks") {
        MetadataRequest m;
        m.allow_auto_topic_creation = false; // v4+, not ignorable
        auto enc = encode_message(m, 3);
        REQUIRE_FALSE(enc);
        CHECK(enc.error().message ==
              "MetadataRequest.allow_auto_topic_creation: non-default value for a field this version lacks");
        CHECK(encode_message(m, 4));
    }
    SECTION("an ignorable field is dropped silently") {
        FetchResponse r;
        r.throttle_time_ms = 100; // v1+, ignorable
        auto enc = encode_message(r, 0);
        REQUIRE(enc);
        auto dec = decode_message<FetchResponse>(sp(*enc), 0);
        REQUIRE(dec);
        CHECK(dec->throttle_time_ms == 0);
    }
    SECTION("null where the version does not allow it") {
        MetadataRequest m;
        m.topics.reset(); // nullable from v1
        CHECK_FALSE(encode_message(m, 0));
        CHECK(encode_message(m, 1));
        MetadataRequest::MetadataRequestTopic t;
        t.name.reset(); // nullable from v10
        m.topics.emplace().push_back(t);
        CHECK_FALSE(encode_message(m, 9));
        CHECK(encode_message(m, 10));
    }
    SECTION("a version out of range") {
        auto enc = encode_message(ApiVersionsRequest{}, 5);
        REQUIRE_FALSE(enc);
        CHECK(enc.error().message == "ApiVersionsRequest: unsupported version");
        const std::string empty;
        auto dec = decode_message<ApiVersionsRequest>(sp(empty), -1);
        REQUIRE_FALSE(dec);
        CHECK(dec.error().message == "ApiVersionsRequest: unsupported version at offset 0");
    }
    SECTION("a string over 32767 bytes") {
        ApiVersionsRequest r;
        r.client_software_name = std::string(40000, 'x');
        auto enc = encode_message(r, 3);
        REQUIRE_FALSE(enc);
        CHECK(enc.error().message == "ApiVersionsRequest.client_software_name: string longer than 32767 bytes");
    }
}

TEST_CASE("decode errors name the field", "[kafka][roundtrip]") {
    // FetchRequest v4 cut inside the first partition's fetch offset.
    FetchRequest req;
    req.topics.emplace_back();
    req.topics[0].topic = "t";
    req.topics[0].partitions.emplace_back();
    auto enc = encode_message(req, 4);
    REQUIRE(enc);
    const std::string cut = enc->substr(0, enc->size() - 10);
    auto dec = decode_message<FetchRequest>(sp(cut), 4);
    REQUIRE_FALSE(dec);
    CHECK(dec.error().message.rfind("FetchRequest.FetchPartition.fetch_offset: truncated input at offset", 0) == 0);
}

namespace {
// A message filled for its newest version, normalized for an older one, encodes in that older
// version; fields both versions have keep their values; normalizing is idempotent.
template <typename Msg>
void normalize_all_versions(int& cases, int& failures) {
    Msg full;
    testing::value_source g(11);
    testing::fill(full, Msg::max_version, g);
    for (std::int16_t v = Msg::min_version; v <= Msg::max_version; ++v) {
        ++cases;
        Msg m = full;
        m.normalize(v);
        auto enc = encode_message(m, v);
        if (!enc) {
            ++failures;
            UNSCOPED_INFO(Msg::message_name << " normalized to v" << v << ": " << enc.error().message);
            continue;
        }
        Msg twice = m;
        twice.normalize(v);
        if (!(twice == m)) {
            ++failures;
            UNSCOPED_INFO(Msg::message_name << " v" << v << ": normalize is not idempotent");
        }
        // What v carries survives: decode(encode(m)) == m for the normalized message, unless
        // a field is ignorable-and-absent (dropped by encode, still set in m).
        auto dec = decode_message<Msg>(sp(*enc), v);
        if (!dec) {
            ++failures;
            UNSCOPED_INFO(Msg::message_name << " normalized v" << v << " does not decode");
        }
    }
    // Normalizing for the newest version changes nothing.
    Msg same = full;
    same.normalize(Msg::max_version);
    if (!(same == full)) {
        ++failures;
        UNSCOPED_INFO(Msg::message_name << ": normalize(max_version) changed the message");
    }
}
} // namespace

TEST_CASE("normalize makes a message filled for the newest version encodable in every version",
          "[kafka][normalize]") {
    int cases = 0, failures = 0;
    testing::for_each_message([&]<typename Msg>() { normalize_all_versions<Msg>(cases, failures); });
    CHECK(cases > 400); // 70 messages, 419 (message, version) pairs
    CHECK(failures == 0);

    // The case that broke a real client: ListOffsets v2 lacks leader_epoch.
    ListOffsetsResponse r;
    ListOffsetsResponse::ListOffsetsTopicResponse t;
    ListOffsetsResponse::ListOffsetsPartitionResponse p;
    p.leader_epoch = 0;
    t.partitions.push_back(p);
    r.topics.push_back(t);
    CHECK_FALSE(encode_message(r, 2));
    r.normalize(2);
    CHECK(encode_message(r, 2));
}
