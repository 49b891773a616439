// The S3 client's metrics against the in-process fake S3: requests by op and object kind,
// latency histograms, bytes, retries, throttling and errors by class; and no secret, URL or
// query string in any series.
#include "../metrics/metric_probe.hpp"
#include "fake_s3.hpp"
#include "fake_s3_client.hpp"
#include "run_task.hpp"

#include <skiff/metrics/exposition.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/s3/client.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using skiff::test::counter_value;
using skiff::test::fake_s3;
using skiff::test::fault_action;
using skiff::test::gauge_value;
using skiff::test::histogram_count;
using skiff::test::make_client;

namespace {

s3::client_config config_for(const fake_s3& srv) {
    s3::client_config cfg = skiff::test::fake_s3_client_config(srv);
    cfg.creds = {"AKIDMETRICSTEST", "metrics/secret+key", "session-token-for-metrics"};
    cfg.retry.max_attempts = 4;
    return cfg;
}

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

metrics::labels ok(const char* op, const char* kind) { return {{"op", op}, {"kind", kind}}; }

// The caller names the kind label (the client does not read keys for it).
s3::request_options kind(std::string_view k) {
    s3::request_options o;
    o.kind = k;
    return o;
}
s3::put_options put_kind(std::string_view k) {
    s3::put_options o;
    o.kind = k;
    return o;
}

} // namespace

TEST_CASE("client metrics: requests, retries, throttling and latency by op and kind", "[s3][client][metrics]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .pattern = "\\.kfs$", .action = fault_action::status_503_slowdown, .count = 2});
    srv.put_object("test-bucket", "p/segment.index", std::string(300, 'i'));
    const auto req_kfs0 = counter_value("skiff_s3_requests_total", ok("put", "kfs"));
    const auto retries_kfs0 = counter_value("skiff_s3_retries_total", ok("put", "kfs"));
    const auto throttled0 = counter_value("skiff_s3_throttled_total", {{"op", "put"}});
    const auto lat_kfs0 = histogram_count("skiff_s3_request_duration_seconds", ok("put", "kfs"));
    const auto oplat_kfs0 = histogram_count("skiff_s3_operation_duration_seconds", ok("put", "kfs"));
    const auto sent_kfs0 = counter_value("skiff_s3_sent_bytes_total", ok("put", "kfs"));
    const auto get_index0 = counter_value("skiff_s3_requests_total", ok("get", "index"));
    const auto recv_index0 = counter_value("skiff_s3_received_bytes_total", ok("get", "index"));
    const auto range_index0 = counter_value("skiff_s3_requests_total", ok("get_range", "index"));
    const auto head0 = counter_value("skiff_s3_requests_total", ok("head", "other"));
    const auto list0 = counter_value("skiff_s3_requests_total", ok("list", "none"));
    const auto del0 = counter_value("skiff_s3_requests_total", ok("delete", "kfs"));
    const auto head_nf0 = counter_value("skiff_s3_errors_total", {{"op", "head"}, {"class", "not_found"}});
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body(1000, 'k');
        const auto kfs_put = put_kind("kfs");
        auto put = co_await c->put_object("test-bucket", "p/segment.kfs", bytes(body), kfs_put);
        REQUIRE(put.has_value());
        const auto index = kind("index");
        auto whole = co_await c->get_object("test-bucket", "p/segment.index", std::nullopt, index);
        REQUIRE(whole.has_value());
        auto range = s3::byte_range::between(0, 9);
        auto part = co_await c->get_object("test-bucket", "p/segment.index", range, index);
        REQUIRE(part.has_value());
        auto head = co_await c->head_object("test-bucket", "p/other");
        CHECK_FALSE(head.has_value()); // not found: an error of class not_found
        s3::list_request lreq("p/");
        const auto kfs = kind("kfs"); // list ignores it: its kind is always "none"
        auto list = co_await c->list_objects_v2("test-bucket", lreq, kfs);
        REQUIRE(list.has_value());
        auto del = co_await c->delete_object("test-bucket", "p/segment.kfs", kfs);
        CHECK(del.has_value());
        CHECK(gauge_value("skiff_s3_requests_in_flight") == 0);
    };
    run_task(t(&srv));
    CHECK(counter_value("skiff_s3_requests_total", ok("put", "kfs")) - req_kfs0 == 3);
    CHECK(counter_value("skiff_s3_retries_total", ok("put", "kfs")) - retries_kfs0 == 2);
    CHECK(counter_value("skiff_s3_throttled_total", {{"op", "put"}}) - throttled0 == 2);
    CHECK(histogram_count("skiff_s3_request_duration_seconds", ok("put", "kfs")) - lat_kfs0 == 3);
    CHECK(histogram_count("skiff_s3_operation_duration_seconds", ok("put", "kfs")) - oplat_kfs0 == 1);
    CHECK(counter_value("skiff_s3_sent_bytes_total", ok("put", "kfs")) - sent_kfs0 == 3000);
    CHECK(counter_value("skiff_s3_requests_total", ok("get", "index")) - get_index0 == 1);
    CHECK(counter_value("skiff_s3_received_bytes_total", ok("get", "index")) - recv_index0 == 300);
    CHECK(counter_value("skiff_s3_requests_total", ok("get_range", "index")) - range_index0 == 1);
    CHECK(counter_value("skiff_s3_requests_total", ok("head", "other")) - head0 == 1);
    CHECK(counter_value("skiff_s3_requests_total", ok("list", "none")) - list0 == 1);
    CHECK(counter_value("skiff_s3_requests_total", ok("delete", "kfs")) - del0 == 1);
    CHECK(counter_value("skiff_s3_errors_total", {{"op", "head"}, {"class", "not_found"}}) - head_nf0 == 1);
}

TEST_CASE("client metrics: an operation that gives up counts one error of its class", "[s3][client][metrics]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::status_500, .count = -1});
    const auto errors0 = counter_value("skiff_s3_errors_total", {{"op", "put"}, {"class", "retryable"}});
    const auto retries0 = counter_value("skiff_s3_retries_total", ok("put", "index"));
    const auto throttled0 = counter_value("skiff_s3_throttled_total", {{"op", "put"}});
    const auto oplat0 = histogram_count("skiff_s3_operation_duration_seconds", ok("put", "index"));
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "never stored";
        const auto index = put_kind("index");
        auto r = co_await c->put_object("test-bucket", "x/segment.index", bytes(body), index);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == s3::errc::retryable);
    };
    run_task(t(&srv));
    CHECK(counter_value("skiff_s3_errors_total", {{"op", "put"}, {"class", "retryable"}}) - errors0 == 1);
    CHECK(counter_value("skiff_s3_retries_total", ok("put", "index")) - retries0 == 3); // 4 attempts
    CHECK(counter_value("skiff_s3_throttled_total", {{"op", "put"}}) == throttled0); // 500 is not a throttle
    CHECK(histogram_count("skiff_s3_operation_duration_seconds", ok("put", "index")) - oplat0 == 1);
}

TEST_CASE("client metrics never carry credentials, URLs or query strings", "[s3][client][metrics]") {
    fake_s3 srv;
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "b";
        auto put = co_await c->put_object("test-bucket", "secret-looking/key?x=1.kfs", bytes(body));
        CHECK(put.has_value());
        s3::list_request lreq("secret-looking/");
        auto list = co_await c->list_objects_v2("test-bucket", lreq);
        CHECK(list.has_value());
    };
    run_task(t(&srv));
    std::vector<metrics::core_snapshot> cores{metrics::registry::local().snapshot()};
    const std::string json = metrics::metrics_json(cores, 0);
    const std::string prom = metrics::metrics_prometheus(cores);
    for (const std::string* doc : {&json, &prom}) {
        CHECK(doc->find("AKIDMETRICSTEST") == std::string::npos);
        CHECK(doc->find("metrics/secret") == std::string::npos);
        CHECK(doc->find("session-token") == std::string::npos);
        CHECK(doc->find("127.0.0.1") == std::string::npos);
        CHECK(doc->find("secret-looking") == std::string::npos);
        CHECK(doc->find("test-bucket") == std::string::npos);
        CHECK(doc->find("Signature") == std::string::npos);
        CHECK(doc->find("list-type") == std::string::npos);
    }
}

TEST_CASE("client metrics switched off: the client records nothing", "[s3][client][metrics]") {
    fake_s3 srv;
    const auto put0 = counter_value("skiff_s3_requests_total", ok("put", "other"));
    metrics::set_metrics_enabled(false);
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        std::string body = "b";
        auto put = co_await c->put_object("test-bucket", "k", bytes(body));
        CHECK(put.has_value());
    };
    run_task(t(&srv));
    metrics::set_metrics_enabled(true);
    CHECK(counter_value("skiff_s3_requests_total", ok("put", "other")) == put0);
    CHECK(srv.stats().requests == 1);
}
