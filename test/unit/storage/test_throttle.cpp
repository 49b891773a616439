// The io budget hears "slow down" at the request that got it, and nothing else (issue 18):
// through the stores' throttle observer, with the S3 store on the in-process fake S3, and
// end to end through a partition log's flush uploads, the only retry loop of a flush.
#include "fake_s3.hpp"
#include "fake_s3_client.hpp"
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/s3_store.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::batch_of;
using skiff::test::fake_s3;
using skiff::test::fault_action;
using skiff::test::fault_rule;
using skiff::test::open_log;

namespace {

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

s3::client_config config_for(const fake_s3& srv) {
    s3::client_config cfg = skiff::test::fake_s3_client_config(srv);
    cfg.creds = {"AKIDTHROTTLE", "throttle/secret", ""};
    cfg.attempt_timeout = 5s;
    cfg.operation_deadline = 20s;
    cfg.backoff_seed = 3;
    return cfg;
}

// A client and its store, built and destroyed on the reactor thread.
struct s3_stack {
    explicit s3_stack(const fake_s3& srv, s3::client_config cfg) {
        auto c = s3::client::create(std::move(cfg));
        REQUIRE(c.has_value());
        client = std::move(*c);
        auto s = s3_store::create(*client, "s3://test-bucket/throttle");
        REQUIRE(s.has_value());
        store = std::move(*s);
        (void)srv;
    }
    std::unique_ptr<s3::client> client;
    std::unique_ptr<s3_store> store;
};

log_config log_cfg() {
    log_config c = skiff::test::fast_log_config();
    c.max_age = 20ms;
    c.append_timeout = 20s;
    c.close_timeout = 5s;
    return c;
}

task<bool> append_durable(partition_log& log, int first_seq) {
    const std::string set = batch_of(first_seq, 3);
    auto r = co_await log.append(std::span<const char>(set.data(), set.size()), ack_mode::durable);
    co_return r.has_value();
}

std::uint64_t puts_seen(const fake_s3& srv, std::string_view suffix) {
    std::uint64_t n = 0;
    for (const auto& r : srv.request_log()) {
        if (r.method == "PUT" && r.key.size() >= suffix.size() &&
            r.key.compare(r.key.size() - suffix.size(), suffix.size(), suffix) == 0) {
            ++n;
        }
    }
    return n;
}

} // namespace

TEST_CASE("memory store: an injected SlowDown is a throttle, a reset is not", "[storage][throttle]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(16, nullptr);
        budget.listen_to(store);
        store.add_fault(mem_fault_rule("put", "", mem_fault::fail_reset, 2));
        store.add_fault(mem_fault_rule("put", "", mem_fault::fail_transient, 1));
        const std::string body = "b";
        for (int i = 0; i < 2; ++i) {
            auto r = co_await store.put("k", bytes(body), false, {});
            REQUIRE_FALSE(r.has_value());
            CHECK(r.error().code == storage::errc::transient);
            CHECK_FALSE(r.error().throttled);
        }
        CHECK(budget.current_limit() == 16);
        CHECK(budget.stats().throttled == 0);
        auto slow = co_await store.put_once("k", bytes(body), false, {});
        REQUIRE_FALSE(slow.has_value());
        CHECK(slow.error().code == storage::errc::transient);
        CHECK(slow.error().throttled);
        CHECK(budget.current_limit() == 8);
        CHECK(budget.stats().throttled == 1);
        auto ok = co_await store.put_once("k", bytes(body), false, {});
        CHECK(ok.has_value());
        // Without an observer a throttle still fails the same way; nobody is told.
        store.set_throttle_observer({});
        store.add_fault(mem_fault_rule("put", "", mem_fault::fail_transient, 1));
        auto unheard = co_await store.put("k", bytes(body), false, {});
        CHECK_FALSE(unheard.has_value());
        CHECK(budget.stats().throttled == 1);
    };
    run_task(t());
}

TEST_CASE("s3 store: every SlowDown tells the budget at that request, also when retried into success",
          "[storage][throttle][s3_store]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::status_503_slowdown, .count = 2});
    auto t = [](fake_s3* s) -> task<void> {
        s3_stack st(*s, config_for(*s));
        io_budget budget(16, nullptr);
        budget.listen_to(*st.store);
        const std::string body = "segment bytes";
        // The client retries both SlowDowns and succeeds; the budget heard each of them.
        auto r = co_await st.store->put("a.kfs", bytes(body), false, {});
        REQUIRE(r.has_value());
        CHECK(budget.stats().throttled == 2);
        CHECK(budget.current_limit() == 4);
        // put_once: one request, the throttle comes back flagged and was heard once.
        s->add_rule({.method = "PUT", .action = fault_action::status_503_slowdown, .count = 1});
        auto once = co_await st.store->put_once("b.kfs", bytes(body), false, {});
        REQUIRE_FALSE(once.has_value());
        CHECK(once.error().code == storage::errc::transient);
        CHECK(once.error().throttled);
        CHECK(budget.stats().throttled == 3);
        CHECK(budget.current_limit() == 2);
        // Reads are heard the same way, per request.
        s->add_rule({.method = "GET", .action = fault_action::status_503_slowdown, .count = 1});
        auto got = co_await st.store->get("a.kfs", std::nullopt, {});
        REQUIRE(got.has_value());
        CHECK(got->data == body);
        CHECK(budget.stats().throttled == 4);
    };
    run_task(t(&srv));
    CHECK(srv.stats().by_method["PUT"] == 4); // 3 for put, 1 for put_once
}

TEST_CASE("s3 store: resets and 500s do not shrink the budget", "[storage][throttle][s3_store]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::reset, .count = 3});
    srv.add_rule({.method = "PUT", .action = fault_action::status_500, .count = 2});
    auto t = [](fake_s3* s) -> task<void> {
        s3_stack st(*s, config_for(*s));
        io_budget budget(16, nullptr);
        budget.listen_to(*st.store);
        const std::string body = "segment bytes";
        auto r = co_await st.store->put("a.kfs", bytes(body), false, {});
        REQUIRE(r.has_value());
        CHECK(budget.stats().throttled == 0);
        CHECK(budget.current_limit() == 16);
        // (A reset would not do here: libcurl resends a request once by itself when a reused
        // keep-alive connection turns out dead, see docs/retries.md.)
        s->add_rule({.method = "PUT", .action = fault_action::status_500, .count = 1});
        auto once = co_await st.store->put_once("b.kfs", bytes(body), false, {});
        REQUIRE_FALSE(once.has_value());
        CHECK(once.error().code == storage::errc::transient);
        CHECK_FALSE(once.error().throttled);
        CHECK(budget.stats().throttled == 0);
    };
    run_task(t(&srv));
    CHECK(srv.stats().faults_injected == 6);
}

TEST_CASE("flush uploads on S3: the budget halves at the first SlowDown, before the upload is retried",
          "[storage][throttle][partition_log]") {
    fake_s3 srv;
    // The first .kfs PUT is throttled; the second one hangs until the client's attempt
    // timeout, which holds the flush at its second attempt while the test looks.
    srv.add_rule({.method = "PUT", .pattern = "\\.kfs$", .action = fault_action::status_503_slowdown, .count = 1});
    srv.add_rule({.method = "PUT", .pattern = "\\.kfs$", .action = fault_action::hang, .count = 1});
    std::size_t limit_at_second_attempt = 0;
    std::uint64_t throttled_at_second_attempt = 0;
    bool durable = false;
    log_stats stats;
    io_budget_stats budget_stats;
    auto t = [](fake_s3* s, std::size_t* limit, std::uint64_t* throttled, bool* ok, log_stats* ls,
                io_budget_stats* bs) -> task<void> {
        auto cfg = config_for(*s);
        cfg.attempt_timeout = 500ms;
        s3_stack st(*s, cfg);
        io_budget budget(16, nullptr);
        budget.listen_to(*st.store);
        auto log = co_await open_log(*st.store, budget, partition_id("throttle-first", 0), log_cfg());
        auto append = [](partition_log* l, bool* out) -> task<void> { *out = co_await append_durable(*l, 0); };
        auto look = [](fake_s3* srv, io_budget* b, std::size_t* lim, std::uint64_t* thr) -> task<void> {
            // The second .kfs PUT reached the server: the first one's answer was handled.
            for (int i = 0; i < 5000 && puts_seen(*srv, ".kfs") < 2; ++i) (void)co_await sleep(1ms);
            *lim = b->current_limit();
            *thr = b->stats().throttled;
        };
        co_await when_all(append(log.get(), ok), look(s, &budget, limit, throttled));
        *ls = log->stats();
        *bs = budget.stats();
        co_await log->close();
    };
    run_task(t(&srv, &limit_at_second_attempt, &throttled_at_second_attempt, &durable, &stats, &budget_stats));
    CHECK(durable);
    // Heard at the first attempt, not after a client's worth of retries.
    CHECK(throttled_at_second_attempt == 1);
    CHECK(limit_at_second_attempt == 8);
    // The hung attempt timed out: a failure, retried by the log, but not a throttle.
    CHECK(budget_stats.throttled == 1);
    CHECK(stats.upload_retries == 2);
    CHECK(puts_seen(srv, ".kfs") == 3);
}

TEST_CASE("flush uploads on S3: SlowDown on a share of PUTs is heard once per throttled request",
          "[storage][throttle][partition_log]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::status_503_slowdown, .count = 4, .every = 2});
    bool all_durable = true;
    io_budget_stats budget_stats;
    log_stats stats;
    auto t = [](fake_s3* s, bool* ok, io_budget_stats* bs, log_stats* ls) -> task<void> {
        s3_stack st(*s, config_for(*s));
        io_budget budget(16, nullptr);
        budget.listen_to(*st.store);
        auto cfg = log_cfg();
        cfg.time_index = false; // the faults hit every other PUT of the pair (a sidecar would take some)
        auto log = co_await open_log(*st.store, budget, partition_id("throttle-share", 0), cfg);
        for (int i = 0; i < 6; ++i) *ok = (co_await append_durable(*log, i * 3)) && *ok;
        *bs = budget.stats();
        *ls = log->stats();
        co_await log->close();
    };
    run_task(t(&srv, &all_durable, &budget_stats, &stats));
    CHECK(all_durable);
    CHECK(srv.stats().faults_injected == 4);
    CHECK(budget_stats.throttled == 4);
    CHECK(budget_stats.decreases == 4);
    // put_once: every SlowDown was one retry of the log's loop, none of the client's.
    CHECK(stats.upload_retries == 4);
}

TEST_CASE("flush uploads on S3: a burst of connection resets does not shrink the budget",
          "[storage][throttle][partition_log]") {
    fake_s3 srv;
    srv.add_rule({.method = "PUT", .action = fault_action::reset, .count = 5});
    bool durable = false;
    io_budget_stats budget_stats;
    std::size_t limit = 0;
    log_stats stats;
    auto t = [](fake_s3* s, bool* ok, io_budget_stats* bs, std::size_t* lim, log_stats* ls) -> task<void> {
        s3_stack st(*s, config_for(*s));
        io_budget budget(16, nullptr);
        budget.listen_to(*st.store);
        auto log = co_await open_log(*st.store, budget, partition_id("throttle-reset", 0), log_cfg());
        *ok = co_await append_durable(*log, 0);
        *bs = budget.stats();
        *lim = budget.current_limit();
        *ls = log->stats();
        co_await log->close();
    };
    run_task(t(&srv, &durable, &budget_stats, &limit, &stats));
    CHECK(durable);
    CHECK(srv.stats().faults_injected == 5);
    CHECK(budget_stats.throttled == 0);
    CHECK(budget_stats.decreases == 0);
    CHECK(limit == 16);
    // Each reset the log saw was one retry of its loop; libcurl may have resent some on a
    // fresh connection by itself (a reused connection that died), so not all five reach it.
    CHECK(stats.upload_retries >= 1);
    CHECK(stats.upload_retries <= 5);
}
