// The S3 client against the in-process fake S3: retries, deadlines, cancellation and
// classification. Nothing here may report a failed request as a success.
#include "fake_s3.hpp"
#include "fake_s3_client.hpp"
#include "run_task.hpp"

#include <skiff/core/base64.hpp>
#include <skiff/core/crc32c.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/http/client.hpp>
#include <skiff/s3/client.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <openssl/evp.h>

#include <chrono>
#include <string>
#include <vector>

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

// --- DeleteObjects ---------------------------------------------------------------------------

namespace {

std::string md5_base64(std::string_view body) {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    REQUIRE(EVP_Digest(body.data(), body.size(), d, &len, EVP_md5(), nullptr) == 1);
    return base64_encode(std::string_view(reinterpret_cast<const char*>(d), len));
}

std::vector<skiff::test::request_record> posts(const fake_s3& srv) {
    std::vector<skiff::test::request_record> out;
    for (auto& r : srv.request_log()) {
        if (r.method == "POST") out.push_back(std::move(r));
    }
    return out;
}

// XML markup, quotes, UTF-8, and the line ends XML would normalise if sent literally.
const std::string special_key = "a&b <c>/\"q\"/\xc3\xbc";
const std::string crlf_key = "cr\rlf\n/it's";

// An unsigned DeleteObjects of key "a" with the given Content-MD5 (none when empty), past the
// client, which always sends a correct one.
task<result<http::response, http::transport_error>> raw_delete_objects(http::client& h, std::string url,
                                                                       std::string md5) {
    static const std::string body = "<Delete><Object><Key>a</Key></Object></Delete>";
    http::request req;
    req.method = "POST";
    req.url = std::move(url);
    req.headers.emplace_back("x-amz-content-sha256", "UNSIGNED-PAYLOAD");
    if (!md5.empty()) req.headers.emplace_back("content-md5", std::move(md5));
    req.body = std::span<const char>(body);
    co_return co_await h.send(std::move(req));
}

} // namespace

TEST_CASE("delete_objects removes several keys, special characters included; missing keys succeed",
          "[s3][client][delete_objects]") {
    fake_s3 srv;
    for (const auto& k : {std::string("d/1"), std::string("d/2"), special_key, crlf_key, std::string("keep")}) {
        srv.put_object("test-bucket", k, "x");
    }
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::vector<std::string> keys{"d/1", "d/2", special_key, crlf_key, "never/there"};
        auto r = co_await c->delete_objects("test-bucket", keys);
        INFO((r.has_value() ? std::string() : r.error().message));
        REQUIRE(r.has_value());
        CHECK(r->failed.empty());
        CHECK(c->stats().of(s3::op_kind::del_many).operations == 1);
        CHECK(c->stats().of(s3::op_kind::del_many).requests == 1);
    };
    run_task(t(&srv));
    CHECK(srv.list_keys("test-bucket") == std::vector<std::string>{"keep"});
    const auto log = posts(srv);
    REQUIRE(log.size() == 1);
    // The sub-resource as SigV4 canonicalises it (an empty value: "delete=").
    CHECK(log[0].target == "/test-bucket?delete=");
    CHECK(log[0].headers.count("content-md5") == 1);
    CHECK(log[0].headers.count("authorization") == 1);
    CHECK(srv.stats().delete_objects_keys == std::vector<std::size_t>{5});
}

TEST_CASE("delete_objects sends the documented body with its MD5", "[s3][client][delete_objects]") {
    fake_s3 srv;
    srv.put_object("test-bucket", "x&y", "1");
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::vector<std::string> keys{"x&y"};
        auto r = co_await c->delete_objects("test-bucket", keys);
        REQUIRE(r.has_value());
        CHECK(r->failed.empty());
    };
    run_task(t(&srv));
    const std::string expected = "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
                                 "<Object><Key>x&amp;y</Key></Object></Delete>";
    const auto log = posts(srv);
    REQUIRE(log.size() == 1);
    CHECK(log[0].status == 200);
    CHECK(log[0].body_size == expected.size());
    CHECK(log[0].headers.at("content-md5") == md5_base64(expected));
    CHECK(log[0].headers.at("content-type") == "application/xml");
    CHECK_FALSE(srv.has_object("test-bucket", "x&y"));
}

TEST_CASE("delete_objects reports the keys the server refuses, one by one", "[s3][client][delete_objects]") {
    fake_s3 srv;
    fault_rule denied;
    denied.method = "DELETE";
    denied.pattern = "^locked/";
    denied.action = fault_action::access_denied;
    denied.count = -1;
    srv.add_rule(denied);
    fault_rule slow;
    slow.method = "DELETE";
    slow.pattern = "^busy$";
    slow.action = fault_action::status_503_slowdown;
    slow.count = 1;
    srv.add_rule(slow);
    for (const auto& k : {"locked/1", "free/1", "busy", "free/2"}) srv.put_object("test-bucket", k, "x");
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::vector<std::string> keys{"locked/1", "free/1", "busy", "free/2"};
        auto r = co_await c->delete_objects("test-bucket", keys);
        REQUIRE(r.has_value());
        REQUIRE(r->failed.size() == 2);
        CHECK(r->failed[0].key == "locked/1");
        CHECK(r->failed[0].code == s3::errc::access_denied);
        CHECK(r->failed[0].s3_code == "AccessDenied");
        CHECK_THAT(r->failed[0].message, Catch::Contains("locked/1"));
        CHECK(r->failed[1].key == "busy");
        CHECK(r->failed[1].code == s3::errc::retryable);
        CHECK(r->failed[1].s3_code == "SlowDown");
        // Per-key refusals are the caller's to retry: one request was sent.
        CHECK(c->stats().of(s3::op_kind::del_many).requests == 1);
    };
    run_task(t(&srv));
    CHECK(srv.list_keys("test-bucket") == std::vector<std::string>{"busy", "locked/1"});
}

TEST_CASE("delete_objects refuses more than 1000 keys without sending anything", "[s3][client][delete_objects]") {
    fake_s3 srv;
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::vector<std::string> keys;
        for (int i = 0; i < 1001; ++i) keys.push_back(fmt::format("k/{:04}", i));
        auto too_many = co_await c->delete_objects("test-bucket", keys);
        REQUIRE_FALSE(too_many.has_value());
        CHECK(too_many.error().code == s3::errc::invalid_request);
        CHECK_THAT(too_many.error().message, Catch::Contains("1001 keys"));
        CHECK(s->stats().requests == 0);
        std::vector<std::string> with_empty{"a", ""};
        auto empty_key = co_await c->delete_objects("test-bucket", with_empty);
        REQUIRE_FALSE(empty_key.has_value());
        CHECK(empty_key.error().code == s3::errc::invalid_request);
        auto none = co_await c->delete_objects("test-bucket", std::vector<std::string>{});
        CHECK(none.has_value());
        CHECK(s->stats().requests == 0);

        keys.pop_back();
        for (const auto& k : keys) s->put_object("test-bucket", k, "x");
        auto exactly = co_await c->delete_objects("test-bucket", keys);
        INFO((exactly.has_value() ? std::string() : exactly.error().message));
        REQUIRE(exactly.has_value());
        CHECK(exactly->failed.empty());
    };
    run_task(t(&srv));
    CHECK(srv.list_keys("test-bucket").empty());
    CHECK(srv.stats().delete_objects_keys == std::vector<std::size_t>{1000});
}

TEST_CASE("delete_objects retries the whole request on SlowDown", "[s3][client][delete_objects][faults]") {
    fake_s3 srv;
    srv.add_rule({.method = "POST", .action = fault_action::status_503_slowdown, .count = 2});
    srv.put_object("test-bucket", "a", "x");
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::vector<s3::attempt_outcome> seen;
        s3::request_options opts;
        opts.on_attempt = [&seen](const s3::attempt_outcome& o) { seen.push_back(o); };
        std::vector<std::string> keys{"a"};
        auto r = co_await c->delete_objects("test-bucket", keys, opts);
        REQUIRE(r.has_value());
        CHECK(r->failed.empty());
        CHECK(c->stats().of(s3::op_kind::del_many).retries == 2);
        REQUIRE(seen.size() == 3);
        CHECK(seen[0].op == s3::op_kind::del_many);
        CHECK(seen[0].throttled);
        CHECK_FALSE(seen[2].throttled);
    };
    run_task(t(&srv));
    CHECK_FALSE(srv.has_object("test-bucket", "a"));
}

TEST_CASE("the fake refuses DeleteObjects without a checksum or with a wrong one, as S3 does",
          "[s3][client][delete_objects]") {
    fake_s3 srv;
    srv.put_object("test-bucket", "a", "x");
    auto t = [](fake_s3* s) -> task<void> {
        http::client h;
        const std::string url = s->endpoint() + "/test-bucket?delete=";
        auto missing = co_await raw_delete_objects(h, url, "");
        REQUIRE(missing.has_value());
        CHECK(missing->status == 400);
        CHECK_THAT(missing->body, Catch::Contains("MissingContentMD5"));
        auto wrong = co_await raw_delete_objects(h, url, md5_base64("something else"));
        REQUIRE(wrong.has_value());
        CHECK(wrong->status == 400);
        CHECK_THAT(wrong->body, Catch::Contains("BadDigest"));
        auto garbled = co_await raw_delete_objects(h, url, "not-a-digest");
        REQUIRE(garbled.has_value());
        CHECK(garbled->status == 400);
        CHECK_THAT(garbled->body, Catch::Contains("InvalidDigest"));
    };
    run_task(t(&srv));
    CHECK(srv.has_object("test-bucket", "a"));
}

TEST_CASE("delete_objects on a directory bucket sends CRC32C instead of Content-MD5, session-signed",
          "[s3][client][delete_objects][express]") {
    const std::string bucket = "logs--use1-az4--x-s3";
    skiff::test::fake_s3_options o;
    o.buckets = {bucket};
    o.express = skiff::test::fake_express_options{"AKIDEXPRESS", "express/secret+key", std::chrono::seconds(300)};
    fake_s3 srv(o);
    srv.put_object(bucket, special_key, "x");
    auto t = [](fake_s3* s, std::string b) -> task<void> {
        s3::client_config cfg = config_for(*s);
        cfg.creds = {"AKIDEXPRESS", "express/secret+key", ""};
        auto c = make_client(cfg);
        std::vector<std::string> keys{special_key};
        auto r = co_await c->delete_objects(b, keys);
        INFO((r.has_value() ? std::string() : r.error().message));
        REQUIRE(r.has_value());
        CHECK(r->failed.empty());
    };
    run_task(t(&srv, bucket));
    CHECK_FALSE(srv.has_object(bucket, special_key));
    CHECK(srv.stats().auth_failures == 0);
    const auto log = posts(srv);
    REQUIRE(log.size() == 1);
    CHECK(log[0].headers.count("content-md5") == 0);
    CHECK(log[0].headers.count("x-amz-checksum-crc32c") == 1);
}
