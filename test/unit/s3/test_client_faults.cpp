// The S3 client against the in-process fake S3: retries, deadlines, cancellation and
// classification. Nothing here may report a failed request as a success.
#include "fake_s3.hpp"
#include "fake_s3_client.hpp"
#include "run_task.hpp"

#include <skiff/core/base64.hpp>
#include <skiff/core/crc32c.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/s3/client.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using skiff::test::fake_s3;
using skiff::test::fault_action;
using skiff::test::fault_rule;
using skiff::test::fault_when;
using skiff::test::make_client;

namespace {

s3::client_config config_for(const fake_s3& srv) { return skiff::test::fake_s3_client_config(srv); }

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

} // namespace

TEST_CASE("put/get/head/delete/list round trip against the fake", "[s3][client]") {
    fake_s3 srv;
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body(100000, 'k');
        s3::put_options popts;
        popts.crc32c = skiff::crc32c(body);
        auto put = co_await c->put_object("test-bucket", "dir/obj 1", bytes(body), popts);
        INFO((put.has_value() ? std::string() : put.error().message));
        REQUIRE(put.has_value());
        CHECK_FALSE(put->etag.empty());
        CHECK(s->get_object("test-bucket", "dir/obj 1") == body);
        {
            const std::uint32_t v = skiff::crc32c(body);
            const char be[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
            CHECK(s->stat_object("test-bucket", "dir/obj 1")->checksum_crc32c == base64_encode(std::string_view(be, 4)));
        }

        auto got = co_await c->get_object("test-bucket", "dir/obj 1");
        REQUIRE(got.has_value());
        CHECK(got->body == body);
        auto part = co_await c->get_object("test-bucket", "dir/obj 1", s3::byte_range::between(10, 19));
        REQUIRE(part.has_value());
        CHECK(part->body == body.substr(10, 10));
        CHECK(part->object_size == body.size());
        auto tail = co_await c->get_object("test-bucket", "dir/obj 1", s3::byte_range::suffix(4));
        REQUIRE(tail.has_value());
        CHECK(tail->body == "kkkk");

        auto head = co_await c->head_object("test-bucket", "dir/obj 1");
        REQUIRE(head.has_value());
        CHECK(head->size == body.size());

        s3::list_request lreq("dir/");
        auto list = co_await c->list_objects_v2("test-bucket", lreq);
        REQUIRE(list.has_value());
        REQUIRE(list->objects.size() == 1);
        CHECK(list->objects[0].key == "dir/obj 1");

        auto del = co_await c->delete_object("test-bucket", "dir/obj 1");
        CHECK(del.has_value());
        auto missing = co_await c->get_object("test-bucket", "dir/obj 1");
        REQUIRE_FALSE(missing.has_value());
        CHECK(missing.error().code == s3::errc::not_found);
        auto head_missing = co_await c->head_object("test-bucket", "dir/obj 1");
        REQUIRE_FALSE(head_missing.has_value());
        CHECK(head_missing.error().code == s3::errc::not_found);
        // Deleting what is not there is not an error in S3.
        auto done8 = co_await c->delete_object("test-bucket", "dir/obj 1");
        CHECK(done8.has_value());
    };
    run_task(t(&srv));
}

TEST_CASE("keep-alive: sequential requests reuse one connection", "[s3][client]") {
    fake_s3 srv;
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "x";
        for (int i = 0; i < 20; ++i) {
            auto r = co_await c->put_object("test-bucket", "k" + std::to_string(i), bytes(body));
            REQUIRE(r.has_value());
        }
    };
    run_task(t(&srv));
    CHECK(srv.stats().requests == 20);
    CHECK(srv.stats().connections_accepted == 1);
}

TEST_CASE("a burst of SlowDown is retried and counted", "[s3][client][faults]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::status_503_slowdown, .count = 3});
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "payload";
        auto r = co_await c->put_object("test-bucket", "seg.kfs", bytes(body));
        REQUIRE(r.has_value());
        CHECK(c->stats().of(s3::op_kind::put).retries == 3);
        CHECK(c->stats().of(s3::op_kind::put).requests == 4);
    };
    run_task(t(&srv));
    CHECK(srv.get_object("test-bucket", "seg.kfs") == std::string("payload"));
}

TEST_CASE("500s, empty 500s and resets are retried; the final answer is the real one", "[s3][client][faults]") {
    fake_s3 srv;
    srv.add_rule({.method = "GET", .action = fault_action::status_500, .count = 1});
    srv.add_rule({.method = "GET", .action = fault_action::status_500_empty_body, .count = 1});
    srv.add_rule({.method = "GET", .action = fault_action::reset, .count = 1});
    srv.put_object("test-bucket", "obj", "the bytes");
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        auto r = co_await c->get_object("test-bucket", "obj");
        REQUIRE(r.has_value());
        CHECK(r->body == "the bytes");
        // libcurl itself retries a request whose reused connection was reset before any
        // answer, so the reset may not cost the client a retry of its own.
        CHECK(c->stats().of(s3::op_kind::get).retries >= 2);
    };
    run_task(t(&srv));
    CHECK(srv.stats().faults_injected == 3);
}

TEST_CASE("retries give up after max_attempts with a retryable error, never success", "[s3][client][faults]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::status_503_slowdown, .count = -1});
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "never stored";
        auto r = co_await c->put_object("test-bucket", "k", bytes(body));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::retryable);
        CHECK(r.error().attempts == 6);
        CHECK(r.error().s3_code == "SlowDown");
        CHECK(c->stats().of(s3::op_kind::put).failures == 1);
    };
    run_task(t(&srv));
    CHECK_FALSE(srv.has_object("test-bucket", "k"));
}

TEST_CASE("a hung response hits the attempt timeout, is retried, and succeeds", "[s3][client][faults]") {
    fake_s3 srv;
    srv.add_rule({.method = "GET", .action = fault_action::hang, .count = 1});
    srv.put_object("test-bucket", "obj", "data");
    auto t = [](fake_s3* s) -> task<void> {
        auto cfg = config_for(*s);
        cfg.attempt_timeout = 200ms;
        auto c = make_client(cfg);
        auto start = reactor::local().now();
        auto r = co_await c->get_object("test-bucket", "obj");
        REQUIRE(r.has_value());
        CHECK(r->body == "data");
        auto took = reactor::local().now() - start;
        CHECK(took >= 200ms);
        CHECK(took < 5s);
    };
    run_task(t(&srv));
}

TEST_CASE("the operation deadline bounds retries of a hanging server", "[s3][client][faults]") {
    fake_s3 srv;
    srv.add_rule({.method = "GET", .action = fault_action::hang, .count = -1});
    auto t = [](fake_s3* s) -> task<void> {
        auto cfg = config_for(*s);
        cfg.attempt_timeout = 5s;
        cfg.operation_deadline = 300ms;
        auto c = make_client(cfg);
        auto start = reactor::local().now();
        auto r = co_await c->get_object("test-bucket", "obj");
        auto took = reactor::local().now() - start;
        REQUIRE_FALSE(r.has_value());
        // Either the transport timed out at the deadline (retryable, gave up) or the
        // deadline scope fired: both are failures, and both end near 300 ms.
        CHECK((r.error().code == s3::errc::deadline_exceeded || r.error().code == s3::errc::retryable));
        CHECK(took >= 250ms);
        CHECK(took < 3s);
    };
    run_task(t(&srv));
}

TEST_CASE("cancelling an operation resolves cancelled, never success", "[s3][client][faults]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::hang, .count = -1});
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::stop_source src;
        std::string body = "zzz";
        auto stopper = [](std::stop_source* ss) -> task<void> {
            (void)co_await sleep(50ms);
            ss->request_stop();
        };
        auto [r, _] = co_await when_all(c->put_object("test-bucket", "k", bytes(body), {}, src.get_token()), stopper(&src));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::cancelled);
        // Cancelled before starting: no request at all.
        auto again = co_await c->put_object("test-bucket", "k", bytes(body), {}, src.get_token());
        REQUIRE_FALSE(again.has_value());
        CHECK(again.error().code == s3::errc::cancelled);
    };
    run_task(t(&srv));
}

TEST_CASE("a PUT applied but whose answer was lost is retried with the same bytes", "[s3][client][faults]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::reset, .when = fault_when::after, .count = 1});
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "same bytes";
        auto r = co_await c->put_object("test-bucket", "k", bytes(body));
        REQUIRE(r.has_value());
    };
    run_task(t(&srv));
    CHECK(srv.stats().by_method["PUT"] == 2);
    CHECK(srv.get_object("test-bucket", "k") == std::string("same bytes"));
}

TEST_CASE("If-None-Match: * refuses to overwrite with precondition_failed", "[s3][client]") {
    fake_s3 srv;
    srv.put_object("test-bucket", "k", "first");
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "second";
        s3::put_options popts;
        popts.if_none_match = true;
        auto r = co_await c->put_object("test-bucket", "k", bytes(body), popts);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::precondition_failed);
        CHECK(r.error().attempts == 1);
    };
    run_task(t(&srv));
    CHECK(srv.get_object("test-bucket", "k") == std::string("first"));
}

TEST_CASE("list pages through continuation tokens", "[s3][client]") {
    fake_s3 srv;
    for (int i = 0; i < 25; ++i) srv.put_object("test-bucket", fmt::format("p/{:03}", i), "v");
    srv.put_object("test-bucket", "q/other", "v");
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        s3::list_request req("p/");
        req.max_keys = 10;
        std::vector<std::string> keys;
        int pages = 0;
        for (;;) {
            auto page = co_await c->list_objects_v2("test-bucket", req);
            REQUIRE(page.has_value());
            ++pages;
            for (auto& o : page->objects) keys.push_back(o.key);
            if (!page->is_truncated) break;
            req.continuation_token = page->next_continuation_token;
        }
        CHECK(pages == 3);
        REQUIRE(keys.size() == 25);
        CHECK(keys.front() == "p/000");
        CHECK(keys.back() == "p/024");
        s3::list_request areq("p/");
        areq.start_after = "p/020";
        auto after = co_await c->list_objects_v2("test-bucket", areq);
        REQUIRE(after.has_value());
        CHECK(after->objects.size() == 4);
    };
    run_task(t(&srv));
}

TEST_CASE("connection refused is retried then reported with a clear sentence", "[s3][client][faults]") {
    std::string endpoint;
    {
        fake_s3 gone;
        endpoint = gone.endpoint();
    }
    auto t = [](std::string ep) -> task<void> {
        s3::client_config cfg;
        cfg.endpoint = ep;
        cfg.creds = {"AKIDTEST", "secret", ""};
        cfg.retry = {.max_attempts = 3, .base = 1ms, .cap = 2ms};
        auto c = make_client(cfg);
        auto r = co_await c->head_object("test-bucket", "k");
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::retryable);
        CHECK(r.error().attempts == 3);
        CHECK_THAT(r.error().message, Catch::Contains("cannot connect"));
        CHECK_THAT(r.error().message, Catch::Contains("refused"));
    };
    run_task(t(endpoint));
}

TEST_CASE("a body that does not match its declared crc32c is rejected, not retried", "[s3][client]") {
    fake_s3 srv;
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "payload";
        s3::put_options popts;
        popts.crc32c = skiff::crc32c(body) ^ 1u;
        auto r = co_await c->put_object("test-bucket", "k", bytes(body), popts);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::signature_mismatch);
        CHECK(r.error().attempts == 1);
    };
    run_task(t(&srv));
    CHECK_FALSE(srv.has_object("test-bucket", "k"));
}
