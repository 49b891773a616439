#include "http_probe.hpp"
#include "run_task.hpp"

#include <skiff/http/client.hpp>
#include <skiff/http/server.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <random>
#include <stdexcept>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using skiff::test::probe;
using skiff::test::probe_response;
using skiff::test::read_response;
using http::server;

namespace {

task<server::response> hello(const server::request& req) {
    server::response r(200, "text/plain", "hello " + req.path);
    if (auto f = req.query_param("format")) r.body += " format=" + *f;
    co_return r;
}
task<server::response> echo(const server::request& req) {
    server::response r(200, "application/octet-stream", req.body);
    r.headers.emplace_back("X-Method", req.method);
    r.headers.emplace_back("X-Bad", "a\r\nInjected: yes"); // dropped by the server
    co_return r;
}
task<server::response> slow(const server::request&) {
    (void)co_await sleep(20ms);
    co_return server::response(200, "text/plain", "slow");
}
task<server::response> boom(const server::request&) {
    throw std::runtime_error("handler exploded");
    co_return server::response{};
}

std::unique_ptr<server> make_server(http::server_config cfg = {}) {
    auto s = server::listen(std::move(cfg));
    REQUIRE(s.has_value());
    (*s)->route("GET", "/hello", [](const server::request& r) { return hello(r); });
    (*s)->route("POST", "/echo", [](const server::request& r) { return echo(r); });
    (*s)->route("PUT", "/echo", [](const server::request& r) { return echo(r); });
    (*s)->route("GET", "/slow", [](const server::request& r) { return slow(r); });
    (*s)->route("GET", "/boom", [](const server::request& r) { return boom(r); });
    return std::move(*s);
}

// Runs `client(addr)` against a serving server, then stops the server and waits for it.
template <typename Client>
task<void> with_server(server* srv, Client client) {
    std::stop_source stop;
    auto run_client = [](Client c, socket_address addr, std::stop_source* st) -> task<void> {
        co_await c(addr);
        st->request_stop();
    };
    auto serving = srv->serve(stop.get_token());
    auto driving = run_client(std::move(client), srv->local_address(), &stop);
    co_await when_all(std::move(serving), std::move(driving));
}

} // namespace

TEST_CASE("http server: GET, query parameters, HEAD, 404 and 405 with Allow", "[http][server]") {
    auto t = []() -> task<void> {
        auto srv = make_server();
        co_await with_server(srv.get(), [](socket_address addr) -> task<void> {
            auto r = co_await probe(addr, test::get_request("/hello?format=chrome&x=1"));
            REQUIRE(r.ok);
            CHECK(r.status == 200);
            CHECK(r.body == "hello /hello format=chrome");
            CHECK(r.header("content-type") == "text/plain");
            CHECK(r.header("connection") == "keep-alive");

            auto h = co_await probe(addr, "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n", true);
            REQUIRE(h.ok);
            CHECK(h.status == 200);
            CHECK(h.header("content-length") == "12");

            auto nf = co_await probe(addr, test::get_request("/nope"));
            CHECK(nf.status == 404);
            CHECK(nf.body.find("/nope") != std::string::npos);

            auto na = co_await probe(addr, "DELETE /hello HTTP/1.1\r\nHost: x\r\n\r\n");
            CHECK(na.status == 405);
            CHECK(na.header("allow") == "GET, HEAD");

            auto post = co_await probe(addr, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
            CHECK(post.status == 405);
            CHECK(post.header("allow") == "POST, PUT");

            auto e = co_await probe(addr, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde");
            CHECK(e.status == 200);
            CHECK(e.body == "abcde");
            CHECK(e.header("x-method") == "POST");
            CHECK(e.header("x-bad").empty());
            CHECK(e.header("injected").empty());

            auto b = co_await probe(addr, test::get_request("/boom"));
            CHECK(b.status == 500);
        });
        CHECK(srv->counters().requests == 7);
        CHECK(srv->counters().open == 0);
    };
    run_task(t());
}

TEST_CASE("http server: keep-alive and pipelining on one connection", "[http][server]") {
    auto t = []() -> task<void> {
        auto srv = make_server();
        co_await with_server(srv.get(), [](socket_address addr) -> task<void> {
            auto c = co_await tcp_stream::connect(addr);
            REQUIRE(c.has_value());
            std::string buf;
            for (int i = 0; i < 3; ++i) {
                auto w = co_await c->write_all(test::get_request("/hello"));
                REQUIRE(w.has_value());
                auto r = co_await read_response(*c, buf);
                REQUIRE(r.ok);
                CHECK(r.status == 200);
            }
            // Three requests in one write, one with a body, answered in order.
            std::string three = test::get_request("/hello?format=a") +
                                "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz" +
                                test::get_request("/hello?format=c");
            auto w = co_await c->write_all(three);
            REQUIRE(w.has_value());
            auto r1 = co_await read_response(*c, buf);
            auto r2 = co_await read_response(*c, buf);
            auto r3 = co_await read_response(*c, buf);
            CHECK(r1.body == "hello /hello format=a");
            CHECK(r2.body == "xyz");
            CHECK(r3.body == "hello /hello format=c");
            // Connection: close is honoured.
            auto w2 = co_await c->write_all(test::get_request("/hello", "Connection: close\r\n"));
            REQUIRE(w2.has_value());
            auto last = co_await read_response(*c, buf);
            CHECK(last.header("connection") == "close");
            auto closed = co_await test::closed_by_peer(*c, buf);
            CHECK(closed);
        });
        CHECK(srv->counters().connections == 1);
    };
    run_task(t());
}

TEST_CASE("http server: HTTP/1.0 closes unless keep-alive is asked for", "[http][server]") {
    auto t = []() -> task<void> {
        auto srv = make_server();
        co_await with_server(srv.get(), [](socket_address addr) -> task<void> {
            auto c = co_await tcp_stream::connect(addr);
            REQUIRE(c.has_value());
            std::string buf;
            auto w = co_await c->write_all(std::string_view("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
            REQUIRE(w.has_value());
            auto r = co_await read_response(*c, buf);
            CHECK(r.status == 200);
            CHECK(r.header("connection") == "keep-alive");
            auto w2 = co_await c->write_all(std::string_view("GET /hello HTTP/1.0\r\n\r\n"));
            REQUIRE(w2.has_value());
            auto r2 = co_await read_response(*c, buf);
            CHECK(r2.status == 200);
            CHECK(r2.header("connection") == "close");
            auto closed = co_await test::closed_by_peer(*c, buf);
            CHECK(closed);
        });
    };
    run_task(t());
}

TEST_CASE("http server: malformed and oversized requests get clear answers and a close", "[http][server]") {
    struct bad_case {
        std::string raw;
        int status;
    };
    auto t = []() -> task<void> {
        http::server_config cfg;
        cfg.max_head_bytes = 1024;
        cfg.max_body_bytes = 100;
        auto srv = make_server(cfg);
        co_await with_server(srv.get(), [](socket_address addr) -> task<void> {
            const std::vector<std::pair<std::string, int>> cases = {
                {"garbage\r\n\r\n", 400},
                {"GET\r\n\r\n", 400},
                {"GET  /hello HTTP/1.1\r\nHost: x\r\n\r\n", 400},
                {"GET hello HTTP/1.1\r\nHost: x\r\n\r\n", 400},
                {"GET /hello HTTP/1.1\r\n\r\n", 400},                     // no Host
                {"GET /hello HTTX/1.1\r\nHost: x\r\n\r\n", 400},
                {"GET /hello HTTP/2.0\r\nHost: x\r\n\r\n", 505},
                {"GET /hello HTTP/1.1\r\nHost x\r\n\r\n", 400},
                {"GET /hello HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400},
                {"GET /hello HTTP/1.1\r\nBad Name: x\r\nHost: x\r\n\r\n", 400},
                {"GET /hello HTTP/1.1\r\nHost: x\r\nX: a\x01" "b\r\n\r\n", 400},
                {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400},
                {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
                {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413},
                {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", 413},
                {"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501},
                {"GET /" + std::string(2000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 431},
                {"GET /hello HTTP/1.1\r\nHost: x\r\nX-Long: " + std::string(5000, 'b'), 431}, // never ends
            };
            for (const auto& [raw, status] : cases) {
                INFO(raw.substr(0, 80));
                auto c = co_await tcp_stream::connect(addr);
                REQUIRE(c.has_value());
                auto w = co_await c->write_all(raw);
                REQUIRE(w.has_value());
                std::string buf;
                auto r = co_await read_response(*c, buf);
                REQUIRE(r.ok);
                CHECK(r.status == status);
                CHECK(r.header("connection") == "close");
                CHECK(r.body.find(std::to_string(status)) == 0);
                auto closed = co_await test::closed_by_peer(*c, buf);
                CHECK(closed);
            }
            // Still serving.
            auto ok = co_await probe(addr, test::get_request("/hello"));
            CHECK(ok.status == 200);
        });
        CHECK(srv->counters().bad_requests == 18);
    };
    run_task(t());
}

TEST_CASE("http server: random garbage never crashes it", "[http][server]") {
    auto t = []() -> task<void> {
        auto srv = make_server();
        co_await with_server(srv.get(), [](socket_address addr) -> task<void> {
            std::mt19937 rng(1234);
            const std::string alphabet = "GET POST /\r\n:HTTP/1.1 Host Content-Length 0123456789\xff%?&= \t";
            for (int i = 0; i < 300; ++i) {
                std::string junk;
                const int len = static_cast<int>(rng() % 300);
                for (int k = 0; k < len; ++k) {
                    junk += (rng() % 4 == 0) ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
                }
                if (i % 2 == 0) junk += "\r\n\r\n";
                auto c = co_await tcp_stream::connect(addr);
                REQUIRE(c.has_value());
                auto w = co_await c->write_all(junk);
                (void)w;
                c->shutdown_write();
                std::string buf;
                auto r = co_await read_response(*c, buf);
                if (r.ok) CHECK(r.status >= 200); // any complete answer is fine; no hang, no crash
            }
            auto ok = co_await probe(addr, test::get_request("/hello"));
            CHECK(ok.status == 200);
        });
        CHECK(srv->counters().open == 0);
    };
    run_task(t());
}

TEST_CASE("http server: binding an address in use fails with one clear sentence", "[http][server]") {
    auto t = []() -> task<void> {
        auto first = server::listen();
        REQUIRE(first.has_value());
        http::server_config cfg;
        cfg.addr = (*first)->local_address().to_string();
        auto second = server::listen(cfg);
        REQUIRE_FALSE(second.has_value());
        CHECK(second.error().find("cannot listen on " + cfg.addr + " for HTTP") == 0);
        http::server_config bad;
        bad.addr = "not-an-address";
        auto third = server::listen(bad);
        REQUIRE_FALSE(third.has_value());
        CHECK(third.error().find("cannot listen for HTTP") == 0);
        co_return;
    };
    run_task(t());
}

TEST_CASE("http server: stop ends idle keep-alive connections and serve() returns", "[http][server]") {
    auto t = []() -> task<void> {
        auto srv = make_server();
        std::stop_source stop;
        auto client = [](socket_address addr, std::stop_source* st, server* s) -> task<void> {
            auto c = co_await tcp_stream::connect(addr);
            REQUIRE(c.has_value());
            std::string buf;
            auto w = co_await c->write_all(test::get_request("/hello"));
            REQUIRE(w.has_value());
            auto r = co_await read_response(*c, buf);
            CHECK(r.status == 200);
            CHECK(s->counters().open == 1); // idle, kept alive
            st->request_stop();
            auto closed = co_await test::closed_by_peer(*c, buf);
            CHECK(closed);
        };
        auto serving = srv->serve(stop.get_token());
        auto driving = client(srv->local_address(), &stop, srv.get());
        co_await when_all(std::move(serving), std::move(driving));
        CHECK(srv->counters().open == 0);
    };
    run_task(t());
}

TEST_CASE("http server: connections over the cap get 503", "[http][server]") {
    auto t = []() -> task<void> {
        http::server_config cfg;
        cfg.max_connections = 2;
        auto srv = make_server(cfg);
        co_await with_server(srv.get(), [](socket_address addr) -> task<void> {
            auto a = co_await tcp_stream::connect(addr);
            auto b = co_await tcp_stream::connect(addr);
            REQUIRE(a.has_value());
            REQUIRE(b.has_value());
            (void)co_await sleep(20ms); // let the server accept both
            auto r = co_await probe(addr, test::get_request("/hello"));
            CHECK(r.status == 503);
            a->close();
            b->close();
            (void)co_await sleep(20ms);
            auto again = co_await probe(addr, test::get_request("/hello"));
            CHECK(again.status == 200);
        });
        CHECK(srv->counters().rejected == 1);
    };
    run_task(t());
}

TEST_CASE("http server: libcurl as a client (keep-alive reuse, concurrent slow handlers)", "[http][server]") {
    auto t = []() -> task<void> {
        auto srv = make_server();
        co_await with_server(srv.get(), [](socket_address addr) -> task<void> {
            http::client cl;
            const std::string base = "http://" + addr.to_string();
            for (int i = 0; i < 3; ++i) {
                http::request req;
                req.url = base + "/hello?format=x%20y";
                auto r = co_await cl.send(std::move(req));
                REQUIRE(r.has_value());
                CHECK(r->status == 200);
                CHECK(r->body == "hello /hello format=x y");
            }
            CHECK(cl.stats().connections_opened == 1);
            std::vector<task<result<http::response, http::transport_error>>> many;
            for (int i = 0; i < 5; ++i) {
                http::request req;
                req.url = base + "/slow";
                many.push_back(cl.send(std::move(req)));
            }
            auto all = co_await when_all(std::move(many));
            for (auto& r : all) {
                REQUIRE(r.has_value());
                CHECK(r->body == "slow");
            }
        });
    };
    run_task(t());
}

TEST_CASE("http server: parse_head unit checks", "[http][server]") {
    server::request req;
    std::string why;
    CHECK(server::parse_head("GET /a?b=c%20d HTTP/1.1\r\nHost: h\r\nX-Y:  v  \r\n\r\n", req, &why) == 0);
    CHECK(req.path == "/a");
    CHECK(req.query == "b=c%20d");
    CHECK(*req.query_param("b") == "c d");
    CHECK_FALSE(req.query_param("zz").has_value());
    REQUIRE(req.header("x-y"));
    CHECK(*req.header("x-y") == "v");
    server::request lf;
    CHECK(server::parse_head("GET / HTTP/1.1\nHost: h\n\n", lf) == 0); // bare LF tolerated
    server::request bad;
    CHECK(server::parse_head("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", bad, &why) == 501);
    CHECK(why.find("Transfer-Encoding") != std::string::npos);
    server::request many;
    std::string head = "GET / HTTP/1.1\r\nHost: h\r\n";
    for (int i = 0; i < 150; ++i) head += "X-" + std::to_string(i) + ": v\r\n";
    CHECK(server::parse_head(head + "\r\n", many) == 431);
}
