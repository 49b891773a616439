// Big-endian and varint codecs: known answers (Kafka protocol guide, protobuf's zig-zag table)
// and the limits an untrusted input can hit.
#include <skiff/core/endian.hpp>
#include <skiff/core/varint.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <span>
#include <string>

using namespace skiff;

namespace {
std::string bytes(std::initializer_list<unsigned> v) {
    std::string s;
    for (unsigned b : v) s += static_cast<char>(b);
    return s;
}
std::span<const char> sp(const std::string& s) { return {s.data(), s.size()}; }
} // namespace

TEST_CASE("big-endian read and write", "[core][endian]") {
    const std::string b = bytes({0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88});
    CHECK(be::read_u16(b.data()) == 0x0102u);
    CHECK(be::read_u32(b.data()) == 0x01020304u);
    CHECK(be::read_u64(b.data()) == 0x0102030405060788ull);
    CHECK(be::read_i8(b.data() + 7) == -120);
    CHECK(be::read_i16(b.data() + 6) == 0x0788);
    CHECK(be::read_i32(bytes({0xff, 0xff, 0xff, 0xfe}).data()) == -2);
    CHECK(be::read_i64(std::string(8, '\xff').data()) == -1);

    std::string out;
    be::append_u16(out, 0x0102);
    be::append_i32(out, -2);
    be::append_u64(out, 0x0102030405060788ull);
    CHECK(out == bytes({0x01, 0x02, 0xff, 0xff, 0xff, 0xfe, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88}));

    char w[8] = {};
    be::write_i64(w, std::numeric_limits<std::int64_t>::min());
    CHECK(std::string(w, 8) == bytes({0x80, 0, 0, 0, 0, 0, 0, 0}));
    CHECK(be::read_i64(w) == std::numeric_limits<std::int64_t>::min());
    static_assert(be::read<std::uint16_t>("\x12\x34") == 0x1234);
}

TEST_CASE("zig-zag known answers", "[core][varint]") {
    CHECK(varint::zigzag_encode(std::int32_t{0}) == 0u);
    CHECK(varint::zigzag_encode(std::int32_t{-1}) == 1u);
    CHECK(varint::zigzag_encode(std::int32_t{1}) == 2u);
    CHECK(varint::zigzag_encode(std::int32_t{-2}) == 3u);
    CHECK(varint::zigzag_encode(std::numeric_limits<std::int32_t>::max()) == 0xfffffffeu);
    CHECK(varint::zigzag_encode(std::numeric_limits<std::int32_t>::min()) == 0xffffffffu);
    CHECK(varint::zigzag_encode(std::numeric_limits<std::int64_t>::min()) == ~std::uint64_t{0});
    CHECK(varint::zigzag_decode(std::uint32_t{3}) == -2);
    CHECK(varint::zigzag_decode(~std::uint64_t{0}) == std::numeric_limits<std::int64_t>::min());
}

TEST_CASE("varint round trips and encodings", "[core][varint]") {
    std::string out;
    varint::append_unsigned(out, 300);
    CHECK(out == bytes({0xac, 0x02}));
    out.clear();
    varint::append_varint(out, -1);
    CHECK(out == bytes({0x01}));
    out.clear();
    varint::append_varlong(out, std::numeric_limits<std::int64_t>::min());
    CHECK(out.size() == 10);
    std::size_t pos = 0;
    CHECK(varint::read_varlong(sp(out), pos) == std::numeric_limits<std::int64_t>::min());
    CHECK(pos == 10);

    for (std::int32_t v : {0, 1, -1, 63, -64, 64, 8191, -8192, std::numeric_limits<std::int32_t>::max(),
                           std::numeric_limits<std::int32_t>::min()}) {
        CAPTURE(v);
        std::string e;
        varint::append_varint(e, v);
        pos = 0;
        CHECK(varint::read_varint(sp(e), pos) == v);
        CHECK(pos == e.size());
    }
}

TEST_CASE("varint reads reject truncation and overflow", "[core][varint]") {
    std::uint32_t u32 = 7;
    std::uint64_t u64 = 7;
    std::size_t pos = 0;

    const auto max32 = bytes({0xff, 0xff, 0xff, 0xff, 0x0f});
    CHECK(varint::read_unsigned32(sp(max32), pos, u32) == varint::read_status::ok);
    CHECK(u32 == 0xffffffffu);
    CHECK(pos == 5);

    u32 = 7;
    pos = 0;
    const auto over32 = bytes({0xff, 0xff, 0xff, 0xff, 0x1f});
    CHECK(varint::read_unsigned32(sp(over32), pos, u32) == varint::read_status::overflow);
    CHECK(pos == 5);
    CHECK(u32 == 7);
    pos = 0;
    CHECK_FALSE(varint::read_varint(sp(over32), pos));

    pos = 0;
    const auto six = bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x00});
    CHECK(varint::read_unsigned32(sp(six), pos, u32) == varint::read_status::overflow);

    pos = 0;
    const auto cut = bytes({0x80, 0x80});
    CHECK(varint::read_unsigned32(sp(cut), pos, u32) == varint::read_status::truncated);
    CHECK(pos == 2);
    CHECK(u32 == 7);

    pos = 0;
    const auto max64 = bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01});
    CHECK(varint::read_unsigned64(sp(max64), pos, u64) == varint::read_status::ok);
    CHECK(u64 == ~std::uint64_t{0});
    pos = 0;
    const auto over64 = bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02});
    CHECK(varint::read_unsigned64(sp(over64), pos, u64) == varint::read_status::overflow);
    pos = 0;
    const auto eleven = bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x00});
    CHECK_FALSE(varint::read_varlong(sp(eleven), pos));

    // Reading starts at pos, not at the front.
    const auto two = bytes({0x05, 0x03});
    pos = 1;
    CHECK(varint::read_varint(sp(two), pos) == -2);
}
