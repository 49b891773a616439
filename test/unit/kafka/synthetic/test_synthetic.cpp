// tools/kafka_codegen.py on synthetic schemas (schemas/): hand-checked bytes for the features
// Kafka's own schemas do not exercise, then the generic round trip and truncation checks.
#include "../hex.hpp"
#include "messages_fill.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace skiff::kafka;
using skiff::kafka::test::hex;
using skiff::kafka::test::sp;
using skiff::kafka::test::unhex;

TEST_CASE("defaults: hex, octal, float, string, struct member", "[kafka][codegen]") {
    SyntheticRequest m;
    CHECK(m.u16 == 0xffff);
    CHECK(m.u32 == 8); // "010" is octal
    CHECK(m.f64 == 1.5);
    CHECK(m.classic == "ab");
    CHECK(m.hybrid == -1);
    REQUIRE(m.maybe.has_value()); // a nullable struct defaults to a present, default struct
    CHECK(m.maybe->y == -1);
    SyntheticData d;
    CHECK(d.flag);
    CHECK_FALSE(d.blob.has_value()); // "default": "null"
    CHECK_FALSE(d.note.has_value());
    CHECK(d.default_ == 0); // C++ keyword: suffixed
}

TEST_CASE("SyntheticRequest bytes per version", "[kafka][codegen]") {
    const std::string common = "ffff" "00000008" "3ff8000000000000" "0002" "6162";
    SyntheticRequest m;
    auto v0 = encode_message(m, 0);
    REQUIRE(v0);
    // Hybrid inline; Maybe not nullable in v0: no marker; Gone present.
    CHECK(hex(*v0) == common + "ffffffff" "00000000" "ffffffff" "00");
    auto v1 = encode_message(m, 1);
    REQUIRE(v1);
    CHECK(hex(*v1) == common + "ffffffff" "01" "00000000" "ffffffff" "00"); // marker 1
    auto v2 = encode_message(m, 2);
    REQUIRE(v2);
    // Classic keeps its int16 length in a flexible version; Hybrid is tagged and default (not
    // written); Maybe has its own tagged-fields section; Gone is gone; empty tag section.
    CHECK(hex(*v2) == common + "01" "00000000" "ffffffff" "00" "00");

    m.hybrid = 5;
    auto t2 = encode_message(m, 2);
    REQUIRE(t2);
    CHECK(hex(*t2) == common + "01" "00000000" "ffffffff" "00" "01" "04" "04" "00000005");
    auto back = decode_message<SyntheticRequest>(sp(*t2), 2);
    REQUIRE(back);
    CHECK(back->hybrid == 5);

    m.maybe.reset();
    auto n1 = encode_message(m, 1);
    REQUIRE(n1);
    CHECK(hex(*n1) == common + "00000005" "ff" "00");
    auto nb = decode_message<SyntheticRequest>(sp(*n1), 1);
    REQUIRE(nb);
    CHECK_FALSE(nb->maybe.has_value());
    CHECK_FALSE(encode_message(m, 0)); // null struct where not nullable

    SyntheticRequest g;
    g.gone = 3; // not ignorable, absent from v2
    CHECK(encode_message(g, 1));
    auto e = encode_message(g, 2);
    REQUIRE_FALSE(e);
    CHECK(e.error().message ==
          "SyntheticRequest.gone: non-default value for a field this version lacks");
}

TEST_CASE("SyntheticData bytes", "[kafka][codegen]") {
    SyntheticData d;
    d.names = std::vector<std::string>{"a"};
    d.longs = {1};
    d.blob = std::string("z");
    d.elems.emplace_back();
    d.elems[0].name = "e";
    d.elems[0].val = 2;
    d.note = "n";
    auto v1 = encode_message(d, 1);
    REQUIRE(v1);
    CHECK(hex(*v1) == "02" "0261"                   // names ["a"]
                      "02" "0000000000000001"       // longs [1]
                      "027a"                        // blob "z"
                      "01"                          // flag
                      "02" "0265" "0000000000000002" "01" "00" // elems: name, val, sub [], tags
                      "0000"                        // default_
                      "01" "01" "02" "026e");       // tag 1: note "n"
    auto back = decode_message<SyntheticData>(sp(*v1), 1);
    REQUIRE(back);
    CHECK(*back == d);

    SECTION("v0 cannot carry the tagged note, and names cannot be null") {
        SyntheticData z;
        z.note = "x"; // not ignorable
        CHECK_FALSE(encode_message(z, 0));
        SyntheticData n;
        n.names.reset();
        CHECK_FALSE(encode_message(n, 0));
        auto ok = encode_message(n, 1);
        REQUIRE(ok);
        CHECK(hex(ok->substr(0, 1)) == "00");
    }
    SECTION("ids are ignorable: dropped in v1") {
        SyntheticData i;
        i.ids.emplace_back();
        i.ids[0].bytes[15] = 1;
        auto e1 = encode_message(i, 1);
        REQUIRE(e1);
        auto b1 = decode_message<SyntheticData>(sp(*e1), 1);
        REQUIRE(b1);
        CHECK(b1->ids.empty());
        auto e2 = encode_message(i, 2);
        REQUIRE(e2);
        auto b2 = decode_message<SyntheticData>(sp(*e2), 2);
        REQUIRE(b2);
        CHECK(b2->ids == i.ids);
    }
}

TEST_CASE("synthetic messages round-trip with every field set; prefixes fail", "[kafka][codegen]") {
    int cases = 0;
    int failures = 0;
    testing::for_each_message([&]<typename Msg>() {
        for (std::int16_t v = Msg::min_version; v <= Msg::max_version; ++v) {
            for (std::uint64_t seed = 1; seed <= 8; ++seed) {
                ++cases;
                Msg m;
                testing::value_source g(seed);
                testing::fill(m, v, g);
                auto enc = encode_message(m, v);
                if (!enc) FAIL(enc.error().message);
                auto dec = decode_message<Msg>(sp(*enc), v);
                if (!dec) FAIL(dec.error().message);
                if (!(*dec == m)) ++failures;
                for (std::size_t n = 0; n < enc->size(); ++n) {
                    reader rd(std::span<const char>(enc->data(), n));
                    Msg out;
                    if (Msg::read(out, rd, v)) ++failures;
                }
            }
        }
    });
    CHECK(cases == 8 * (3 + 4 + 4));
    CHECK(failures == 0);
}

TEST_CASE("the synthetic api table", "[kafka][codegen]") {
    REQUIRE(api_table.size() == 1);
    CHECK(api_table[0].name == "Synthetic");
    CHECK(api_table[0].flexible_from == 2);
    CHECK(SyntheticRequest::api == api_key::synthetic);
}
