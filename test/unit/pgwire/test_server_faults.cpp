// The Postgres wire server over raw sockets, against the toy backend (test_backend.hpp): cancel, disconnects, shutdown, limits, garbage.
#include "server_env.hpp"

#include <catch2/catch.hpp>

using namespace skiff::test::pgwire_env;
TEST_CASE("pgwire server: CancelRequest from another connection cancels a running query", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        std::string slow = test::query_bytes("SLOW");
        bool sent = co_await c->send(std::move(slow));
        REQUIRE(sent);
        toy_backend* b = e->backend;
        co_await until([b] { return b->counters.slow_started == 1; });
        REQUIRE(b->counters.slow_started == 1);

        // A wrong secret cancels nothing, and is not answered either.
        std::string wrong = test::cancel_request_bytes(c->pid, c->secret ^ 1);
        auto r = co_await send_raw(e->addr, std::move(wrong));
        CHECK_FALSE(r.first.has_value());
        CHECK(r.closed);
        CHECK(b->counters.slow_cancelled == 0);
        CHECK(e->srv->stats().cancels == 0);

        std::string right = test::cancel_request_bytes(c->pid, c->secret);
        r = co_await send_raw(e->addr, std::move(right));
        CHECK_FALSE(r.first.has_value());
        CHECK(r.closed);
        auto m = co_await c->read_until('Z');
        REQUIRE(types_of(m) == "EZ");
        CHECK(error_field(m[0].body, 'C') == "57014");
        CHECK(b->counters.slow_cancelled == 1);
        CHECK(e->srv->stats().cancels == 1);
        m = co_await query(*c, "SELECT 1");
        CHECK(types_of(m) == "TDCZ");

        // The same in the extended protocol: the error starts skip-until-Sync.
        std::vector<std::optional<std::string>> none;
        std::string ext = test::parse_bytes("", "SLOW") + test::bind_bytes("", "", none) + test::execute_bytes("") +
                          test::sync_bytes();
        sent = co_await c->send(std::move(ext));
        REQUIRE(sent);
        co_await until([b] { return b->counters.slow_started == 2; });
        std::string again = test::cancel_request_bytes(c->pid, c->secret);
        r = co_await send_raw(e->addr, std::move(again));
        CHECK(r.closed);
        m = co_await c->read_until('Z');
        CHECK(types_of(m) == "12EZ");
        CHECK(e->srv->stats().cancels == 2);
    });
}

TEST_CASE("pgwire server: a client that goes away cancels its query", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        std::string slow = test::query_bytes("SLOW");
        bool sent = co_await c->send(std::move(slow));
        REQUIRE(sent);
        toy_backend* b = e->backend;
        co_await until([b] { return b->counters.slow_started == 1; });
        c->close();
        co_await until([b] { return b->counters.slow_cancelled == 1; });
        CHECK(b->counters.slow_cancelled == 1);
        pgwire::server* s = e->srv;
        co_await until([s] { return s->stats().connections_open == 0; });
        CHECK(s->stats().connections_open == 0);
    });
}

TEST_CASE("pgwire server: shutdown cancels running queries and says why", "[pgwire][server]") {
    run([](env* e) -> task<void> {
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        auto idle = co_await wire_client::session(e->addr);
        REQUIRE(idle.has_value());
        std::string slow = test::query_bytes("SLOW");
        bool sent = co_await c->send(std::move(slow));
        REQUIRE(sent);
        toy_backend* b = e->backend;
        co_await until([b] { return b->counters.slow_started == 1; });
        e->stop->request_stop();
        auto m = co_await c->read_msg();
        REQUIRE(m.has_value());
        CHECK(m->type == 'E');
        CHECK(error_field(m->body, 'C') == "57P01");
        CHECK(error_field(m->body, 'S') == "FATAL");
        bool closed = co_await c->closed_by_server();
        CHECK(closed);
        auto im = co_await idle->read_msg();
        REQUIRE(im.has_value());
        CHECK(error_field(im->body, 'C') == "57P01");
        CHECK(b->counters.slow_cancelled == 1);
    });
}

TEST_CASE("pgwire server: max_connections refuses with 53300", "[pgwire][server]") {
    pgwire::server_config cfg;
    cfg.max_connections = 2;
    run([](env* e) -> task<void> {
        auto a = co_await wire_client::session(e->addr);
        auto b = co_await wire_client::session(e->addr);
        REQUIRE(a.has_value());
        REQUIRE(b.has_value());
        std::string hello = test::startup_bytes({{"user", "c"}});
        auto r = co_await send_raw(e->addr, std::move(hello));
        REQUIRE(r.first.has_value());
        CHECK(error_field(r.first->body, 'C') == "53300");
        CHECK(error_field(r.first->body, 'S') == "FATAL");
        CHECK(r.closed);
        // A full server still takes CancelRequests.
        std::string slow = test::query_bytes("SLOW");
        bool sent = co_await a->send(std::move(slow));
        REQUIRE(sent);
        toy_backend* tb = e->backend;
        co_await until([tb] { return tb->counters.slow_started == 1; });
        std::string cancel = test::cancel_request_bytes(a->pid, a->secret);
        r = co_await send_raw(e->addr, std::move(cancel));
        auto m = co_await a->read_until('Z');
        CHECK(types_of(m) == "EZ");
        // A slot frees when a session ends.
        b->close();
        pgwire::server* s = e->srv;
        co_await until([s] { return s->stats().connections_open == 1; });
        auto d = co_await wire_client::session(e->addr);
        CHECK(d.has_value());
    }, cfg);
}

TEST_CASE("pgwire server: garbage on the wire is answered 08P01 and closed", "[pgwire][server]") {
    pgwire::server_config cfg;
    cfg.startup_timeout = 200ms;
    cfg.max_message_bytes = 4096;
    run([](env* e) -> task<void> {
        struct bad_case {
            const char* what;
            std::string after_startup; // bytes sent after a good startup
        };
        std::vector<bad_case> cases{
            {"length below 4", "Q\0\0\0\x02"s},
            {"huge length", "Q\x7f\xff\xff\xf0"s},
            {"over max_message_bytes", test::query_bytes(std::string(5000, 'x'))},
            {"unknown type", test::typed_bytes('z', "")},
            {"malformed Parse", test::typed_bytes('P', "s1\0SELECT"s)},
            {"Query without terminator", test::typed_bytes('Q', "SELECT 1")},
        };
        for (auto& bc : cases) {
            INFO(bc.what);
            auto c = co_await wire_client::session(e->addr);
            REQUIRE(c.has_value());
            bool sent = co_await c->send(std::move(bc.after_startup));
            REQUIRE(sent);
            auto m = co_await c->read_msg();
            REQUIRE(m.has_value());
            CHECK(m->type == 'E');
            CHECK(error_field(m->body, 'C') == "08P01");
            CHECK(error_field(m->body, 'S') == "FATAL");
            bool closed = co_await c->closed_by_server();
            CHECK(closed);
        }
        CHECK(e->srv->stats().protocol_violations == cases.size());

        // Startup-phase garbage.
        std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        auto r = co_await send_raw(e->addr, std::move(http));
        REQUIRE(r.first.has_value());
        CHECK(error_field(r.first->body, 'C') == "08P01");
        CHECK(r.closed);
        std::string tiny = "\0\0\0\x04"s;
        r = co_await send_raw(e->addr, std::move(tiny));
        REQUIRE(r.first.has_value());
        CHECK(error_field(r.first->body, 'C') == "08P01");
        std::string noterm = "\0\0\0\x0e\0\x03\0\0user\0u\0"s.substr(0, 13);
        noterm[3] = 13;
        r = co_await send_raw(e->addr, std::move(noterm));
        REQUIRE(r.first.has_value());
        CHECK(error_field(r.first->body, 'C') == "08P01");

        // Silence, or half a startup packet, past startup_timeout: closed without an answer.
        for (int half = 0; half < 2; ++half) {
            auto c = co_await wire_client::connect(e->addr);
            REQUIRE(c.has_value());
            if (half) {
                std::string part = "\0\0\0\x20\0\x03"s;
                bool sent = co_await c->send(std::move(part));
                REQUIRE(sent);
            }
            bool closed = co_await c->closed_by_server(5s);
            CHECK(closed);
        }

        // EOF in the middle of a message, during startup and after it.
        {
            auto c = co_await wire_client::connect(e->addr);
            REQUIRE(c.has_value());
            std::string part = "\0\0\0\x20\0\x03"s;
            bool sent = co_await c->send(std::move(part));
            REQUIRE(sent);
            c->close();
        }
        {
            auto c = co_await wire_client::session(e->addr);
            REQUIRE(c.has_value());
            std::string part = "Q\0\0\0\x20SEL"s;
            bool sent = co_await c->send(std::move(part));
            REQUIRE(sent);
            c->close();
        }
        pgwire::server* s = e->srv;
        co_await until([s] { return s->stats().connections_open == 0; });
        CHECK(s->stats().connections_open == 0);
        // And the server still serves.
        auto c = co_await wire_client::session(e->addr);
        REQUIRE(c.has_value());
        auto m = co_await query(*c, "SELECT 1");
        CHECK(types_of(m) == "TDCZ");
    }, cfg);
}
