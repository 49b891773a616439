// The RLE / bit-packing hybrid, against bytes worked out by hand from Encodings.md.
#include <skiff/parquet/encoding.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace skiff::parquet;

namespace {

std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (int x : b) s.push_back(static_cast<char>(x));
    return s;
}
std::string hybrid8(const std::vector<std::uint8_t>& v, int bw) {
    std::string s;
    rle_hybrid_append(s, v, bw);
    return s;
}

} // namespace

TEST_CASE("rle: bit widths", "[parquet][rle]") {
    CHECK(bit_width(0) == 0);
    CHECK(bit_width(1) == 1);
    CHECK(bit_width(2) == 2);
    CHECK(bit_width(3) == 2);
    CHECK(bit_width(4) == 3);
    CHECK(bit_width(255) == 8);
    CHECK(bit_width(256) == 9);
}

TEST_CASE("rle: a run of 8 or more is one RLE run", "[parquet][rle]") {
    // header (10 << 1) = 0x14, the value in one byte
    CHECK(hybrid8(std::vector<std::uint8_t>(10, 1), 1) == bytes({0x14, 0x01}));
    // 300 repeats: header 600 = varint d8 04
    CHECK(hybrid8(std::vector<std::uint8_t>(300, 2), 2) == bytes({0xd8, 0x04, 0x02}));
    // bit width 9 stores the value in 2 bytes, little-endian
    std::string s;
    rle_hybrid_append(s, std::vector<std::uint32_t>(8, 0x1ab), 9);
    CHECK(s == bytes({0x10, 0xab, 0x01}));
}

TEST_CASE("rle: bit-packed groups, the spec's example", "[parquet][rle]") {
    // Encodings.md: 0..7 at bit width 3 pack to 10001000 11000110 11111010; header (1 << 1) | 1.
    CHECK(hybrid8({0, 1, 2, 3, 4, 5, 6, 7}, 3) == bytes({0x03, 0x88, 0xc6, 0xfa}));
    // A short tail is padded with zeros: 0,1,0,1,0 -> 0b00001010.
    CHECK(hybrid8({0, 1, 0, 1, 0}, 1) == bytes({0x03, 0x0a}));
}

TEST_CASE("rle: bit-packed then RLE when a run starts at a group boundary", "[parquet][rle]") {
    // 1,2,3,4,5,6,7,0 at width 3: 001 010 011 100 101 110 111 000 LSB first = d1 58 1f;
    // then nine 6s: header 18 = 0x12, value 0x06.
    std::vector<std::uint8_t> v{1, 2, 3, 4, 5, 6, 7, 0};
    v.insert(v.end(), 9, 6);
    CHECK(hybrid8(v, 3) == bytes({0x03, 0xd1, 0x58, 0x1f, 0x12, 0x06}));
    // A run that starts mid-group is packed with its group; the rest (8) is RLE.
    std::vector<std::uint8_t> w{1, 0, 0, 0, 0, 0, 0, 0};
    w.insert(w.end(), 8, 0);
    CHECK(hybrid8(w, 1) == bytes({0x03, 0x01, 0x10, 0x00}));
}

TEST_CASE("rle: levels of data page v1 carry a 4-byte length", "[parquet][rle]") {
    std::string s;
    append_levels_v1(s, std::vector<std::uint8_t>(10, 1), 1);
    CHECK(s == bytes({0x02, 0x00, 0x00, 0x00, 0x14, 0x01}));
}

TEST_CASE("rle: many groups in one bit-packed run", "[parquet][rle]") {
    std::vector<std::uint32_t> v;
    for (std::uint32_t i = 0; i < 24; ++i) v.push_back(i % 2);
    std::string s;
    rle_hybrid_append(s, v, 1);
    // 3 groups: header (3 << 1) | 1 = 7, each group 0,1,0,1,... = 0b10101010
    CHECK(s == bytes({0x07, 0xaa, 0xaa, 0xaa}));
}
