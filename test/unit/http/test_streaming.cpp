// http::client's streaming mode (request::body_sink) against the in-process test server.
#include "run_task.hpp"
#include "test_server.hpp"

#include <skiff/http/client.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>
#include <curl/curl.h>

#include <chrono>
#include <exception>
#include <functional>
#include <stop_token>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace skiff;
using runtime::task;
using test::http_test_server;
using http_result = result<http::response, http::transport_error>;

namespace {

using scenario = task<void> (*)(http_test_server&);

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

// What a sink saw: every piece, in order.
struct pieces {
    std::vector<std::string> got;
    std::string joined() const {
        std::string s;
        for (const auto& p : got) s += p;
        return s;
    }
};

http::request streaming(const http_test_server& srv, std::string_view path, pieces& into) {
    http::request r;
    r.url = srv.url(path);
    r.body_sink = [&into](std::string_view piece) {
        into.got.emplace_back(piece);
        return true;
    };
    return r;
}

task<http_result> fetch(http::client& c, http::request req, std::stop_token st = {}) {
    auto sending = c.send(std::move(req), std::move(st));
    co_return co_await std::move(sending);
}

task<void> chunks_reach_the_sink_as_they_arrive(http_test_server& srv) {
    // A limit far below the streamed size: it bounds collected bodies, not streamed ones.
    http::client_config cfg;
    cfg.max_response_bytes = 8;
    http::client c(cfg);
    pieces p;
    auto sending = fetch(c, streaming(srv, "/chunked/5", p));
    auto r = co_await std::move(sending);
    REQUIRE(r);
    CHECK(r->status == 200);
    CHECK(r->body.empty());
    CHECK(p.joined() == "line 0\nline 1\nline 2\nline 3\nline 4\n");
    // Written 5 ms apart: curl hands them over separately, not as one body at the end.
    CHECK(p.got.size() >= 2);
}

task<void> error_bodies_are_collected(http_test_server& srv) {
    http::client c;
    pieces p;
    auto sending = fetch(c, streaming(srv, "/status/503", p));
    auto r = co_await std::move(sending);
    REQUIRE(r);
    CHECK(r->status == 503);
    CHECK(r->body == "status 503");
    CHECK(p.got.empty());
}

task<void> a_refusing_sink_aborts(http_test_server& srv) {
    http::client c;
    int calls = 0;
    http::request req;
    req.url = srv.url("/chunked/5");
    req.body_sink = [&calls](std::string_view) { return ++calls < 2; };
    auto sending = fetch(c, std::move(req));
    auto r = co_await std::move(sending);
    REQUIRE_FALSE(r);
    CHECK(r.error().curl_code == CURLE_WRITE_ERROR);
    CHECK_FALSE(r.error().cancelled);
    CHECK(calls == 2);
}

task<void> stop_when_seen(const pieces& p, std::stop_source& src, bool& stayed_open) {
    while (p.got.empty()) {
        auto nap = runtime::sleep(2ms);
        (void)co_await nap;
    }
    // Outlive a would-be deadline: timeout 0 must mean "none", not "1 ms".
    auto nap = runtime::sleep(100ms);
    (void)co_await nap;
    stayed_open = true;
    src.request_stop();
}

task<void> an_endless_stream_lasts_until_cancelled(http_test_server& srv) {
    http::client c;
    pieces p;
    auto req = streaming(srv, "/chunked-hang", p);
    req.timeout = 0ms;
    std::stop_source src;
    bool stayed_open = false;
    auto sending = fetch(c, std::move(req), src.get_token());
    auto stopper = stop_when_seen(p, src, stayed_open);
    auto both = runtime::when_all(std::move(sending), std::move(stopper));
    auto results = co_await std::move(both);
    auto& r = std::get<0>(results);
    REQUIRE_FALSE(r);
    CHECK(r.error().cancelled);
    CHECK(stayed_open);
    CHECK(p.joined() == "line 0\n");
    CHECK(c.stats().in_flight == 0);
}

} // namespace

TEST_CASE("a streamed body reaches the sink piece by piece", "[http][stream]") {
    run_scenario(chunks_reach_the_sink_as_they_arrive);
}
TEST_CASE("a streaming request collects a non-2xx body as usual", "[http][stream]") {
    run_scenario(error_bodies_are_collected);
}
TEST_CASE("a sink returning false aborts the transfer", "[http][stream]") { run_scenario(a_refusing_sink_aborts); }
TEST_CASE("a stream with timeout 0 lasts until cancelled", "[http][stream]") {
    run_scenario(an_endless_stream_lasts_until_cancelled);
}
