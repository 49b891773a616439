// gateway_kv against a real etcd (started by the test, see etcd_process.hpp): the kv
// contract, then what only the real client has (endpoints, a dying etcd, size limits).
#include "etcd_process.hpp"
#include "kv_contract.hpp"
#include "run_task.hpp"

#include <skiff/etcd/gateway_kv.hpp>
#include <skiff/http/client.hpp>
#include <skiff/runtime/timer.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <unistd.h>

using namespace std::chrono_literals;
using namespace skiff;
using etcd::errc;
using etcd::event;
using runtime::task;

#define AWAIT(var, expr)       \
    auto var##_task_ = (expr); \
    auto var = co_await std::move(var##_task_)
#define AWAIT_VOID(var, expr)  \
    auto var##_task_ = (expr); \
    co_await std::move(var##_task_)

namespace {

std::unique_ptr<etcd::gateway_kv> connect(std::vector<std::string> endpoints) {
    etcd::gateway_config cfg;
    cfg.endpoints = std::move(endpoints);
    cfg.request_timeout = 2000ms;
    cfg.connect_timeout = 500ms;
    auto kv = etcd::gateway_kv::create(std::move(cfg));
    REQUIRE(kv);
    return std::move(*kv);
}

// Until etcd has elected itself and answers reads.
task<void> wait_ready(etcd::kv& kv) {
    const auto deadline = runtime::reactor::local().now() + 10s;
    for (;;) {
        AWAIT(r, kv.get("/skiff-test/ready"));
        if (r) co_return;
        INFO(r.error().message);
        REQUIRE(runtime::reactor::local().now() < deadline);
        auto nap = runtime::sleep(50ms);
        (void)co_await nap;
    }
}

// The one etcd the contract scenarios share (each works under its own key prefix).
test::etcd_process& shared_etcd() {
    static std::unique_ptr<test::etcd_process> p = test::etcd_process::start();
    return *p;
}

class gateway_harness final : public test::kv_harness {
public:
    explicit gateway_harness(test::etcd_process& etcd) : _etcd(etcd) {
        static int n = 0;
        _ns = fmt::format("/skiff-test/{}/{}/", ::getpid(), ++n);
    }

    etcd::kv& client() override { return *_clients.emplace_back(connect({_etcd.url()})); }
    task<void> shutdown() override {
        for (auto& c : _clients) {
            auto closing = c->close();
            co_await std::move(closing);
        }
        _clients.clear();
    }
    task<void> let_pass(std::chrono::milliseconds d) override {
        auto nap = runtime::sleep(d);
        (void)co_await nap;
    }
    task<void> compact(std::int64_t rev) override {
        // Not part of kv (skiff never compacts): straight to the gateway.
        http::client c;
        const std::string body = fmt::format(R"({{"revision":"{}","physical":true}})", rev);
        http::request req;
        req.method = "POST";
        req.url = _etcd.url() + "/v3/kv/compaction";
        req.body = std::span<const char>(body.data(), body.size());
        auto sending = c.send(std::move(req));
        auto r = co_await std::move(sending);
        REQUIRE(r);
        CHECK(r->status == 200);
    }
    std::chrono::seconds min_ttl() const override { return 1s; }
    std::string ns() override { return _ns; }

private:
    test::etcd_process& _etcd;
    std::string _ns;
    std::vector<std::unique_ptr<etcd::gateway_kv>> _clients;
};

task<void> ready_then(gateway_harness& h, test::kv_scenario fn) {
    AWAIT_VOID(ready, wait_ready(h.client()));
    AWAIT_VOID(ran, test::run_scenario(h, fn));
}

// ---- only the real client ----------------------------------------------------------------

std::chrono::milliseconds since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
}

task<void> killed_etcd_is_unavailable(test::etcd_process& etcd) {
    auto kv = connect({etcd.url()});
    AWAIT_VOID(ready, wait_ready(*kv));
    AWAIT(p, kv->put("/k", "v"));
    REQUIRE(p);
    {
        auto w = kv->watch("/k", false, *p);
        AWAIT(first, test::collect(*w, 1));
        CHECK(first[0].kv.value == "v");

        etcd.kill();
        // The stream breaks at once (the connection is reset), not at some timeout.
        auto t0 = std::chrono::steady_clock::now();
        AWAIT(broken, w->next());
        REQUIRE_FALSE(broken);
        CHECK(broken.error().code == errc::unavailable);
        CHECK(since(t0) < 1000ms);
    }
    auto t0 = std::chrono::steady_clock::now();
    AWAIT(g, kv->get("/k"));
    REQUIRE_FALSE(g);
    CHECK(g.error().code == errc::unavailable);
    CHECK(g.error().retriable());
    AWAIT(w2, kv->put("/k", "v2"));
    REQUIRE_FALSE(w2);
    CHECK(w2.error().code == errc::unavailable);
    CHECK(since(t0) < 1000ms);
    auto w3 = kv->watch("/k", false, 0);
    AWAIT(n3, w3->next());
    REQUIRE_FALSE(n3);
    CHECK(n3.error().code == errc::unavailable);
    w3.reset();
    AWAIT_VOID(closed, kv->close());
}

task<void> watch_again_after_restart(test::etcd_process& etcd) {
    auto kv = connect({etcd.url()});
    AWAIT_VOID(ready, wait_ready(*kv));
    AWAIT(p1, kv->put("/k", "before"));
    REQUIRE(p1);
    std::int64_t last_seen = 0;
    {
        auto w = kv->watch("/k", false, *p1);
        AWAIT(seen, test::collect(*w, 1));
        last_seen = seen.back().kv.mod_revision;
        etcd.restart();
        AWAIT(broken, w->next());
        REQUIRE_FALSE(broken);
        CHECK(broken.error().code == errc::unavailable);
    }
    AWAIT_VOID(ready_again, wait_ready(*kv));
    AWAIT(p2, kv->put("/k", "after"));
    REQUIRE(p2);
    CHECK(*p2 == last_seen + 1); // the keyspace and its revisions survived the restart
    // What the cluster code does: watch again from the last revision seen + 1.
    auto w = kv->watch("/k", false, last_seen + 1);
    AWAIT(again, test::collect(*w, 1));
    REQUIRE(again.size() == 1);
    CHECK(again[0].kv.value == "after");
    CHECK(again[0].kv.mod_revision == *p2);
    w.reset();
    AWAIT_VOID(closed, kv->close());
}

task<void> dead_first_endpoint(test::etcd_process& etcd) {
    const auto dead = fmt::format("http://127.0.0.1:{}", test::unused_port());
    auto kv = connect({dead, etcd.url()});
    CHECK(kv->current_endpoint() == dead);
    AWAIT_VOID(ready, wait_ready(*kv));
    CHECK(kv->current_endpoint() == etcd.url());
    AWAIT(p, kv->put("/skiff-test/two-endpoints", "v"));
    REQUIRE(p);
    // A write is resent to the next endpoint only when it never left: a refused connection.
    auto kv2 = connect({dead, etcd.url()});
    AWAIT(p2, kv2->put("/skiff-test/two-endpoints", "v2"));
    REQUIRE(p2);
    CHECK(*p2 == *p + 1);
    // A watch, too, moves past the dead endpoint.
    auto kv3 = connect({dead, etcd.url()});
    {
        auto w = kv3->watch("/skiff-test/two-endpoints", false, *p);
        AWAIT(events, test::collect(*w, 2));
        CHECK(events[0].kv.value == "v");
        CHECK(events[1].kv.value == "v2");
    }
    AWAIT_VOID(c1, kv->close());
    AWAIT_VOID(c2, kv2->close());
    AWAIT_VOID(c3, kv3->close());
}

task<void> oversized_answers_are_refused(test::etcd_process& etcd) {
    etcd::gateway_config cfg;
    cfg.endpoints = {etcd.url()};
    cfg.max_response_bytes = 1024;
    auto made = etcd::gateway_kv::create(std::move(cfg));
    REQUIRE(made);
    auto& kv = **made;
    AWAIT_VOID(ready, wait_ready(kv));
    AWAIT(p, kv.put("/skiff-test/big", std::string(4096, 'x')));
    REQUIRE(p);
    AWAIT(g, kv.get("/skiff-test/big"));
    REQUIRE_FALSE(g);
    CHECK(g.error().code == errc::bad_response);
    AWAIT_VOID(closed, kv.close());
}

task<void> keepalive_of_unknown_lease(test::etcd_process& etcd) {
    auto kv = connect({etcd.url()});
    AWAIT_VOID(ready, wait_ready(*kv));
    AWAIT(ka, kv->keepalive(0x1234));
    REQUIRE_FALSE(ka);
    CHECK(ka.error().code == errc::lease_not_found);
    AWAIT(rv, kv->revoke(0x1234));
    REQUIRE_FALSE(rv);
    CHECK(rv.error().code == errc::lease_not_found);
    AWAIT(p, kv->put("/skiff-test/k", "v", 0x1234));
    REQUIRE_FALSE(p);
    CHECK(p.error().code == errc::lease_not_found);
    AWAIT_VOID(closed, kv->close());
}

} // namespace

TEST_CASE("gateway_kv keeps the kv contract against etcd", "[etcd][gateway_kv]") {
    auto& etcd = shared_etcd();
    const auto& all = test::kv_contract();
    const auto i = GENERATE_COPY(range(std::size_t{0}, all.size()));
    DYNAMIC_SECTION(all[i].name) {
        gateway_harness h(etcd);
        runtime::run_task(ready_then(h, all[i].fn));
    }
}

TEST_CASE("gateway_kv: a killed etcd is errc::unavailable at once", "[etcd][gateway_kv]") {
    auto etcd = test::etcd_process::start();
    runtime::run_task(killed_etcd_is_unavailable(*etcd));
}

TEST_CASE("gateway_kv: after a restart the watch resumes from the last revision", "[etcd][gateway_kv]") {
    auto etcd = test::etcd_process::start();
    runtime::run_task(watch_again_after_restart(*etcd));
}

TEST_CASE("gateway_kv: a dead first endpoint is skipped", "[etcd][gateway_kv]") {
    runtime::run_task(dead_first_endpoint(shared_etcd()));
}

TEST_CASE("gateway_kv: answers over max_response_bytes are refused", "[etcd][gateway_kv]") {
    runtime::run_task(oversized_answers_are_refused(shared_etcd()));
}

TEST_CASE("gateway_kv: an unknown lease is lease_not_found", "[etcd][gateway_kv]") {
    runtime::run_task(keepalive_of_unknown_lease(shared_etcd()));
}

TEST_CASE("gateway_config::parse_endpoints", "[etcd]") {
    auto two = etcd::gateway_config::parse_endpoints("http://127.0.0.1:2379, https://etcd-2:2379/");
    REQUIRE(two);
    CHECK(*two == std::vector<std::string>{"http://127.0.0.1:2379", "https://etcd-2:2379"});
    auto bad = etcd::gateway_config::parse_endpoints("127.0.0.1:2379");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().code == errc::invalid_argument);
    auto none = etcd::gateway_config::parse_endpoints(" , ");
    REQUIRE_FALSE(none);
    CHECK(none.error().code == errc::invalid_argument);
}
