// The transaction coordinator (src/broker/txn/coordinator.cpp) over an in-memory bucket, with
// the broker's side (producer ids, markers, group offsets) recorded by fakes: the protocol's
// state machine, fencing, what is stored before each answer, timeouts, recovery after a
// restart, retried markers and failed state writes; and the stored form (txn_state).
#include "run_task.hpp"

#include "txn/coordinator.hpp"
#include "txn/txn_state.hpp"

#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/memory_store.hpp>

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace skiff;
using namespace skiff::broker;
using namespace skiff::broker::txn;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using kafka::error_code;

struct marker {
    topic_partition tp;
    std::int64_t pid;
    std::int16_t epoch;
    bool commit;
    friend bool operator==(const marker&, const marker&) = default;
};

struct next_turn {
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) const { reactor::local().schedule(h); }
    void await_resume() const noexcept {}
};
task<void> settle(int turns = 50) {
    for (int i = 0; i < turns; ++i) co_await next_turn{};
}

// One reactor on a manual clock, one bucket, a coordinator whose broker side is recorded.
struct env {
    std::shared_ptr<manual_clock> clk = std::make_shared<manual_clock>();
    std::unique_ptr<reactor> r;
    std::shared_ptr<memory_bucket> bucket = std::make_shared<memory_bucket>();
    std::unique_ptr<memory_store> store;
    std::unique_ptr<coordinator> coord;
    std::unique_ptr<gate> bg = std::make_unique<gate>("test-bg");
    std::int64_t wall = 1700000000000;
    std::int64_t next_pid = 1000;
    std::vector<marker> markers;
    int marker_failures = 0; // the next N marker writes fail
    std::vector<std::pair<std::string, std::map<std::string, std::map<std::int32_t, pending_offset>>>> committed;

    env() {
        reactor_config rc;
        rc.clk = clk;
        r = make_test_reactor(rc);
        make();
    }
    ~env() { r->run_until_complete(shutdown(this)); }
    static task<void> shutdown(env* e) {
        if (e->coord) co_await e->coord->close();
        co_await e->bg->close();
    }
    bool keep_ongoing = false; // the next make() builds a takeover coordinator
    void make() {
        store = std::make_unique<memory_store>(bucket);
        coordinator_config cfg;
        cfg.keep_ongoing = keep_ongoing;
        cfg.ns = "test";
        cfg.max_timeout = 60000ms;
        cfg.check_interval = 1000ms;
        cfg.wall_ms = [this] { return wall; };
        coordinator_env ce;
        ce.allocate_producer_id = [this]() -> task<result<std::int64_t, std::string>> { co_return next_pid++; };
        ce.write_marker = [this](topic_partition tp, std::int64_t pid, std::int16_t epoch,
                                 bool commit) -> task<result<void, std::string>> {
            if (marker_failures > 0) {
                --marker_failures;
                co_return failure{std::string("injected")};
            }
            markers.push_back(marker{std::move(tp), pid, epoch, commit});
            co_return ok();
        };
        ce.commit_offsets = [this](std::string g, std::map<std::string, std::map<std::int32_t, pending_offset>> o)
            -> task<result<void, std::string>> {
            committed.emplace_back(std::move(g), std::move(o));
            co_return ok();
        };
        coord = std::make_unique<coordinator>(*store, std::move(cfg), std::move(ce));
    }
    // A new coordinator over the same bucket, loaded and started, as after a restart.
    task<void> restart() {
        co_await coord->close();
        coord.reset();
        make();
        auto loaded = co_await coord->load({});
        CHECK(loaded.has_value());
        coord->start();
    }
    std::optional<txn_metadata> stored(const std::string& id) {
        auto it = bucket->objects.find(txn_state_key("test", id));
        if (it == bucket->objects.end()) return std::nullopt;
        auto m = parse_txn(it->second);
        REQUIRE(m.has_value());
        return *m;
    }
    void run(task<void> t) { r->run_until_complete(std::move(t)); }
};

std::map<std::string, std::map<std::int32_t, pending_offset>> offsets_of(std::string topic, std::int32_t p, std::int64_t o) {
    std::map<std::string, std::map<std::int32_t, pending_offset>> m;
    pending_offset po;
    po.offset = o;
    po.metadata = "md";
    m[topic][p] = po;
    return m;
}

} // namespace

TEST_CASE("txn state: stored form round trip and refusals", "[txn][coordinator]") {
    txn_metadata m;
    m.id = "tx/1 é";
    m.producer_id = 42;
    m.producer_epoch = 7;
    m.timeout_ms = 5000;
    m.st = state::prepare_commit;
    m.partitions = {{"a", 0}, {"b", 3}};
    m.groups = {"g1"};
    m.offsets["g1"]["a"][0] = pending_offset{10, 2, "meta"};
    m.start_ms = 100;
    m.update_ms = 200;
    auto back = parse_txn(serialize_txn(m));
    REQUIRE(back.has_value());
    CHECK(*back == m);
    CHECK(txn_state_key("ns", "tx/1") == "ns/skiff~meta/txns/tx%2F1/state.json");
    for (std::string bad : {std::string("nope"), std::string("{}"), std::string(R"({"version":2})"),
                            serialize_txn(m).replace(serialize_txn(m).find("PrepareCommit"), 13, "Bogus")}) {
        CHECK_FALSE(parse_txn(bad).has_value());
    }
    CHECK(state_name(state::complete_abort) == "CompleteAbort");
}

TEST_CASE("txn coordinator: a committed transaction writes markers, applies offsets, stores each step",
          "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        const std::string a1 = "t1";
        auto init = co_await e->coord->init_producer_id(a1, 10000, -1, -1, true);
        CHECK(init.error == error_code::none);
        CHECK(init.producer_id == 1000);
        CHECK(init.producer_epoch == 0);
        REQUIRE(e->stored("t1"));
        CHECK(e->stored("t1")->st == state::empty);

        std::vector<topic_partition> tps1{{"out", 0}, {"out", 1}};

        const std::string a2 = "t1";
        auto add = co_await e->coord->add_partitions(a2, 1000, 0, tps1, true);
        CHECK(add == error_code::none);
        CHECK(e->stored("t1")->st == state::ongoing);
        CHECK(e->stored("t1")->partitions.size() == 2);
        CHECK(e->coord->verify_produce("t1", 1000, 0, {"out", 1}, true) == error_code::none);
        CHECK(e->coord->verify_produce("t1", 1000, 0, {"out", 2}, true) == error_code::invalid_txn_state);
        CHECK(e->coord->verify_produce("t1", 1000, 1, {"out", 1}, false) == error_code::invalid_producer_epoch);

        // Offsets of a group not added are refused; added, they are stored with the state.
        const std::string a3 = "t1";
        const std::string a4 = "g";
        const auto a5 = offsets_of("in", 0, 55);
        auto early = co_await e->coord->txn_offset_commit(a3, 1000, 0, a4, a5, true);
        CHECK(early == error_code::invalid_txn_state);
        const std::string a6 = "t1";
        const std::string a7 = "g";
        auto addo = co_await e->coord->add_offsets(a6, 1000, 0, a7, true);
        CHECK(addo == error_code::none);
        const std::string a8 = "t1";
        const std::string a9 = "g";
        const auto a10 = offsets_of("in", 0, 55);
        auto toc = co_await e->coord->txn_offset_commit(a8, 1000, 0, a9, a10, true);
        CHECK(toc == error_code::none);
        CHECK(e->stored("t1")->offsets.at("g").at("in").at(0).offset == 55);
        CHECK(e->committed.empty()); // not visible before the commit

        const std::string a11 = "t1";
        auto end = co_await e->coord->end_txn(a11, 1000, 0, true, true);
        CHECK(end == error_code::none);
        CHECK(e->markers == std::vector<marker>{{{"out", 0}, 1000, 0, true}, {{"out", 1}, 1000, 0, true}});
        REQUIRE(e->committed.size() == 1);
        CHECK(e->committed[0].first == "g");
        CHECK(e->committed[0].second.at("in").at(0).offset == 55);
        auto st = e->stored("t1");
        CHECK(st->st == state::complete_commit);
        CHECK(st->partitions.empty());
        CHECK(st->offsets.empty());
        CHECK(e->coord->stats().committed == 1);

        // A retried EndTxn is answered as before; the opposite outcome is refused.
        const std::string a12 = "t1";
        auto again = co_await e->coord->end_txn(a12, 1000, 0, true, true);
        CHECK(again == error_code::none);
        const std::string a13 = "t1";
        auto flip = co_await e->coord->end_txn(a13, 1000, 0, false, true);
        CHECK(flip == error_code::invalid_txn_state);
        CHECK(e->markers.size() == 2);
    }(&e));
}

TEST_CASE("txn coordinator: abort writes abort markers and drops the offsets", "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        const std::string a14 = "t";
        auto init = co_await e->coord->init_producer_id(a14, 10000, -1, -1, true);
        REQUIRE(init.error == error_code::none);
        std::vector<topic_partition> tps2{{"out", 0}};

        const std::string a15 = "t";
        (void)co_await e->coord->add_partitions(a15, init.producer_id, 0, tps2, true);
        const std::string a16 = "t";
        const std::string a17 = "g";
        (void)co_await e->coord->add_offsets(a16, init.producer_id, 0, a17, true);
        const std::string a18 = "t";
        const std::string a19 = "g";
        const auto a20 = offsets_of("in", 0, 9);
        (void)co_await e->coord->txn_offset_commit(a18, init.producer_id, 0, a19, a20, true);
        const std::string a21 = "t";
        auto end = co_await e->coord->end_txn(a21, init.producer_id, 0, false, true);
        CHECK(end == error_code::none);
        CHECK(e->markers == std::vector<marker>{{{"out", 0}, 1000, 0, false}});
        CHECK(e->committed.empty());
        CHECK(e->stored("t")->st == state::complete_abort);
        CHECK(e->coord->stats().aborted == 1);
        // The next transaction starts from scratch with the same epoch.
        std::vector<topic_partition> tps3{{"out", 1}};

        const std::string a22 = "t";
        auto add = co_await e->coord->add_partitions(a22, init.producer_id, 0, tps3, true);
        CHECK(add == error_code::none);
        CHECK(e->stored("t")->partitions == std::set<topic_partition>{{"out", 1}});
    }(&e));
}

TEST_CASE("txn coordinator: bad input gets Kafka's codes and changes nothing", "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        const std::string a23 = "nobody";
        auto unknown = co_await e->coord->end_txn(a23, 5, 0, true, true);
        CHECK(unknown == error_code::invalid_producer_id_mapping);
        CHECK(e->bucket->objects.empty());
        const std::string a24 = "t";
        auto bad_timeout = co_await e->coord->init_producer_id(a24, 120000, -1, -1, true);
        CHECK(bad_timeout.error == error_code::invalid_transaction_timeout);
        const std::string a25 = "t";
        auto zero_timeout = co_await e->coord->init_producer_id(a25, 0, -1, -1, true);
        CHECK(zero_timeout.error == error_code::invalid_transaction_timeout);
        const std::string a26 = "t";
        auto init = co_await e->coord->init_producer_id(a26, 10000, -1, -1, true);
        REQUIRE(init.error == error_code::none);
        std::vector<topic_partition> tps4{{"x", 0}};

        const std::string a27 = "t";
        auto wrong_pid = co_await e->coord->add_partitions(a27, 999, 0, tps4, true);
        CHECK(wrong_pid == error_code::invalid_producer_id_mapping);
        const std::string a28 = "t";
        auto empty_end = co_await e->coord->end_txn(a28, init.producer_id, 0, true, true);
        CHECK(empty_end == error_code::invalid_txn_state);
        const std::string a29 = "t";
        auto wrong_epoch = co_await e->coord->end_txn(a29, init.producer_id, 3, true, false);
        CHECK(wrong_epoch == error_code::invalid_producer_epoch);
        CHECK(e->stored("t")->st == state::empty);
        CHECK(e->markers.empty());
        // KIP-360 with a producer id/epoch that is not the current one: fenced.
        const std::string a30 = "t";
        auto stale = co_await e->coord->init_producer_id(a30, 10000, init.producer_id, 5, true);
        CHECK(stale.error == error_code::producer_fenced);
    }(&e));
}

TEST_CASE("txn coordinator: a new instance fences the old one and aborts its transaction", "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        const std::string a31 = "t";
        auto a = co_await e->coord->init_producer_id(a31, 10000, -1, -1, true);
        std::vector<topic_partition> tps5{{"out", 0}};

        const std::string a32 = "t";
        (void)co_await e->coord->add_partitions(a32, a.producer_id, a.producer_epoch, tps5, true);
        const std::string a33 = "t";
        auto b = co_await e->coord->init_producer_id(a33, 10000, -1, -1, true);
        CHECK(b.error == error_code::none);
        CHECK(b.producer_id == a.producer_id);
        CHECK(b.producer_epoch == 2); // the abort took epoch 1
        CHECK(e->markers == std::vector<marker>{{{"out", 0}, a.producer_id, 1, false}});
        CHECK(e->coord->stats().fenced == 1);
        std::vector<topic_partition> tps6{{"out", 1}};

        const std::string a34 = "t";
        auto old_add = co_await e->coord->add_partitions(a34, a.producer_id, a.producer_epoch, tps6, true);
        CHECK(old_add == error_code::producer_fenced);
        const std::string a35 = "t";
        auto old_end = co_await e->coord->end_txn(a35, a.producer_id, a.producer_epoch, true, false);
        CHECK(old_end == error_code::invalid_producer_epoch);
        CHECK(e->stored("t")->producer_epoch == 2);
        CHECK(e->stored("t")->st == state::empty);
    }(&e));
}

TEST_CASE("txn coordinator: a transaction past its timeout is aborted with the epoch bumped", "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        e->coord->start();
        const std::string a36 = "slow";
        auto a = co_await e->coord->init_producer_id(a36, 3000, -1, -1, true);
        std::vector<topic_partition> tps7{{"out", 2}};

        const std::string a37 = "slow";
        (void)co_await e->coord->add_partitions(a37, a.producer_id, 0, tps7, true);
        e->wall += 2000;
        e->clk->advance(1000ms);
        co_await settle();
        CHECK(e->markers.empty());
        e->wall += 2000;
        e->clk->advance(1000ms);
        co_await settle();
        CHECK(e->markers == std::vector<marker>{{{"out", 2}, a.producer_id, 1, false}});
        CHECK(e->coord->stats().timed_out == 1);
        CHECK(e->stored("slow")->st == state::complete_abort);
        const std::string a38 = "slow";
        auto late = co_await e->coord->end_txn(a38, a.producer_id, 0, true, true);
        CHECK(late == error_code::producer_fenced);
    }(&e));
}

TEST_CASE("txn coordinator: a restart finishes prepared transactions and aborts ongoing ones", "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        // "committing": the prepare was stored, then the broker died before the markers.
        txn_metadata c;
        c.id = "committing";
        c.producer_id = 7;
        c.producer_epoch = 3;
        c.st = state::prepare_commit;
        c.partitions = {{"out", 0}};
        c.groups = {"g"};
        c.offsets["g"]["in"][1] = pending_offset{77, -1, ""};
        e->bucket->objects[txn_state_key("test", c.id)] = serialize_txn(c);
        txn_metadata o = c;
        o.id = "open";
        o.producer_id = 8;
        o.st = state::ongoing;
        o.start_ms = e->wall;
        e->bucket->objects[txn_state_key("test", o.id)] = serialize_txn(o);
        e->bucket->objects["test/skiff~meta/txns/junk/state.json"] = "not json";

        co_await e->restart();
        co_await settle(200);
        CHECK(e->stored("committing")->st == state::complete_commit);
        CHECK(e->stored("open")->st == state::complete_abort);
        CHECK(e->stored("open")->producer_epoch == 4);
        std::vector<marker> want{{{"out", 0}, 7, 3, true}, {{"out", 0}, 8, 4, false}};
        auto got = e->markers;
        std::sort(got.begin(), got.end(), [](auto& x, auto& y) { return x.pid < y.pid; });
        CHECK(got == want);
        REQUIRE(e->committed.size() == 1);
        CHECK(e->committed[0].second.at("in").at(1).offset == 77);
        // The restarted "open" producer is fenced; a new instance gets epoch 5.
        std::vector<topic_partition> tps8{{"out", 1}};

        const std::string a39 = "open";
        auto old = co_await e->coord->add_partitions(a39, 8, 3, tps8, true);
        CHECK(old == error_code::producer_fenced);
        const std::string a40 = "open";
        auto fresh = co_await e->coord->init_producer_id(a40, 10000, -1, -1, true);
        CHECK(fresh.producer_epoch == 5);
    }(&e));
}

TEST_CASE("txn coordinator: a takeover keeps ongoing transactions (their producer goes on), finishes prepared "
          "ones, and still times them out",
          "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        txn_metadata o;
        o.id = "moving";
        o.producer_id = 8;
        o.producer_epoch = 3;
        o.st = state::ongoing;
        o.partitions = {{"out", 0}, {"out", 1}};
        o.groups = {"g"};
        o.offsets["g"]["in"][2] = pending_offset{42, -1, ""};
        o.timeout_ms = 10000;
        o.start_ms = e->wall;
        e->bucket->objects[txn_state_key("test", o.id)] = serialize_txn(o);
        txn_metadata late = o;
        late.id = "late";
        late.producer_id = 9;
        late.partitions = {{"out", 2}};
        late.offsets.clear();
        late.groups.clear();
        late.start_ms = e->wall - 9500; // half a second left
        e->bucket->objects[txn_state_key("test", late.id)] = serialize_txn(late);
        txn_metadata c = o;
        c.id = "committing";
        c.producer_id = 7;
        c.st = state::prepare_commit;
        c.partitions = {{"out", 3}};
        c.groups.clear();
        c.offsets.clear();
        e->bucket->objects[txn_state_key("test", c.id)] = serialize_txn(c);

        e->keep_ongoing = true;
        co_await e->restart();
        co_await settle(200);
        // The prepared one is finished; the ongoing ones are untouched, nobody fenced.
        CHECK(e->stored("committing")->st == state::complete_commit);
        CHECK(e->stored("moving")->st == state::ongoing);
        CHECK(e->stored("moving")->producer_epoch == 3);
        CHECK(e->markers == std::vector<marker>{{{"out", 3}, 7, 3, true}});
        // The producer carries on at its epoch: one more partition, then its commit writes
        // every partition's marker and applies the offsets committed before the move.
        std::vector<topic_partition> more{{"out", 4}};
        const std::string id = "moving";
        auto added = co_await e->coord->add_partitions(id, 8, 3, more, true);
        CHECK(added == error_code::none);
        auto ended = co_await e->coord->end_txn(id, 8, 3, true, true);
        CHECK(ended == error_code::none);
        co_await settle(200);
        CHECK(e->stored("moving")->st == state::complete_commit);
        std::vector<marker> got(e->markers.begin() + 1, e->markers.end());
        std::sort(got.begin(), got.end(), [](auto& x, auto& y) { return x.tp < y.tp; });
        CHECK(got == std::vector<marker>{{{"out", 0}, 8, 3, true}, {{"out", 1}, 8, 3, true}, {{"out", 4}, 8, 3, true}});
        REQUIRE(e->committed.size() == 1);
        CHECK(e->committed[0].second.at("in").at(2).offset == 42);
        // The timeout still applies to what was taken over.
        e->wall += 1000;
        e->clk->advance(1500ms);
        co_await settle(200);
        CHECK(e->stored("late")->st == state::complete_abort);
        CHECK(e->stored("late")->producer_epoch == 4);
    }(&e));
}

TEST_CASE("txn coordinator: failed marker writes are retried; a failed state write changes nothing",
          "[txn][coordinator]") {
    env e;
    auto a = std::make_shared<std::optional<coordinator::init_result>>();
    e.run([](env* e, std::shared_ptr<std::optional<coordinator::init_result>> a) -> task<void> {
        const std::string a41 = "t";
        auto r = co_await e->coord->init_producer_id(a41, 10000, -1, -1, true);
        a->emplace(r);
        // The state PUT fails: the request is answered retriably and nothing is promised.
        e->store->add_fault(mem_fault_rule("put", "state.json", mem_fault::fail_permanent, 1));
        std::vector<topic_partition> tps9{{"out", 0}};

        const std::string a42 = "t";
        auto add = co_await e->coord->add_partitions(a42, r.producer_id, 0, tps9, true);
        CHECK(add == error_code::coordinator_not_available);
        CHECK(e->stored("t")->st == state::empty);
        CHECK(e->coord->stats().state_write_failures == 1);
        CHECK(e->coord->verify_produce("t", r.producer_id, 0, {"out", 0}, true) == error_code::invalid_txn_state);
        std::vector<topic_partition> tps10{{"out", 0}};

        const std::string a43 = "t";
        auto add2 = co_await e->coord->add_partitions(a43, r.producer_id, 0, tps10, true);
        CHECK(add2 == error_code::none);
        e->marker_failures = 3;
    }(&e, a));
    auto done = std::make_shared<std::optional<error_code>>();
    e.run([](env* e, std::shared_ptr<std::optional<coordinator::init_result>> a,
             std::shared_ptr<std::optional<error_code>> done) -> task<void> {
        auto spawned = e->bg->spawn([](env* e, std::int64_t pid, std::shared_ptr<std::optional<error_code>> d) -> task<void> {
            const std::string a44 = "t";
            auto r = co_await e->coord->end_txn(a44, pid, 0, true, true);
            d->emplace(r);
        }(e, (*a)->producer_id, done));
        CHECK(spawned.has_value());
        for (int i = 0; i < 50 && !*done; ++i) {
            e->clk->advance(500ms);
            co_await settle();
        }
        REQUIRE(done->has_value());
        CHECK(**done == error_code::none);
        CHECK(e->markers.size() == 1);
        CHECK(e->coord->stats().marker_retries >= 3);
        CHECK(e->stored("t")->st == state::complete_commit);
    }(&e, a, done));
}

TEST_CASE("txn coordinator: list and describe", "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        const std::string a45 = "a";
        auto a = co_await e->coord->init_producer_id(a45, 10000, -1, -1, true);
        const std::string a46 = "b";
        auto b = co_await e->coord->init_producer_id(a46, 10000, -1, -1, true);
        std::vector<topic_partition> tps11{{"t", 1}};

        const std::string a47 = "b";
        (void)co_await e->coord->add_partitions(a47, b.producer_id, 0, tps11, true);
        CHECK(e->coord->list({}, {}).size() == 2);
        auto ongoing = e->coord->list({"Ongoing"}, {});
        REQUIRE(ongoing.size() == 1);
        CHECK(ongoing[0].id == "b");
        CHECK(e->coord->list({}, {a.producer_id}).size() == 1);
        auto d = e->coord->describe("b");
        REQUIRE(d);
        CHECK(d->partitions == std::set<topic_partition>{{"t", 1}});
        CHECK(d->timeout_ms == 10000);
        CHECK_FALSE(e->coord->describe("zzz"));
        CHECK(e->coord->stats().open == 1);
    }(&e));
}

#include "txn/abort_index.hpp"

TEST_CASE("abort index: keys name the entry, foreign and malformed keys are not entries", "[txn][abort_index]") {
    const std::string prefix = "ns/orders/3/";
    aborted_txn t;
    t.producer_id = 4242;
    t.first_offset = 100;
    t.last_offset = 250;
    const auto key = abort_index_key(prefix, t);
    CHECK(key == "ns/orders/3/txn-aborted-00000000000000000250-00000000000000000100-00000000000000004242");
    CHECK(key.rfind(abort_index_prefix(prefix), 0) == 0);
    auto back = parse_abort_index_key(prefix, key);
    REQUIRE(back);
    CHECK(*back == t);
    CHECK(abort_index_body(t) == R"({"producer_id":4242,"first_offset":100,"last_offset":250})");
    for (std::string bad : {std::string("ns/orders/3/segment-00000000000000000000.kfs"),
                            key.substr(0, key.size() - 1), key + "0", std::string("ns/orders/4/") + key.substr(12),
                            std::string("ns/orders/3/txn-aborted-00000000000000000250x00000000000000000100-00000000000000004242"),
                            std::string("ns/orders/3/txn-aborted-00000000000000000050-00000000000000000100-00000000000000004242"),
                            std::string("ns/orders/3/txn-aborted-99999999999999999999-00000000000000000100-00000000000000004242")}) {
        CHECK_FALSE(parse_abort_index_key(prefix, bad));
    }
}

TEST_CASE("partition_txns: restored aborted entries are listed once, in marker order", "[txn][abort_index]") {
    partition_txns p;
    p.restore_aborted(aborted_txn{7, 10, 20});
    p.restore_aborted(aborted_txn{8, 5, 12});
    p.restore_aborted(aborted_txn{7, 10, 20}); // listed twice (or also replayed): once
    p.restore_aborted(aborted_txn{9, 30, 25});  // first after last: not an entry
    REQUIRE(p.aborted().size() == 2);
    CHECK(p.aborted()[0].last_offset == 12);
    CHECK(p.aborted()[1].last_offset == 20);
    auto got = p.aborted_between(13, 100);
    REQUIRE(got.size() == 1);
    CHECK(got[0].producer_id == 7);
    CHECK(p.last_stable_offset(50) == 50); // restored aborts leave nothing open
}

TEST_CASE("txn coordinator: EndTxn answers once markers are durable; the complete record follows, and the id's "
          "next request waits for it",
          "[txn][coordinator]") {
    env e;
    e.store->set_latency(10ms);
    struct seen {
        bool done = false;
        error_code end = error_code::unknown_server_error;
        std::optional<state> stored_at_answer;
        std::optional<state> described_at_answer;
        error_code next = error_code::unknown_server_error;
        std::optional<state> stored_at_next;
    };
    auto s = std::make_shared<seen>();
    e.run([](env* e, std::shared_ptr<seen> s) -> task<void> {
        auto spawned = e->bg->spawn([](env* e, std::shared_ptr<seen> s) -> task<void> {
            const std::string id = "t";
            auto a = co_await e->coord->init_producer_id(id, 10000, -1, -1, true);
            std::vector<topic_partition> tps{{"out", 0}};
            (void)co_await e->coord->add_partitions(id, a.producer_id, 0, tps, true);
            s->end = co_await e->coord->end_txn(id, a.producer_id, 0, true, true);
            s->stored_at_answer = e->stored(id)->st;
            s->described_at_answer = e->coord->describe(id)->st;
            std::vector<topic_partition> tps2{{"out", 1}};
            s->next = co_await e->coord->add_partitions(id, a.producer_id, 0, tps2, true);
            s->stored_at_next = e->stored(id)->st;
            s->done = true;
        }(e, s));
        CHECK(spawned.has_value());
        for (int i = 0; i < 100 && !s->done; ++i) {
            e->clk->advance(5ms);
            co_await settle();
        }
    }(&e, s));
    REQUIRE(s->done);
    CHECK(s->end == error_code::none);
    CHECK(s->stored_at_answer == state::prepare_commit); // answered before "complete" landed
    CHECK(s->described_at_answer == state::complete_commit); // but decided and applied: shown so
    CHECK(e.markers.size() == 1);
    CHECK(s->next == error_code::none);
    CHECK(s->stored_at_next == state::ongoing); // after the complete record, not instead of it
    CHECK(e.coord->stats().committed == 1);
}

TEST_CASE("txn coordinator: idle transactional ids expire; open ones and recent ones do not", "[txn][coordinator]") {
    env e;
    e.run([](env* e) -> task<void> {
        e->coord->start();
        const std::string idle = "idle", open = "open", recent = "recent";
        auto a = co_await e->coord->init_producer_id(idle, 10000, -1, -1, true);
        auto b = co_await e->coord->init_producer_id(open, 60000, -1, -1, true);
        std::vector<topic_partition> tps{{"out", 0}};
        (void)co_await e->coord->add_partitions(open, b.producer_id, 0, tps, true);
        // Seven days and a bit later: "open" would have timed out long ago, so keep it fresh
        // by making its timeout unreachable here: only idle ids are looked at for expiry.
        e->wall += 604800000 + 1000;
        auto c = co_await e->coord->init_producer_id(recent, 10000, -1, -1, true);
        (void)c;
        e->clk->advance(1000ms);
        co_await settle(200);
        CHECK(e->coord->stats().expired == 1);
        CHECK_FALSE(e->stored(idle));
        CHECK(e->stored(recent));
        CHECK_FALSE(e->coord->describe(idle));
        // "open" was aborted by its timeout in the same tick, not expired.
        CHECK(e->stored(open));
        // The expired id's old producer is unknown; a new InitProducerId starts afresh.
        auto late = co_await e->coord->end_txn(idle, a.producer_id, 0, true, true);
        CHECK(late == error_code::invalid_producer_id_mapping);
        auto again = co_await e->coord->init_producer_id(idle, 10000, -1, -1, true);
        CHECK(again.error == error_code::none);
        CHECK(again.producer_epoch == 0);
        CHECK(again.producer_id != a.producer_id);
    }(&e));
}
