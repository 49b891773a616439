#include <skiff/core/hex.hpp>

#include <catch2/catch.hpp>

using namespace skiff;

TEST_CASE("hex_digit_value: either case by default", "[core][hex]") {
    CHECK(hex_digit_value('0') == 0);
    CHECK(hex_digit_value('9') == 9);
    CHECK(hex_digit_value('a') == 10);
    CHECK(hex_digit_value('f') == 15);
    CHECK(hex_digit_value('A') == 10);
    CHECK(hex_digit_value('F') == 15);
    CHECK(hex_digit_value('g') == -1);
    CHECK(hex_digit_value('G') == -1);
    CHECK(hex_digit_value('/') == -1); // just below '0'
    CHECK(hex_digit_value(':') == -1); // just above '9'
    CHECK(hex_digit_value('`') == -1); // just below 'a'
    CHECK(hex_digit_value('@') == -1); // just below 'A'
}

TEST_CASE("hex_digit_value: the caller may insist on one case", "[core][hex]") {
    CHECK(hex_digit_value('7', hex_case::lower) == 7);
    CHECK(hex_digit_value('c', hex_case::lower) == 12);
    CHECK(hex_digit_value('C', hex_case::lower) == -1);
    CHECK(hex_digit_value('7', hex_case::upper) == 7);
    CHECK(hex_digit_value('C', hex_case::upper) == 12);
    CHECK(hex_digit_value('c', hex_case::upper) == -1);
    static_assert(hex_digit_value('e', hex_case::lower) == 14); // usable at compile time
}

TEST_CASE("hex_digit and append_hex write the case asked for", "[core][hex]") {
    CHECK(hex_digit(0) == '0');
    CHECK(hex_digit(9) == '9');
    CHECK(hex_digit(10) == 'a');
    CHECK(hex_digit(15) == 'f');
    CHECK(hex_digit(11, hex_case::upper) == 'B');
    CHECK(hex_digit(11, hex_case::either) == 'b');
    std::string out = "%";
    append_hex(out, 0x2f, hex_case::upper);
    append_hex(out, 0xa0);
    append_hex(out, 0x07);
    CHECK(out == "%2Fa007");
    // Every byte survives a round trip through its two digits, in either case.
    for (unsigned b = 0; b < 256; ++b) {
        for (auto letters : {hex_case::lower, hex_case::upper}) {
            std::string two;
            append_hex(two, static_cast<std::uint8_t>(b), letters);
            REQUIRE(two.size() == 2);
            CHECK(hex_digit_value(two[0], letters) * 16 + hex_digit_value(two[1], letters) == static_cast<int>(b));
        }
    }
}
