#include "sqlstate.hpp"
#include "text.hpp"

#include <catch2/catch.hpp>
#include <sqlite3.h>

using namespace skiff::sql;

TEST_CASE("valid_utf8 accepts UTF-8 and refuses overlong, surrogate and truncated forms", "[sql][text]") {
    CHECK(valid_utf8("plain"));
    CHECK(valid_utf8("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
    CHECK_FALSE(valid_utf8("\xc3"));             // truncated
    CHECK_FALSE(valid_utf8("\xc0\xaf"));         // overlong '/'
    CHECK_FALSE(valid_utf8("\xed\xa0\x80"));     // surrogate
    CHECK_FALSE(valid_utf8("\xf4\x90\x80\x80")); // beyond U+10FFFF
    CHECK_FALSE(valid_utf8("\xff"));
    CHECK(valid_utf8(std::string("a\0b", 3)));
}

TEST_CASE("append_json_string escapes and keeps bytes of invalid UTF-8 visible", "[sql][text]") {
    std::string out;
    append_json_string(out, "a\"b\\c\n\x01");
    CHECK(out == "\"a\\\"b\\\\c\\n\\u0001\"");
    out.clear();
    append_json_string(out, "\xff\x41");
    CHECK(out == "\"\\u00ffA\"");
    out.clear();
    append_json_string(out, "\xc3\xa9");
    CHECK(out == "\"\xc3\xa9\"");
}

TEST_CASE("bytea and float8 text output follow Postgres", "[sql][text]") {
    CHECK(bytea_hex(std::string("\x00\xff\x10", 3)) == "\\x00ff10");
    CHECK(bytea_hex("") == "\\x");
    CHECK(float8_text(1.5) == "1.5");
    CHECK(float8_text(0.1) == "0.1");
    CHECK(float8_text(1.0 / 0.0) == "Infinity");
    CHECK(float8_text(-1.0 / 0.0) == "-Infinity");
}

TEST_CASE("SQLite errors map to SQLSTATEs", "[sql][text]") {
    CHECK(map_sqlite_error(SQLITE_ERROR, "near \"SELEC\": syntax error").sqlstate == "42601");
    CHECK(map_sqlite_error(SQLITE_ERROR, "incomplete input").sqlstate == "42601");
    CHECK(map_sqlite_error(SQLITE_ERROR, "no such table: nope").sqlstate == "42P01");
    CHECK(map_sqlite_error(SQLITE_ERROR, "no such column: x").sqlstate == "42703");
    CHECK(map_sqlite_error(SQLITE_ERROR, "no such function: f").sqlstate == "42883");
    CHECK(map_sqlite_error(SQLITE_INTERRUPT, "interrupted").sqlstate == "57014");
    CHECK(map_sqlite_error(SQLITE_TOOBIG, "string or blob too big").sqlstate == "54000");
    CHECK(map_sqlite_error(SQLITE_ERROR, "malformed JSON").sqlstate == "22000");
    auto e = map_sqlite_error(SQLITE_ERROR, "something else");
    CHECK(e.sqlstate == "XX000");
    CHECK(e.message == "something else");
}
