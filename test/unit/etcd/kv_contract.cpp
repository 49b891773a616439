#include "kv_contract.hpp"

#include <catch2/catch.hpp>

#include <exception>

using namespace std::chrono_literals;

namespace skiff::test {

using etcd::compare;
using etcd::delete_op;
using etcd::errc;
using etcd::event;
using etcd::put_op;
using etcd::range_op;
using etcd::txn_request;
using runtime::task;

// `co_await` of a named task only (g++ 12 and temporaries in co_await operands).
#define AWAIT(var, expr)       \
    auto var##_task_ = (expr); \
    auto var = co_await std::move(var##_task_)
#define AWAIT_VOID(var, expr)  \
    auto var##_task_ = (expr); \
    co_await std::move(var##_task_)

namespace {

task<void> revisions(kv_harness& h) {
    auto& kv = h.client();
    const auto a = h.ns() + "a", b = h.ns() + "b";
    AWAIT(r1, kv.put(a, "1"));
    REQUIRE(r1);
    AWAIT(g1, kv.get(a));
    REQUIRE(g1);
    REQUIRE(g1->kvs.size() == 1);
    CHECK(g1->kvs[0].key == a);
    CHECK(g1->kvs[0].value == "1");
    CHECK(g1->kvs[0].create_revision == *r1);
    CHECK(g1->kvs[0].mod_revision == *r1);
    CHECK(g1->kvs[0].version == 1);
    CHECK(g1->kvs[0].lease == 0);
    CHECK(g1->revision == *r1);

    AWAIT(r2, kv.put(a, std::string("two\0bytes", 9)));
    REQUIRE(r2);
    CHECK(*r2 == *r1 + 1);
    AWAIT(r3, kv.put(b, "3"));
    REQUIRE(r3);
    CHECK(*r3 == *r2 + 1);
    AWAIT(all, kv.get_prefix(h.ns()));
    REQUIRE(all);
    REQUIRE(all->kvs.size() == 2);
    CHECK(all->kvs[0].key == a);
    CHECK(all->kvs[0].value == std::string("two\0bytes", 9));
    CHECK(all->kvs[0].create_revision == *r1);
    CHECK(all->kvs[0].mod_revision == *r2);
    CHECK(all->kvs[0].version == 2);
    CHECK(all->kvs[1].key == b);
    CHECK(all->revision == *r3);

    AWAIT(d1, kv.del(a));
    REQUIRE(d1);
    CHECK(*d1 == *r3 + 1);
    AWAIT(gone, kv.get(a));
    REQUIRE(gone);
    CHECK(gone->kvs.empty());
    CHECK(gone->revision == *d1);
    // Deleting nothing writes nothing: the revision stays.
    AWAIT(d2, kv.del(a));
    REQUIRE(d2);
    CHECK(*d2 == *d1);
    // Recreated: a new life, version 1 again.
    AWAIT(r4, kv.put(a, "again"));
    REQUIRE(r4);
    AWAIT(g4, kv.get(a));
    REQUIRE(g4);
    REQUIRE(g4->kvs.size() == 1);
    CHECK(g4->kvs[0].create_revision == *r4);
    CHECK(g4->kvs[0].version == 1);
}

txn_request claim(const std::string& key, std::string value) {
    txn_request t;
    t.compares.push_back(compare::absent(key));
    t.success.push_back(put_op{key, std::move(value), 0});
    t.failure.push_back(range_op{key, false});
    return t;
}

task<void> create_if_absent(kv_harness& h) {
    auto& broker1 = h.client();
    auto& broker2 = h.client();
    const auto key = h.ns() + "leader";
    AWAIT(first, broker1.txn(claim(key, "broker-1")));
    REQUIRE(first);
    CHECK(first->succeeded);
    CHECK(first->ranges.empty());
    AWAIT(second, broker2.txn(claim(key, "broker-2")));
    REQUIRE(second);
    CHECK_FALSE(second->succeeded);
    // The loser learns who won from the failure branch, at the same revision (no write).
    REQUIRE(second->ranges.size() == 1);
    REQUIRE(second->ranges[0].kvs.size() == 1);
    CHECK(second->ranges[0].kvs[0].value == "broker-1");
    CHECK(second->revision == first->revision);
    AWAIT(now, broker2.get(key));
    REQUIRE(now);
    REQUIRE(now->kvs.size() == 1);
    CHECK(now->kvs[0].value == "broker-1");
}

task<void> compare_value_and_mod_revision(kv_harness& h) {
    auto& kv = h.client();
    const auto key = h.ns() + "k";
    AWAIT(r1, kv.put(key, "x"));
    REQUIRE(r1);

    txn_request wrong_value;
    wrong_value.compares.push_back(compare::value_is(key, "y"));
    wrong_value.success.push_back(put_op{key, "never", 0});
    AWAIT(t1, kv.txn(wrong_value));
    REQUIRE(t1);
    CHECK_FALSE(t1->succeeded);
    CHECK(t1->revision == *r1);

    txn_request right_value;
    right_value.compares.push_back(compare::value_is(key, "x"));
    right_value.success.push_back(put_op{key, "z", 0});
    right_value.success.push_back(put_op{key + "-side", "s", 0});
    right_value.success.push_back(range_op{key, false});
    AWAIT(t2, kv.txn(right_value));
    REQUIRE(t2);
    CHECK(t2->succeeded);
    // One transaction, one revision, for every write in it; a range inside sees them.
    CHECK(t2->revision == *r1 + 1);
    REQUIRE(t2->ranges.size() == 1);
    REQUIRE(t2->ranges[0].kvs.size() == 1);
    CHECK(t2->ranges[0].kvs[0].value == "z");
    CHECK(t2->ranges[0].kvs[0].mod_revision == t2->revision);
    AWAIT(side, kv.get(key + "-side"));
    REQUIRE(side);
    REQUIRE(side->kvs.size() == 1);
    CHECK(side->kvs[0].mod_revision == t2->revision);

    // A compare-and-swap on a stale mod_revision loses; on the current one it wins.
    txn_request stale;
    stale.compares.push_back(compare::mod_revision_is(key, *r1));
    stale.success.push_back(put_op{key, "stale", 0});
    AWAIT(t3, kv.txn(stale));
    REQUIRE(t3);
    CHECK_FALSE(t3->succeeded);
    txn_request fresh;
    fresh.compares.push_back(compare::mod_revision_is(key, t2->revision));
    fresh.success.push_back(delete_op{key, true}); // the key and key-side
    AWAIT(t4, kv.txn(fresh));
    REQUIRE(t4);
    CHECK(t4->succeeded);
    AWAIT(left, kv.get_prefix(key));
    REQUIRE(left);
    CHECK(left->kvs.empty());

    // A missing key's value equals nothing and differs from nothing; its version is 0.
    txn_request missing;
    compare ne = compare::value_is(key, "x");
    ne.how = compare::op::not_equal;
    missing.compares.push_back(ne);
    AWAIT(t5, kv.txn(missing));
    REQUIRE(t5);
    CHECK_FALSE(t5->succeeded);
    txn_request version_zero;
    version_zero.compares.push_back(compare{key, compare::target::version, compare::op::equal, 0, {}});
    compare newer{key, compare::target::mod_revision, compare::op::less, t4->revision, {}};
    version_zero.compares.push_back(newer);
    AWAIT(t6, kv.txn(version_zero));
    REQUIRE(t6);
    CHECK(t6->succeeded);
}

task<void> lease_expiry_deletes_keys(kv_harness& h) {
    auto& kv = h.client();
    const auto key = h.ns() + "member";
    AWAIT(g, kv.grant(1s));
    REQUIRE(g);
    CHECK(g->ttl == h.min_ttl()); // raised to the minimum
    AWAIT(p, kv.put(key, "alive", g->id));
    REQUIRE(p);
    AWAIT(got, kv.get(key));
    REQUIRE(got);
    REQUIRE(got->kvs.size() == 1);
    CHECK(got->kvs[0].lease == g->id);
    auto w = kv.watch(h.ns(), true, *p + 1);

    AWAIT_VOID(passed, h.let_pass(std::chrono::duration_cast<std::chrono::milliseconds>(g->ttl) + 1500ms));
    AWAIT(events, collect(*w, 1));
    REQUIRE(events.size() == 1);
    CHECK(events[0].type == event::kind::del);
    CHECK(events[0].kv.key == key);
    CHECK(events[0].kv.mod_revision > *p);
    AWAIT(after, kv.get(key));
    REQUIRE(after);
    CHECK(after->kvs.empty());
    AWAIT(ka, kv.keepalive(g->id));
    REQUIRE_FALSE(ka);
    CHECK(ka.error().code == errc::lease_not_found);
    AWAIT(late_put, kv.put(key, "zombie", g->id));
    REQUIRE_FALSE(late_put);
    CHECK(late_put.error().code == errc::lease_not_found);
}

task<void> keepalive_extends(kv_harness& h) {
    auto& kv = h.client();
    const auto key = h.ns() + "member";
    AWAIT(g, kv.grant(h.min_ttl()));
    REQUIRE(g);
    AWAIT(p, kv.put(key, "alive", g->id));
    REQUIRE(p);
    const auto three_quarters = std::chrono::duration_cast<std::chrono::milliseconds>(g->ttl) * 3 / 4;
    for (int i = 0; i < 2; ++i) {
        AWAIT_VOID(passed, h.let_pass(three_quarters));
        AWAIT(ka, kv.keepalive(g->id));
        REQUIRE(ka);
        CHECK(*ka == g->ttl);
    }
    // 1.5 TTLs after the grant, kept alive: still there.
    AWAIT(still, kv.get(key));
    REQUIRE(still);
    CHECK(still->kvs.size() == 1);
}

task<void> revoke_deletes_keys(kv_harness& h) {
    auto& kv = h.client();
    AWAIT(g, kv.grant(10s));
    REQUIRE(g);
    CHECK(g->ttl == 10s);
    AWAIT(p1, kv.put(h.ns() + "a", "1", g->id));
    REQUIRE(p1);
    AWAIT(p2, kv.put(h.ns() + "b", "2", g->id));
    REQUIRE(p2);
    AWAIT(p3, kv.put(h.ns() + "c", "3"));
    REQUIRE(p3);
    auto w = kv.watch(h.ns(), true, *p3 + 1);
    AWAIT(rv, kv.revoke(g->id));
    REQUIRE(rv);
    AWAIT(events, collect(*w, 2));
    REQUIRE(events.size() == 2);
    CHECK(events[0].type == event::kind::del);
    CHECK(events[1].type == event::kind::del);
    CHECK(events[0].kv.key == h.ns() + "a");
    CHECK(events[1].kv.key == h.ns() + "b");
    // One revocation, one revision.
    CHECK(events[0].kv.mod_revision == *p3 + 1);
    CHECK(events[1].kv.mod_revision == *p3 + 1);
    AWAIT(left, kv.get_prefix(h.ns()));
    REQUIRE(left);
    REQUIRE(left->kvs.size() == 1);
    CHECK(left->kvs[0].value == "3");
    AWAIT(again, kv.revoke(g->id));
    REQUIRE_FALSE(again);
    CHECK(again.error().code == errc::lease_not_found);
}

task<void> watch_from_a_revision(kv_harness& h) {
    auto& writer = h.client();
    auto& reader = h.client();
    const auto key = h.ns() + "k";
    AWAIT(r1, writer.put(key, "1"));
    REQUIRE(r1);
    AWAIT(r2, writer.put(key, "2"));
    REQUIRE(r2);
    AWAIT(r3, writer.put(h.ns() + "other", "o"));
    REQUIRE(r3);
    AWAIT(r4, writer.del(key));
    REQUIRE(r4);

    // History first: everything on the key from r2 on, not the other key.
    auto w = reader.watch(key, false, *r2);
    AWAIT(past, collect(*w, 2));
    REQUIRE(past.size() == 2);
    CHECK(past[0].type == event::kind::put);
    CHECK(past[0].kv.value == "2");
    CHECK(past[0].kv.mod_revision == *r2);
    CHECK(past[0].kv.create_revision == *r1);
    CHECK(past[0].kv.version == 2);
    CHECK(past[1].type == event::kind::del);
    CHECK(past[1].kv.key == key);
    CHECK(past[1].kv.mod_revision == *r4);

    // Then live changes, in order.
    AWAIT(r5, writer.put(key, "5"));
    REQUIRE(r5);
    AWAIT(r6, writer.del(key));
    REQUIRE(r6);
    AWAIT(live, collect(*w, 2));
    REQUIRE(live.size() == 2);
    CHECK(live[0].type == event::kind::put);
    CHECK(live[0].kv.value == "5");
    CHECK(live[0].kv.mod_revision == *r5);
    CHECK(live[0].kv.version == 1);
    CHECK(live[1].type == event::kind::del);
    CHECK(live[1].kv.mod_revision == *r6);

    // A prefix watch from "now" (0) sees only what follows, under the prefix.
    auto pw = reader.watch(h.ns() + "p/", true, 0);
    AWAIT(r7, writer.put(h.ns() + "q", "outside"));
    REQUIRE(r7);
    AWAIT(r8, writer.put(h.ns() + "p/1", "inside"));
    REQUIRE(r8);
    AWAIT(pe, collect(*pw, 1));
    REQUIRE(pe.size() == 1);
    CHECK(pe[0].kv.key == h.ns() + "p/1");
    CHECK(pe[0].kv.mod_revision == *r8);
}

task<void> watch_compacted(kv_harness& h) {
    auto& kv = h.client();
    const auto key = h.ns() + "k";
    AWAIT(r1, kv.put(key, "1"));
    REQUIRE(r1);
    AWAIT(r2, kv.put(key, "2"));
    REQUIRE(r2);
    AWAIT(r3, kv.put(key, "3"));
    REQUIRE(r3);
    AWAIT_VOID(compacted, h.compact(*r3));
    auto old = kv.watch(key, false, *r1);
    AWAIT(e, old->next());
    REQUIRE_FALSE(e);
    CHECK(e.error().code == errc::compacted);
    // From the compaction point itself the history is still there.
    auto fresh = kv.watch(key, false, *r3);
    AWAIT(ok, collect(*fresh, 1));
    REQUIRE(ok.size() == 1);
    CHECK(ok[0].kv.value == "3");
}

task<void> cancelled_calls(kv_harness& h) {
    auto& kv = h.client();
    std::stop_source src;
    src.request_stop();
    AWAIT(g, kv.get(h.ns() + "k", src.get_token()));
    REQUIRE_FALSE(g);
    CHECK(g.error().code == errc::cancelled);
    AWAIT(p, kv.put(h.ns() + "k", "v", 0, src.get_token()));
    REQUIRE_FALSE(p);
    CHECK(p.error().code == errc::cancelled);
    auto w = kv.watch(h.ns(), true, 0);
    AWAIT(n, w->next(src.get_token()));
    REQUIRE_FALSE(n);
    CHECK(n.error().code == errc::cancelled);
    // Nothing was written.
    AWAIT(after, kv.get(h.ns() + "k"));
    REQUIRE(after);
    CHECK(after->kvs.empty());
}

} // namespace

task<std::vector<event>> collect(etcd::watcher& w, std::size_t n) {
    std::vector<event> all;
    auto filling = collect_into(w, n, all);
    co_await std::move(filling);
    co_return all;
}

task<void> collect_into(etcd::watcher& w, std::size_t n, std::vector<event>& all) {
    while (all.size() < n) {
        AWAIT(batch, w.next());
        if (!batch) {
            UNSCOPED_INFO("watch failed: " << etcd::to_string(batch.error().code) << ": " << batch.error().message);
        }
        REQUIRE(batch.has_value());
        REQUIRE_FALSE(batch->empty());
        for (auto& e : *batch) all.push_back(std::move(e));
    }
}

task<void> run_scenario(kv_harness& h, kv_scenario fn) {
    std::exception_ptr ex;
    try {
        auto body = fn(h);
        co_await std::move(body);
    } catch (...) {
        ex = std::current_exception();
    }
    auto closing = h.shutdown();
    co_await std::move(closing);
    if (ex) std::rethrow_exception(ex);
}

const std::vector<named_scenario>& kv_contract() {
    static const std::vector<named_scenario> all{
        {"revisions, versions and ranges", revisions},
        {"create-if-absent: the second claimer loses", create_if_absent},
        {"compare on value and mod_revision", compare_value_and_mod_revision},
        {"lease expiry deletes its keys and emits deletes", lease_expiry_deletes_keys},
        {"keepalive extends a lease", keepalive_extends},
        {"revoke deletes the lease's keys in one revision", revoke_deletes_keys},
        {"watch from a revision, then live", watch_from_a_revision},
        {"a watch from a compacted revision fails", watch_compacted},
        {"a stopped token cancels", cancelled_calls},
    };
    return all;
}

} // namespace skiff::test
