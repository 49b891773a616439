// The harness of the pgwire server tests: a fresh server over the toy backend (test_backend.hpp)
// per test, driven by a raw-socket client coroutine (wire_client.hpp).
#pragma once

#include "run_task.hpp"
#include "test_backend.hpp"
#include "wire_client.hpp"

#include <skiff/pgwire/server.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <exception>

namespace skiff::test::pgwire_env {

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using namespace std::string_literals;
using skiff::test::toy_backend;
using skiff::test::wire_client;
using skiff::test::wire_msg;
using skiff::test::types_of;
using skiff::test::error_field;

struct env {
    socket_address addr;
    pgwire::server* srv = nullptr;
    toy_backend* backend = nullptr;
    std::stop_source* stop = nullptr;
};

using client_fn = task<void> (*)(env*);

inline task<void> drive(client_fn fn, env* e, std::exception_ptr* failed) {
    try {
        co_await fn(e);
    } catch (...) {
        *failed = std::current_exception();
    }
    e->stop->request_stop();
}

// Serves on a fresh server until `fn` returns, then stops the server and waits for it to end.
inline task<void> with_server(pgwire::server_config cfg, client_fn fn) {
    toy_backend b;
    cfg.addr = "127.0.0.1:0";
    auto created = pgwire::server::create(std::move(cfg), b);
    REQUIRE(created.has_value());
    auto srv = std::move(*created);
    std::stop_source stop;
    env e{srv->local_address(), srv.get(), &b, &stop};
    std::exception_ptr failed;
    auto serving = srv->serve(stop.get_token());
    auto driving = drive(fn, &e, &failed);
    co_await when_all(std::move(serving), std::move(driving));
    CHECK(srv->stats().connections_open == 0);
    if (failed) std::rethrow_exception(failed);
}

inline void run(client_fn fn, pgwire::server_config cfg = {}) { run_task(with_server(std::move(cfg), fn)); }

// Polls `cond` (a lambda capturing pointers only: trivially destructible, safe in co_await).
template <typename Cond>
task<void> until(Cond cond) {
    for (int i = 0; i < 1000 && !cond(); ++i) (void)co_await sleep(5ms);
}

// Sends `bytes` and reads up to ReadyForQuery.
inline task<std::vector<wire_msg>> roundtrip(wire_client& c, std::string bytes) {
    bool sent = co_await c.send(std::move(bytes));
    REQUIRE(sent);
    auto msgs = co_await c.read_until('Z');
    co_return msgs;
}

inline task<std::vector<wire_msg>> query(wire_client& c, const char* sql) {
    std::string q = test::query_bytes(sql);
    auto msgs = co_await roundtrip(c, std::move(q));
    co_return msgs;
}

inline task<std::vector<wire_msg>> sync(wire_client& c) {
    std::string s = test::sync_bytes();
    auto msgs = co_await roundtrip(c, std::move(s));
    co_return msgs;
}

// Opens a connection, sends raw bytes, and returns the first message and whether the server
// then closed the connection.
struct refused {
    std::optional<wire_msg> first;
    bool closed = false;
};
inline task<refused> send_raw(socket_address addr, std::string bytes) {
    auto c = co_await wire_client::connect(addr);
    REQUIRE(c.has_value());
    bool sent = co_await c->send(std::move(bytes));
    REQUIRE(sent);
    refused r;
    r.first = co_await c->read_msg(5s);
    r.closed = co_await c->closed_by_server(5s);
    co_return r;
}

} // namespace skiff::test::pgwire_env
