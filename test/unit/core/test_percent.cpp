#include <skiff/core/percent.hpp>

#include <catch2/catch.hpp>

using namespace skiff;

TEST_CASE("percent_decode: escapes in either case", "[core][percent]") {
    auto r = percent_decode("a%2Fb%2fc%00d", plus_sign::literal, bad_escape::reject);
    REQUIRE(r);
    CHECK(*r == std::string("a/b/c\0d", 7));
}

TEST_CASE("percent_decode: '+' is a choice", "[core][percent]") {
    CHECK(*percent_decode("a+b%2B", plus_sign::literal, bad_escape::reject) == "a+b+");
    CHECK(*percent_decode("a+b%2B", plus_sign::space, bad_escape::reject) == "a b+");
}

TEST_CASE("percent_decode: a malformed escape is kept or rejected at its offset", "[core][percent]") {
    for (std::string_view bad : {"x%", "x%4", "x%4g", "x%g4"}) {
        CAPTURE(bad);
        auto strict = percent_decode(bad, plus_sign::literal, bad_escape::reject);
        REQUIRE_FALSE(strict);
        CHECK(strict.error() == 1);
        auto lenient = percent_decode(bad, plus_sign::literal, bad_escape::keep);
        REQUIRE(lenient);
        CHECK(*lenient == bad);
    }
    // The escape may end the input exactly.
    CHECK(*percent_decode("%41", plus_sign::literal, bad_escape::reject) == "A");
    // A kept '%' does not swallow what follows it.
    CHECK(*percent_decode("%%41", plus_sign::literal, bad_escape::keep) == "%A");
}

TEST_CASE("form_decode: lenient, '+' is a space", "[core][percent]") {
    CHECK(form_decode("a+b%20c%zz%") == "a b c%zz%");
    CHECK(form_decode("") == "");
}

TEST_CASE("form_value: first pair of that name, decoded", "[core][percent]") {
    CHECK(form_value("a=1&b=x+y%21&b=2", "b") == "x y!");
    CHECK(form_value("a=1&flag&c=3", "flag") == "");
    CHECK(form_value("a%20b=1", "a b") == "1");
    CHECK_FALSE(form_value("a=1&bb=2", "b"));
    CHECK_FALSE(form_value("", "a"));
    CHECK(form_value("&&a=1", "a") == "1");
}
