#include <skiff/core/parse_int.hpp>
#include <skiff/core/printable.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace skiff;

TEST_CASE("printable: control bytes replaced, UTF-8 kept", "[core][printable]") {
    CHECK(printable(std::string("a\nb\x7f" "c\0d", 7)) == "a?b?c?d");
    CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");
    CHECK(printable("a\tb", 200, ' ') == "a b");
}

TEST_CASE("printable: bounded with an ellipsis", "[core][printable]") {
    CHECK(printable(std::string(200, 'x')) == std::string(200, 'x'));
    CHECK(printable(std::string(201, 'x')) == std::string(200, 'x') + "...");
    CHECK(printable("abcdef", 3) == "abc...");
    CHECK(printable("", 3) == "");
}

TEST_CASE("parse_u64: whole input, digits only", "[core][parse]") {
    CHECK(parse_u64("0") == 0u);
    CHECK(parse_u64("18446744073709551615") == 18446744073709551615u);
    CHECK_FALSE(parse_u64("18446744073709551616"));
    for (std::string_view bad : {"", " 1", "1 ", "+1", "-1", "1x", "0x10"}) {
        CAPTURE(bad);
        CHECK_FALSE(parse_u64(bad));
    }
    CHECK(parse_unsigned<std::uint16_t>("65535") == 65535u);
    CHECK_FALSE(parse_unsigned<std::uint16_t>("65536"));
}
