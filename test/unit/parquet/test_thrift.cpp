// Thrift compact protocol: bytes worked out by hand from thrift-compact-protocol.md, then read
// back through the reader.
#include <skiff/parquet/thrift_compact.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace skiff::parquet;
using namespace skiff::parquet::thrift;

namespace {

std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (int x : b) s.push_back(static_cast<char>(x));
    return s;
}

value parse(const std::string& s) {
    std::size_t pos = 0;
    auto v = read_struct(std::span<const char>(s.data(), s.size()), pos);
    REQUIRE(v);
    CHECK(pos == s.size());
    return *v;
}

} // namespace

TEST_CASE("thrift: short and long field headers, zig-zag ints", "[parquet][thrift]") {
    std::string out;
    compact_writer w(out);
    w.field_i32(1, 1);    // delta 1: 0x15, zigzag(1) = 2
    w.field_i32(2, -1);   // delta 1 again: 0x15, zigzag(-1) = 1
    w.field_i64(20, 300); // delta 18 > 15: long form 0x06, zigzag i16 20 = 40, zigzag 300 = 600 = d8 04
    w.end_struct();
    CHECK(out == bytes({0x15, 0x02, 0x15, 0x01, 0x06, 0x28, 0xd8, 0x04, 0x00}));
    const value v = parse(out);
    REQUIRE(v.fields.size() == 3);
    CHECK(v.field(1)->i == 1);
    CHECK(v.field(2)->i == -1);
    CHECK(v.field(20)->i == 300);
    CHECK(v.field(20)->type == ctype::i64);
}

TEST_CASE("thrift: field ids going down use the long form", "[parquet][thrift]") {
    std::string out;
    compact_writer w(out);
    w.field_i32(5, 0);  // 0x55 0x00
    w.field_i16(2, -2); // delta -3: 0x04 (i16), id zigzag 4, value zigzag(-2) = 3
    w.end_struct();
    CHECK(out == bytes({0x55, 0x00, 0x04, 0x04, 0x03, 0x00}));
    const value v = parse(out);
    CHECK(v.field(5)->i == 0);
    CHECK(v.field(2)->i == -2);
}

TEST_CASE("thrift: extreme and negative varints", "[parquet][thrift]") {
    std::string out;
    compact_writer w(out);
    w.field_i64(1, -64);                                      // 0x16, zigzag 127: 7f
    w.field_i64(2, -65);                                      // 0x16, zigzag 129: 81 01
    w.field_i32(3, std::numeric_limits<std::int32_t>::min()); // 0x15, zigzag 0xffffffff: ff ff ff ff 0f
    w.field_i8(4, -1);                                        // 0x13, i8 is one raw byte
    w.end_struct();
    CHECK(out == bytes({0x16, 0x7f, 0x16, 0x81, 0x01, 0x15, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x13, 0xff, 0x00}));
    const value v = parse(out);
    CHECK(v.field(1)->i == -64);
    CHECK(v.field(2)->i == -65);
    CHECK(v.field(3)->i == std::numeric_limits<std::int32_t>::min());
    CHECK(v.field(4)->i == -1);
}

TEST_CASE("thrift: bool fields live in the header; binary and double", "[parquet][thrift]") {
    std::string out;
    compact_writer w(out);
    w.field_bool(1, true);   // delta 1, type 1 (true): 0x11
    w.field_bool(2, false);  // delta 1, type 2 (false): 0x12
    w.field_binary(4, "ab"); // delta 2, type 8: 0x28 02 'a' 'b'
    w.field_double(5, 1.0);  // delta 1, type 7: 0x17, little-endian IEEE
    w.end_struct();
    CHECK(out == bytes({0x11, 0x12, 0x28, 0x02, 'a', 'b', 0x17, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x00}));
    const value v = parse(out);
    CHECK(v.field(1)->b);
    CHECK_FALSE(v.field(2)->b);
    CHECK(v.field(4)->bin == "ab");
    CHECK(v.field(5)->d == 1.0);
}

TEST_CASE("thrift: list headers, short and long form", "[parquet][thrift]") {
    std::string out;
    compact_writer w(out);
    w.begin_list(1, ctype::i32, 3); // 0x19, size 3 in the high nibble: 0x35
    for (int i = 1; i <= 3; ++i) w.elem_i32(i);
    w.begin_list(2, ctype::binary, 15); // 15 does not fit: 0xf8 then varint 15
    for (int i = 0; i < 15; ++i) w.elem_binary("");
    w.end_struct();
    std::string expect = bytes({0x19, 0x35, 0x02, 0x04, 0x06, 0x19, 0xf8, 0x0f});
    expect.append(15, '\0');
    expect.push_back(0);
    CHECK(out == expect);
    const value v = parse(out);
    REQUIRE(v.field(1)->elems.size() == 3);
    CHECK(v.field(1)->elems[2].i == 3);
    CHECK(v.field(2)->elems.size() == 15);
    CHECK(v.field(2)->elem_type == ctype::binary);

    std::string h;
    append_list_header(h, ctype::struct_, 300); // 0xfc, varint 300 = ac 02
    CHECK(h == bytes({0xfc, 0xac, 0x02}));
}

TEST_CASE("thrift: nested structs restore the outer field id", "[parquet][thrift]") {
    std::string out;
    compact_writer w(out);
    w.begin_struct(1); // 0x1c
    w.field_i32(1, 5); // inner ids start from 0 again: 0x15 0x0a
    w.end_struct();    // 0x00
    w.field_i32(2, 7); // delta from the outer id 1: 0x15 0x0e
    w.begin_list(3, ctype::struct_, 2); // 0x19 0x2c
    w.begin_element();
    w.field_bool(1, true); // 0x11
    w.end_struct();
    w.begin_element();
    w.end_struct(); // an empty struct: just its stop
    w.end_struct();
    CHECK(out == bytes({0x1c, 0x15, 0x0a, 0x00, 0x15, 0x0e, 0x19, 0x2c, 0x11, 0x00, 0x00, 0x00}));
    const value v = parse(out);
    CHECK(v.field(1)->field(1)->i == 5);
    CHECK(v.field(2)->i == 7);
    REQUIRE(v.field(3)->elems.size() == 2);
    CHECK(v.field(3)->elems[0].field(1)->b);
    CHECK(v.field(3)->elems[1].fields.empty());
}

TEST_CASE("thrift: the reader rejects truncated and lying input", "[parquet][thrift]") {
    auto fails = [](const std::string& s) {
        std::size_t pos = 0;
        auto v = read_struct(std::span<const char>(s.data(), s.size()), pos);
        return !v && v.error().code == errc::corrupt;
    };
    CHECK(fails(""));
    CHECK(fails(bytes({0x15})));                   // no value
    CHECK(fails(bytes({0x15, 0x02})));             // no stop
    CHECK(fails(bytes({0x18, 0x05, 'a', 0x00})));  // binary longer than the input
    CHECK(fails(bytes({0x19, 0xf5, 0xff, 0x7f}))); // a list of 2 million elements in 4 bytes
    CHECK(fails(bytes({0x1d, 0x00})));             // type code 13
    std::string deep;
    for (int i = 0; i < 100; ++i) deep.push_back(0x1c);
    CHECK(fails(deep));
}
