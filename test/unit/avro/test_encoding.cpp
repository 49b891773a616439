// Golden bytes of the Avro binary encoding (Avro 1.11 spec, "Binary Encoding"), and the
// generic decoder on them.
#include "avro_test_util.hpp"

#include <skiff/avro/decoder.hpp>
#include <skiff/avro/encoder.hpp>
#include <skiff/avro/schema.hpp>

#include <catch2/catch.hpp>

#include <limits>

using namespace skiff::avro;
using avro_test::hex;
using avro_test::unhex;

namespace {

std::string enc_long(std::int64_t v) {
    std::string out;
    encoder(out).write_long(v);
    return hex(out);
}

node_ptr schema_of(std::string_view json) {
    auto s = parse_schema(json);
    REQUIRE(s);
    return *s;
}

} // namespace

TEST_CASE("zig-zag varints match the spec's table", "[avro]") {
    CHECK(enc_long(0) == "00");
    CHECK(enc_long(-1) == "01");
    CHECK(enc_long(1) == "02");
    CHECK(enc_long(-2) == "03");
    CHECK(enc_long(2) == "04");
    CHECK(enc_long(-64) == "7f");
    CHECK(enc_long(64) == "8001");
    CHECK(enc_long(std::numeric_limits<std::int64_t>::max()) == "feffffffffffffffff01");
    CHECK(enc_long(std::numeric_limits<std::int64_t>::min()) == "ffffffffffffffffff01");
    std::string out;
    encoder(out).write_int(std::numeric_limits<std::int32_t>::min());
    CHECK(hex(out) == "ffffffff0f");
    for (std::int64_t v : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{63}, std::int64_t{-65}, std::int64_t{1} << 40,
                           std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()}) {
        std::string b;
        encoder(b).write_long(v);
        decoder d(b);
        auto r = d.read_long();
        REQUIRE(r);
        CHECK(*r == v);
        CHECK(d.at_end());
    }
}

TEST_CASE("primitives encode as the spec says", "[avro]") {
    std::string out;
    encoder e(out);
    e.write_string("foo");          // the spec's example: 06 66 6f 6f
    e.write_bool(true);
    e.write_bool(false);
    e.write_null();
    e.write_float(1.0f);            // 0x3f800000 little-endian
    e.write_double(-2.0);           // 0xc000000000000000 little-endian
    const std::uint8_t b[] = {0x00, 0xff};
    e.write_bytes(b);
    e.write_fixed(b);
    e.write_union_index(1);
    CHECK(hex(out) == "06666f6f0100" "0000803f" "00000000000000c0" "0400ff" "00ff" "02");
}

TEST_CASE("arrays and maps are written in blocks with a 0 terminator", "[avro]") {
    // The spec's example: the array [3, 27] of longs is 04 06 36 00.
    auto arr = schema_of(R"({"type":"array","items":"long"})");
    std::string out;
    REQUIRE(encode(*arr, value(array{value(std::int64_t{3}), value(std::int64_t{27})}), out));
    CHECK(hex(out) == "04063600");
    out.clear();
    REQUIRE(encode(*arr, value(array{}), out));
    CHECK(hex(out) == "00");

    auto m = schema_of(R"({"type":"map","values":"int"})");
    out.clear();
    REQUIRE(encode(*m, value(map{map_entry{"a", value(std::int32_t{1})}}), out));
    CHECK(hex(out) == "0202610200");
}

TEST_CASE("unions write the branch index, then the value", "[avro]") {
    // The spec's example: ["null","string"] with "a" is 02 02 61; null is 00.
    auto u = schema_of(R"(["null","string"])");
    std::string out;
    REQUIRE(encode(*u, value(std::string("a")), out));
    CHECK(hex(out) == "020261");
    out.clear();
    REQUIRE(encode(*u, value(), out));
    CHECK(hex(out) == "00");
    out.clear();
    auto r = encode(*u, value(std::int32_t{1}), out);
    REQUIRE(!r);
    CHECK(r.error().code == errc::type_mismatch);
}

TEST_CASE("the decoder reads every kind by schema", "[avro]") {
    auto s = schema_of(R"({"type":"record","name":"r","namespace":"ns","fields":[
        {"name":"i","type":"int","field-id":7},
        {"name":"l","type":{"type":"long","logicalType":"timestamp-micros"}},
        {"name":"b","type":"bytes"},
        {"name":"s","type":"string"},
        {"name":"e","type":{"type":"enum","name":"e","symbols":["X","Y"]}},
        {"name":"f","type":{"type":"fixed","name":"f4","size":4}},
        {"name":"again","type":"ns.f4"},
        {"name":"a","type":{"type":"array","items":"int","element-id":9}},
        {"name":"m","type":{"type":"map","values":["null","double"]}},
        {"name":"u","type":["null","boolean"]}]})");
    CHECK(s->fields[0].field_id == 7);
    CHECK(s->fields[1].schema->logical_type == "timestamp-micros");
    CHECK(s->fields[7].schema->element_id == 9);
    CHECK(s->fields[6].schema->kind == type::fixed);
    CHECK(s->field_index(7) == 0);
    CHECK(s->field_index("u") == 9);

    record rec{{value(std::int32_t{-5}), value(std::int64_t{1} << 50), value(bytes{0, 1, 2}), value(std::string("hé")),
                value(enum_symbol{1, "Y"}), value(bytes{9, 8, 7, 6}), value(bytes{1, 1, 1, 1}),
                value(array{value(std::int32_t{1}), value(std::int32_t{2})}),
                value(map{map_entry{"k", value(2.5)}, map_entry{"n", value()}}), value(true)}};
    std::string out;
    REQUIRE(encode(*s, value(rec), out));
    decoder d(out);
    auto v = d.read(*s);
    REQUIRE(v);
    CHECK(d.at_end());
    auto r = v->get_if<record>();
    REQUIRE(r);
    REQUIRE(r->fields.size() == 10);
    CHECK(*r->fields[0].get_if<std::int32_t>() == -5);
    CHECK(*r->fields[1].get_if<std::int64_t>() == (std::int64_t{1} << 50));
    CHECK(*r->fields[2].get_if<bytes>() == bytes{0, 1, 2});
    CHECK(*r->fields[3].get_if<std::string>() == "hé");
    CHECK(r->fields[4].get_if<enum_symbol>()->symbol == "Y");
    CHECK(*r->fields[5].get_if<bytes>() == bytes{9, 8, 7, 6});
    CHECK(r->fields[7].get_if<array>()->size() == 2);
    const auto& m = *r->fields[8].get_if<map>();
    REQUIRE(m.size() == 2);
    CHECK(m[0].key == "k");
    CHECK(*m[0].val.get_if<double>() == 2.5);
    CHECK(m[1].val.is_null());
    CHECK(*r->fields[9].get_if<bool>() == true);
}

TEST_CASE("the decoder reads negative block counts with their byte size", "[avro]") {
    auto arr = schema_of(R"({"type":"array","items":"long"})");
    // Block of -2 items, 2 bytes, then 3 and 27, then the terminator.
    const std::string in = unhex("0304063600");
    decoder d(in);
    auto v = d.read(*arr);
    REQUIRE(v);
    REQUIRE(v->get_if<array>()->size() == 2);
    CHECK(*(*v->get_if<array>())[1].get_if<std::int64_t>() == 27);
}

TEST_CASE("the decoder rejects corrupt and hostile input", "[avro]") {
    auto str = schema_of(R"("string")");
    auto arr = schema_of(R"({"type":"array","items":"long"})");
    auto nulls = schema_of(R"({"type":"array","items":"null"})");
    auto u = schema_of(R"(["null","int"])");
    auto e = schema_of(R"({"type":"enum","name":"e","symbols":["A"]})");
    auto b = schema_of(R"("boolean")");
    struct bad_case { node_ptr s; std::string hex_in; errc code; };
    const bad_case cases[] = {
        {str, "06666f", errc::too_large},               // length 3, 2 bytes left
        {str, "feffffffffffffffff01", errc::too_large}, // length 2^63-1
        {str, "01", errc::corrupt},                     // negative length
        {str, "ffffffffffffffffffff01", errc::corrupt}, // varint longer than 10 bytes
        {str, "80", errc::truncated},                   // varint cut
        {arr, "feffffff0f", errc::too_large},           // 2^31 items of long in 5 bytes
        {nulls, "feffffffffffffffff01", errc::too_large}, // items of no size: the value budget
        {u, "04", errc::corrupt},                       // branch 2 of 2
        {e, "02", errc::corrupt},                       // symbol 1 of 1
        {b, "02", errc::corrupt},                       // boolean byte 2
        {arr, "0202", errc::truncated},                 // the terminator missing
    };
    for (const auto& c : cases) {
        INFO(c.hex_in);
        const std::string in = unhex(c.hex_in);
        decoder d(in);
        auto v = d.read(*c.s);
        REQUIRE(!v);
        CHECK(v.error().code == c.code);
        CHECK(!v.error().message.empty());
    }
}

TEST_CASE("schemas that cannot be parsed are errors", "[avro]") {
    for (std::string_view bad : {R"({"type":"nope"})", R"({"type":"record","name":"r","fields":[{"name":"x","type":"r"}]})",
                                 R"([])", R"({"type":"array"})", R"(not json)", R"({"type":"fixed","name":"f"})",
                                 R"({"type":"record","name":"a","fields":[]} )" "x"}) {
        INFO(bad);
        auto s = parse_schema(bad);
        REQUIRE(!s);
        CHECK(s.error().code == errc::invalid_schema);
    }
    std::string deep(10000, '[');
    auto s = parse_schema(deep);
    REQUIRE(!s);
    CHECK(s.error().code == errc::invalid_schema);
}
