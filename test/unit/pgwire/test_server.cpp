// The Postgres wire server over raw sockets, against the toy backend (test_backend.hpp): startup, simple and extended query.
#include "server_env.hpp"

#include <catch2/catch.hpp>

using namespace skiff::test::pgwire_env;

TEST_CASE("pgwire server: startup answers auth, parameters, key data, ReadyForQuery", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        const auto& m = c->startup_messages;
        REQUIRE(m.size() >= 4);
        CHECK(m.front().type == 'R');
        CHECK(m.front().body == "\0\0\0\0"s);
        CHECK(m.back().type == 'Z');
        CHECK(m.back().body == "I");
        bool version = false;
        for (const auto& x : m)
            if (x.type == 'S' && x.body.starts_with("server_version\0"s)) version = true;
        CHECK(version);
        CHECK(e->backend->counters.last_user == "alice");
        auto d = co_await wire_client::session(e->addr, "bob");
        REQUIRE(d.has_value());
        CHECK(c->pid != d->pid);
        CHECK(c->secret != d->secret); // 1 in 2^32 of a false failure
        std::string bye = test::terminate_bytes();
        bool sent = co_await c->send(std::move(bye));
        CHECK(sent);
        bool closed = co_await c->closed_by_server();
        CHECK(closed);
    });
}

TEST_CASE("pgwire server: SSLRequest and GSSENCRequest are answered N, then plain startup", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        for (int gss = 0; gss < 2; ++gss) {
            auto c = co_await wire_client::connect(e->addr);
            REQUIRE(c.has_value());
            std::string req = gss ? test::gssenc_request_bytes() : test::ssl_request_bytes();
            bool sent = co_await c->send(std::move(req));
            REQUIRE(sent);
            auto n = co_await c->read_byte();
            REQUIRE(n.has_value());
            CHECK(*n == 'N');
            std::vector<std::pair<std::string, std::string>> params{{"user", "u"}, {"application_name", "psql"}};
            std::string hello = test::startup_bytes(params);
            auto msgs = co_await roundtrip(*c, std::move(hello));
            CHECK(types_of(msgs).front() == 'R');
            CHECK(types_of(msgs).back() == 'Z');
            CHECK(e->backend->counters.last_application_name == "psql");
        }
        // Plain bytes already behind an SSLRequest would be read as if encrypted: refused.
        std::string both = test::ssl_request_bytes() + test::startup_bytes({{"user", "u"}});
        auto r = co_await send_raw(e->addr, std::move(both));
        REQUIRE(r.first.has_value());
        CHECK(error_field(r.first->body, 'C') == "08P01");
        CHECK(r.closed);
    });
}

TEST_CASE("pgwire server: startup refusals", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        std::string nodb = test::startup_bytes({{"user", "u"}, {"database", "nodb"}});
        auto r = co_await send_raw(e->addr, std::move(nodb));
        REQUIRE(r.first.has_value());
        CHECK(r.first->type == 'E');
        CHECK(error_field(r.first->body, 'C') == "3D000");
        CHECK(error_field(r.first->body, 'S') == "FATAL");
        CHECK(r.closed);

        std::string nouser = test::startup_bytes({{"database", "x"}});
        r = co_await send_raw(e->addr, std::move(nouser));
        REQUIRE(r.first.has_value());
        CHECK(error_field(r.first->body, 'C') == "28000");
        CHECK(r.closed);

        std::string v2 = test::startup_bytes({{"user", "u"}}, 2u << 16);
        r = co_await send_raw(e->addr, std::move(v2));
        REQUIRE(r.first.has_value());
        CHECK(error_field(r.first->body, 'C') == "0A000");
        CHECK(r.closed);

        // 3.1 is answered with NegotiateProtocolVersion (newest minor 0), then the session.
        auto c = co_await wire_client::connect(e->addr);
        REQUIRE(c.has_value());
        std::string v31 = test::startup_bytes({{"user", "u"}, {"_pq_.future", "x"}}, (3u << 16) | 1u);
        auto msgs = co_await roundtrip(*c, std::move(v31));
        REQUIRE(msgs.size() >= 3);
        CHECK(msgs[0].type == 'v');
        CHECK(msgs[0].body == "\0\0\0\0\0\0\0\x01_pq_.future\0"s);
        CHECK(msgs[1].type == 'R');
        CHECK(msgs.back().type == 'Z');
    });
}

TEST_CASE("pgwire server: simple query rows, multi-statement, empty query, errors", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        auto m = co_await query(*c, "SELECT 3");
        REQUIRE(types_of(m) == "TDDDCZ");
        auto cols = test::row_description_columns(m[0].body);
        REQUIRE(cols.size() == 1);
        CHECK(cols[0].first == "n");
        CHECK(cols[0].second == pgwire::oid::int4);
        CHECK(test::data_row_values(m[1].body) == std::vector<std::optional<std::string>>{"1"});
        CHECK(test::data_row_values(m[3].body) == std::vector<std::optional<std::string>>{"3"});
        CHECK(test::cstring_body(m[4].body) == "SELECT 3");

        m = co_await query(*c, "SELECT 1; SET; SELECT 2");
        CHECK(types_of(m) == "TDCCTDDCZ");
        CHECK(test::cstring_body(m[3].body) == "SET");

        m = co_await query(*c, "");
        CHECK(types_of(m) == "IZ");
        m = co_await query(*c, " ; ;");
        CHECK(types_of(m) == "IZ");

        m = co_await query(*c, "SELECT 1; FAIL now; SELECT 2");
        REQUIRE(types_of(m) == "TDCEZ");
        CHECK(error_field(m[3].body, 'C') == "42601");
        CHECK(error_field(m[3].body, 'S') == "ERROR");
        CHECK(error_field(m[3].body, 'V') == "ERROR");
        CHECK(error_field(m[3].body, 'M') == "syntax error at or near \"FAIL\"");
        CHECK_FALSE(error_field(m[3].body, 'H').empty());
        CHECK(m[4].body == "I");

        m = co_await query(*c, "SELECT 20000");
        REQUIRE(m.size() == 20003);
        CHECK(test::data_row_values(m[20000].body) == std::vector<std::optional<std::string>>{"20000"});
        CHECK(test::cstring_body(m[20001].body) == "SELECT 20000");
        CHECK(e->srv->stats().queries == 6);
        CHECK(e->srv->stats().errors == 1);
    });
}

TEST_CASE("pgwire server: extended protocol with parameters", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        // node-pg's sequence: Parse unnamed, Bind, Describe portal, Execute, Sync.
        std::vector<std::optional<std::string>> params{"a'b", std::nullopt};
        std::string flow = test::parse_bytes("", "ECHO $1 $2") + test::bind_bytes("", "", params) +
                           test::describe_bytes('P', "") + test::execute_bytes("") + test::sync_bytes();
        auto m = co_await roundtrip(*c, std::move(flow));
        REQUIRE(types_of(m) == "12TDCZ");
        auto cols = test::row_description_columns(m[2].body);
        REQUIRE(cols.size() == 2);
        CHECK(cols[1].first == "p2");
        CHECK(test::data_row_values(m[3].body) == params);
        CHECK(test::cstring_body(m[4].body) == "SELECT 1");

        // A named statement with a declared type; Describe statement; Execute without Describe
        // sends no RowDescription.
        std::string prep = test::parse_bytes("s1", "SELECT $1", {pgwire::oid::int4}) +
                           test::describe_bytes('S', "s1") + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(prep));
        REQUIRE(types_of(m) == "1tTZ");
        CHECK(m[1].body == "\0\x01\0\0\0\x17"s);
        std::vector<std::optional<std::string>> three{"3"};
        std::string exec = test::bind_bytes("p1", "s1", three, {0}, {0}) + test::execute_bytes("p1") + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(exec));
        REQUIRE(types_of(m) == "2DDDCZ");
        CHECK(test::cstring_body(m[4].body) == "SELECT 3");

        // Describe of a statement without rows: ParameterDescription + NoData; Close.
        std::string set = test::parse_bytes("s2", "SET") + test::describe_bytes('S', "s2") +
                          test::close_bytes('S', "s2") + test::close_bytes('P', "nothing") + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(set));
        CHECK(types_of(m) == "1tn33Z");

        // An empty statement executes to EmptyQueryResponse.
        std::vector<std::optional<std::string>> none;
        std::string empty = test::parse_bytes("", "") + test::bind_bytes("", "", none) + test::execute_bytes("") +
                            test::sync_bytes();
        m = co_await roundtrip(*c, std::move(empty));
        CHECK(types_of(m) == "12IZ");

        // Flush sends what is pending without ending the transaction.
        std::string flush = test::parse_bytes("s3", "SET") + test::flush_bytes();
        bool sent = co_await c->send(std::move(flush));
        REQUIRE(sent);
        auto one = co_await c->read_msg();
        REQUIRE(one.has_value());
        CHECK(one->type == '1');
        m = co_await sync(*c);
        CHECK(types_of(m) == "Z");
    });
}

TEST_CASE("pgwire server: extended protocol errors skip until Sync", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        std::vector<std::optional<std::string>> none;
        std::string bad = test::parse_bytes("", "FAIL here") + test::bind_bytes("", "", none) +
                          test::execute_bytes("") + test::query_bytes("SELECT 1") + test::sync_bytes();
        auto m = co_await roundtrip(*c, std::move(bad));
        REQUIRE(types_of(m) == "EZ");
        CHECK(error_field(m[0].body, 'C') == "42601");
        m = co_await query(*c, "SELECT 1");
        CHECK(types_of(m) == "TDCZ");

        auto expect_error = [](const std::vector<wire_msg>& msgs, const char* state) {
            REQUIRE(types_of(msgs).size() >= 2);
            CHECK(types_of(msgs).substr(types_of(msgs).size() - 2) == "EZ");
            CHECK(error_field(msgs[msgs.size() - 2].body, 'C') == state);
        };
        std::string prep = test::parse_bytes("s1", "SELECT $1") + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(prep));
        CHECK(types_of(m) == "1Z");
        std::vector<std::optional<std::string>> one{"1"};
        std::string dup = test::parse_bytes("s1", "SELECT 2") + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(dup));
        expect_error(m, "42P05");
        std::string binp = test::bind_bytes("", "s1", one, {1}) + test::execute_bytes("") + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(binp));
        expect_error(m, "0A000");
        std::string binr = test::bind_bytes("", "s1", one, {}, {1}) + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(binr));
        expect_error(m, "0A000");
        std::string count = test::bind_bytes("", "s1", none) + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(count));
        expect_error(m, "08P01");
        std::string nostmt = test::bind_bytes("", "nope", none) + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(nostmt));
        expect_error(m, "26000");
        std::string noportal = test::execute_bytes("nope") + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(noportal));
        expect_error(m, "34000");
        // Portals end at Sync.
        std::string bound = test::bind_bytes("p", "s1", one) + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(bound));
        CHECK(types_of(m) == "2Z");
        std::string gone = test::execute_bytes("p") + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(gone));
        expect_error(m, "34000");
        // None of these ended the session.
        m = co_await query(*c, "SELECT 2");
        CHECK(types_of(m) == "TDDCZ");
        CHECK(e->srv->stats().protocol_violations == 0);
    });
}

TEST_CASE("pgwire server: Execute with a row limit suspends the portal", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        std::vector<std::optional<std::string>> five{"5"};
        // JDBC/node-pg cursor style: one Execute per batch of 2, then Sync.
        std::string first = test::parse_bytes("", "SELECT $1") + test::bind_bytes("cur", "", five) +
                            test::describe_bytes('P', "cur") + test::execute_bytes("cur", 2) + test::flush_bytes();
        bool sent = co_await c->send(std::move(first));
        REQUIRE(sent);
        auto m = co_await c->read_until('s');
        REQUIRE(types_of(m) == "12TDDs");
        CHECK(test::data_row_values(m[4].body) == std::vector<std::optional<std::string>>{"2"});
        std::string second = test::execute_bytes("cur", 2) + test::flush_bytes();
        sent = co_await c->send(std::move(second));
        REQUIRE(sent);
        m = co_await c->read_until('s');
        REQUIRE(types_of(m) == "DDs");
        CHECK(test::data_row_values(m[0].body) == std::vector<std::optional<std::string>>{"3"});
        std::string last = test::execute_bytes("cur", 2) + test::sync_bytes();
        m = co_await roundtrip(*c, std::move(last));
        REQUIRE(types_of(m) == "DCZ");
        CHECK(test::data_row_values(m[0].body) == std::vector<std::optional<std::string>>{"5"});
        CHECK(test::cstring_body(m[1].body) == "SELECT 1");

        // Exactly the limit: complete at once. Max 0 after a suspension: all the rest.
        std::vector<std::optional<std::string>> two{"2"};
        std::string exact = test::bind_bytes("", "", two) + test::execute_bytes("", 2) +
                            test::bind_bytes("p", "", five) + test::execute_bytes("p", 1) + test::execute_bytes("p", 0) +
                            test::sync_bytes();
        m = co_await roundtrip(*c, std::move(exact));
        REQUIRE(types_of(m) == "2DDC2DsDDDDCZ");
        CHECK(test::cstring_body(m[3].body) == "SELECT 2");
        CHECK(test::cstring_body(m[11].body) == "SELECT 4");
        // A suspended portal dies at Sync like any other.
        std::string after = test::bind_bytes("q", "", five) + test::execute_bytes("q", 1) + test::sync_bytes() +
                            test::execute_bytes("q", 1) + test::sync_bytes();
        sent = co_await c->send(std::move(after));
        REQUIRE(sent);
        m = co_await c->read_until('Z');
        CHECK(types_of(m) == "2DsZ");
        m = co_await c->read_until('Z');
        REQUIRE(types_of(m) == "EZ");
        CHECK(error_field(m[0].body, 'C') == "34000");
    });
}

