// Golden bytes for the Postgres v3 codec, from the layouts in the protocol documentation
// ("Message Formats"); the frontend bodies are what psql/libpq send.
#include <skiff/pgwire/codec.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace skiff;
using namespace skiff::pgwire;
using namespace std::string_literals;

namespace {
std::string built(void (*f)(std::string&)) {
    std::string out;
    f(out);
    return out;
}
} // namespace

TEST_CASE("pgwire codec: fixed backend messages", "[pgwire][codec]") {
    CHECK(built(codec::authentication_ok) == "R\0\0\0\x08\0\0\0\0"s);
    CHECK(built(codec::parse_complete) == "1\0\0\0\x04"s);
    CHECK(built(codec::bind_complete) == "2\0\0\0\x04"s);
    CHECK(built(codec::close_complete) == "3\0\0\0\x04"s);
    CHECK(built(codec::no_data) == "n\0\0\0\x04"s);
    CHECK(built(codec::portal_suspended) == "s\0\0\0\x04"s);
    CHECK(built(codec::empty_query_response) == "I\0\0\0\x04"s);
    std::string z;
    codec::ready_for_query(z);
    CHECK(z == "Z\0\0\0\x05I"s);
    std::string k;
    codec::backend_key_data(k, 0x01020304, -2);
    CHECK(k == "K\0\0\0\x0c\x01\x02\x03\x04\xff\xff\xff\xfe"s);
}

TEST_CASE("pgwire codec: ParameterStatus, CommandComplete, ParameterDescription", "[pgwire][codec]") {
    std::string s;
    codec::parameter_status(s, "client_encoding", "UTF8");
    CHECK(s == "S\0\0\0\x19" "client_encoding\0UTF8\0"s);
    std::string c;
    codec::command_complete(c, "SELECT 3");
    CHECK(c == "C\0\0\0\x0dSELECT 3\0"s);
    std::string nul;
    codec::command_complete(nul, "A\0B"s); // an embedded NUL cannot end the tag early
    CHECK(nul == "C\0\0\0\x07" "AB\0"s);
    std::string t;
    codec::parameter_description(t, {oid::int4, oid::text});
    CHECK(t == "t\0\0\0\x0e\0\x02\0\0\0\x17\0\0\0\x19"s);
    std::string v;
    codec::negotiate_protocol_version(v, 0, {"_pq_.x"});
    CHECK(v == "v\0\0\0\x13\0\0\0\0\0\0\0\x01_pq_.x\0"s);
}

TEST_CASE("pgwire codec: RowDescription and DataRow", "[pgwire][codec]") {
    std::string t;
    codec::row_description(t, {column_desc("n", oid::int4), column_desc("name", oid::text)});
    // per field: name\0, table oid 0 (4), attnum 0 (2), type oid (4), typlen (2), typmod (4), format (2)
    const std::string f1 = "n\0"s + "\0\0\0\0"s + "\0\0"s + "\0\0\0\x17"s + "\xff\xff"s + "\xff\xff\xff\xff"s + "\0\0"s;
    const std::string f2 = "name\0"s + "\0\0\0\0"s + "\0\0"s + "\0\0\0\x19"s + "\xff\xff"s + "\xff\xff\xff\xff"s + "\0\0"s;
    const std::string body = "\0\x02"s + f1 + f2;
    CHECK(t == "T"s + "\0\0\0"s + static_cast<char>(body.size() + 4) + body);

    std::string d;
    codec::data_row(d, row{std::string("42"), std::nullopt, std::string("")});
    CHECK(d == "D\0\0\0\x14\0\x03\0\0\0\x02" "42\xff\xff\xff\xff\0\0\0\0"s);
}

TEST_CASE("pgwire codec: ErrorResponse fields", "[pgwire][codec]") {
    sql_error e("42P01", "relation \"t\" does not exist");
    e.hint = "create it";
    std::string out;
    codec::error_response(out, e);
    const std::string body = "SERROR\0VERROR\0C42P01\0Mrelation \"t\" does not exist\0Hcreate it\0\0"s;
    CHECK(out == "E\0\0\0"s + static_cast<char>(body.size() + 4) + body);

    sql_error bad("nope", "m");
    bad.detail = "d";
    std::string f;
    codec::error_response(f, bad, "FATAL");
    CHECK(f.substr(5) == "SFATAL\0VFATAL\0CXX000\0Mm\0Dd\0\0"s); // a malformed SQLSTATE becomes XX000
    std::string n;
    codec::notice_response(n, sql_error("01000", "w"));
    CHECK(n.substr(0, 1) == "N");
    CHECK(n.substr(5) == "SNOTICE\0VNOTICE\0C01000\0Mw\0\0"s);
}

TEST_CASE("pgwire codec: framing typed messages", "[pgwire][codec]") {
    const std::string q = "Q\0\0\0\x0dSELECT 1\0"s;
    const std::string two = q + "X";
    auto whole = codec::next_message(two, 1 << 20);
    REQUIRE(whole.status == codec::frame_status::complete);
    CHECK(whole.f.type == 'Q');
    CHECK(whole.f.body == "SELECT 1\0"s);
    CHECK(whole.f.size == q.size());
    for (std::size_t cut = 0; cut < q.size(); ++cut)
        CHECK(codec::next_message(q.substr(0, cut), 1 << 20).status == codec::frame_status::need_more);
    CHECK(codec::next_message("Q\0\0\0\x03"s, 1 << 20).status == codec::frame_status::bad_length);
    CHECK(codec::next_message("Q\xff\xff\xff\xff"s, 1 << 20).status == codec::frame_status::bad_length);
    CHECK(codec::next_message("Q\x7f\0\0\0"s, 1 << 20).status == codec::frame_status::too_long);
    CHECK(codec::next_message(q, 13).status == codec::frame_status::too_long);
    CHECK(codec::next_message(q, 14).status == codec::frame_status::complete);
}

TEST_CASE("pgwire codec: startup packets", "[pgwire][codec]") {
    // psql's StartupMessage: length, 3.0, user/database pairs, terminator.
    const std::string sm = "\0\0\0\x34\0\x03\0\0user\0alice\0database\0test\0application_name\0\0\0"s;
    auto fr = codec::next_startup(sm);
    REQUIRE(fr.status == codec::frame_status::complete);
    auto m = codec::parse_startup(fr.f.body);
    REQUIRE(m.has_value());
    CHECK(m->code == codec::protocol_3_0);
    REQUIRE(m->params.size() == 3);
    CHECK(m->params[0] == std::pair<std::string, std::string>("user", "alice"));
    CHECK(m->params[2] == std::pair<std::string, std::string>("application_name", ""));

    auto ssl = codec::parse_startup(codec::next_startup("\0\0\0\x08\x04\xd2\x16\x2f"s).f.body);
    REQUIRE(ssl.has_value());
    CHECK(ssl->code == codec::ssl_request_code);
    auto cancel = codec::parse_startup("\x04\xd2\x16\x2e\0\0\0\x07\x12\x34\x56\x78"s);
    REQUIRE(cancel.has_value());
    CHECK(cancel->code == codec::cancel_request_code);
    CHECK(cancel->cancel_pid == 7);
    CHECK(cancel->cancel_secret == 0x12345678);

    CHECK_FALSE(codec::parse_startup("\x04\xd2\x16\x2e\0\0\0\x07"s).has_value()); // short cancel
    CHECK_FALSE(codec::parse_startup("\0\x03\0\0user\0alice"s).has_value());      // no terminator
    CHECK_FALSE(codec::parse_startup("\0\x03\0\0user\0alice\0\0extra"s).has_value());
    CHECK_FALSE(codec::parse_startup("\0\x03"s).has_value());
    auto v2 = codec::parse_startup("\0\x02\0\0garbage"s);
    REQUIRE(v2.has_value()); // the version is the caller's to refuse
    CHECK((v2->code >> 16) == 2);
    CHECK(codec::next_startup("\0\0\0\x07\0\0\0"s).status == codec::frame_status::bad_length);
    CHECK(codec::next_startup("\0\x01\0\0"s).status == codec::frame_status::too_long);
}

TEST_CASE("pgwire codec: extended protocol messages", "[pgwire][codec]") {
    auto p = codec::parse_parse("s1\0SELECT $1::int\0\0\x01\0\0\0\x17"s);
    REQUIRE(p.has_value());
    CHECK(p->statement == "s1");
    CHECK(p->query == "SELECT $1::int");
    CHECK(p->param_types == std::vector<std::uint32_t>{23});
    CHECK_FALSE(codec::parse_parse("s1\0SELECT\0\0\x02\0\0\0\x17"s).has_value()); // count beyond the body
    CHECK_FALSE(codec::parse_parse("s1\0SELECT"s).has_value());

    // portal "", statement "s1", 1 format (text), 2 params ("7", NULL), 1 result format (text)
    auto b = codec::parse_bind("\0s1\0\0\x01\0\0\0\x02\0\0\0\x01" "7\xff\xff\xff\xff\0\x01\0\0"s);
    REQUIRE(b.has_value());
    CHECK(b->portal.empty());
    CHECK(b->statement == "s1");
    REQUIRE(b->params.size() == 2);
    CHECK(b->params[0] == std::optional<std::string>("7"));
    CHECK_FALSE(b->params[1].has_value());
    CHECK(codec::all_text(b->param_formats));
    CHECK(codec::all_text(b->result_formats));
    CHECK_FALSE(codec::all_text({0, 1}));
    CHECK_FALSE(codec::parse_bind("\0s1\0\0\0\0\x01\0\0\0\x09" "7"s).has_value());       // value past the end
    CHECK_FALSE(codec::parse_bind("\0s1\0\0\0\0\x01\xff\xff\xff\xfe\0\0"s).has_value()); // length -2
    CHECK_FALSE(codec::parse_bind("\0s1\0\0\x02\0\0\0\0\0\x01\0\0\0\0\0\0"s).has_value()); // 2 formats, 1 param

    auto d = codec::parse_describe("Sname\0"s);
    REQUIRE(d.has_value());
    CHECK(d->kind == 'S');
    CHECK(d->name == "name");
    CHECK_FALSE(codec::parse_describe("Xname\0"s).has_value());
    CHECK_FALSE(codec::parse_describe(""s).has_value());

    auto e = codec::parse_execute("\0\0\0\0\x0a"s);
    REQUIRE(e.has_value());
    CHECK(e->portal.empty());
    CHECK(e->max_rows == 10);
    CHECK_FALSE(codec::parse_execute("\0\0\0"s).has_value());

    auto q = codec::parse_query("SELECT 1\0"s);
    REQUIRE(q.has_value());
    CHECK(*q == "SELECT 1");
    CHECK_FALSE(codec::parse_query("SELECT 1"s).has_value());
    CHECK_FALSE(codec::parse_query("SELECT 1\0junk"s).has_value());
}
