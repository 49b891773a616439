// Kafka wire primitives: fixed-size values, varints (known answers from the protocol guide and
// the record format), strings/bytes/arrays in both encodings, limits, sticky errors.
#include "hex.hpp"

#include <skiff/kafka/protocol.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

using namespace skiff::kafka;
using skiff::kafka::test::hex;
using skiff::kafka::test::sp;
using skiff::kafka::test::unhex;

TEST_CASE("fixed-size values are big-endian", "[kafka][protocol]") {
    writer w;
    w.write_bool(true);
    w.write_int8(-2);
    w.write_int16(0x1234);
    w.write_uint16(0xfedc);
    w.write_int32(-1);
    w.write_uint32(0x89abcdef);
    w.write_int64(0x0102030405060708);
    w.write_float64(1.5);
    CHECK(hex(w.buffer()) == "01fe1234fedcffffffff89abcdef01020304050607083ff8000000000000");

    const std::string b = w.buffer();
    reader rd(sp(b));
    bool bo = false;
    std::int8_t i8 = 0;
    std::int16_t i16 = 0;
    std::uint16_t u16 = 0;
    std::int32_t i32 = 0;
    std::uint32_t u32 = 0;
    std::int64_t i64 = 0;
    double d = 0;
    REQUIRE(rd.read_bool(bo));
    REQUIRE(rd.read_int8(i8));
    REQUIRE(rd.read_int16(i16));
    REQUIRE(rd.read_uint16(u16));
    REQUIRE(rd.read_int32(i32));
    REQUIRE(rd.read_uint32(u32));
    REQUIRE(rd.read_int64(i64));
    REQUIRE(rd.read_float64(d));
    CHECK(bo);
    CHECK(i8 == -2);
    CHECK(i16 == 0x1234);
    CHECK(u16 == 0xfedc);
    CHECK(i32 == -1);
    CHECK(u32 == 0x89abcdef);
    CHECK(i64 == 0x0102030405060708);
    CHECK(d == 1.5);
    CHECK(rd.remaining() == 0);
    CHECK(rd.ok());
}

TEST_CASE("a bool is true for any non-zero byte", "[kafka][protocol]") {
    const std::string b = unhex("02");
    reader rd(sp(b));
    bool v = false;
    REQUIRE(rd.read_bool(v));
    CHECK(v);
}

TEST_CASE("unsigned varints: known answers and limits", "[kafka][protocol]") {
    struct kat {
        std::uint32_t value;
        const char* bytes;
    };
    // Little-endian groups of 7 bits (protocol guide, "UNSIGNED_VARINT").
    for (const kat& k : {kat{0, "00"}, kat{1, "01"}, kat{127, "7f"}, kat{128, "8001"},
                         kat{300, "ac02"}, kat{16384, "808001"},
                         kat{0xffffffffu, "ffffffff0f"}}) {
        writer w;
        w.write_unsigned_varint(k.value);
        CHECK(hex(w.buffer()) == k.bytes);
        const std::string b = unhex(k.bytes);
        reader rd(sp(b));
        std::uint32_t v = 1;
        REQUIRE(rd.read_unsigned_varint(v));
        CHECK(v == k.value);
        CHECK(rd.remaining() == 0);
    }
    SECTION("more than 32 bits") {
        const std::string b = unhex("ffffffff1f");
        reader rd(sp(b));
        std::uint32_t v = 0;
        CHECK_FALSE(rd.read_unsigned_varint(v));
        CHECK(rd.error().message.find("32 bits") != std::string::npos);
    }
    SECTION("six bytes") {
        const std::string b = unhex("808080808000");
        reader rd(sp(b));
        std::uint32_t v = 0;
        CHECK_FALSE(rd.read_unsigned_varint(v));
    }
    SECTION("truncated") {
        const std::string b = unhex("8080");
        reader rd(sp(b));
        std::uint32_t v = 7;
        CHECK_FALSE(rd.read_unsigned_varint(v));
        CHECK(v == 7);
    }
}

TEST_CASE("zig-zag varint and varlong", "[kafka][protocol]") {
    struct kat {
        std::int64_t value;
        const char* bytes;
    };
    for (const kat& k : {kat{0, "00"}, kat{-1, "01"}, kat{1, "02"}, kat{-2, "03"}, kat{63, "7e"},
                         kat{-64, "7f"}, kat{64, "8001"}, kat{2147483647, "feffffff0f"},
                         kat{-2147483648LL, "ffffffff0f"}}) {
        writer w;
        w.write_varint(static_cast<std::int32_t>(k.value));
        CHECK(hex(w.buffer()) == k.bytes);
        const std::string b = unhex(k.bytes);
        reader rd(sp(b));
        std::int32_t v = 0;
        REQUIRE(rd.read_varint(v));
        CHECK(v == k.value);
    }
    for (std::int64_t v : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1} << 40,
                           std::numeric_limits<std::int64_t>::max(),
                           std::numeric_limits<std::int64_t>::min()}) {
        writer w;
        w.write_varlong(v);
        CHECK(w.size() <= 10);
        const std::string b = w.buffer();
        reader rd(sp(b));
        std::int64_t got = 0;
        REQUIRE(rd.read_varlong(got));
        CHECK(got == v);
    }
    writer w;
    w.write_varlong(std::numeric_limits<std::int64_t>::min());
    CHECK(hex(w.buffer()) == "ffffffffffffffffff01");
    const std::string too_long = unhex("ffffffffffffffffff7f");
    reader rd(sp(too_long));
    std::int64_t v = 0;
    CHECK_FALSE(rd.read_varlong(v));
}

TEST_CASE("strings: classic and compact, null and limits", "[kafka][protocol]") {
    writer w;
    w.write_string("abc", false);
    w.write_string("abc", true);
    w.write_nullable_string(std::nullopt, false, true, "f");
    w.write_nullable_string(std::nullopt, true, true, "f");
    w.write_string("", false);
    w.write_string("", true);
    CHECK(hex(w.buffer()) == "0003616263" "04616263" "ffff" "00" "0000" "01");
    CHECK(w.ok());

    const std::string b = w.buffer();
    reader rd(sp(b));
    std::string s;
    std::optional<std::string> o = "x";
    REQUIRE(rd.read_string(s, false));
    CHECK(s == "abc");
    REQUIRE(rd.read_string(s, true));
    CHECK(s == "abc");
    REQUIRE(rd.read_nullable_string(o, false, true));
    CHECK_FALSE(o.has_value());
    o = "x";
    REQUIRE(rd.read_nullable_string(o, true, true));
    CHECK_FALSE(o.has_value());
    REQUIRE(rd.read_nullable_string(o, false, true));
    CHECK(o == std::string{});
    REQUIRE(rd.read_string(s, true));
    CHECK(s.empty());
    CHECK(rd.remaining() == 0);

    SECTION("null where not nullable") {
        const std::string n = unhex("ffff");
        reader r2(sp(n));
        CHECK_FALSE(r2.read_string(s, false));
        CHECK(r2.error().message.find("null") != std::string::npos);
        writer w2;
        w2.write_nullable_string(std::nullopt, true, false, "Msg.field");
        CHECK_FALSE(w2.ok());
        CHECK(w2.error().message == "Msg.field: null value in a version where the field is not nullable");
    }
    SECTION("length beyond the input") {
        const std::string n = unhex("000561");
        reader r2(sp(n));
        CHECK_FALSE(r2.read_string(s, false));
        CHECK(r2.error().message == "length exceeds the input at offset 2");
        const std::string c = unhex("0561");
        reader r3(sp(c));
        CHECK_FALSE(r3.read_string(s, true));
    }
    SECTION("negative length other than -1") {
        const std::string n = unhex("fffe");
        reader r2(sp(n));
        std::optional<std::string> x;
        CHECK_FALSE(r2.read_nullable_string(x, false, true));
    }
    SECTION("longer than 32767 bytes") {
        writer w2;
        w2.write_string(std::string(40000, 'a'), true, "Msg.big");
        CHECK_FALSE(w2.ok());
        CHECK(w2.error().message == "Msg.big: string longer than 32767 bytes");
        std::string compact;
        {
            writer w3;
            w3.write_unsigned_varint(40001);
            compact = w3.buffer() + std::string(40000, 'a');
        }
        reader r2(sp(compact));
        CHECK_FALSE(r2.read_string(s, true));
    }
}

TEST_CASE("bytes and array lengths", "[kafka][protocol]") {
    writer w;
    w.write_bytes("xy", false);
    w.write_bytes("xy", true);
    w.write_nullable_bytes(std::nullopt, false, true, "f");
    w.write_nullable_bytes(std::nullopt, true, true, "f");
    w.write_array_length(2, false);
    w.write_array_length(2, true);
    w.write_null_array(false, true, "f");
    w.write_null_array(true, true, "f");
    CHECK(hex(w.buffer()) == "000000027879" "037879" "ffffffff" "00" "00000002" "03" "ffffffff" "00");

    const std::string b = w.buffer() + "ab"; // two bytes so that the array counts fit
    reader rd(sp(b));
    std::string s;
    std::optional<std::string> o;
    std::int32_t n = 0;
    REQUIRE(rd.read_bytes(s, false));
    CHECK(s == "xy");
    REQUIRE(rd.read_bytes(s, true));
    CHECK(s == "xy");
    REQUIRE(rd.read_nullable_bytes(o, false, true));
    CHECK_FALSE(o);
    REQUIRE(rd.read_nullable_bytes(o, true, true));
    CHECK_FALSE(o);
    REQUIRE(rd.read_array_length(n, false, false));
    CHECK(n == 2);
    REQUIRE(rd.read_array_length(n, true, false));
    CHECK(n == 2);
    REQUIRE(rd.read_array_length(n, false, true));
    CHECK(n == -1);
    REQUIRE(rd.read_array_length(n, true, true));
    CHECK(n == -1);

    SECTION("a count larger than the bytes left") {
        const std::string big = unhex("7fffffff00");
        reader r2(sp(big));
        CHECK_FALSE(r2.read_array_length(n, false, false));
        const std::string c = unhex("ffffffff0f");
        reader r3(sp(c));
        CHECK_FALSE(r3.read_array_length(n, true, false));
    }
    SECTION("null array where not nullable") {
        const std::string nul = unhex("ffffffff");
        reader r2(sp(nul));
        CHECK_FALSE(r2.read_array_length(n, false, false));
        writer w2;
        w2.write_null_array(false, false, "M.a");
        CHECK_FALSE(w2.ok());
    }
}

TEST_CASE("errors stick and carry the offset and field", "[kafka][protocol]") {
    const std::string b = unhex("0001");
    reader rd(sp(b));
    std::int32_t v = 5;
    CHECK_FALSE(rd.read_int32(v));
    CHECK(v == 5);
    CHECK_FALSE(rd.ok());
    std::int8_t x = 0;
    CHECK_FALSE(rd.read_int8(x)); // sticky, although a byte is left
    CHECK_FALSE(rd.context("Msg.field"));
    CHECK_FALSE(rd.context("Outer.field")); // the innermost context wins
    CHECK(rd.error().message == "Msg.field: truncated input at offset 0");
}

TEST_CASE("sub readers bound tagged values and report absolute offsets", "[kafka][protocol]") {
    const std::string b = unhex("aa 02 0001 bb");
    reader rd(sp(b));
    REQUIRE(rd.skip(1));
    std::uint32_t size = 0;
    REQUIRE(rd.read_unsigned_varint(size));
    reader sub;
    REQUIRE(rd.sub_reader(size, sub));
    std::int32_t v = 0;
    CHECK_FALSE(sub.read_int32(v)); // only 2 bytes in the sub reader
    CHECK_FALSE(rd.adopt(sub, "M.tagged"));
    CHECK(rd.error().message == "M.tagged: truncated input at offset 2");

    reader rd2(sp(b));
    reader sub2;
    CHECK_FALSE(rd2.sub_reader(6, sub2));
}

TEST_CASE("skip_tagged_fields", "[kafka][protocol]") {
    const std::string ok = unhex("02 00 01 ff 05 02 aabb");
    reader rd(sp(ok));
    REQUIRE(rd.skip_tagged_fields());
    CHECK(rd.remaining() == 0);
    const std::string bad = unhex("01 00 05 aa");
    reader rd2(sp(bad));
    CHECK_FALSE(rd2.skip_tagged_fields());
}

TEST_CASE("writer insert_length and patch_int32", "[kafka][protocol]") {
    writer w;
    w.write_int8(9);
    const std::size_t mark = w.size();
    w.write_raw(std::string(200, 'z'));
    w.insert_length(mark);
    CHECK(hex(w.buffer().substr(0, 3)) == "09c801");
    CHECK(w.size() == 203);
    w.patch_int32(0, 0x01020304);
    CHECK(hex(w.buffer().substr(0, 5)) == "010203047a");
}

TEST_CASE("uuid text form", "[kafka][protocol]") {
    uuid zero;
    CHECK(zero.is_zero());
    CHECK(zero.to_string() == "AAAAAAAAAAAAAAAAAAAAAA");
    uuid u;
    for (std::size_t i = 0; i < 16; ++i) u.bytes[i] = static_cast<std::uint8_t>(0xf0 + i);
    CHECK_FALSE(u.is_zero());
    // base64url of f0f1...ff without padding.
    CHECK(u.to_string() == "8PHy8_T19vf4-fr7_P3-_w");
}

namespace {
struct one_int {
    static constexpr std::string_view message_name = "OneInt";
    std::int32_t v = 0;
    void encode(writer& w, std::int16_t) const { w.write_int32(v); }
    static bool read(one_int& out, reader& rd, std::int16_t) { return rd.read_int32(out.v); }
};
} // namespace

TEST_CASE("encode_message and decode_message helpers fail cleanly", "[kafka][protocol]") {
    auto enc = encode_message(one_int{7}, 0);
    REQUIRE(enc);
    CHECK(hex(*enc) == "00000007");
    auto dec = decode_message<one_int>(sp(*enc), 0);
    REQUIRE(dec);
    CHECK(dec->v == 7);
    const std::string longer = *enc + "x";
    auto trailing = decode_message<one_int>(sp(longer), 0);
    REQUIRE_FALSE(trailing);
    CHECK(trailing.error().message == "OneInt: 1 trailing bytes");
}
