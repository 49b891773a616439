// The S3 client against a real S3 peer: moto with a spec-following SigV4 check
// (../shared/tools/s3-test-server), directly and through ../shared/tools/s3-fault-proxy.
// Run through with-s3.sh, which starts both; a missing server is a failure, not a skip.
#include "run_task.hpp"

#include <skiff/http/client.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/s3/classify.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/s3/sigv4.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;

namespace {

std::string need_env(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) FAIL(fmt::format("{} is not set: run this test through test/integration/with-s3.sh", name));
    return v;
}

s3::client_config server_config(const std::string& endpoint) {
    s3::client_config cfg;
    cfg.endpoint = endpoint;
    cfg.path_style = true;
    cfg.region = need_env("AWS_REGION");
    cfg.creds = {need_env("AWS_ACCESS_KEY_ID"), need_env("AWS_SECRET_ACCESS_KEY"), ""};
    cfg.retry.base = 5ms;
    cfg.retry.cap = 50ms;
    cfg.retry.max_attempts = 8;
    cfg.attempt_timeout = 5s;
    cfg.operation_deadline = 30s;
    return cfg;
}

std::unique_ptr<s3::client> make_client(const s3::client_config& cfg) {
    auto c = s3::client::create(cfg);
    REQUIRE(c.has_value());
    return std::move(*c);
}

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

// Changes the fault proxy's settings at run time (never forwarded upstream).
task<void> proxy_config(http::client* h, std::string query) {
    http::request req;
    req.method = "POST";
    req.url = fmt::format("{}/__proxy/config?{}", need_env("S3_PROXY_ENDPOINT"), query);
    auto r = co_await h->send(std::move(req));
    REQUIRE(r.has_value());
    REQUIRE(r->status == 200);
}

} // namespace

TEST_CASE("PUT, GET, ranged GET, HEAD and DELETE against the SigV4-checking server", "[integration][s3]") {
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        auto c = make_client(server_config(need_env("S3_ENDPOINT")));
        std::string body(3 * 1024 * 1024 + 17, '\0');
        for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131 % 251);
        auto put = co_await c->put_object(bucket, "it/big.bin", bytes(body));
        INFO((put ? std::string() : put.error().message));
        REQUIRE(put.has_value());
        auto got = co_await c->get_object(bucket, "it/big.bin");
        REQUIRE(got.has_value());
        CHECK(got->body == body);
        auto range = co_await c->get_object(bucket, "it/big.bin", s3::byte_range::between(1000, 1999));
        REQUIRE(range.has_value());
        CHECK(range->body == body.substr(1000, 1000));
        CHECK(range->object_size == body.size());
        auto tail = co_await c->get_object(bucket, "it/big.bin", s3::byte_range::suffix(16));
        REQUIRE(tail.has_value());
        CHECK(tail->body == body.substr(body.size() - 16));
        auto from = co_await c->get_object(bucket, "it/big.bin", s3::byte_range::starting_at(body.size() - 5));
        REQUIRE(from.has_value());
        CHECK(from->body == body.substr(body.size() - 5));
        auto head = co_await c->head_object(bucket, "it/big.bin");
        REQUIRE(head.has_value());
        CHECK(head->size == body.size());
        CHECK(head->etag == put->etag);
        auto done1 = co_await c->delete_object(bucket, "it/big.bin");
        REQUIRE(done1.has_value());
        auto gone = co_await c->head_object(bucket, "it/big.bin");
        REQUIRE_FALSE(gone.has_value());
        CHECK(gone.error().code == s3::errc::not_found);
        auto gone2 = co_await c->get_object(bucket, "it/big.bin");
        REQUIRE_FALSE(gone2.has_value());
        CHECK(gone2.error().code == s3::errc::not_found);
    };
    run_task(t());
}

TEST_CASE("keys with special and non-ASCII characters sign and round-trip", "[integration][s3]") {
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        auto c = make_client(server_config(need_env("S3_ENDPOINT")));
        const std::vector<std::string> keys = {
            "sp/with space",         "sp/plus+equals=tilde~",   "sp/bang!quote'paren(x)",
            "sp/star*comma,semi;",   "sp/colon:at@",            "sp/double//slash",
            "sp/caf\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac", "sp/dollar$amp&hash#q?pct%",
            "sp/./dot/../segments",  "sp/trailing/",
        };
        for (const auto& k : keys) {
            std::string body = "body of " + k;
            auto put = co_await c->put_object(bucket, k, bytes(body));
            INFO(k << ": " << (put ? std::string() : put.error().message));
            REQUIRE(put.has_value());
            auto got = co_await c->get_object(bucket, k);
            REQUIRE(got.has_value());
            CHECK(got->body == body);
            auto head = co_await c->head_object(bucket, k);
            REQUIRE(head.has_value());
            CHECK(head->size == body.size());
        }
        s3::list_request req("sp/");
        auto page = co_await c->list_objects_v2(bucket, req);
        REQUIRE(page.has_value());
        std::vector<std::string> listed;
        for (auto& o : page->objects) listed.push_back(o.key);
        for (const auto& k : keys) {
            INFO(k);
            CHECK(std::find(listed.begin(), listed.end(), k) != listed.end());
        }
        for (const auto& k : keys) {
            INFO(k);
            auto done2 = co_await c->delete_object(bucket, k);
            REQUIRE(done2.has_value());
            auto gone = co_await c->head_object(bucket, k);
            CHECK_FALSE(gone.has_value());
        }
    };
    run_task(t());
}

TEST_CASE("LIST pages through continuation tokens and start-after", "[integration][s3]") {
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        auto c = make_client(server_config(need_env("S3_ENDPOINT")));
        std::string v = "v";
        for (int i = 0; i < 23; ++i) {
            auto r = co_await c->put_object(bucket, fmt::format("pg/{:04}", i), bytes(v));
            REQUIRE(r.has_value());
        }
        s3::list_request req("pg/");
        req.max_keys = 7;
        std::vector<std::string> keys;
        int pages = 0;
        for (;;) {
            auto page = co_await c->list_objects_v2(bucket, req);
            REQUIRE(page.has_value());
            ++pages;
            for (auto& o : page->objects) keys.push_back(o.key);
            if (!page->is_truncated) break;
            req.continuation_token = page->next_continuation_token;
        }
        CHECK(pages == 4);
        REQUIRE(keys.size() == 23);
        for (int i = 0; i < 23; ++i) CHECK(keys[static_cast<std::size_t>(i)] == fmt::format("pg/{:04}", i));
        s3::list_request after("pg/");
        after.start_after = "pg/0019";
        auto rest = co_await c->list_objects_v2(bucket, after);
        REQUIRE(rest.has_value());
        REQUIRE(rest->objects.size() == 3);
        CHECK(rest->objects[0].key == "pg/0020");
    };
    run_task(t());
}

TEST_CASE("a wrong secret is rejected once, clearly, without leaking it", "[integration][s3]") {
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        auto cfg = server_config(need_env("S3_ENDPOINT"));
        cfg.creds.secret_access_key = "definitely-wrong-secret-value";
        auto c = make_client(cfg);
        std::string body = "x";
        auto r = co_await c->put_object(bucket, "wrong/secret", bytes(body));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::signature_mismatch);
        CHECK(r.error().attempts == 1);
        CHECK_THAT(r.error().message, Catch::Contains("signature"));
        CHECK_THAT(r.error().message, !Catch::Contains("definitely-wrong-secret-value"));
        // An unknown access key id is an access error, also not retried.
        cfg.creds.access_key_id = "AKIDUNKNOWN00000000";
        auto c2 = make_client(cfg);
        auto r2 = co_await c2->head_object(bucket, "wrong/secret");
        REQUIRE_FALSE(r2.has_value());
        CHECK((r2.error().code == s3::errc::access_denied || r2.error().code == s3::errc::signature_mismatch));
        CHECK(r2.error().attempts == 1);
    };
    run_task(t());
}

TEST_CASE("a payload hash that does not match the body is rejected", "[integration][s3]") {
    // Built from the lower layers, since the client never sends a wrong hash itself.
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        auto ep = s3::parse_endpoint(need_env("S3_ENDPOINT"));
        REQUIRE(ep.has_value());
        auto url = s3::make_object_url(*ep, bucket, "bad/hash", true, {});
        std::string body = "the real body";
        s3::signing_request sreq;
        sreq.method = "PUT";
        sreq.encoded_path = url.encoded_path;
        sreq.headers = {{"host", url.host_header}, {"content-length", std::to_string(body.size())}};
        sreq.payload_hash = s3::sha256_hex("some other body");
        s3::signing_options opts;
        opts.region = need_env("AWS_REGION");
        s3::credentials creds{need_env("AWS_ACCESS_KEY_ID"), need_env("AWS_SECRET_ACCESS_KEY"), ""};
        auto signed_req = s3::sign(sreq, creds, opts, std::chrono::system_clock::now());
        REQUIRE(signed_req.has_value());
        http::client h;
        http::request req;
        req.method = "PUT";
        req.url = url.url;
        for (auto& hd : sreq.headers) req.headers.emplace_back(hd.name, hd.value);
        for (auto& hd : signed_req->headers_to_add) req.headers.emplace_back(hd.name, hd.value);
        req.body = bytes(body);
        auto resp = co_await h.send(std::move(req));
        REQUIRE(resp.has_value());
        CHECK(resp->status == 400);
        auto err = s3::classify_http(resp->status, "PUT", resp->body, "bad/hash");
        CHECK(err.code == s3::errc::signature_mismatch);
        CHECK(err.s3_code == "XAmzContentSHA256Mismatch");
    };
    run_task(t());
}

TEST_CASE("through the fault proxy: SlowDown bursts, 500s and resets are retried", "[integration][s3][faults]") {
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        http::client control;
        auto c = make_client(server_config(need_env("S3_PROXY_ENDPOINT")));
        std::string body(64 * 1024, 'p');

        co_await proxy_config(&control, "fail-mode=503-slowdown&fail-match=%5EPUT&fail-next=3&fail-rate=0");
        auto r1 = co_await c->put_object(bucket, "proxy/slowdown.kfs", bytes(body));
        REQUIRE(r1.has_value());
        CHECK(c->stats().of(s3::op_kind::put).retries == 3);

        co_await proxy_config(&control, "fail-mode=500&fail-match=%5EGET&fail-next=2&fail-rate=0");
        auto r2 = co_await c->get_object(bucket, "proxy/slowdown.kfs");
        REQUIRE(r2.has_value());
        CHECK(r2->body == body);
        CHECK(c->stats().of(s3::op_kind::get).retries == 2);

        co_await proxy_config(&control, "fail-mode=reset&fail-match=%5EHEAD&fail-next=2&fail-rate=0");
        auto r3 = co_await c->head_object(bucket, "proxy/slowdown.kfs");
        REQUIRE(r3.has_value());
        CHECK(r3->size == body.size());
    };
    run_task(t());
}

TEST_CASE("through the fault proxy: a hung answer times out and the retry succeeds", "[integration][s3][faults]") {
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        http::client control;
        auto cfg = server_config(need_env("S3_PROXY_ENDPOINT"));
        cfg.attempt_timeout = 500ms;
        auto c = make_client(cfg);
        std::string body = "after a hang";
        co_await proxy_config(&control, "fail-mode=timeout&fail-match=%5EPUT&fail-next=1&fail-rate=0");
        auto start = reactor::local().now();
        auto r = co_await c->put_object(bucket, "proxy/hang", bytes(body));
        auto took = reactor::local().now() - start;
        REQUIRE(r.has_value());
        CHECK(took >= 500ms);
        CHECK(took < 10s);
        auto got = co_await c->get_object(bucket, "proxy/hang");
        REQUIRE(got.has_value());
        CHECK(got->body == body);
    };
    run_task(t());
}

TEST_CASE("through the fault proxy: a lost PUT answer is retried with the same bytes", "[integration][s3][faults]") {
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        http::client control;
        auto c = make_client(server_config(need_env("S3_PROXY_ENDPOINT")));
        std::string body = "applied upstream, answer lost";
        co_await proxy_config(&control, "fail-mode=503-slowdown&fail-match=%5EPUT&fail-next=1&fail-rate=0&fail-when=after");
        auto r = co_await c->put_object(bucket, "proxy/lost", bytes(body));
        REQUIRE(r.has_value());
        co_await proxy_config(&control, "fail-next=0&fail-rate=0&fail-when=before");
        auto got = co_await c->get_object(bucket, "proxy/lost");
        REQUIRE(got.has_value());
        CHECK(got->body == body);
    };
    run_task(t());
}

TEST_CASE("through the fault proxy: a permanent outage ends in a retryable error, never success",
          "[integration][s3][faults]") {
    auto t = []() -> task<void> {
        auto bucket = need_env("S3_BUCKET");
        http::client control;
        auto cfg = server_config(need_env("S3_PROXY_ENDPOINT"));
        cfg.retry.max_attempts = 4;
        auto c = make_client(cfg);
        std::string body = "never acknowledged";
        co_await proxy_config(&control, "fail-mode=503-slowdown&fail-match=%5EPUT&fail-next=0&fail-rate=1");
        auto r = co_await c->put_object(bucket, "proxy/outage", bytes(body));
        co_await proxy_config(&control, "fail-rate=0");
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::retryable);
        CHECK(r.error().attempts == 4);
        auto head = co_await c->head_object(bucket, "proxy/outage");
        REQUIRE_FALSE(head.has_value());
        CHECK(head.error().code == s3::errc::not_found);
    };
    run_task(t());
}
