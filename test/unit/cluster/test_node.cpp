// cluster::node against the in-process etcd (etcd::memory_kv): registration, claims and
// epochs, releases, lease loss and the view. Real time with 1-2 s leases: a few seconds each.
#include "run_task.hpp"

#include <skiff/cluster/node.hpp>
#include <skiff/etcd/memory_kv.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/timer.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>

using namespace skiff;
using namespace std::chrono_literals;

namespace {

cluster::node_config config_for(std::int32_t id, std::int32_t port = 0) {
    cluster::node_config c;
    c.ns = "test";
    c.self.id = id;
    c.self.host = "127.0.0.1";
    c.self.port = port ? port : 9000 + id;
    c.lease_ttl = 2s;
    c.safety_margin = 100ms;
    return c;
}

struct cluster_of_two {
    std::shared_ptr<etcd::memory_store> store = etcd::memory_store::create(1s);
    etcd::memory_kv kv_a{store}, kv_b{store};
    cluster::node a{kv_a, config_for(1)}, b{kv_b, config_for(2)};
};

// Polls `cond` every 20 ms for up to `limit`.
// join() with its error in the failure message.
runtime::task<bool> joined(cluster::node& n) {
    auto r = co_await n.join();
    if (!r) UNSCOPED_INFO("join: " << r.error().message);
    co_return static_cast<bool>(r);
}

template <typename Cond>
runtime::task<bool> eventually(Cond cond, std::chrono::milliseconds limit) {
    for (auto waited = 0ms; waited < limit; waited += 20ms) {
        if (cond()) co_return true;
        (void)co_await runtime::sleep(20ms);
    }
    co_return cond();
}

} // namespace

TEST_CASE("a broker id registers once; a second broker with the same id is refused", "[cluster][node]") {
    runtime::run_task([]() -> runtime::task<void> {
        auto store = etcd::memory_store::create(1s);
        etcd::memory_kv kv1(store), kv2(store);
        cluster::node first(kv1, config_for(1, 9001));
        cluster::node impostor(kv2, config_for(1, 9999));
        auto j = co_await first.join();
        REQUIRE(j);
        REQUIRE(first.current()->members.count(1) == 1);
        REQUIRE(first.lease_valid(runtime::reactor::local().now()));
        auto k = co_await impostor.join();
        REQUIRE(!k);
        REQUIRE(k.error().code == cluster::errc::already_live);
        REQUIRE(k.error().message.find("127.0.0.1:9001") != std::string::npos);
        REQUIRE(store->lease_count() == 1); // the impostor's lease was revoked
    }());
}

TEST_CASE("a restarted broker (same id and address) waits for its old lease instead of failing", "[cluster][node]") {
    runtime::run_task([]() -> runtime::task<void> {
        auto store = etcd::memory_store::create(1s);
        etcd::memory_kv kv1(store), kv2(store);
        cluster::node old_run(kv1, config_for(3));
        const bool ok1 = static_cast<bool>(co_await joined(old_run));
        REQUIRE(ok1);
        auto cfg = config_for(3);
        cfg.join_wait = 5s;
        cluster::node new_run(kv2, cfg);
        // The old run "crashed": its lease runs out after its TTL (2 s) since nobody keeps it.
        const auto t0 = runtime::reactor::local().now();
        auto j = co_await new_run.join();
        REQUIRE(j);
        REQUIRE(runtime::reactor::local().now() - t0 >= 1s);
        REQUIRE(new_run.current()->members.count(3) == 1);
    }());
}

TEST_CASE("only one of two brokers wins a partition, and the epoch grows with every owner", "[cluster][node]") {
    runtime::run_task([]() -> runtime::task<void> {
        cluster_of_two c;
        const bool ok2 = static_cast<bool>(co_await joined(c.a));
        REQUIRE(ok2);
        const bool ok3 = static_cast<bool>(co_await joined(c.b));
        REQUIRE(ok3);
        auto ca = co_await c.a.claim_partition("orders", 0);
        auto cb = co_await c.b.claim_partition("orders", 0);
        REQUIRE(ca);
        REQUIRE(!cb);
        REQUIRE(cb.error().code == cluster::errc::lost);
        REQUIRE(ca->epoch == 1);
        REQUIRE(ca->previous.clean); // never owned before

        // A clean hand-over: the next owner continues where the log ended.
        const bool ok4 = static_cast<bool>(co_await c.a.release_partition("orders", 0, ca->epoch, true, 1234));
        REQUIRE(ok4);
        auto cb2 = co_await c.b.claim_partition("orders", 0);
        REQUIRE(cb2);
        REQUIRE(cb2->epoch == 2);
        REQUIRE(cb2->previous.clean);
        REQUIRE(cb2->previous.next_offset == 1234);
        // A release by the former owner now fails: the key is not its own any more.
        auto stale = co_await c.a.release_partition("orders", 0, ca->epoch, true, 9999);
        REQUIRE(!stale);
        REQUIRE(stale.error().code == cluster::errc::lost);

        // The owner dies: its key goes with its lease; the next claim is marked unclean.
        REQUIRE(c.store->expire_lease(c.b.lease_id()));
        auto ca2 = co_await c.a.claim_partition("orders", 0);
        REQUIRE(ca2);
        REQUIRE(ca2->epoch == 3);
        REQUIRE(!ca2->previous.clean);
    }());
}

TEST_CASE("the view follows members and owners through the watch", "[cluster][node]") {
    runtime::run_task([]() -> runtime::task<void> {
        cluster_of_two c;
        const bool ok5 = static_cast<bool>(co_await joined(c.a));
        REQUIRE(ok5);
        runtime::gate g("test");
        std::stop_source stop;
        REQUIRE(g.spawn(c.a.run(stop.get_token())));
        const bool ok6 = static_cast<bool>(co_await joined(c.b));
        REQUIRE(ok6);
        const bool ok7 = static_cast<bool>(co_await eventually([&] { return c.a.current()->members.size() == 2; }, 2000ms));
        REQUIRE(ok7);
        auto cb = co_await c.b.claim_partition("t", 3);
        REQUIRE(cb);
        const bool ok8 = static_cast<bool>(co_await eventually([&] { return c.a.current()->owner_of("t", 3) != nullptr; }, 2000ms));
        REQUIRE(ok8);
        REQUIRE(c.a.current()->owner_of("t", 3)->broker == 2);
        REQUIRE(c.a.current()->owner_of("t", 3)->epoch == 1);
        // b dies: a sees it leave and its partition become free.
        REQUIRE(c.store->expire_lease(c.b.lease_id()));
        const bool ok9 = static_cast<bool>(co_await eventually([&] { return c.a.current()->members.size() == 1; }, 2000ms));
        REQUIRE(ok9);
        REQUIRE(c.a.current()->owner_of("t", 3) == nullptr);
        stop.request_stop();
        co_await g.close();
    }());
}

TEST_CASE("keep-alives hold the lease; an unreachable etcd lets it lapse; a lost lease rejoins", "[cluster][node]") {
    runtime::run_task([]() -> runtime::task<void> {
        cluster_of_two c;
        const bool ok10 = static_cast<bool>(co_await joined(c.a));
        REQUIRE(ok10);
        runtime::gate g("test");
        std::stop_source stop;
        REQUIRE(g.spawn(c.a.run(stop.get_token())));
        // Several TTLs: the keep-alives keep it valid.
        (void)co_await runtime::sleep(3000ms);
        REQUIRE(c.a.lease_valid(runtime::reactor::local().now()));
        REQUIRE(c.a.counters().keepalives >= 2);

        // etcd unreachable: the proven lifetime runs out within one TTL, without any answer.
        c.kv_a.set_unavailable(true);
        const bool ok11 = static_cast<bool>(co_await eventually([&] { return !c.a.lease_valid(runtime::reactor::local().now()); }, 2500ms));
        REQUIRE(ok11);
        const auto gen = c.a.lease_generation();
        // Meanwhile etcd expired the lease; when it is reachable again the node learns that and
        // joins again under a new lease.
        REQUIRE(c.store->expire_lease(c.a.lease_id()));
        c.kv_a.set_unavailable(false);
        const bool ok12 = static_cast<bool>(co_await eventually([&] { return c.a.lease_generation() > gen; }, 4000ms));
        REQUIRE(ok12);
        REQUIRE(c.a.lease_valid(runtime::reactor::local().now()));
        REQUIRE(c.a.counters().leases_lost == 1);
        const bool ok13 = static_cast<bool>(co_await eventually([&] { return c.a.current()->members.count(1) == 1; }, 2000ms));
        REQUIRE(ok13);
        stop.request_stop();
        co_await g.close();
    }());
}

TEST_CASE("the cluster lock is exclusive and freed by unlock", "[cluster][node]") {
    runtime::run_task([]() -> runtime::task<void> {
        cluster_of_two c;
        const bool ok14 = static_cast<bool>(co_await joined(c.a));
        REQUIRE(ok14);
        const bool ok15 = static_cast<bool>(co_await joined(c.b));
        REQUIRE(ok15);
        const std::string key = c.a.key_names().catalog_lock();
        const bool ok16 = static_cast<bool>(co_await c.a.lock(key, 100ms));
        REQUIRE(ok16);
        auto busy = co_await c.b.lock(key, 200ms);
        REQUIRE(!busy);
        co_await c.a.unlock(key);
        const bool ok17 = static_cast<bool>(co_await c.b.lock(key, 200ms));
        REQUIRE(ok17);
    }());
}
