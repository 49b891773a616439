// memory_kv: the kv contract on a manual clock, then what only the fake has (failure
// injection, expiring a lease on demand, several clients on one store).
#include "kv_contract.hpp"
#include "run_task.hpp"

#include <skiff/etcd/memory_kv.hpp>
#include <skiff/runtime/timer.hpp>

#include <catch2/catch.hpp>

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

// A few loop turns: timers due on the manual clock fire, woken watchers run.
task<void> turns(int n) {
    for (int i = 0; i < n; ++i) {
        auto nap = runtime::sleep(0ms);
        (void)co_await nap;
    }
}

class memory_harness final : public test::kv_harness {
public:
    explicit memory_harness(std::shared_ptr<runtime::manual_clock> clk)
        : _clk(std::move(clk)), _store(etcd::memory_store::create(2s)) {}

    etcd::kv& client() override { return *_clients.emplace_back(std::make_unique<etcd::memory_kv>(_store)); }
    task<void> shutdown() override {
        for (auto& c : _clients) {
            auto closing = c->close();
            co_await std::move(closing);
        }
        _clients.clear();
    }
    task<void> let_pass(std::chrono::milliseconds d) override {
        _clk->advance(d);
        auto t = turns(3);
        co_await std::move(t);
    }
    task<void> compact(std::int64_t rev) override {
        _store->compact(rev);
        co_return;
    }
    std::chrono::seconds min_ttl() const override { return 2s; }
    std::string ns() override { return "/skiff-test/"; }

    etcd::memory_store& store() { return *_store; }
    etcd::memory_kv& memory_client() {
        return static_cast<etcd::memory_kv&>(client());
    }

private:
    std::shared_ptr<runtime::manual_clock> _clk;
    std::shared_ptr<etcd::memory_store> _store;
    std::vector<std::unique_ptr<etcd::memory_kv>> _clients;
};

using memory_scenario = task<void> (*)(memory_harness&, runtime::manual_clock&);

task<void> adapt(memory_harness& h, runtime::manual_clock& clk, memory_scenario fn) {
    std::exception_ptr ex;
    try {
        auto body = fn(h, clk);
        co_await std::move(body);
    } catch (...) {
        ex = std::current_exception();
    }
    auto closing = h.shutdown();
    co_await std::move(closing);
    if (ex) std::rethrow_exception(ex);
}

void run_memory(test::kv_scenario fn) {
    auto clk = std::make_shared<runtime::manual_clock>();
    runtime::reactor_config cfg;
    cfg.clk = clk;
    auto r = runtime::make_test_reactor(cfg);
    memory_harness h(clk);
    r->run_until_complete(test::run_scenario(h, fn));
}

void run_memory(memory_scenario fn) {
    auto clk = std::make_shared<runtime::manual_clock>();
    runtime::reactor_config cfg;
    cfg.clk = clk;
    auto r = runtime::make_test_reactor(cfg);
    memory_harness h(clk);
    r->run_until_complete(adapt(h, *clk, fn));
}

// ---- only the fake -------------------------------------------------------------------------

task<void> unavailable_injection(memory_harness& h, runtime::manual_clock&) {
    auto& down = h.memory_client();
    auto& up = h.memory_client();
    AWAIT(p, down.put("/k", "v"));
    REQUIRE(p);
    auto w = down.watch("/", true, 0);
    AWAIT(p2, up.put("/k", "v2"));
    REQUIRE(p2);
    down.set_unavailable(true);
    // Events already on the way are still delivered, then the stream is broken.
    AWAIT(first, w->next());
    REQUIRE(first);
    REQUIRE(first->size() == 1);
    CHECK((*first)[0].kv.value == "v2");
    AWAIT(broken, w->next());
    REQUIRE_FALSE(broken);
    CHECK(broken.error().code == errc::unavailable);
    CHECK(broken.error().retriable());

    AWAIT(g, down.get("/k"));
    REQUIRE_FALSE(g);
    CHECK(g.error().code == errc::unavailable);
    AWAIT(t, down.txn({}));
    REQUIRE_FALSE(t);
    CHECK(t.error().code == errc::unavailable);
    AWAIT(l, down.grant(5s));
    REQUIRE_FALSE(l);
    CHECK(l.error().code == errc::unavailable);
    auto w2 = down.watch("/", true, 0);
    AWAIT(n2, w2->next());
    REQUIRE_FALSE(n2);
    CHECK(n2.error().code == errc::unavailable);

    // The other client is not affected; once back, the first one sees the same store.
    AWAIT(p3, up.put("/k", "v3"));
    REQUIRE(p3);
    down.set_unavailable(false);
    AWAIT(back, down.get("/k"));
    REQUIRE(back);
    REQUIRE(back->kvs.size() == 1);
    CHECK(back->kvs[0].value == "v3");
    // Re-created from the last revision seen + 1, the watch misses nothing.
    auto w3 = down.watch("/", true, *p2 + 1);
    AWAIT(missed, test::collect(*w3, 1));
    REQUIRE(missed.size() == 1);
    CHECK(missed[0].kv.mod_revision == *p3);
}

task<void> expire_lease_now(memory_harness& h, runtime::manual_clock&) {
    auto& kv = h.memory_client();
    AWAIT(g, kv.grant(60s));
    REQUIRE(g);
    AWAIT(p, kv.put("/member", "x", g->id));
    REQUIRE(p);
    auto w = kv.watch("/member", false, 0);
    CHECK(h.store().lease_count() == 1);
    CHECK(h.store().expire_lease(g->id));
    CHECK_FALSE(h.store().expire_lease(g->id));
    CHECK(h.store().lease_count() == 0);
    AWAIT(ev, test::collect(*w, 1));
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].type == event::kind::del);
    CHECK(h.store().revision() == *p + 1);
}

task<void> expiry_needs_no_call(memory_harness& h, runtime::manual_clock& clk) {
    // The expiry timer, not the next call, deletes the key: a watcher alone sees it.
    auto& kv = h.memory_client();
    AWAIT(g, kv.grant(2s));
    REQUIRE(g);
    AWAIT(p, kv.put("/member", "x", g->id));
    REQUIRE(p);
    auto w = kv.watch("/member", false, 0);
    clk.advance(1999ms);
    AWAIT_VOID(t1, turns(3));
    CHECK(h.store().revision() == *p);
    clk.advance(1ms);
    AWAIT_VOID(t2, turns(3));
    CHECK(h.store().revision() == *p + 1);
    AWAIT(ev, test::collect(*w, 1));
    REQUIRE(ev.size() == 1);
    CHECK(ev[0].type == event::kind::del);
}

task<void> rebinding_a_key_moves_it_between_leases(memory_harness& h, runtime::manual_clock&) {
    auto& kv = h.memory_client();
    AWAIT(a, kv.grant(10s));
    REQUIRE(a);
    AWAIT(b, kv.grant(10s));
    REQUIRE(b);
    AWAIT(p1, kv.put("/k", "1", a->id));
    REQUIRE(p1);
    AWAIT(p2, kv.put("/k", "2", b->id));
    REQUIRE(p2);
    CHECK(h.store().expire_lease(a->id));
    AWAIT(still, kv.get("/k"));
    REQUIRE(still);
    REQUIRE(still->kvs.size() == 1);
    CHECK(still->kvs[0].lease == b->id);
    CHECK(h.store().expire_lease(b->id));
    AWAIT(gone, kv.get("/k"));
    REQUIRE(gone);
    CHECK(gone->kvs.empty());
}

task<void> duplicate_put_in_txn_is_refused(memory_harness& h, runtime::manual_clock&) {
    auto& kv = h.memory_client();
    etcd::txn_request t;
    t.success.push_back(etcd::put_op{"/k", "1", 0});
    t.success.push_back(etcd::put_op{"/k", "2", 0});
    AWAIT(r, kv.txn(t));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_argument);
    CHECK(h.store().revision() == 1);
}

} // namespace

TEST_CASE("memory_kv keeps the kv contract", "[etcd][memory_kv]") {
    const auto& all = test::kv_contract();
    const auto i = GENERATE_COPY(range(std::size_t{0}, all.size()));
    DYNAMIC_SECTION(all[i].name) { run_memory(all[i].fn); }
}

TEST_CASE("memory_kv: set_unavailable fails calls and breaks watches", "[etcd][memory_kv]") {
    run_memory(unavailable_injection);
}
TEST_CASE("memory_kv: a lease expired on demand deletes its keys", "[etcd][memory_kv]") { run_memory(expire_lease_now); }
TEST_CASE("memory_kv: leases expire on the clock without any call", "[etcd][memory_kv]") {
    run_memory(expiry_needs_no_call);
}
TEST_CASE("memory_kv: a key put under another lease leaves the first", "[etcd][memory_kv]") {
    run_memory(rebinding_a_key_moves_it_between_leases);
}
TEST_CASE("memory_kv: two puts of one key in a txn are refused", "[etcd][memory_kv]") {
    run_memory(duplicate_put_in_txn_is_refused);
}

TEST_CASE("prefix_end", "[etcd]") {
    CHECK(etcd::prefix_end("abc") == "abd");
    CHECK(etcd::prefix_end("/skiff/") == "/skiff0");
    CHECK(etcd::prefix_end(std::string("a\xff", 2)) == "b");
    CHECK(etcd::prefix_end(std::string("\xff\xff", 2)).empty());
    CHECK(etcd::prefix_end("").empty());
}

TEST_CASE("etcd errc names and messages", "[etcd]") {
    const std::error_code ec = etcd::errc::lease_not_found;
    CHECK(ec.category().name() == std::string("skiff.etcd"));
    CHECK(ec.message() == "etcd lease expired or was revoked");
    CHECK(std::string(etcd::to_string(etcd::errc::compacted)) == "compacted");
}
