// The S3 object store against the in-process fake S3: the shared contract (with and without
// a key prefix), the prefix mapping, what is sent on the wire, and failures mapped to
// storage errors.
#include "../metrics/metric_probe.hpp"
#include "fake_s3.hpp"
#include "fake_s3_client.hpp"
#include "run_task.hpp"
#include "store_contract.hpp"

#include <skiff/core/base64.hpp>
#include <skiff/core/crc32c.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/storage/s3_store.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::runtime::run_task;
using skiff::runtime::task;
using skiff::test::fake_s3;
using skiff::test::fault_action;
using skiff::test::fault_rule;
using skiff::test::make_client;

namespace {

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

template <typename T>
std::string outcome(const result<T, store_error>& r) {
    return r.has_value() ? std::string("ok") : std::string(to_string(r.error().code));
}
template <typename T>
std::string message(const result<T, store_error>& r) {
    return r.has_value() ? std::string() : r.error().message;
}

s3::client_config config_for(const fake_s3& srv) {
    s3::client_config cfg = skiff::test::fake_s3_client_config(srv);
    cfg.attempt_timeout = 5s;
    cfg.operation_deadline = 20s;
    return cfg;
}

std::unique_ptr<s3_store> make_store(s3::client& c, std::string_view url) {
    auto s = s3_store::create(c, url);
    INFO(message(s));
    REQUIRE(s.has_value());
    return std::move(*s);
}

// Client and store live and die on the reactor thread; the fake outlives both.
class s3_harness final : public contract::store_harness {
public:
    s3_harness(const fake_s3& srv, std::string_view url)
        : _client(make_client(config_for(srv))), _store(make_store(*_client, url)) {}
    object_store& store() override { return *_store; }

private:
    std::unique_ptr<s3::client> _client;
    std::unique_ptr<s3_store> _store;
};

std::string crc32c_header(std::string_view body) {
    const std::uint32_t v = skiff::crc32c(body);
    const char be[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                        static_cast<char>(v)};
    return base64_encode(std::string_view(be, 4));
}

} // namespace

TEST_CASE("s3 store: object store contract, keys below a prefix", "[storage][s3_store]") {
    fake_s3 srv;
    contract::check_object_store_contract(
        [&srv] { return std::make_unique<s3_harness>(srv, "s3://test-bucket/some/prefix"); });
    // Everything the contract wrote stayed below the store's prefix.
    for (const auto& k : srv.list_keys("test-bucket")) CHECK(k.starts_with("some/prefix/"));
}

TEST_CASE("s3 store: object store contract, whole bucket", "[storage][s3_store]") {
    fake_s3 srv;
    contract::check_object_store_contract([&srv] { return std::make_unique<s3_harness>(srv, "s3://test-bucket"); });
}

TEST_CASE("s3 store: object store contract on an S3 Express directory bucket", "[storage][s3_store][express]") {
    // Every request goes through a session (CreateSession, then session-signed requests with
    // x-amz-s3session-token); create-only PUTs are conditional writes there too.
    skiff::test::fake_s3_options o;
    o.buckets = {"seg--use1-az4--x-s3"};
    o.express = skiff::test::fake_express_options{"AKIDTEST", "secret/for+tests", std::chrono::seconds(300)};
    fake_s3 srv(o);
    contract::check_object_store_contract(
        [&srv] { return std::make_unique<s3_harness>(srv, "s3://seg--use1-az4--x-s3/p"); });
    CHECK(srv.stats().sessions_created >= 1);
    CHECK(srv.stats().auth_failures == 0);
}

// Moved from the s3 client's tests: storage, not the client, knows what its keys name.
TEST_CASE("s3 store: metric_kind names segments and indexes by suffix", "[storage][s3_store]") {
    CHECK(s3_store::metric_kind("ns/t/0/segment-00000000000000000000.kfs") == "kfs");
    CHECK(s3_store::metric_kind("ns/t/0/segment-00000000000000000000.index") == "index");
    CHECK(s3_store::metric_kind("a.kfs.bak") == "other");
    CHECK(s3_store::metric_kind("") == "other");
}

TEST_CASE("s3 store: the client's metrics carry the store's kind label", "[storage][s3_store][metrics]") {
    using skiff::test::counter_value;
    fake_s3 srv;
    const metrics::labels put_kfs{{"op", "put"}, {"kind", "kfs"}};
    const metrics::labels get_index{{"op", "get"}, {"kind", "index"}};
    const metrics::labels head_other{{"op", "head"}, {"kind", "other"}};
    const auto kfs0 = counter_value("skiff_s3_requests_total", put_kfs);
    const auto index0 = counter_value("skiff_s3_requests_total", get_index);
    const auto other0 = counter_value("skiff_s3_requests_total", head_other);
    auto t = [](fake_s3* s) -> task<void> {
        s3_harness h(*s, "s3://test-bucket/labels");
        // Declared by create(): visible before the first request.
        CHECK(skiff::test::find_series("skiff_s3_requests_total", {{"op", "delete"}, {"kind", "index"}}).has_value());
        const std::string body = "x";
        auto put = co_await h.store().put("t/0/00000000000000000000.kfs", bytes(body), false, {});
        CHECK(put.has_value());
        auto put_once = co_await h.store().put_once("t/0/00000000000000000000.index", bytes(body), false, {});
        CHECK(put_once.has_value());
        auto got = co_await h.store().get("t/0/00000000000000000000.index", std::nullopt, {});
        CHECK(got.has_value());
        auto missing = co_await h.store().size("t/0/manifest", {});
        CHECK(outcome(missing) == "not_found");
    };
    run_task(t(&srv));
    CHECK(counter_value("skiff_s3_requests_total", put_kfs) - kfs0 == 1);
    CHECK(counter_value("skiff_s3_requests_total", get_index) - index0 == 1);
    CHECK(counter_value("skiff_s3_requests_total", head_other) - other0 == 1);
}

TEST_CASE("s3 store: URLs", "[storage][s3_store]") {
    fake_s3 srv;
    auto t = [](const fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        struct expect_url {
            const char* url;
            const char* bucket;
            const char* prefix;
        };
        for (const auto& e : {expect_url{"s3://b", "b", ""}, expect_url{"s3://b/", "b", ""},
                              expect_url{"s3://b/p", "b", "p/"}, expect_url{"s3://b/p/", "b", "p/"},
                              expect_url{"s3://my-bucket/a/b/c", "my-bucket", "a/b/c/"}}) {
            auto st = make_store(*c, e.url);
            CHECK(st->bucket() == e.bucket);
            CHECK(st->prefix() == e.prefix);
            CHECK(st->describe() == std::string("s3://") + e.bucket + "/" + e.prefix);
            CHECK(st->object_key("k/1") == std::string(e.prefix) + "k/1");
        }
        for (const char* bad : {"", "b/p", "s3:/b", "s3://", "s3:///p", "http://b/p", "s3://b//p", "s3://b?x/p"}) {
            auto st = s3_store::create(*c, bad);
            INFO(bad);
            CHECK(outcome(st) == "invalid_argument");
        }
        co_return;
    };
    run_task(t(&srv));
}

TEST_CASE("s3 store: keys map below the prefix and listing strips it", "[storage][s3_store]") {
    fake_s3 srv;
    // Neighbours a sloppy prefix match would pick up.
    srv.put_object("test-bucket", "some/prefix", "the prefix itself");
    srv.put_object("test-bucket", "some/prefixed/x", "neighbour");
    srv.put_object("test-bucket", "other/y", "elsewhere");
    srv.put_object("test-bucket", "some/prefix/planted", "planted");
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket/some/prefix");
        const std::string body = "mine";
        auto p = co_await st->put("ns/k", bytes(body), false, {});
        REQUIRE(p.has_value());
        CHECK(s->get_object("test-bucket", "some/prefix/ns/k") == "mine");
        auto g = co_await st->get("planted", std::nullopt, {});
        REQUIRE(g.has_value());
        CHECK(g->data == "planted");
        auto l = co_await st->list("", "", "", 100, {});
        REQUIRE(l.has_value());
        std::vector<std::string> keys;
        for (const auto& o : l->objects) keys.push_back(o.key);
        CHECK(keys == std::vector<std::string>{"ns/k", "planted"});
        auto rm = co_await st->remove("ns/k", {});
        REQUIRE(rm.has_value());
        CHECK_FALSE(s->has_object("test-bucket", "some/prefix/ns/k"));
        CHECK(s->has_object("test-bucket", "some/prefix"));
    };
    run_task(t(&srv));
}

TEST_CASE("s3 store: put sends crc32c, and If-None-Match only for if_absent", "[storage][s3_store]") {
    fake_s3 srv;
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket/p");
        const std::string body = "checksummed body";
        auto a = co_await st->put("plain", bytes(body), false, {});
        REQUIRE(a.has_value());
        auto b = co_await st->put("guarded", bytes(body), true, {});
        REQUIRE(b.has_value());
        CHECK(s->stat_object("test-bucket", "p/plain")->checksum_crc32c == crc32c_header(body));
    };
    run_task(t(&srv));
    std::vector<skiff::test::request_record> puts;
    for (auto& r : srv.request_log()) {
        if (r.method == "PUT") puts.push_back(r);
    }
    REQUIRE(puts.size() == 2);
    CHECK(puts[0].key == "p/plain");
    CHECK(puts[0].headers.at("x-amz-checksum-crc32c") == crc32c_header("checksummed body"));
    CHECK(puts[0].headers.count("if-none-match") == 0);
    CHECK(puts[1].key == "p/guarded");
    CHECK(puts[1].headers.at("if-none-match") == "*");
    CHECK(puts[1].headers.count("x-amz-checksum-crc32c") == 1);
}

TEST_CASE("s3 store: a burst of SlowDown is retried into success", "[storage][s3_store][faults]") {
    fake_s3 srv;
    fault_rule put_rule;
    put_rule.method = "PUT";
    put_rule.action = fault_action::status_503_slowdown;
    put_rule.count = 3;
    srv.add_rule(put_rule);
    fault_rule get_rule;
    get_rule.method = "GET";
    get_rule.pattern = "slow";
    get_rule.action = fault_action::status_500_empty_body;
    get_rule.count = 2;
    srv.add_rule(get_rule);
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket/p");
        const std::string body = "eventually";
        auto r = co_await st->put("slow", bytes(body), false, {});
        INFO(message(r));
        REQUIRE(r.has_value());
        auto g = co_await st->get("slow", std::nullopt, {});
        INFO(message(g));
        REQUIRE(g.has_value());
        CHECK(g->data == "eventually");
    };
    run_task(t(&srv));
    CHECK(srv.stats().by_method.at("PUT") == 4);
    CHECK(srv.stats().faults_injected == 5);
}

TEST_CASE("s3 store: a server that keeps failing gives transient with S3's sentence", "[storage][s3_store][faults]") {
    fake_s3 srv;
    fault_rule rule;
    rule.action = fault_action::status_500;
    rule.count = -1;
    srv.add_rule(rule);
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket/p");
        const std::string body = "never stored";
        auto r = co_await st->put("k", bytes(body), false, {});
        REQUIRE_FALSE(r.has_value());
        CHECK(outcome(r) == "transient");
        INFO(r.error().message);
        // Which operation, which object, and the S3 client's own sentence.
        CHECK_THAT(r.error().message, Catch::StartsWith("put of 's3://test-bucket/p/k' failed: "));
        CHECK_THAT(r.error().message, Catch::Contains("InternalError") && Catch::Contains("gave up after 6 attempts"));
        CHECK_FALSE(s->has_object("test-bucket", "p/k"));

        auto l = co_await st->list("", "", "", 10, {});
        CHECK(outcome(l) == "transient");
        CHECK_THAT(message(l), Catch::StartsWith("list of 's3://test-bucket/p/' failed: "));
        auto z = co_await st->size("k", {});
        CHECK(outcome(z) == "transient");
    };
    run_task(t(&srv));
}

TEST_CASE("s3 store: cancelling a hung request resolves cancelled", "[storage][s3_store][faults]") {
    fake_s3 srv;
    fault_rule rule;
    rule.method = "PUT";
    rule.action = fault_action::hang;
    rule.count = -1;
    srv.add_rule(rule);
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket");
        std::stop_source src;
        const std::string body = "stuck";
        auto stopper = [](std::stop_source* ss) -> task<void> {
            (void)co_await runtime::sleep(50ms);
            ss->request_stop();
        };
        auto [r, _] = co_await runtime::when_all(st->put("k", bytes(body), false, src.get_token()), stopper(&src));
        CHECK(outcome(r) == "cancelled");
    };
    run_task(t(&srv));
}

TEST_CASE("s3 store: the operation deadline surfaces as deadline_exceeded or transient", "[storage][s3_store][faults]") {
    fake_s3 srv;
    fault_rule rule;
    rule.method = "HEAD";
    rule.action = fault_action::hang;
    rule.count = -1;
    srv.add_rule(rule);
    auto t = [](fake_s3* s) -> task<void> {
        auto cfg = config_for(*s);
        cfg.attempt_timeout = 100ms;
        cfg.operation_deadline = 300ms;
        auto c = make_client(cfg);
        auto st = make_store(*c, "s3://test-bucket");
        auto r = co_await st->size("k", {});
        INFO(message(r));
        CHECK((outcome(r) == "deadline_exceeded" || outcome(r) == "transient"));
    };
    run_task(t(&srv));
}

TEST_CASE("s3 store: error classes map onto storage classes", "[storage][s3_store]") {
    struct expect_map {
        s3::errc from;
        errc to;
    };
    for (const auto& m : {expect_map{s3::errc::retryable, errc::transient},
                          expect_map{s3::errc::bad_response, errc::transient},
                          expect_map{s3::errc::not_found, errc::not_found},
                          expect_map{s3::errc::precondition_failed, errc::precondition_failed},
                          expect_map{s3::errc::access_denied, errc::permanent},
                          expect_map{s3::errc::signature_mismatch, errc::permanent},
                          expect_map{s3::errc::invalid_request, errc::permanent},
                          expect_map{s3::errc::config, errc::permanent},
                          expect_map{s3::errc::cancelled, errc::cancelled},
                          expect_map{s3::errc::deadline_exceeded, errc::deadline_exceeded}}) {
        s3::error e;
        e.code = m.from;
        e.message = "the S3 sentence";
        const store_error got = s3_store::map_error(e, "get of 's3://b/k'");
        INFO(s3::to_string(m.from));
        CHECK(got.code == m.to);
        CHECK(got.message == "get of 's3://b/k' failed: the S3 sentence");
    }
    s3::error range;
    range.code = s3::errc::invalid_request;
    range.http_status = 416;
    range.s3_code = "InvalidRange";
    CHECK(s3_store::map_error(range, "get").code == errc::invalid_argument);
}

TEST_CASE("s3 store: remove_many sends one DeleteObjects per 1000 keys", "[storage][s3_store][remove_many]") {
    using skiff::test::counter_value;
    fake_s3 srv;
    std::vector<std::string> keys;
    for (int i = 0; i < 2500; ++i) keys.push_back(fmt::format("t/0/{:020}.kfs", i));
    for (const auto& k : keys) srv.put_object("test-bucket", "p/" + k, "x");
    srv.put_object("test-bucket", "p/t/0/keep.kfs", "x");
    srv.put_object("test-bucket", "other/t/0/00000000000000000000.kfs", "x");
    const metrics::labels del_kfs{{"op", "delete_many"}, {"kind", "kfs"}};
    const auto requests0 = counter_value("skiff_s3_requests_total", del_kfs);
    auto t = [](fake_s3* s, std::vector<std::string> ks) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket/p");
        // A missing key and a duplicate change nothing.
        ks.push_back("t/0/never-written.kfs");
        ks.push_back(ks.front());
        auto r = co_await st->remove_many(std::move(ks), {});
        INFO(message(r));
        CHECK(r.has_value());
    };
    run_task(t(&srv, keys));
    CHECK(srv.list_keys("test-bucket") ==
          std::vector<std::string>{"other/t/0/00000000000000000000.kfs", "p/t/0/keep.kfs"});
    CHECK(srv.stats().by_method.at("POST") == 3);
    CHECK(srv.stats().by_method.count("DELETE") == 0);
    CHECK(srv.stats().delete_objects_keys == std::vector<std::size_t>{1000, 1000, 501});
    CHECK(counter_value("skiff_s3_requests_total", del_kfs) - requests0 == 3);
}

TEST_CASE("s3 store: remove_many goes through every batch and reports refused keys", "[storage][s3_store][remove_many]") {
    fake_s3 srv;
    fault_rule denied;
    denied.method = "DELETE";
    denied.pattern = "-locked$";
    denied.action = fault_action::access_denied;
    denied.count = -1;
    srv.add_rule(denied);
    fault_rule slow;
    slow.method = "DELETE";
    slow.pattern = "-busy$";
    slow.action = fault_action::status_503_slowdown;
    slow.count = -1;
    srv.add_rule(slow);
    std::vector<std::string> keys;
    for (int i = 0; i < 2500; ++i) keys.push_back(fmt::format("k/{:05}", i));
    keys.push_back("k/00000-busy"); // sorts into the first batch
    keys.push_back("k/02400-locked"); // into the last one
    for (const auto& k : keys) srv.put_object("test-bucket", "p/" + k, "x");
    int throttled = 0;
    auto t = [](fake_s3* s, std::vector<std::string> ks, int* throttles) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket/p");
        st->set_throttle_observer([throttles] { ++*throttles; });
        auto r = co_await st->remove_many(ks, {});
        REQUIRE_FALSE(r.has_value());
        // The refusal retrying cannot fix wins over the SlowDown of an earlier batch.
        CHECK(r.error().code == errc::permanent);
        CHECK_FALSE(r.error().throttled);
        CHECK_THAT(r.error().message, Catch::Contains("p/k/02400-locked"));
        CHECK_THAT(r.error().message, Catch::Contains("AccessDenied"));
        CHECK_THAT(r.error().message, Catch::Contains("2 of 2502 keys not removed"));

        // Only SlowDown left: transient and throttled.
        std::vector<std::string> busy{"k/00000-busy"};
        auto again = co_await st->remove_many(std::move(busy), {});
        REQUIRE_FALSE(again.has_value());
        CHECK(again.error().code == errc::transient);
        CHECK(again.error().throttled);
    };
    run_task(t(&srv, keys, &throttled));
    CHECK(srv.list_keys("test-bucket") == std::vector<std::string>{"p/k/00000-busy", "p/k/02400-locked"});
    CHECK(srv.stats().delete_objects_keys == std::vector<std::size_t>{1000, 1000, 502, 1});
    CHECK(throttled == 2); // once per batch with a per-key SlowDown
}

TEST_CASE("s3 store: remove_many checks every key before sending anything", "[storage][s3_store][remove_many]") {
    fake_s3 srv;
    srv.put_object("test-bucket", "p/a", "x");
    auto t = [](fake_s3* s) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket/p");
        std::vector<std::string> keys{"a", "b//c"};
        auto r = co_await st->remove_many(std::move(keys), {});
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == errc::invalid_argument);
        auto none = co_await st->remove_many(std::vector<std::string>{}, {});
        CHECK(none.has_value());
    };
    run_task(t(&srv));
    CHECK(srv.stats().requests == 0);
    CHECK(srv.has_object("test-bucket", "p/a"));
}

TEST_CASE("s3 store: remove_many stops at a batch that fails as a whole", "[storage][s3_store][remove_many][faults]") {
    fake_s3 srv;
    fault_rule down;
    down.method = "POST";
    down.action = fault_action::status_500;
    down.count = -1;
    srv.add_rule(down);
    std::vector<std::string> keys;
    for (int i = 0; i < 1500; ++i) keys.push_back(fmt::format("k/{:05}", i));
    for (const auto& k : keys) srv.put_object("test-bucket", "p/" + k, "x");
    auto t = [](fake_s3* s, std::vector<std::string> ks) -> task<void> {
        auto c = make_client(config_for(*s));
        auto st = make_store(*c, "s3://test-bucket/p");
        auto r = co_await st->remove_many(std::move(ks), {});
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == errc::transient);
        CHECK_THAT(r.error().message, Catch::Contains("'s3://test-bucket/p/k/00000' and 999 more keys (batch 1 of 2)"));
        CHECK_THAT(r.error().message, Catch::Contains("InternalError"));
    };
    run_task(t(&srv, keys));
    // Every attempt was the first batch's (the client's six), none the second's.
    CHECK(srv.stats().by_method.at("POST") == 6);
    CHECK(srv.list_keys("test-bucket").size() == 1500);
}
