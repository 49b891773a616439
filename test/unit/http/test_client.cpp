// http::client against the in-process test server, both on one reactor.
#include "run_task.hpp"
#include "test_server.hpp"

#include <skiff/http/client.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>
#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

using namespace std::chrono_literals;
using namespace skiff;
using runtime::task;
using test::http_test_server;
using http_result = result<http::response, http::transport_error>;

// `co_await` of a named task only: g++ 12 mishandles temporaries with destructors inside a
// co_await operand (see the style notes), and most calls here build a request temporary.
#define AWAIT(var, expr)            \
    auto var##_task_ = (expr);      \
    auto var = co_await std::move(var##_task_)

namespace {

// ---- scaffolding -------------------------------------------------------------------------

using scenario = task<void> (*)(http_test_server&);

// Runs one scenario against a fresh server and always stops the server afterwards (a
// failed REQUIRE throws through the scenario; the server's gate must still be closed).
task<void> with_server(scenario fn) {
    auto srv = http_test_server::start();
    std::exception_ptr ex;
    try {
        auto body = fn(*srv);
        co_await std::move(body);
    } catch (...) {
        ex = std::current_exception();
    }
    auto stopping = srv->stop();
    co_await std::move(stopping);
    if (ex) std::rethrow_exception(ex);
}

void run_scenario(scenario fn) { runtime::run_task(with_server(fn)); }

http::request get(const http_test_server& srv, std::string_view path) {
    http::request r;
    r.url = srv.url(path);
    return r;
}

http::request with_body(const http_test_server& srv, std::string method, std::string_view path,
                        const std::string& body) {
    http::request r;
    r.method = std::move(method);
    r.url = srv.url(path);
    r.body = std::span<const char>(body.data(), body.size());
    return r;
}

task<http_result> fetch(http::client& c, http::request req, std::stop_token st = {}) {
    auto sending = c.send(std::move(req), std::move(st));
    co_return co_await std::move(sending);
}

// Polls `pred` every few milliseconds until it holds or `max` passes.
task<bool> wait_until(std::function<bool()> pred, std::chrono::milliseconds max) {
    auto& r = runtime::reactor::local();
    const auto deadline = r.now() + max;
    while (!pred()) {
        if (r.now() >= deadline) co_return false;
        auto nap = runtime::sleep(2ms);
        auto slept = co_await nap;
        (void)slept;
    }
    co_return true;
}

// Requests a stop once the server has received `hangs_before + 1` /hang requests.
task<void> stop_when_hanging(http_test_server& srv, int hangs_before, std::stop_source& src) {
    auto waiting = wait_until([&srv, hangs_before] { return srv.stats.hangs > hangs_before; }, 5000ms);
    const bool seen = co_await std::move(waiting);
    CHECK(seen);
    src.request_stop();
}

task<void> stop_after(std::chrono::milliseconds d, std::stop_source& src) {
    auto nap = runtime::sleep(d);
    auto slept = co_await nap;
    (void)slept;
    src.request_stop();
}

std::chrono::milliseconds elapsed_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
}

bool has_uppercase(std::string_view s) {
    for (char c : s)
        if (c >= 'A' && c <= 'Z') return true;
    return false;
}

// A port nobody listens on: bind an ephemeral one, then close it.
std::uint16_t closed_port() {
    auto addr = runtime::socket_address::parse("127.0.0.1:0");
    auto l = runtime::tcp_listener::listen(*addr);
    REQUIRE(l);
    const auto port = l->local_address().port();
    l->close();
    return port;
}

// ---- scenarios ---------------------------------------------------------------------------

task<void> get_round_trip(http_test_server& srv) {
    http::client c;
    AWAIT(r, fetch(c, get(srv, "/hello")));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == "hello world");
    REQUIRE(r->header("content-length"));
    CHECK(*r->header("content-length") == "11");
    CHECK(*r->header("content-type") == "text/plain");
    CHECK(c.stats().requests == 1);
    CHECK(c.stats().in_flight == 0);
    CHECK(c.stats().connections_opened == 1);
    CHECK(c.stats().transport_errors == 0);
}

task<void> put_one_mib_echo(http_test_server& srv) {
    http::client c;
    const std::string body = test::pattern(1 << 20);
    AWAIT(r, fetch(c, with_body(srv, "PUT", "/echo", body)));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(*r->header("x-method") == "PUT");
    CHECK(*r->header("x-content-length") == std::to_string(body.size()));
    CHECK(*r->header("x-expect") == "none"); // no 100-continue round trip
    REQUIRE(r->body.size() == body.size());
    CHECK((r->body == body));
}

task<void> put_large_without_expect(http_test_server& srv) {
    // curl would add "Expect: 100-continue" above 1 MiB; the client suppresses it.
    http::client c;
    const std::string body = test::pattern(3 << 20);
    AWAIT(r, fetch(c, with_body(srv, "PUT", "/echo", body)));
    REQUIRE(r);
    CHECK(*r->header("x-expect") == "none");
    CHECK((r->body == body));
}

task<void> put_empty_body(http_test_server& srv) {
    http::client c;
    const std::string body;
    AWAIT(r, fetch(c, with_body(srv, "PUT", "/echo", body)));
    REQUIRE(r);
    CHECK(*r->header("x-method") == "PUT");
    CHECK(*r->header("x-content-length") == "0");
    CHECK(r->body.empty());
}

task<void> caller_expect_is_honoured(http_test_server& srv) {
    http::client c;
    const std::string body = test::pattern(64 * 1024);
    auto req = with_body(srv, "PUT", "/echo", body);
    req.headers.emplace_back("Expect", "100-continue");
    AWAIT(r, fetch(c, std::move(req)));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(*r->header("x-expect") == "100-continue");
    CHECK((r->body == body));
}

task<void> interim_continue_is_dropped(http_test_server& srv) {
    http::client c;
    AWAIT(r, fetch(c, get(srv, "/continue")));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body == "after continue");
    CHECK(r->header("x-interim") == nullptr);
    CHECK(r->header("x-final") != nullptr);
}

task<void> head_request(http_test_server& srv) {
    // The limit applies to bodies only: HEAD of a large object must succeed.
    http::client_config cfg;
    cfg.max_response_bytes = 1000;
    http::client c(cfg);
    auto req = get(srv, "/large/5000");
    req.method = "HEAD";
    AWAIT(r, fetch(c, std::move(req)));
    REQUIRE(r);
    CHECK(r->status == 200);
    REQUIRE(r->header("content-length"));
    CHECK(*r->header("content-length") == "5000");
    CHECK(r->body.empty());
    // The connection stays usable after a bodiless response.
    AWAIT(again, fetch(c, get(srv, "/hello")));
    REQUIRE(again);
    CHECK(again->body == "hello world");
    CHECK(srv.stats.accepts == 1);
}

task<void> post_and_delete(http_test_server& srv) {
    http::client c;
    const std::string body = "post body";
    AWAIT(p, fetch(c, with_body(srv, "POST", "/echo", body)));
    REQUIRE(p);
    CHECK(*p->header("x-method") == "POST");
    CHECK(p->body == body);

    const std::string none;
    AWAIT(pe, fetch(c, with_body(srv, "POST", "/echo", none)));
    REQUIRE(pe);
    CHECK(*pe->header("x-method") == "POST");
    CHECK(*pe->header("x-content-length") == "0");

    auto del = get(srv, "/echo");
    del.method = "DELETE";
    AWAIT(d, fetch(c, std::move(del)));
    REQUIRE(d);
    CHECK(*d->header("x-method") == "DELETE");
    CHECK(d->body.empty());
}

task<void> request_headers_sent_as_given(http_test_server& srv) {
    http::client c;
    auto req = get(srv, "/reqheaders");
    req.headers = {{"X-Custom", "Value 1"}, {"x-amz-date", "20240101T000000Z"}, {"X-Empty", ""}};
    AWAIT(r, fetch(c, std::move(req)));
    REQUIRE(r);
    const std::string& head = r->body;
    CHECK(head.find("GET /reqheaders HTTP/1.1\r\n") == 0);
    CHECK(head.find("\r\nX-Custom: Value 1\r\n") != std::string::npos);
    CHECK(head.find("\r\nx-amz-date: 20240101T000000Z\r\n") != std::string::npos);
    CHECK(head.find("\r\nX-Empty:") != std::string::npos);
    CHECK(head.find("X-Custom") < head.find("x-amz-date")); // in the given order
    CHECK(head.find("Expect") == std::string::npos);
    CHECK(head.find("Accept-Encoding") == std::string::npos); // bodies are never decoded

    // A POST without a Content-Type gets none (curl's form default is suppressed).
    const std::string body = "x";
    AWAIT(p, fetch(c, with_body(srv, "POST", "/reqheaders", body)));
    REQUIRE(p);
    CHECK(p->body.find("Content-Type") == std::string::npos);
}

task<void> path_sent_as_is(http_test_server& srv) {
    // S3 keys may contain "/../": the path must not be normalised (it is signed as is).
    http::client c;
    AWAIT(r, fetch(c, get(srv, "/n/a/../b/./c")));
    REQUIRE(r);
    CHECK(r->body == "/n/a/../b/./c");
}

task<void> non_2xx_is_a_response(http_test_server& srv) {
    http::client c;
    AWAIT(nf, fetch(c, get(srv, "/status/404")));
    REQUIRE(nf);
    CHECK(nf->status == 404);
    CHECK(nf->body == "status 404");
    AWAIT(busy, fetch(c, get(srv, "/status/503")));
    REQUIRE(busy);
    CHECK(busy->status == 503);
    CHECK(c.stats().transport_errors == 0);
}

task<void> many_concurrent(http_test_server& srv) {
    http::client c;
    std::vector<task<http_result>> tasks;
    for (int i = 0; i < 64; ++i) tasks.push_back(fetch(c, get(srv, fmt::format("/n/{}", i))));
    auto all = runtime::when_all(std::move(tasks));
    auto results = co_await std::move(all);
    REQUIRE(results.size() == 64);
    int ok = 0;
    for (int i = 0; i < 64; ++i) {
        auto& r = results[static_cast<std::size_t>(i)];
        if (r && r->status == 200 && r->body == fmt::format("/n/{}", i)) ++ok;
        else if (!r) FAIL_CHECK("request " << i << " failed: " << r.error().message);
    }
    CHECK(ok == 64);
    CHECK(c.stats().requests == 64);
    CHECK(c.stats().in_flight == 0);
    CHECK(c.stats().transport_errors == 0);
    CHECK(static_cast<int>(c.stats().connections_opened) == srv.stats.accepts);
}

task<void> concurrent_requests_overlap(http_test_server& srv) {
    // 32 requests that each take 100 ms server-side finish together, not one after another.
    http::client c;
    std::vector<task<http_result>> tasks;
    for (int i = 0; i < 32; ++i) tasks.push_back(fetch(c, get(srv, "/delay/100")));
    const auto t0 = std::chrono::steady_clock::now();
    auto all = runtime::when_all(std::move(tasks));
    auto results = co_await std::move(all);
    const auto took = elapsed_since(t0);
    for (auto& r : results) {
        REQUIRE(r);
        CHECK(r->body == "late");
    }
    CHECK(took < 1500ms);
}

task<void> host_connection_limit_queues(http_test_server& srv) {
    http::client_config cfg;
    cfg.max_host_connections = 2;
    http::client c(cfg);
    std::vector<task<http_result>> tasks;
    for (int i = 0; i < 12; ++i) tasks.push_back(fetch(c, get(srv, "/delay/10")));
    auto all = runtime::when_all(std::move(tasks));
    auto results = co_await std::move(all);
    for (auto& r : results) REQUIRE(r);
    CHECK(srv.stats.accepts <= 2);
    CHECK(c.stats().connections_opened <= 2);
}

task<void> keep_alive_reuses_one_connection(http_test_server& srv) {
    http::client c;
    const std::string body = "small body";
    for (int i = 0; i < 20; ++i) {
        auto req = (i % 2 == 0) ? get(srv, "/hello") : with_body(srv, "PUT", "/echo", body);
        AWAIT(r, fetch(c, std::move(req)));
        REQUIRE(r);
        CHECK(r->status == 200);
    }
    CHECK(srv.stats.accepts == 1);
    CHECK(srv.stats.requests == 20);
    CHECK(c.stats().connections_opened == 1);
    CHECK(c.stats().requests == 20);
}

task<void> server_closing_connections(http_test_server& srv) {
    http::client c;
    AWAIT(a, fetch(c, get(srv, "/close"))); // announced with Connection: close
    REQUIRE(a);
    CHECK(a->body == "bye");
    AWAIT(b, fetch(c, get(srv, "/quiet-close"))); // silently closed after the answer
    REQUIRE(b);
    CHECK(b->body == "bye");
    // Give the FIN time to arrive, so curl finds the pooled connection dead.
    AWAIT(closed, wait_until([&srv] { return srv.stats.accepts == 2; }, 1000ms));
    CHECK(closed);
    auto nap = runtime::sleep(20ms);
    (void)co_await nap;
    const std::string body = test::pattern(100000);
    AWAIT(d, fetch(c, with_body(srv, "PUT", "/echo", body)));
    REQUIRE(d);
    CHECK((d->body == body));
    CHECK(srv.stats.accepts == 3);
    CHECK(c.stats().connections_opened == 3);
}

task<void> connection_refused(http_test_server&) {
    http::client c;
    const auto port = closed_port();
    http::request req;
    req.url = fmt::format("http://127.0.0.1:{}/x", port);
    AWAIT(r, fetch(c, std::move(req)));
    REQUIRE_FALSE(r);
    CHECK(r.error().curl_code == CURLE_COULDNT_CONNECT);
    CHECK_FALSE(r.error().cancelled);
    CHECK_FALSE(r.error().timed_out);
    INFO("message: " << r.error().message);
    CHECK(r.error().message.find(std::to_string(port)) != std::string::npos);
    CHECK(c.stats().transport_errors == 1);
    CHECK(c.stats().in_flight == 0);
}

task<void> hung_server_times_out(http_test_server& srv) {
    http::client c;
    auto req = get(srv, "/hang");
    req.timeout = 300ms;
    const auto t0 = std::chrono::steady_clock::now();
    AWAIT(r, fetch(c, std::move(req)));
    const auto took = elapsed_since(t0);
    REQUIRE_FALSE(r);
    CHECK(r.error().timed_out);
    CHECK(r.error().curl_code == CURLE_OPERATION_TIMEDOUT);
    CHECK_FALSE(r.error().cancelled);
    CHECK(took >= 250ms);
    CHECK(took < 2000ms);
    // curl closes the connection it gave up on.
    AWAIT(closed, wait_until([&srv] { return srv.stats.peer_closes == 1; }, 2000ms));
    CHECK(closed);
}

task<void> cancel_mid_request(http_test_server& srv) {
    http::client c;
    std::stop_source src;
    auto sending = fetch(c, get(srv, "/hang"), src.get_token());
    auto stopper = stop_when_hanging(srv, 0, src);
    const auto t0 = std::chrono::steady_clock::now();
    auto both = runtime::when_all(std::move(sending), std::move(stopper));
    auto results = co_await std::move(both);
    auto& r = std::get<0>(results);
    REQUIRE_FALSE(r);
    CHECK(r.error().cancelled);
    CHECK_FALSE(r.error().timed_out);
    CHECK(r.error().curl_code == CURLE_ABORTED_BY_CALLBACK);
    CHECK(elapsed_since(t0) < 5000ms);
    CHECK(c.stats().cancelled == 1);
    CHECK(c.stats().in_flight == 0);
    // The half-used connection is closed, and the server sees it.
    AWAIT(closed, wait_until([&srv] { return srv.stats.peer_closes == 1; }, 2000ms));
    CHECK(closed);
    // The client is still healthy.
    AWAIT(after, fetch(c, get(srv, "/hello")));
    REQUIRE(after);
    CHECK(after->body == "hello world");
}

task<void> cancel_many_in_flight(http_test_server& srv) {
    http::client c;
    std::stop_source src;
    std::vector<task<http_result>> tasks;
    for (int i = 0; i < 16; ++i) tasks.push_back(fetch(c, get(srv, "/hang"), src.get_token()));
    auto all = runtime::when_all(std::move(tasks));
    auto stopper = stop_when_hanging(srv, 15, src);
    auto both = runtime::when_all(std::move(all), std::move(stopper));
    auto results = co_await std::move(both);
    for (auto& r : std::get<0>(results)) {
        REQUIRE_FALSE(r);
        CHECK(r.error().cancelled);
    }
    CHECK(c.stats().cancelled == 16);
    AWAIT(closed, wait_until([&srv] { return srv.stats.peer_closes == 16; }, 2000ms));
    CHECK(closed);
}

task<void> deadline_scope_cancels(http_test_server& srv) {
    // A caller-side deadline arrives as a stop: the client reports cancelled, and the
    // deadline_scope tells the caller it expired.
    http::client c;
    runtime::deadline_scope scope(runtime::reactor::local().now() + 100ms);
    AWAIT(r, fetch(c, get(srv, "/hang"), scope.token()));
    REQUIRE_FALSE(r);
    CHECK(r.error().cancelled);
    CHECK(scope.expired());
}

task<void> already_stopped_token(http_test_server& srv) {
    http::client c;
    std::stop_source src;
    src.request_stop();
    AWAIT(r, fetch(c, get(srv, "/hello"), src.get_token()));
    REQUIRE_FALSE(r);
    CHECK(r.error().cancelled);
    CHECK(c.stats().cancelled == 1);
    CHECK(c.stats().connections_opened == 0);
    auto nap = runtime::sleep(20ms);
    (void)co_await nap;
    CHECK(srv.stats.accepts == 0);
}

task<void> cancel_races_completion(http_test_server& srv) {
    // Stops land before, during and after the exchange; every outcome is either a real
    // response or cancelled, never anything else (and never a half-response as success).
    http::client c;
    int ok = 0, cancelled = 0;
    for (int i = 0; i < 40; ++i) {
        std::stop_source src;
        auto sending = fetch(c, get(srv, "/delay/3"), src.get_token());
        auto stopper = stop_after(std::chrono::milliseconds(i % 8), src);
        auto both = runtime::when_all(std::move(sending), std::move(stopper));
        auto results = co_await std::move(both);
        auto& r = std::get<0>(results);
        if (r) {
            CHECK(r->status == 200);
            CHECK(r->body == "late");
            ++ok;
        } else {
            CHECK(r.error().cancelled);
            ++cancelled;
        }
    }
    CHECK(ok + cancelled == 40);
    CHECK(c.stats().in_flight == 0);
    CHECK(static_cast<int>(c.stats().cancelled) == cancelled);
}

task<void> server_closes_mid_response(http_test_server& srv) {
    http::client c;
    AWAIT(r, fetch(c, get(srv, "/truncate")));
    REQUIRE_FALSE(r);
    CHECK(r.error().curl_code == CURLE_PARTIAL_FILE);
    CHECK_FALSE(r.error().cancelled);
    AWAIT(d, fetch(c, get(srv, "/drop")));
    REQUIRE_FALSE(d);
    CHECK(d.error().curl_code == CURLE_GOT_NOTHING);
    CHECK(c.stats().transport_errors == 2);
}

task<void> body_ended_by_close(http_test_server& srv) {
    http::client c;
    AWAIT(r, fetch(c, get(srv, "/stream/200000")));
    REQUIRE(r);
    CHECK(r->header("content-length") == nullptr);
    CHECK((r->body == test::pattern(200000)));
}

task<void> large_download(http_test_server& srv) {
    http::client c;
    AWAIT(r, fetch(c, get(srv, "/large/8388608")));
    REQUIRE(r);
    CHECK(r->body.size() == 8388608);
    CHECK((r->body == test::pattern(8388608)));
}

task<void> header_parsing(http_test_server& srv) {
    http::client c;
    AWAIT(r, fetch(c, get(srv, "/headers")));
    REQUIRE(r);
    for (const auto& [name, value] : r->headers) CHECK_FALSE(has_uppercase(name));
    CHECK(*r->header("x-amz-request-id") == "req-123");
    CHECK(*r->header("etag") == "\"abc\"");
    CHECK(*r->header("x-spaces") == "padded value");
    CHECK(*r->header("content-type") == "text/plain");
    std::vector<std::string> multi;
    for (const auto& [name, value] : r->headers)
        if (name == "x-multi") multi.push_back(value);
    CHECK(multi == std::vector<std::string>{"one", "two"});
    CHECK(*r->header("x-multi") == "one"); // header() gives the first
    // Arrival order is kept.
    std::vector<std::string> names;
    for (const auto& [name, value] : r->headers) names.push_back(name);
    CHECK(names == std::vector<std::string>{"x-amz-request-id", "x-multi", "etag", "x-multi", "x-spaces",
                                            "content-type", "content-length"});
}

task<void> response_size_limit(http_test_server& srv) {
    http::client_config cfg;
    cfg.max_response_bytes = 1000;
    http::client c(cfg);
    AWAIT(announced, fetch(c, get(srv, "/large/5000"))); // Content-Length too big
    REQUIRE_FALSE(announced);
    CHECK(announced.error().curl_code == CURLE_FILESIZE_EXCEEDED);
    CHECK(announced.error().message.find("1000") != std::string::npos);
    AWAIT(streamed, fetch(c, get(srv, "/stream/5000"))); // no Content-Length
    REQUIRE_FALSE(streamed);
    CHECK(streamed.error().curl_code == CURLE_FILESIZE_EXCEEDED);
    AWAIT(exact, fetch(c, get(srv, "/large/1000")));
    REQUIRE(exact);
    CHECK(exact->body.size() == 1000);
    // A 304's Content-Length describes the resource, not a body: not limited.
    AWAIT(nm, fetch(c, get(srv, "/not-modified")));
    REQUIRE(nm);
    CHECK(nm->status == 304);
    CHECK(nm->body.empty());
    CHECK(c.stats().transport_errors == 2);
}

task<void> destroyed_client_releases_pooled_sockets(http_test_server& srv) {
    {
        http::client c;
        for (int i = 0; i < 3; ++i) {
            AWAIT(r, fetch(c, get(srv, "/hello")));
            REQUIRE(r);
        }
    }
    // Destroying the client closes its pooled connection ...
    AWAIT(closed, wait_until([&srv] { return srv.stats.peer_closes == 1; }, 2000ms));
    CHECK(closed);
    // ... and every poll it left with the ring has completed and been freed.
    AWAIT(freed, wait_until([] { return http::detail::orphaned_sockets() == 0; }, 2000ms));
    CHECK(freed);
}

task<void> expect_timeout_changes_poll_events(http_test_server& srv) {
    // The server never sends the 100 the client asked for: curl waits for it (a poll for
    // input), then its 1 s expect timer switches it to sending (output) while that poll is
    // still armed, so the stale poll is cancelled and re-armed with the new events.
    http::client c;
    const std::string body = test::pattern(200000);
    auto req = with_body(srv, "PUT", "/ignore-expect", body);
    req.headers.emplace_back("Expect", "100-continue");
    AWAIT(r, fetch(c, std::move(req)));
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK((r->body == body));
}

task<void> stop_then_destroy(http_test_server& srv, std::stop_source& src, std::unique_ptr<http::client>& c) {
    AWAIT(seen, wait_until([&srv] { return srv.stats.hangs == 1; }, 5000ms));
    REQUIRE(seen);
    src.request_stop();
    // The transfer is out of curl, but the cancel of its socket's poll is still with the
    // kernel: destroying the client now must leave that poll's state alive until its CQE.
    c.reset();
    CHECK(http::detail::orphaned_sockets() == 1);
}

task<void> destroy_right_after_cancel(http_test_server& srv) {
    auto c = std::make_unique<http::client>();
    std::stop_source src;
    auto sending = fetch(*c, get(srv, "/hang"), src.get_token());
    auto stopper = stop_then_destroy(srv, src, c);
    auto both = runtime::when_all(std::move(sending), std::move(stopper));
    auto results = co_await std::move(both);
    auto& r = std::get<0>(results);
    REQUIRE_FALSE(r);
    CHECK(r.error().cancelled);
    AWAIT(freed, wait_until([] { return http::detail::orphaned_sockets() == 0; }, 2000ms));
    CHECK(freed);
    AWAIT(closed, wait_until([&srv] { return srv.stats.peer_closes == 1; }, 2000ms));
    CHECK(closed);
}

// One request of a given kind, stopped after `stop_ms` (never when negative). Checks that
// the outcome is the right one for the kind, or cancelled; returns 1 when it was cancelled.
task<int> mixed_one(http::client& c, http_test_server& srv, int kind, int stop_ms) {
    const std::string body = test::pattern(64 * 1024 + static_cast<std::size_t>(kind));
    http::request req;
    switch (kind) {
    case 0: req = get(srv, "/hello"); break;
    case 1: req = with_body(srv, "PUT", "/echo", body); break;
    case 2: req = get(srv, "/truncate"); break;
    case 3: req = get(srv, "/drop"); break;
    case 4: req = get(srv, "/delay/4"); break;
    default: req = get(srv, "/large/300000"); break;
    }
    std::stop_source src;
    auto sending = fetch(c, std::move(req), src.get_token());
    auto stopper = stop_after(std::chrono::milliseconds(std::max(stop_ms, 0)), src);
    http_result r = http::transport_error{};
    if (stop_ms < 0) {
        auto got = co_await std::move(sending);
        r = std::move(got);
    } else {
        auto both = runtime::when_all(std::move(sending), std::move(stopper));
        auto results = co_await std::move(both);
        r = std::move(std::get<0>(results));
    }
    if (!r && r.error().cancelled) {
        CHECK(stop_ms >= 0);
        co_return 1;
    }
    INFO("kind " << kind << " stop " << stop_ms << ": " << (r ? std::string("ok") : r.error().message));
    switch (kind) {
    case 0: CHECK((r && r->body == "hello world")); break;
    case 1: CHECK((r && r->body == body)); break;
    case 2: CHECK((!r && r.error().curl_code == CURLE_PARTIAL_FILE)); break;
    case 3: CHECK((!r && r.error().curl_code == CURLE_GOT_NOTHING)); break;
    case 4: CHECK((r && r->body == "late")); break;
    default: CHECK((r && r->body == test::pattern(300000))); break;
    }
    co_return 0;
}

task<void> mixed_stress(http_test_server& srv) {
    http::client c;
    std::uint32_t seed = 12345;
    auto next = [&seed] {
        seed = seed * 1664525u + 1013904223u;
        return static_cast<int>(seed >> 16);
    };
    int cancelled = 0, total = 0;
    for (int round = 0; round < 4; ++round) {
        std::vector<task<int>> tasks;
        for (int i = 0; i < 48; ++i) {
            const int kind = next() % 6;
            const int stop_ms = (next() % 3 == 0) ? -1 : next() % 10;
            tasks.push_back(mixed_one(c, srv, kind, stop_ms));
        }
        auto all = runtime::when_all(std::move(tasks));
        auto outcomes = co_await std::move(all);
        for (int o : outcomes) cancelled += o;
        total += 48;
    }
    CHECK(c.stats().requests == static_cast<std::uint64_t>(total));
    CHECK(c.stats().cancelled == static_cast<std::uint64_t>(cancelled));
    CHECK(c.stats().in_flight == 0);
    // Still healthy afterwards.
    AWAIT(r, fetch(c, get(srv, "/hello")));
    REQUIRE(r);
    CHECK(r->body == "hello world");
}

// This machine's host name, if it resolves to 127.0.0.1 only (where the test server listens).
std::optional<std::string> loopback_host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return std::nullopt;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(name, nullptr, &hints, &res) != 0 || !res) return std::nullopt;
    bool all_loopback = true;
    for (auto* a = res; a; a = a->ai_next) {
        const auto* v4 = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
        if (a->ai_family != AF_INET || v4->sin_addr.s_addr != htonl(INADDR_LOOPBACK)) all_loopback = false;
    }
    ::freeaddrinfo(res);
    if (!all_loopback) return std::nullopt;
    return std::string(name);
}

task<void> host_name_resolution(http_test_server& srv) {
    // A name (not "localhost", which curl answers itself) goes through curl's resolver,
    // whose completion is one more socket or timer event for the loop to deliver.
    const auto host = loopback_host_name();
    if (!host) {
        WARN("skipped: this machine's host name does not resolve to 127.0.0.1 only");
        co_return;
    }
    http::client c;
    http::request req;
    req.url = fmt::format("http://{}:{}/hello", *host, srv.port());
    for (int i = 0; i < 3; ++i) {
        AWAIT(r, fetch(c, req));
        REQUIRE(r);
        CHECK(r->body == "hello world");
    }
    CHECK(srv.stats.accepts == 1);
}

task<void> two_clients_one_reactor(http_test_server& srv) {
    http::client a;
    http::client b;
    std::vector<task<http_result>> tasks;
    for (int i = 0; i < 8; ++i) tasks.push_back(fetch(i % 2 ? a : b, get(srv, fmt::format("/n/{}", i))));
    auto all = runtime::when_all(std::move(tasks));
    auto results = co_await std::move(all);
    for (int i = 0; i < 8; ++i) {
        auto& r = results[static_cast<std::size_t>(i)];
        REQUIRE(r);
        CHECK(r->body == fmt::format("/n/{}", i));
    }
    CHECK(a.stats().requests == 4);
    CHECK(b.stats().requests == 4);
}

} // namespace

TEST_CASE("GET returns status, headers and body", "[http]") { run_scenario(get_round_trip); }
TEST_CASE("PUT of 1 MiB is echoed byte-exact without Expect", "[http]") { run_scenario(put_one_mib_echo); }
TEST_CASE("large PUT does not wait for 100-continue", "[http]") { run_scenario(put_large_without_expect); }
TEST_CASE("PUT with an empty body sends Content-Length 0", "[http]") { run_scenario(put_empty_body); }
TEST_CASE("a caller's Expect: 100-continue is honoured", "[http]") { run_scenario(caller_expect_is_honoured); }
TEST_CASE("headers of an interim 100 response are dropped", "[http]") { run_scenario(interim_continue_is_dropped); }
TEST_CASE("HEAD returns headers and no body", "[http]") { run_scenario(head_request); }
TEST_CASE("POST and DELETE", "[http]") { run_scenario(post_and_delete); }
TEST_CASE("request headers are sent as given", "[http]") { run_scenario(request_headers_sent_as_given); }
TEST_CASE("the URL path is sent as is", "[http]") { run_scenario(path_sent_as_is); }
TEST_CASE("non-2xx statuses are responses, not transport errors", "[http]") { run_scenario(non_2xx_is_a_response); }
TEST_CASE("64 concurrent requests all succeed", "[http]") { run_scenario(many_concurrent); }
TEST_CASE("concurrent requests run in parallel", "[http]") { run_scenario(concurrent_requests_overlap); }
TEST_CASE("max_host_connections queues requests", "[http]") { run_scenario(host_connection_limit_queues); }
TEST_CASE("20 sequential requests reuse one connection", "[http]") { run_scenario(keep_alive_reuses_one_connection); }
TEST_CASE("connections closed by the server are replaced", "[http]") { run_scenario(server_closing_connections); }
TEST_CASE("connection refused is a transport error", "[http]") { run_scenario(connection_refused); }
TEST_CASE("a hung server times out at the request deadline", "[http]") { run_scenario(hung_server_times_out); }
TEST_CASE("cancellation mid-request", "[http]") { run_scenario(cancel_mid_request); }
TEST_CASE("cancelling many requests at once", "[http]") { run_scenario(cancel_many_in_flight); }
TEST_CASE("a deadline_scope token cancels", "[http]") { run_scenario(deadline_scope_cancels); }
TEST_CASE("an already-stopped token cancels without network traffic", "[http]") {
    run_scenario(already_stopped_token);
}
TEST_CASE("cancellation racing completion is never a false success", "[http]") {
    run_scenario(cancel_races_completion);
}
TEST_CASE("a server closing mid-response is a transport error", "[http]") {
    run_scenario(server_closes_mid_response);
}
TEST_CASE("a body ended by connection close", "[http]") { run_scenario(body_ended_by_close); }
TEST_CASE("an 8 MiB download", "[http]") { run_scenario(large_download); }
TEST_CASE("response headers: lowercase names, repeats, trimming, order", "[http]") {
    run_scenario(header_parsing);
}
TEST_CASE("max_response_bytes bounds the body", "[http]") { run_scenario(response_size_limit); }
TEST_CASE("a destroyed client releases its pooled sockets", "[http]") {
    run_scenario(destroyed_client_releases_pooled_sockets);
}
TEST_CASE("a poll with stale events is cancelled and re-armed", "[http]") {
    run_scenario(expect_timeout_changes_poll_events);
}
TEST_CASE("a client destroyed right after a cancel orphans its pending poll", "[http]") {
    run_scenario(destroy_right_after_cancel);
}
TEST_CASE("mixed requests with random stops", "[http]") { run_scenario(mixed_stress); }
TEST_CASE("a host name goes through curl's resolver", "[http]") { run_scenario(host_name_resolution); }
TEST_CASE("two clients on one reactor", "[http]") { run_scenario(two_clients_one_reactor); }
