#include "run_task.hpp"

#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <unistd.h>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;

namespace {
task<std::string> echo_server_once(tcp_listener* l) {
    auto conn = co_await l->accept();
    REQUIRE(conn.has_value());
    std::string got;
    char buf[4096];
    for (;;) {
        auto n = co_await conn->read_some(buf);
        REQUIRE(n.has_value());
        if (*n == 0) break;
        got.append(buf, *n);
        auto w = co_await conn->write_all(std::span<const char>(buf, *n));
        REQUIRE(w.has_value());
    }
    co_return got;
}
task<std::string> client_roundtrip(socket_address addr, std::string payload) {
    auto c = co_await tcp_stream::connect(addr);
    REQUIRE(c.has_value());
    auto w = co_await c->write_all(payload);
    REQUIRE(w.has_value());
    std::string back(payload.size(), '\0');
    auto r = co_await c->read_exactly(back);
    REQUIRE(r.has_value());
    c->shutdown_write();
    char extra;
    auto n = co_await c->read_some(std::span<char>(&extra, 1));
    REQUIRE(n.has_value());
    CHECK(*n == 0);
    co_return back;
}
} // namespace

TEST_CASE("socket_address parses and rejects", "[runtime][socket]") {
    auto a = socket_address::parse("127.0.0.1:9092");
    REQUIRE(a.has_value());
    CHECK(a->port() == 9092);
    CHECK(a->to_string() == "127.0.0.1:9092");
    auto b = socket_address::parse("[::1]:80");
    REQUIRE(b.has_value());
    CHECK(b->to_string() == "[::1]:80");
    CHECK_FALSE(socket_address::parse("127.0.0.1").has_value());
    CHECK_FALSE(socket_address::parse("127.0.0.1:99999").has_value());
    CHECK_FALSE(socket_address::parse("example.com:80").has_value());
    CHECK_FALSE(socket_address::parse("[::1:80").has_value());
    CHECK_FALSE(socket_address::parse("1.2.3.4:").has_value());
}

TEST_CASE("listen, accept, connect, send and recv on the ring", "[runtime][socket]") {
    auto t = []() -> task<void> {
        auto l = tcp_listener::listen(*socket_address::parse("127.0.0.1:0"));
        REQUIRE(l.has_value());
        auto addr = l->local_address();
        CHECK(addr.port() != 0);
        std::string payload(300000, 'x');
        for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
        auto [server_got, client_got] = co_await when_all(echo_server_once(&*l), client_roundtrip(addr, payload));
        CHECK(server_got == payload);
        CHECK(client_got == payload);
    };
    run_task(t());
}

TEST_CASE("connect to a closed port fails with connection refused", "[runtime][socket]") {
    auto t = []() -> task<void> {
        socket_address addr;
        {
            auto l = tcp_listener::listen(*socket_address::parse("127.0.0.1:0"));
            addr = l->local_address();
        } // closed again: nothing listens there now
        auto c = co_await tcp_stream::connect(addr);
        REQUIRE_FALSE(c.has_value());
        CHECK(c.error() == std::error_code(ECONNREFUSED, std::system_category()));
    };
    run_task(t());
}

TEST_CASE("a pending accept and recv are cancelled by their stop tokens", "[runtime][socket]") {
    auto t = []() -> task<void> {
        auto l = tcp_listener::listen(*socket_address::parse("127.0.0.1:0"));
        REQUIRE(l.has_value());
        std::stop_source src;
        auto stopper = [](std::stop_source* s) -> task<void> {
            (void)co_await sleep(5ms);
            s->request_stop();
        };
        auto [acc, _] = co_await when_all(l->accept(src.get_token()), stopper(&src));
        REQUIRE_FALSE(acc.has_value());
        CHECK(acc.error() == make_error_code(errc::cancelled));

        // A recv with nothing to read, cancelled mid-flight.
        auto c = co_await tcp_stream::connect(l->local_address());
        REQUIRE(c.has_value());
        auto peer = co_await l->accept();
        REQUIRE(peer.has_value());
        std::stop_source src2;
        char buf[16];
        auto [rd, _2] = co_await when_all(c->read_some(buf, src2.get_token()), stopper(&src2));
        REQUIRE_FALSE(rd.has_value());
        CHECK(rd.error() == make_error_code(errc::cancelled));
        CHECK(reactor::local().ops_in_flight() == 1); // only the reactor's own wakeup read
    };
    run_task(t());
}

TEST_CASE("operations beyond the CQ budget are parked, then all complete", "[runtime][socket]") {
    reactor_config cfg;
    cfg.sq_entries = 4;
    cfg.cq_entries = 8;
    auto r = make_test_reactor(cfg);
    auto t = []() -> task<void> {
        auto l = tcp_listener::listen(*socket_address::parse("127.0.0.1:0"));
        REQUIRE(l.has_value());
        // 40 sleeping connections' reads exceed the 8-entry CQ budget.
        std::vector<tcp_stream> clients, servers;
        for (int i = 0; i < 40; ++i) {
            auto c = co_await tcp_stream::connect(l->local_address());
            REQUIRE(c.has_value());
            auto s = co_await l->accept();
            REQUIRE(s.has_value());
            clients.push_back(std::move(*c));
            servers.push_back(std::move(*s));
        }
        auto reader = [](tcp_stream* s) -> task<std::size_t> {
            char b[8];
            auto n = co_await s->read_some(b);
            co_return n.has_value() ? *n : 0;
        };
        auto writer = [](std::vector<tcp_stream>* cs) -> task<std::size_t> {
            (void)co_await sleep(5ms);
            CHECK(reactor::local().ops_parked() > 0);
            // Plain writes, not ring ops: a ring write would itself be parked behind the
            // reads it is meant to wake (the cap counts long-lived ops; see reactor_config).
            for (auto& c : *cs) CHECK(::write(c.fd(), "hi", 2) == 2);
            co_return 0;
        };
        std::vector<task<std::size_t>> reads;
        for (auto& s : servers) reads.push_back(reader(&s));
        auto [got, _] = co_await when_all(when_all(std::move(reads)), writer(&clients));
        for (auto n : got) CHECK(n == 2);
        CHECK(reactor::local().ops_parked() == 0);
    };
    r->run_until_complete(t());
}
