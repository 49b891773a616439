#include <skiff/core/ascii.hpp>

#include <catch2/catch.hpp>

using namespace skiff;

TEST_CASE("ASCII case folding touches letters only", "[core][ascii]") {
    CHECK(ascii_lowercase("Content-LENGTH: 5") == "content-length: 5");
    CHECK(ascii_lowercase("\xc3\x89t\xc3\xa9") == "\xc3\x89t\xc3\xa9"); // no locale, no UTF-8 folding
    CHECK(iequals("X-Amz-Date", "x-amz-date"));
    CHECK_FALSE(iequals("x-amz-date", "x-amz-dat"));
    CHECK_FALSE(iequals("[", "{")); // 0x5b and 0x7b differ by 0x20 but are not letters
}

TEST_CASE("icontains", "[core][ascii]") {
    CHECK(icontains("X-Amz-Security-Token: abc", "x-amz-security-token"));
    CHECK(icontains("connection Timed Out", "timed out"));
    CHECK(icontains("abc", ""));
    CHECK_FALSE(icontains("ab", "abc"));
    CHECK_FALSE(icontains("signatur", "signature="));
    CHECK(icontains("xxSIGNATURE=", "signature="));
}
