// The per-attempt side of the S3 client: the attempt observer (what the storage engine's io
// budget listens to), single-attempt operations for callers that own their retry loop, and
// caller-named metric kinds.
#include "../metrics/metric_probe.hpp"
#include "fake_s3.hpp"
#include "fake_s3_client.hpp"
#include "run_task.hpp"

#include <skiff/s3/classify.hpp>
#include <skiff/s3/client.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using skiff::test::counter_value;
using skiff::test::fake_s3;
using skiff::test::fault_action;
using skiff::test::make_client;

namespace {

s3::client_config config_for(const fake_s3& srv) {
    s3::client_config cfg = skiff::test::fake_s3_client_config(srv);
    cfg.creds = {"AKIDATTEMPTS", "attempts/secret", ""};
    cfg.retry.max_attempts = 5;
    cfg.backoff_seed = 7;
    return cfg;
}

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

// What the observer saw, copied out (the outcome's error pointer dies with the call).
struct seen {
    s3::op_kind op;
    int attempt;
    bool failed;
    bool throttled;
    int status;
};

s3::attempt_observer record_into(std::vector<seen>* out) {
    return [out](const s3::attempt_outcome& o) {
        out->push_back({o.op, o.attempt, o.failure != nullptr, o.throttled, o.failure ? o.failure->http_status : 200});
    };
}

} // namespace

TEST_CASE("is_throttle: 503, 429 and SlowDown, not other retryable failures", "[s3][classify]") {
    CHECK(s3::is_throttle(s3::classify_http(503, "PUT", "")));
    CHECK(s3::is_throttle(s3::classify_http(429, "GET", "")));
    CHECK(s3::is_throttle(s3::classify_http(
        400, "PUT", "<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>")));
    CHECK_FALSE(s3::is_throttle(s3::classify_http(500, "PUT", "")));
    CHECK_FALSE(s3::is_throttle(s3::classify_http(
        500, "PUT", "<Error><Code>InternalError</Code><Message>oops</Message></Error>")));
    CHECK_FALSE(s3::is_throttle(s3::classify_http(404, "GET", "")));
    CHECK_FALSE(s3::is_throttle(s3::classify_transport(56, "Connection reset by peer", "http://127.0.0.1:1")));
    CHECK_FALSE(s3::is_throttle(s3::classify_transport(28, "Operation timed out", "http://127.0.0.1:1")));
}

TEST_CASE("the attempt observer hears every attempt, throttles at the attempt that got them", "[s3][client]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::status_503_slowdown, .count = 2});
    std::vector<seen> log;
    auto t = [](fake_s3* s, std::vector<seen>* out) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "throttled twice";
        s3::put_options opts;
        opts.on_attempt = record_into(out);
        auto r = co_await c->put_object("test-bucket", "a", bytes(body), opts);
        REQUIRE(r.has_value());
    };
    run_task(t(&srv, &log));
    REQUIRE(log.size() == 3);
    CHECK(log[0].op == s3::op_kind::put);
    CHECK(log[0].attempt == 1);
    CHECK(log[0].throttled);
    CHECK(log[0].status == 503);
    CHECK(log[1].attempt == 2);
    CHECK(log[1].throttled);
    CHECK(log[2].attempt == 3);
    CHECK_FALSE(log[2].failed);
    CHECK_FALSE(log[2].throttled);
}

TEST_CASE("the attempt observer: resets and 500s are failures, not throttles", "[s3][client]") {
    fake_s3 srv;
    srv.add_rule({.method = "GET", .action = fault_action::reset, .count = 2});
    srv.add_rule({.method = "GET", .action = fault_action::status_500, .count = 1});
    srv.put_object("test-bucket", "obj", "payload");
    std::vector<seen> log;
    auto t = [](fake_s3* s, std::vector<seen>* out) -> task<void> {
        auto c = make_client(config_for(*s));
        s3::request_options opts;
        opts.on_attempt = record_into(out);
        auto r = co_await c->get_object("test-bucket", "obj", std::nullopt, opts);
        REQUIRE(r.has_value());
        CHECK(r->body == "payload");
    };
    run_task(t(&srv, &log));
    REQUIRE(log.size() == 4);
    for (int i = 0; i < 3; ++i) {
        INFO("attempt " << i + 1);
        CHECK(log[static_cast<std::size_t>(i)].op == s3::op_kind::get);
        CHECK(log[static_cast<std::size_t>(i)].failed);
        CHECK_FALSE(log[static_cast<std::size_t>(i)].throttled);
    }
    CHECK(log[2].status == 500);
    CHECK_FALSE(log[3].failed);
}

TEST_CASE("max_attempts = 1 sends one request and leaves the retry to the caller", "[s3][client]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::status_503_slowdown, .count = 1});
    std::vector<seen> log;
    auto t = [](fake_s3* s, std::vector<seen>* out) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "once";
        s3::put_options opts;
        opts.max_attempts = 1;
        opts.on_attempt = record_into(out);
        auto r = co_await c->put_object("test-bucket", "once", bytes(body), opts);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::retryable);
        CHECK(r.error().attempts == 1);
        CHECK(r.error().s3_code == "SlowDown");
        CHECK(c->stats().of(s3::op_kind::put).retries == 0);
        // The caller's own retry: the same bytes under the same key now land.
        auto again = co_await c->put_object("test-bucket", "once", bytes(body), opts);
        CHECK(again.has_value());
    };
    run_task(t(&srv, &log));
    CHECK(srv.stats().by_method["PUT"] == 2);
    REQUIRE(log.size() == 2);
    CHECK(log[0].throttled);
    CHECK_FALSE(log[1].failed);
    CHECK(srv.get_object("test-bucket", "once") == "once");
}

TEST_CASE("max_attempts never raises the configured policy", "[s3][client]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::status_500, .count = -1});
    auto t = [](fake_s3* s) -> task<void> {
        auto cfg = config_for(*s);
        cfg.retry.max_attempts = 2;
        auto c = make_client(std::move(cfg));
        std::string body = "x";
        s3::put_options opts;
        opts.max_attempts = 50;
        auto r = co_await c->put_object("test-bucket", "k", bytes(body), opts);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().attempts == 2);
    };
    run_task(t(&srv));
    CHECK(srv.stats().by_method["PUT"] == 2);
}

TEST_CASE("metric kinds: the caller's label, \"other\" by default, and a bounded set", "[s3][client][metrics]") {
    fake_s3 srv;
    const metrics::labels put_other{{"op", "put"}, {"kind", "other"}};
    const metrics::labels put_kfs{{"op", "put"}, {"kind", "kfs"}};
    const metrics::labels head_manifest{{"op", "head"}, {"kind", "manifest"}};
    const auto other0 = counter_value("skiff_s3_requests_total", put_other);
    const auto kfs0 = counter_value("skiff_s3_requests_total", put_kfs);
    auto t = [](fake_s3* s, std::uint64_t other_before) -> task<void> {
        auto c = make_client(config_for(*s));
        // Declared kinds exist at zero before any request.
        c->declare_metric_kind("manifest");
        CHECK(skiff::test::find_series("skiff_s3_requests_total", {{"op", "head"}, {"kind", "manifest"}}).has_value());
        std::string body = "b";
        // The key's suffix no longer decides: a ".kfs" key without a kind is "other".
        auto plain = co_await c->put_object("test-bucket", "x.kfs", bytes(body));
        REQUIRE(plain.has_value());
        s3::put_options kfs;
        kfs.kind = "kfs";
        auto named = co_await c->put_object("test-bucket", "no-suffix", bytes(body), kfs);
        REQUIRE(named.has_value());
        // More distinct labels than a client keeps: the extra ones count as "other".
        std::vector<std::string> labels;
        for (std::size_t i = 0; i < s3::max_metric_kinds + 3; ++i) labels.push_back("k" + std::to_string(i));
        for (const auto& l : labels) {
            s3::put_options o;
            o.kind = l;
            auto r = co_await c->put_object("test-bucket", "many", bytes(body), o);
            REQUIRE(r.has_value());
        }
        // other, manifest, kfs and five of the k-labels fit; six k-labels fall back to "other".
        CHECK(skiff::test::find_series("skiff_s3_requests_total", {{"op", "put"}, {"kind", "k4"}}).has_value());
        CHECK_FALSE(skiff::test::find_series("skiff_s3_requests_total", {{"op", "put"}, {"kind", "k5"}}).has_value());
        CHECK(counter_value("skiff_s3_requests_total", {{"op", "put"}, {"kind", "other"}}) - other_before == 1 + 6);
    };
    run_task(t(&srv, other0));
    CHECK(counter_value("skiff_s3_requests_total", put_kfs) - kfs0 == 1);
    CHECK(counter_value("skiff_s3_requests_total", head_manifest) == 0);
}
