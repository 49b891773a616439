// The classic group coordinator on a real reactor with a manual clock and an in-memory store:
// membership (join / sync / heartbeat / leave, timeouts, static members), committed offsets
// (durability, coalescing, failures, restart), admin calls and shutdown.
#include "run_task.hpp"

#include <skiff/broker/group_coordinator.hpp>
#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/memory_store.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::broker;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;

namespace {

using kafka::JoinGroupResponse;
using kafka::SyncGroupResponse;

template <typename T>
using slot = std::shared_ptr<std::optional<T>>;

template <typename T>
task<void> fill(task<T> t, slot<T> out) {
    auto v = co_await std::move(t);
    out->emplace(std::move(v));
}

group_config test_config() {
    group_config c;
    c.ns = "test";
    c.initial_rebalance_delay = 0ms;
    c.min_session_timeout = 1000ms;
    c.max_session_timeout = 60000ms;
    c.wall_ms = [] { return std::int64_t{1700000000000}; };
    return c;
}

// One reactor (manual clock), one bucket, one coordinator and a gate for background calls.
// The destructor closes whatever a failed test left running, so a failure never aborts.
struct env {
    std::shared_ptr<manual_clock> clk = std::make_shared<manual_clock>();
    std::unique_ptr<reactor> r;
    std::shared_ptr<memory_bucket> bucket = std::make_shared<memory_bucket>();
    group_config cfg;
    std::unique_ptr<memory_store> store;
    std::unique_ptr<group_coordinator> coord;
    std::unique_ptr<gate> bg = std::make_unique<gate>("test-bg");

    explicit env(group_config c = test_config()) : cfg(std::move(c)) {
        reactor_config rc;
        rc.clk = clk;
        r = make_test_reactor(rc);
        store = std::make_unique<memory_store>(bucket);
        coord = std::make_unique<group_coordinator>(*store, cfg);
    }
    ~env() {
        r->run_until_complete(shutdown(this));
        coord.reset();
    }
    static task<void> shutdown(env* e) {
        if (e->coord) co_await e->coord->close();
        co_await e->bg->close();
    }
    template <typename T>
    slot<T> start(task<T> t) {
        auto s = std::make_shared<std::optional<T>>();
        auto ok = bg->spawn(fill(std::move(t), s));
        CHECK(ok.has_value());
        return s;
    }
    // A new coordinator (and store instance) over the same bucket, as after a restart.
    task<void> restart(std::function<bool(std::string_view)> owns) {
        co_await coord->close();
        coord.reset();
        store = std::make_unique<memory_store>(bucket);
        coord = std::make_unique<group_coordinator>(*store, cfg);
        auto loaded = co_await coord->load(std::move(owns));
        CHECK(loaded.has_value());
    }
    void run(task<void> t) { r->run_until_complete(std::move(t)); }
};

// One trip through the reactor's ready queue. (A zero sleep would not do: on a manual clock
// a due timer re-armed from its own wakeup fires again in the same turn.)
struct next_turn {
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) const { reactor::local().schedule(h); }
    void await_resume() const noexcept {}
};

// Lets scheduled coroutines run (no time passes).
task<void> settle(int turns = 20) {
    for (int i = 0; i < turns; ++i) co_await next_turn{};
}
task<void> pass_time(env* e, duration d) {
    e->clk->advance(d);
    co_await settle();
}

kafka::JoinGroupRequest join_req(std::string group, std::string member, std::int32_t session_ms = 10000,
                                 std::int32_t rebalance_ms = 30000,
                                 std::vector<std::pair<std::string, std::string>> protos = {{"range", "meta"}}) {
    kafka::JoinGroupRequest r;
    r.group_id = std::move(group);
    r.member_id = std::move(member);
    r.session_timeout_ms = session_ms;
    r.rebalance_timeout_ms = rebalance_ms;
    r.protocol_type = "consumer";
    for (auto& [n, m] : protos) {
        kafka::JoinGroupRequest::JoinGroupRequestProtocol p;
        p.name = n;
        p.metadata = m;
        r.protocols.push_back(std::move(p));
    }
    return r;
}

kafka::HeartbeatResponse heartbeat(env* e, std::string group, std::int32_t gen, std::string member,
                                   std::optional<std::string> instance = std::nullopt) {
    kafka::HeartbeatRequest r;
    r.group_id = std::move(group);
    r.generation_id = gen;
    r.member_id = std::move(member);
    r.group_instance_id = std::move(instance);
    return e->coord->heartbeat(r, 4);
}

kafka::SyncGroupRequest sync_req(std::string group, std::int32_t gen, std::string member,
                                 std::map<std::string, std::string> assignments = {}) {
    kafka::SyncGroupRequest r;
    r.group_id = std::move(group);
    r.generation_id = gen;
    r.member_id = std::move(member);
    for (auto& [m, a] : assignments) {
        kafka::SyncGroupRequest::SyncGroupRequestAssignment x;
        x.member_id = m;
        x.assignment = a;
        r.assignments.push_back(std::move(x));
    }
    return r;
}

std::vector<std::string> split(std::string_view s) {
    std::vector<std::string> out;
    while (!s.empty()) {
        auto comma = s.find(',');
        out.emplace_back(s.substr(0, comma));
        if (comma == std::string_view::npos) break;
        s.remove_prefix(comma + 1);
    }
    return out;
}

// MEMBER_ID_REQUIRED handshake (v5): the id the coordinator hands out.
task<std::string> handshake(env* e, std::string group, std::string client, std::int32_t session_ms = 10000) {
    auto req = join_req(std::move(group), "", session_ms);
    auto r = co_await e->coord->join(std::move(req), 5, client, "/10.0.0.1");
    CHECK(r.error_code == kerr::member_id_required);
    co_return r.member_id;
}

// Joins every client into `group` (v5 with the handshake); returns the JoinGroup answers in
// client order once the rebalance completed.
// (Braced lists inside a co_await expression break g++ 12, so the clients come as "c1,c2".)
task<std::vector<JoinGroupResponse>> join_all(env* e, std::string group, std::string_view client_list,
                                              std::int32_t session_ms = 10000) {
    std::vector<std::string> clients = split(client_list);
    std::vector<std::string> ids;
    for (auto& c : clients) ids.push_back(co_await handshake(e, group, c, session_ms));
    std::vector<slot<JoinGroupResponse>> slots;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        auto req = join_req(group, ids[i], session_ms);
        slots.push_back(e->start(e->coord->join(std::move(req), 5, clients[i], "/10.0.0.1")));
    }
    co_await settle();
    std::vector<JoinGroupResponse> out;
    for (auto& s : slots) {
        REQUIRE(s->has_value());
        out.push_back(**s);
    }
    co_return out;
}

// Leader and followers sync; every member is assigned "a:" + its id. Returns the answers.
task<std::vector<SyncGroupResponse>> sync_all(env* e, std::string group, const std::vector<JoinGroupResponse>& joined) {
    std::vector<slot<SyncGroupResponse>> slots;
    std::map<std::string, std::string> assign;
    for (const auto& j : joined) assign[j.member_id] = "a:" + j.member_id;
    for (const auto& j : joined) {
        bool leader = j.leader == j.member_id;
        auto req = sync_req(group, j.generation_id, j.member_id,
                            leader ? assign : std::map<std::string, std::string>{});
        slots.push_back(e->start(e->coord->sync(std::move(req), 5)));
    }
    co_await settle();
    std::vector<SyncGroupResponse> out;
    for (auto& s : slots) {
        REQUIRE(s->has_value());
        out.push_back(**s);
    }
    co_return out;
}

kafka::OffsetCommitRequest commit_req(std::string group, std::vector<std::tuple<std::string, int, std::int64_t>> offs,
                                      std::int32_t gen = -1, std::string member = "", std::string metadata = "md") {
    kafka::OffsetCommitRequest r;
    r.group_id = std::move(group);
    r.generation_id_or_member_epoch = gen;
    r.member_id = std::move(member);
    for (auto& item : offs) {
        const std::string& t = std::get<0>(item);
        const int p = std::get<1>(item);
        const std::int64_t o = std::get<2>(item);
        auto it = std::find_if(r.topics.begin(), r.topics.end(), [&](const auto& x) { return x.name == t; });
        if (it == r.topics.end()) {
            r.topics.emplace_back();
            r.topics.back().name = t;
            it = r.topics.end() - 1;
        }
        kafka::OffsetCommitRequest::OffsetCommitRequestPartition part;
        part.partition_index = p;
        part.committed_offset = o;
        part.committed_leader_epoch = 7;
        part.committed_metadata = metadata;
        it->partitions.push_back(std::move(part));
    }
    return r;
}

std::vector<std::int16_t> commit_errors(const kafka::OffsetCommitResponse& r) {
    std::vector<std::int16_t> out;
    for (const auto& t : r.topics)
        for (const auto& p : t.partitions) out.push_back(p.error_code);
    return out;
}

// Committed offsets of the listed partitions via OffsetFetch v7 (-1: none).
// `spec`: "topic:partition,topic:partition".
task<std::vector<std::int64_t>> fetch(env* e, std::string group, std::string_view spec) {
    std::vector<std::pair<std::string, int>> parts;
    for (const auto& item : split(spec)) {
        auto colon = item.rfind(':');
        parts.emplace_back(item.substr(0, colon), std::stoi(item.substr(colon + 1)));
    }
    kafka::OffsetFetchRequest req;
    req.group_id = std::move(group);
    req.topics.emplace();
    for (auto& item : parts) {
        const std::string& t = item.first;
        const int p = item.second;
        auto it = std::find_if(req.topics->begin(), req.topics->end(), [&](const auto& x) { return x.name == t; });
        if (it == req.topics->end()) {
            req.topics->emplace_back();
            req.topics->back().name = t;
            it = req.topics->end() - 1;
        }
        it->partition_indexes.push_back(p);
    }
    auto r = co_await e->coord->fetch_offsets(std::move(req), 7);
    CHECK(r.error_code == kerr::none);
    std::vector<std::int64_t> out;
    for (const auto& t : r.topics)
        for (const auto& p : t.partitions) out.push_back(p.committed_offset);
    co_return out;
}

kafka::DescribeGroupsResponse::DescribedGroup describe(env* e, std::string group) {
    kafka::DescribeGroupsRequest req;
    req.groups.push_back(std::move(group));
    auto r = e->coord->describe_groups(req, 5);
    REQUIRE(r.groups.size() == 1);
    return r.groups[0];
}

std::vector<std::pair<std::string, std::string>> list(env* e, std::vector<std::string> states = {}) {
    kafka::ListGroupsRequest req;
    req.states_filter = std::move(states);
    auto r = e->coord->list_groups(req, 4);
    CHECK(r.error_code == kerr::none);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& g : r.groups) out.emplace_back(g.group_id, g.group_state);
    return out;
}

} // namespace

// ---- membership ---------------------------------------------------------------------------

TEST_CASE("two members join: one leader, one follower, same generation", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "g", "c1,c2");
        REQUIRE(j.size() == 2);
        CHECK(j[0].error_code == kerr::none);
        CHECK(j[1].error_code == kerr::none);
        CHECK(j[0].generation_id == 1);
        CHECK(j[1].generation_id == 1);
        CHECK(j[0].leader == j[0].member_id); // the first to join leads
        CHECK(j[1].leader == j[0].member_id);
        CHECK(j[0].members.size() == 2); // the leader sees everyone with metadata
        for (const auto& m : j[0].members) CHECK(m.metadata == "meta");
        CHECK(j[1].members.empty());
        CHECK(j[0].protocol_name == std::optional<std::string>("range"));
        CHECK_FALSE(j[0].protocol_type.has_value()); // v7+ only
        CHECK(j[0].member_id.rfind("c1-", 0) == 0);
        CHECK(j[1].member_id.rfind("c2-", 0) == 0);
        CHECK(j[0].member_id != j[1].member_id);
        CHECK(describe(e, "g").group_state == "CompletingRebalance");
        auto st = e->coord->stats();
        CHECK(st.groups == 1);
        CHECK(st.members == 2);
        CHECK(st.rebalances == 1);
    }(&e));
}

TEST_CASE("MEMBER_ID_REQUIRED handshake from v4; older versions join directly", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto req = join_req("g", "");
        auto r = co_await e->coord->join(std::move(req), 4, "client", "/h");
        CHECK(r.error_code == kerr::member_id_required);
        CHECK(r.member_id.rfind("client-", 0) == 0);
        CHECK(r.generation_id == -1);
        CHECK(e->coord->stats().members == 0); // only pending

        // Joining with that id makes it a member.
        auto req2 = join_req("g", r.member_id);
        auto j = co_await e->coord->join(std::move(req2), 4, "client", "/h");
        CHECK(j.error_code == kerr::none);
        CHECK(j.member_id == r.member_id);
        CHECK(j.leader == r.member_id);

        // v3: no handshake.
        auto req3 = join_req("g3", "");
        auto d = co_await e->coord->join(std::move(req3), 3, "old", "/h");
        CHECK(d.error_code == kerr::none);
        CHECK(d.member_id.rfind("old-", 0) == 0);
        CHECK(d.generation_id == 1);
        // protocol_name stays a non-null string before v7.
        CHECK(d.protocol_name == std::optional<std::string>("range"));
        CHECK_FALSE(d.protocol_type.has_value());

        // An id that was never handed out is unknown.
        auto req4 = join_req("g", "made-up");
        auto u = co_await e->coord->join(std::move(req4), 5, "client", "/h");
        CHECK(u.error_code == kerr::unknown_member_id);
        auto req5 = join_req("nope", "made-up");
        auto u2 = co_await e->coord->join(std::move(req5), 5, "client", "/h");
        CHECK(u2.error_code == kerr::unknown_member_id);
    }(&e));
}

TEST_CASE("a pending member that never comes back stops holding up the rebalance", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto id1 = co_await handshake(e, "g", "c1", 5000);
        (void)co_await handshake(e, "g", "c2", 5000); // never rejoins
        auto req = join_req("g", id1, 5000, 60000);
        auto s = e->start(e->coord->join(std::move(req), 5, "c1", "/h"));
        co_await settle();
        CHECK_FALSE(s->has_value());
        co_await pass_time(e, 5001ms); // the pending member's session ends
        REQUIRE(s->has_value());
        CHECK((*s)->error_code == kerr::none);
        CHECK((*s)->members.size() == 1);
    }(&e));
}

TEST_CASE("sync distributes the leader's assignment; followers wait for it", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "g", "c1,c2");
        const auto& leader = j[0];
        const auto& follower = j[1];
        // The follower syncs first and waits.
        auto freq = sync_req("g", follower.generation_id, follower.member_id);
        auto fs = e->start(e->coord->sync(std::move(freq), 5));
        co_await settle();
        CHECK_FALSE(fs->has_value());
        // Wrong generation / unknown member / wrong protocol are refused at once.
        auto bad = sync_req("g", 99, leader.member_id);
        auto b = co_await e->coord->sync(std::move(bad), 5);
        CHECK(b.error_code == kerr::illegal_generation);
        auto unk = sync_req("g", 1, "nobody");
        auto u = co_await e->coord->sync(std::move(unk), 5);
        CHECK(u.error_code == kerr::unknown_member_id);
        auto wrongp = sync_req("g", 1, follower.member_id);
        wrongp.protocol_name = "roundrobin";
        auto w = co_await e->coord->sync(std::move(wrongp), 5);
        CHECK(w.error_code == kerr::inconsistent_group_protocol);
        // Heartbeats are fine while the group completes its rebalance.
        CHECK(heartbeat(e, "g", 1, follower.member_id).error_code == kerr::none);

        std::map<std::string, std::string> assign{{leader.member_id, "L"}, {follower.member_id, "F"}, {"ghost", "X"}};
        auto lreq = sync_req("g", leader.generation_id, leader.member_id, assign);
        auto ls = co_await e->coord->sync(std::move(lreq), 5);
        CHECK(ls.error_code == kerr::none);
        CHECK(ls.assignment == "L");
        CHECK(ls.protocol_name == std::optional<std::string>("range"));
        co_await settle();
        REQUIRE(fs->has_value());
        CHECK((*fs)->error_code == kerr::none);
        CHECK((*fs)->assignment == "F");
        CHECK(describe(e, "g").group_state == "Stable");

        // In Stable a sync returns the current assignment.
        auto again = sync_req("g", 1, follower.member_id);
        auto a = co_await e->coord->sync(std::move(again), 3);
        CHECK(a.error_code == kerr::none);
        CHECK(a.assignment == "F");
        CHECK_FALSE(a.protocol_name.has_value()); // v3 has no protocol fields
    }(&e));
}

TEST_CASE("heartbeat answers", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        CHECK(heartbeat(e, "", 1, "m").error_code == kerr::invalid_group_id);
        CHECK(heartbeat(e, "nope", 1, "m").error_code == kerr::unknown_member_id);
        auto j = co_await join_all(e, "g", "c1,c2");
        (void)co_await sync_all(e, "g", j);
        CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::none);
        CHECK(heartbeat(e, "g", 2, j[0].member_id).error_code == kerr::illegal_generation);
        CHECK(heartbeat(e, "g", 0, j[0].member_id).error_code == kerr::illegal_generation);
        CHECK(heartbeat(e, "g", 1, "stranger").error_code == kerr::unknown_member_id);
        // The leader rejoins: a rebalance starts and the others are told to rejoin.
        auto lreq = join_req("g", j[0].member_id);
        auto ls = e->start(e->coord->join(std::move(lreq), 5, "c1", "/h"));
        co_await settle();
        CHECK_FALSE(ls->has_value());
        CHECK(heartbeat(e, "g", 1, j[1].member_id).error_code == kerr::rebalance_in_progress);
        CHECK(describe(e, "g").group_state == "PreparingRebalance");
        auto freq = join_req("g", j[1].member_id);
        auto f = co_await e->coord->join(std::move(freq), 5, "c2", "/h");
        CHECK(f.error_code == kerr::none);
        CHECK(f.generation_id == 2);
        co_await settle();
        REQUIRE(ls->has_value());
        CHECK((*ls)->generation_id == 2);
    }(&e));
}

TEST_CASE("a third member joining rebalances the group", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "g", "c1,c2");
        (void)co_await sync_all(e, "g", j);
        auto id3 = co_await handshake(e, "g", "c3");
        auto r3 = join_req("g", id3);
        auto s3 = e->start(e->coord->join(std::move(r3), 5, "c3", "/h"));
        co_await settle();
        CHECK_FALSE(s3->has_value());
        CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::rebalance_in_progress);
        CHECK(heartbeat(e, "g", 1, j[1].member_id).error_code == kerr::rebalance_in_progress);
        // The old members rejoin; the rebalance completes with all three.
        auto r1 = join_req("g", j[0].member_id);
        auto s1 = e->start(e->coord->join(std::move(r1), 5, "c1", "/h"));
        auto r2 = join_req("g", j[1].member_id);
        auto s2 = e->start(e->coord->join(std::move(r2), 5, "c2", "/h"));
        co_await settle();
        REQUIRE(s1->has_value());
        REQUIRE(s2->has_value());
        REQUIRE(s3->has_value());
        CHECK((*s1)->generation_id == 2);
        CHECK((*s2)->generation_id == 2);
        CHECK((*s3)->generation_id == 2);
        CHECK((*s1)->leader == j[0].member_id); // the leader keeps its role
        CHECK((*s1)->members.size() == 3);
        CHECK((*s3)->members.empty());
        // Old-generation heartbeats are now illegal.
        CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::illegal_generation);
    }(&e));
}

TEST_CASE("members that do not rejoin within the rebalance timeout are removed", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "g", "c1,c2");
        (void)co_await sync_all(e, "g", j);
        // The follower rejoins (with new metadata); the leader does not, so it is replaced.
        auto req = join_req("g", j[1].member_id, 10000, 30000, {{"range", "new-meta"}});
        auto s = e->start(e->coord->join(std::move(req), 5, "c2", "/h"));
        co_await settle();
        CHECK_FALSE(s->has_value());
        // The leader keeps heartbeating but never rejoins.
        for (int i = 0; i < 10; ++i) {
            co_await pass_time(e, 3000ms);
            (void)heartbeat(e, "g", 1, j[0].member_id);
        }
        co_await pass_time(e, 1000ms);
        REQUIRE(s->has_value());
        CHECK((*s)->error_code == kerr::none);
        CHECK((*s)->generation_id == 2);
        CHECK((*s)->leader == j[1].member_id);
        CHECK((*s)->members.size() == 1);
        CHECK(heartbeat(e, "g", 2, j[0].member_id).error_code == kerr::unknown_member_id);
    }(&e));
}

TEST_CASE("leaving triggers a rebalance; v0-2 and v3+ shapes", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "g", "c1,c2,c3");
        (void)co_await sync_all(e, "g", j);

        kafka::LeaveGroupRequest batch;
        batch.group_id = "g";
        batch.members.resize(2);
        batch.members[0].member_id = j[1].member_id;
        batch.members[1].member_id = "nobody";
        auto lr = e->coord->leave(batch, 3);
        CHECK(lr.error_code == kerr::none);
        REQUIRE(lr.members.size() == 2);
        CHECK(lr.members[0].member_id == j[1].member_id);
        CHECK(lr.members[0].error_code == kerr::none);
        CHECK(lr.members[1].error_code == kerr::unknown_member_id);
        CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::rebalance_in_progress);

        kafka::LeaveGroupRequest single;
        single.group_id = "g";
        single.member_id = j[2].member_id;
        auto sr = e->coord->leave(single, 1);
        CHECK(sr.error_code == kerr::none);
        CHECK(sr.members.empty());
        single.member_id = "nobody";
        CHECK(e->coord->leave(single, 0).error_code == kerr::unknown_member_id);
        single.group_id = "";
        CHECK(e->coord->leave(single, 0).error_code == kerr::invalid_group_id);

        auto req = join_req("g", j[0].member_id);
        auto r = co_await e->coord->join(std::move(req), 5, "c1", "/h");
        CHECK(r.error_code == kerr::none);
        CHECK(r.generation_id == 2);
        CHECK(r.members.size() == 1);

        // The last member leaving empties the group.
        kafka::LeaveGroupRequest last;
        last.group_id = "g";
        last.member_id = j[0].member_id;
        CHECK(e->coord->leave(last, 2).error_code == kerr::none);
        auto d = describe(e, "g");
        CHECK(d.group_state == "Empty");
        CHECK(d.members.empty());
    }(&e));
}

TEST_CASE("a member whose session expires is removed and the group rebalances", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "g", "c1,c2", 6000);
        (void)co_await sync_all(e, "g", j);
        // c1 heartbeats every 2 s; c2 is silent.
        for (int i = 0; i < 2; ++i) {
            co_await pass_time(e, 2000ms);
            CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::none);
        }
        co_await pass_time(e, 1500ms);
        CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::none);
        co_await pass_time(e, 1500ms); // 7 s since c2's last sign of life
        CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::rebalance_in_progress);
        CHECK(heartbeat(e, "g", 1, j[1].member_id).error_code == kerr::unknown_member_id);
        auto d = describe(e, "g");
        CHECK(d.members.size() == 1);
        CHECK(e->coord->stats().members == 1);
        auto req = join_req("g", j[0].member_id, 6000);
        auto r = co_await e->coord->join(std::move(req), 5, "c1", "/h");
        CHECK(r.generation_id == 2);
        CHECK(r.members.size() == 1);

        // A member waiting in a rebalance does not need to heartbeat.
        auto id2 = co_await handshake(e, "g", "c2", 6000);
        auto r2 = join_req("g", id2, 6000, 30000);
        auto s2 = e->start(e->coord->join(std::move(r2), 5, "c2", "/h"));
        co_await pass_time(e, 5000ms);
        CHECK(heartbeat(e, "g", 2, j[0].member_id).error_code == kerr::rebalance_in_progress);
        co_await pass_time(e, 5000ms); // past c1's session, but c1 has not rejoined: removed
        co_await pass_time(e, 21000ms); // rebalance timeout
        REQUIRE(s2->has_value());
        CHECK((*s2)->error_code == kerr::none);
        CHECK((*s2)->members.size() == 1);
        CHECK((*s2)->leader == id2);
    }(&e));
}

TEST_CASE("a follower that never syncs is removed after the rebalance timeout", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "g", "c1,c2", 60000);
        auto lreq = sync_req("g", 1, j[0].member_id, {{j[0].member_id, "L"}, {j[1].member_id, "F"}});
        auto ls = co_await e->coord->sync(std::move(lreq), 5);
        CHECK(ls.error_code == kerr::none);
        co_await pass_time(e, 31000ms);
        CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::rebalance_in_progress);
        CHECK(describe(e, "g").members.size() == 1);
    }(&e));
}

TEST_CASE("the initial rebalance delay waits for more members and extends", "[broker][group]") {
    auto cfg = test_config();
    cfg.initial_rebalance_delay = 3000ms;
    env e(cfg);
    e.run([](env* e) -> task<void> {
        auto r1 = join_req("g", "", 10000, 10000);
        auto s1 = e->start(e->coord->join(std::move(r1), 3, "c1", "/h"));
        co_await pass_time(e, 2000ms);
        CHECK_FALSE(s1->has_value());
        auto r2 = join_req("g", "", 10000, 10000);
        auto s2 = e->start(e->coord->join(std::move(r2), 3, "c2", "/h"));
        co_await pass_time(e, 1000ms); // first delay over, but a member came: wait again
        CHECK_FALSE(s1->has_value());
        co_await pass_time(e, 2900ms);
        CHECK_FALSE(s1->has_value());
        co_await pass_time(e, 100ms);
        REQUIRE(s1->has_value());
        REQUIRE(s2->has_value());
        CHECK((*s1)->generation_id == 1);
        CHECK((*s2)->generation_id == 1);
        CHECK((*s1)->members.size() == 2);
    }(&e));
}

TEST_CASE("join validation: group id, session timeout, protocols", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto a = join_req("", "");
        auto ra = co_await e->coord->join(std::move(a), 5, "c", "/h");
        CHECK(ra.error_code == kerr::invalid_group_id);
        auto b = join_req("g", "", 999);
        auto rb = co_await e->coord->join(std::move(b), 5, "c", "/h");
        CHECK(rb.error_code == kerr::invalid_session_timeout);
        auto c = join_req("g", "", 60001);
        auto rc = co_await e->coord->join(std::move(c), 5, "c", "/h");
        CHECK(rc.error_code == kerr::invalid_session_timeout);
        auto d = join_req("g", "", 10000, 30000, {});
        auto rd = co_await e->coord->join(std::move(d), 3, "c", "/h");
        CHECK(rd.error_code == kerr::inconsistent_group_protocol);
        auto f = join_req("g", "");
        f.protocol_type = "";
        auto rf = co_await e->coord->join(std::move(f), 3, "c", "/h");
        CHECK(rf.error_code == kerr::inconsistent_group_protocol);

        // A group's members must share a protocol and the protocol type.
        auto ok = join_req("g", "", 10000, 30000, {{"range", "m"}, {"sticky", "m"}});
        auto rok = co_await e->coord->join(std::move(ok), 3, "c", "/h");
        CHECK(rok.error_code == kerr::none);
        auto other = join_req("g", "", 10000, 30000, {{"roundrobin", "m"}});
        auto ro = co_await e->coord->join(std::move(other), 3, "c", "/h");
        CHECK(ro.error_code == kerr::inconsistent_group_protocol);
        auto type = join_req("g", "");
        type.protocol_type = "connect";
        auto rt = co_await e->coord->join(std::move(type), 3, "c", "/h");
        CHECK(rt.error_code == kerr::inconsistent_group_protocol);
    }(&e));
}

TEST_CASE("protocol selection: a protocol all members support, by votes", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto id1 = co_await handshake(e, "g", "c1");
        auto id2 = co_await handshake(e, "g", "c2");
        auto id3 = co_await handshake(e, "g", "c3");
        auto r1 = join_req("g", id1, 10000, 30000, {{"range", "1"}, {"sticky", "1s"}, {"rr", "1r"}});
        auto r2 = join_req("g", id2, 10000, 30000, {{"sticky", "2s"}, {"range", "2"}});
        auto r3 = join_req("g", id3, 10000, 30000, {{"sticky", "3s"}, {"range", "3"}});
        auto s1 = e->start(e->coord->join(std::move(r1), 5, "c1", "/h"));
        auto s2 = e->start(e->coord->join(std::move(r2), 5, "c2", "/h"));
        auto s3 = e->start(e->coord->join(std::move(r3), 5, "c3", "/h"));
        co_await settle();
        REQUIRE(s1->has_value());
        CHECK((*s1)->protocol_name == std::optional<std::string>("sticky"));
        std::map<std::string, std::string> md;
        for (const auto& m : (*s1)->members) md[m.member_id] = m.metadata;
        CHECK(md[id1] == "1s");
        CHECK(md[id2] == "2s");
        CHECK(md[id3] == "3s");
    }(&e));
}

TEST_CASE("static members: a restarted instance takes its place without a rebalance", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        // A static member needs no handshake (c2's pending id holds the rebalance open).
        auto id2 = co_await handshake(e, "g", "c2");
        auto r1 = join_req("g", "");
        r1.group_instance_id = "inst-1";
        auto s1 = e->start(e->coord->join(std::move(r1), 5, "c1", "/h"));
        auto r2 = join_req("g", id2);
        auto s2 = e->start(e->coord->join(std::move(r2), 5, "c2", "/h"));
        co_await settle();
        REQUIRE(s1->has_value());
        REQUIRE(s2->has_value());
        std::vector<JoinGroupResponse> j{**s1, **s2};
        CHECK(j[0].member_id.rfind("inst-1-", 0) == 0);
        (void)co_await sync_all(e, "g", j);
        CHECK(describe(e, "g").group_state == "Stable");

        // The instance restarts and joins with no member id.
        auto again = join_req("g", "");
        again.group_instance_id = "inst-1";
        auto ra = co_await e->coord->join(std::move(again), 5, "c1", "/h");
        CHECK(ra.error_code == kerr::none);
        CHECK(ra.member_id != j[0].member_id);
        CHECK(ra.generation_id == 1);
        CHECK(ra.leader != ra.member_id); // no assignment to compute: stay a follower
        CHECK(describe(e, "g").group_state == "Stable");
        // Its SyncGroup gets the instance's assignment.
        auto sreq = sync_req("g", 1, ra.member_id);
        sreq.group_instance_id = "inst-1";
        auto sr = co_await e->coord->sync(std::move(sreq), 5);
        CHECK(sr.error_code == kerr::none);
        CHECK(sr.assignment == "a:" + j[0].member_id);
        // The old id is fenced.
        CHECK(heartbeat(e, "g", 1, j[0].member_id, "inst-1").error_code == kerr::fenced_instance_id);
        CHECK(heartbeat(e, "g", 1, j[0].member_id).error_code == kerr::unknown_member_id);
        CHECK(heartbeat(e, "g", 1, ra.member_id, "inst-1").error_code == kerr::none);
        CHECK(e->coord->stats().members == 2);

        // Leaving by instance id alone.
        kafka::LeaveGroupRequest lv;
        lv.group_id = "g";
        lv.members.resize(1);
        lv.members[0].group_instance_id = "inst-1";
        auto lr = e->coord->leave(lv, 4);
        REQUIRE(lr.members.size() == 1);
        CHECK(lr.members[0].error_code == kerr::none);
        CHECK(e->coord->stats().members == 1);
    }(&e));
}

// ---- offsets -------------------------------------------------------------------------------

TEST_CASE("offset commit and fetch round trip", "[broker][group][offsets]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto req = commit_req("g", {{"orders", 0, 42}, {"orders", 1, 7}, {"audit", 3, 100}});
        auto r = co_await e->coord->commit_offsets(std::move(req), 8);
        CHECK(commit_errors(r) == std::vector<std::int16_t>{0, 0, 0});
        auto got = co_await fetch(e, "g", "orders:0,orders:1,orders:2,audit:3,x:0");
        CHECK(got == std::vector<std::int64_t>{42, 7, -1, 100, -1});

        // All topics (null), with epoch and metadata.
        kafka::OffsetFetchRequest all;
        all.group_id = "g";
        all.topics = std::nullopt;
        auto fa = co_await e->coord->fetch_offsets(std::move(all), 7);
        REQUIRE(fa.topics.size() == 2);
        CHECK(fa.topics[0].name == "audit");
        CHECK(fa.topics[1].name == "orders");
        REQUIRE(fa.topics[1].partitions.size() == 2);
        CHECK(fa.topics[1].partitions[0].committed_leader_epoch == 7);
        CHECK(fa.topics[1].partitions[0].metadata == std::optional<std::string>("md"));

        // v8: several groups.
        kafka::OffsetFetchRequest multi;
        multi.groups.resize(3);
        multi.groups[0].group_id = "g";
        multi.groups[0].topics = std::nullopt;
        multi.groups[1].group_id = "unknown";
        multi.groups[1].topics.emplace(1);
        (*multi.groups[1].topics)[0].name = "orders";
        (*multi.groups[1].topics)[0].partition_indexes = {0};
        multi.groups[2].group_id = "";
        auto fm = co_await e->coord->fetch_offsets(std::move(multi), 8);
        REQUIRE(fm.groups.size() == 3);
        CHECK(fm.groups[0].error_code == kerr::none);
        CHECK(fm.groups[0].topics.size() == 2);
        REQUIRE(fm.groups[1].topics.size() == 1);
        CHECK(fm.groups[1].topics[0].partitions[0].committed_offset == -1);
        CHECK(fm.groups[2].error_code == kerr::invalid_group_id);

        // A later commit overwrites; the stored object holds it.
        auto req2 = commit_req("g", {{"orders", 0, 50}});
        auto r2 = co_await e->coord->commit_offsets(std::move(req2), 2);
        CHECK(commit_errors(r2) == std::vector<std::int16_t>{0});
        auto got2 = co_await fetch(e, "g", "orders:0,orders:1");
        CHECK(got2 == std::vector<std::int64_t>{50, 7});
        CHECK(e->bucket->objects.count(group_offsets_key("test", "g")) == 1);
        CHECK(e->coord->stats().offset_commits == 2);
    }(&e));
}

TEST_CASE("offset commit validation", "[broker][group][offsets]") {
    env e;
    e.run([](env* e) -> task<void> {
        // Too much metadata is refused for that partition only.
        auto big = commit_req("g", {{"t", 0, 1}}, -1, "", std::string(4097, 'x'));
        big.topics[0].partitions.push_back(big.topics[0].partitions[0]);
        big.topics[0].partitions[1].partition_index = 1;
        big.topics[0].partitions[1].committed_metadata = std::string(4096, 'y');
        big.topics[0].partitions.push_back(big.topics[0].partitions[1]);
        big.topics[0].partitions[2].partition_index = -1;
        auto rb = co_await e->coord->commit_offsets(std::move(big), 8);
        CHECK(commit_errors(rb) == std::vector<std::int16_t>{kerr::offset_metadata_too_large, kerr::none,
                                                             kerr::unknown_topic_or_partition});
        auto empty_id = commit_req("", {{"t", 0, 1}});
        auto re = co_await e->coord->commit_offsets(std::move(empty_id), 8);
        CHECK(commit_errors(re) == std::vector<std::int16_t>{kerr::invalid_group_id});
        // A generation on a group this coordinator does not know.
        auto stale = commit_req("nope", {{"t", 0, 1}}, 3, "m");
        auto rs = co_await e->coord->commit_offsets(std::move(stale), 8);
        CHECK(commit_errors(rs) == std::vector<std::int16_t>{kerr::illegal_generation});

        auto j = co_await join_all(e, "cg", "c1,c2");
        // CompletingRebalance: retry after the rebalance.
        auto early = commit_req("cg", {{"t", 0, 1}}, 1, j[0].member_id);
        auto rr = co_await e->coord->commit_offsets(std::move(early), 8);
        CHECK(commit_errors(rr) == std::vector<std::int16_t>{kerr::rebalance_in_progress});
        (void)co_await sync_all(e, "cg", j);
        auto good = commit_req("cg", {{"t", 0, 5}}, 1, j[1].member_id);
        auto rg = co_await e->coord->commit_offsets(std::move(good), 8);
        CHECK(commit_errors(rg) == std::vector<std::int16_t>{kerr::none});
        auto wrong_gen = commit_req("cg", {{"t", 0, 6}}, 0, j[1].member_id);
        auto rw = co_await e->coord->commit_offsets(std::move(wrong_gen), 8);
        CHECK(commit_errors(rw) == std::vector<std::int16_t>{kerr::illegal_generation});
        auto unknown = commit_req("cg", {{"t", 0, 6}}, 1, "stranger");
        auto ru = co_await e->coord->commit_offsets(std::move(unknown), 8);
        CHECK(commit_errors(ru) == std::vector<std::int16_t>{kerr::unknown_member_id});
        // A standalone commit into a group with members is refused.
        auto standalone = commit_req("cg", {{"t", 0, 6}});
        auto rsa = co_await e->coord->commit_offsets(std::move(standalone), 8);
        CHECK(commit_errors(rsa) == std::vector<std::int16_t>{kerr::unknown_member_id});
        auto got = co_await fetch(e, "cg", "t:0");
        CHECK(got == std::vector<std::int64_t>{5});
    }(&e));
}

TEST_CASE("concurrent commits of one group coalesce, one PUT at a time", "[broker][group][offsets]") {
    env e;
    e.store->set_latency(10ms);
    e.run([](env* e) -> task<void> {
        std::vector<slot<kafka::OffsetCommitResponse>> s;
        for (int i = 0; i < 4; ++i) {
            auto req = commit_req("g", {{"t", i % 2, 100 + i}});
            s.push_back(e->start(e->coord->commit_offsets(std::move(req), 8)));
        }
        co_await settle();
        for (auto& x : s) CHECK_FALSE(x->has_value()); // nothing answered before a PUT lands
        for (int i = 0; i < 5; ++i) co_await pass_time(e, 10ms);
        for (auto& x : s) {
            REQUIRE(x->has_value());
            CHECK(commit_errors(**x) == std::vector<std::int16_t>{0});
        }
        CHECK(e->store->stats().puts == 2); // the first alone, the other three together
        CHECK(e->store->stats().max_concurrent_puts == 1);
        auto got = co_await fetch(e, "g", "t:0,t:1");
        CHECK(got == std::vector<std::int64_t>{102, 103});
    }(&e));
}

TEST_CASE("a failed offsets write is not reported as committed", "[broker][group][offsets]") {
    auto cfg = test_config();
    cfg.offset_write_timeout = 5000ms;
    env e(cfg);
    e.run([](env* e) -> task<void> {
        auto first = commit_req("g", {{"t", 0, 1}});
        auto r1 = co_await e->coord->commit_offsets(std::move(first), 8);
        CHECK(commit_errors(r1) == std::vector<std::int16_t>{0});

        e->store->add_fault(mem_fault_rule("put", "offsets.json", mem_fault::fail_transient, 1));
        auto failing = commit_req("g", {{"t", 0, 2}});
        auto r2 = co_await e->coord->commit_offsets(std::move(failing), 8);
        CHECK(commit_errors(r2) == std::vector<std::int16_t>{kerr::coordinator_not_available});
        auto got = co_await fetch(e, "g", "t:0");
        CHECK(got == std::vector<std::int64_t>{1});

        // A write that hangs times out (retriable) and is not reported either.
        e->store->add_fault(mem_fault_rule("put", "offsets.json", mem_fault::hang, 1));
        auto hanging = commit_req("g", {{"t", 0, 3}});
        auto s = e->start(e->coord->commit_offsets(std::move(hanging), 8));
        co_await pass_time(e, 4999ms);
        CHECK_FALSE(s->has_value());
        co_await pass_time(e, 2ms);
        REQUIRE(s->has_value());
        CHECK(commit_errors(**s) == std::vector<std::int16_t>{kerr::request_timed_out});
        auto got2 = co_await fetch(e, "g", "t:0");
        CHECK(got2 == std::vector<std::int64_t>{1});

        // The store works again: commits go through.
        auto ok = commit_req("g", {{"t", 0, 4}});
        auto r4 = co_await e->coord->commit_offsets(std::move(ok), 8);
        CHECK(commit_errors(r4) == std::vector<std::int16_t>{0});
        auto got3 = co_await fetch(e, "g", "t:0");
        CHECK(got3 == std::vector<std::int64_t>{4});
        CHECK(e->coord->stats().offset_commits == 2);
    }(&e));
}

TEST_CASE("committed offsets survive a restart; load honours ownership", "[broker][group][offsets]") {
    env e;
    e.run([](env* e) -> task<void> {
        std::vector<std::string> names{"mine", "theirs", std::string("we/ird\xff id")};
        for (const auto& g : names) {
            auto req = commit_req(g, {{"orders", 0, 11}, {"orders", 5, 55}}, -1, "", "meta\xfe");
            auto r = co_await e->coord->commit_offsets(std::move(req), 8);
            CHECK(commit_errors(r) == std::vector<std::int16_t>{0, 0});
        }
        co_await e->restart([](std::string_view id) { return id != "theirs"; });
        auto got = co_await fetch(e, "mine", "orders:0,orders:5,orders:1");
        CHECK(got == std::vector<std::int64_t>{11, 55, -1});
        auto weird = co_await fetch(e, std::string("we/ird\xff id"), "orders:5");
        CHECK(weird == std::vector<std::int64_t>{55});
        auto theirs = co_await fetch(e, "theirs", "orders:0");
        CHECK(theirs == std::vector<std::int64_t>{-1});

        kafka::OffsetFetchRequest all;
        all.group_id = "mine";
        all.topics = std::nullopt;
        auto fa = co_await e->coord->fetch_offsets(std::move(all), 6);
        REQUIRE(fa.topics.size() == 1);
        REQUIRE(fa.topics[0].partitions.size() == 2);
        CHECK(fa.topics[0].partitions[0].metadata == std::optional<std::string>("meta\xfe"));
        CHECK(fa.topics[0].partitions[0].committed_leader_epoch == 7);

        auto groups = list(e);
        REQUIRE(groups.size() == 2);
        CHECK(groups[0] == std::pair<std::string, std::string>("mine", "Empty"));
        CHECK(groups[1].first == std::string("we/ird\xff id"));
        // A loaded group takes members as usual.
        auto j = co_await join_all(e, "mine", "c1");
        CHECK(j[0].generation_id == 1);
    }(&e));
}

TEST_CASE("a corrupt offsets object is skipped on load", "[broker][group][offsets]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto req = commit_req("good", {{"t", 0, 9}});
        auto r = co_await e->coord->commit_offsets(std::move(req), 8);
        CHECK(commit_errors(r) == std::vector<std::int16_t>{0});
        e->bucket->objects[group_offsets_key("test", "bad")] = "{not json";
        e->bucket->objects[group_offsets_key("test", "v9")] = R"({"version":9,"group_id":"v9","offsets":[]})";
        e->bucket->objects[group_offsets_key("test", "shape")] =
            R"({"version":1,"group_id":"shape","offsets":[{"topic":"t","partitions":[{"partition":"zero"}]}]})";
        e->bucket->objects[group_offsets_key("test", "liar")] = R"({"version":1,"group_id":"other","offsets":[]})";
        e->bucket->objects["test/skiff~meta/groups/%ZZ/offsets.json"] = "{}";
        e->bucket->objects["test/skiff~meta/groups/stray-file"] = "x";
        co_await e->restart({});
        auto groups = list(e);
        REQUIRE(groups.size() == 1);
        CHECK(groups[0].first == "good");
        auto got = co_await fetch(e, "good", "t:0");
        CHECK(got == std::vector<std::int64_t>{9});
    }(&e));
}

TEST_CASE("a load that cannot list fails", "[broker][group][offsets]") {
    env e;
    e.store->add_fault(mem_fault_rule("list", "", mem_fault::fail_permanent, 1));
    e.run([](env* e) -> task<void> {
        auto r = co_await e->coord->load({});
        CHECK_FALSE(r.has_value());
    }(&e));
}

// ---- admin -----------------------------------------------------------------------------------

TEST_CASE("list and describe groups", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "stable", "c1,c2");
        (void)co_await sync_all(e, "stable", j);
        (void)co_await join_all(e, "completing", "c3");
        auto req = commit_req("offsets-only", {{"t", 0, 1}});
        (void)co_await e->coord->commit_offsets(std::move(req), 8);

        auto all = list(e);
        REQUIRE(all.size() == 3);
        CHECK(all[0] == std::pair<std::string, std::string>("completing", "CompletingRebalance"));
        CHECK(all[1] == std::pair<std::string, std::string>("offsets-only", "Empty"));
        CHECK(all[2] == std::pair<std::string, std::string>("stable", "Stable"));
        auto filtered = list(e, {"stable", "EMPTY"});
        REQUIRE(filtered.size() == 2);
        CHECK(filtered[0].first == "offsets-only");
        CHECK(filtered[1].first == "stable");
        kafka::ListGroupsRequest lreq;
        lreq.types_filter = {"consumer"};
        CHECK(e->coord->list_groups(lreq, 5).groups.empty());
        lreq.types_filter = {"Classic"};
        CHECK(e->coord->list_groups(lreq, 5).groups.size() == 3);
        auto v0 = e->coord->list_groups(kafka::ListGroupsRequest{}, 0);
        REQUIRE(v0.groups.size() == 3);
        CHECK(v0.groups[2].protocol_type == "consumer");

        auto d = describe(e, "stable");
        CHECK(d.error_code == kerr::none);
        CHECK(d.group_state == "Stable");
        CHECK(d.protocol_type == "consumer");
        CHECK(d.protocol_data == "range");
        REQUIRE(d.members.size() == 2);
        for (const auto& m : d.members) {
            CHECK(m.member_assignment == "a:" + m.member_id);
            CHECK(m.member_metadata == "meta");
            CHECK(m.client_host == "/10.0.0.1");
        }
        auto c = describe(e, "completing");
        CHECK(c.group_state == "CompletingRebalance");
        CHECK(c.protocol_data.empty());
        REQUIRE(c.members.size() == 1);
        CHECK(c.members[0].member_metadata.empty());
        CHECK(describe(e, "unknown").group_state == "Dead");
        CHECK(describe(e, "").error_code == kerr::invalid_group_id);
    }(&e));
}

TEST_CASE("delete groups", "[broker][group][offsets]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto req = commit_req("old", {{"t", 0, 1}});
        (void)co_await e->coord->commit_offsets(std::move(req), 8);
        (void)co_await join_all(e, "busy", "c1");
        const auto key = group_offsets_key("test", "old");
        CHECK(e->bucket->objects.count(key) == 1);

        kafka::DeleteGroupsRequest del;
        del.groups_names = {"old", "busy", "missing", ""};
        auto r = co_await e->coord->delete_groups(std::move(del), 2);
        REQUIRE(r.results.size() == 4);
        CHECK(r.results[0].group_id == "old");
        CHECK(r.results[0].error_code == kerr::none);
        CHECK(r.results[1].error_code == kerr::non_empty_group);
        CHECK(r.results[2].error_code == kerr::group_id_not_found);
        CHECK(r.results[3].error_code == kerr::invalid_group_id);
        CHECK(e->bucket->objects.count(key) == 0);
        auto got = co_await fetch(e, "old", "t:0");
        CHECK(got == std::vector<std::int64_t>{-1});
        CHECK(list(e).size() == 1);

        // A failed delete keeps the group and its offsets.
        auto req2 = commit_req("kept", {{"t", 0, 3}});
        (void)co_await e->coord->commit_offsets(std::move(req2), 8);
        e->store->add_fault(mem_fault_rule("remove", "", mem_fault::fail_transient, 1));
        kafka::DeleteGroupsRequest del2;
        del2.groups_names = {"kept"};
        auto r2 = co_await e->coord->delete_groups(std::move(del2), 2);
        CHECK(r2.results[0].error_code == kerr::coordinator_not_available);
        auto kept = co_await fetch(e, "kept", "t:0");
        CHECK(kept == std::vector<std::int64_t>{3});
        CHECK(describe(e, "kept").group_state == "Empty");
    }(&e));
}

TEST_CASE("a delete waits for the group's write in flight", "[broker][group][offsets]") {
    env e;
    e.store->set_latency(10ms);
    e.run([](env* e) -> task<void> {
        auto req = commit_req("g", {{"t", 0, 1}});
        auto c = e->start(e->coord->commit_offsets(std::move(req), 8));
        co_await settle();
        kafka::DeleteGroupsRequest del;
        del.groups_names = {"g"};
        auto d = e->start(e->coord->delete_groups(std::move(del), 2));
        for (int i = 0; i < 5; ++i) co_await pass_time(e, 10ms);
        REQUIRE(c->has_value());
        REQUIRE(d->has_value());
        CHECK(commit_errors(**c) == std::vector<std::int16_t>{0});
        CHECK((*d)->results[0].error_code == kerr::none);
        CHECK(e->bucket->objects.empty());
    }(&e));
}

// ---- shutdown, keys, robustness ------------------------------------------------------------------

TEST_CASE("close answers pending joins and syncs and refuses new work", "[broker][group]") {
    auto cfg = test_config();
    cfg.initial_rebalance_delay = 3000ms;
    env e(cfg);
    e.store->set_latency(10ms);
    e.run([](env* e) -> task<void> {
        auto r1 = join_req("g", "");
        auto s1 = e->start(e->coord->join(std::move(r1), 3, "c1", "/h"));
        auto creq = commit_req("h", {{"t", 0, 1}});
        auto cs = e->start(e->coord->commit_offsets(std::move(creq), 8));
        co_await settle();
        CHECK_FALSE(s1->has_value());
        auto closing = e->start([](group_coordinator* c) -> task<int> {
            co_await c->close();
            co_return 0;
        }(e->coord.get()));
        co_await settle();
        REQUIRE(s1->has_value());
        CHECK((*s1)->error_code == kerr::coordinator_not_available);
        CHECK_FALSE(closing->has_value()); // the write in flight is still landing
        co_await pass_time(e, 10ms);
        REQUIRE(cs->has_value());
        CHECK(commit_errors(**cs) == std::vector<std::int16_t>{0}); // accepted before close: written
        REQUIRE(closing->has_value());

        auto r2 = join_req("g", "");
        auto j2 = co_await e->coord->join(std::move(r2), 5, "c2", "/h");
        CHECK(j2.error_code == kerr::coordinator_not_available);
        CHECK(heartbeat(e, "g", 0, "x").error_code == kerr::coordinator_not_available);
        auto c2 = commit_req("h", {{"t", 0, 2}});
        auto rc = co_await e->coord->commit_offsets(std::move(c2), 8);
        CHECK(commit_errors(rc) == std::vector<std::int16_t>{kerr::coordinator_not_available});
    }(&e));
}

TEST_CASE("close answers a follower waiting for the leader's sync", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "g", "c1,c2");
        auto freq = sync_req("g", 1, j[1].member_id);
        auto fs = e->start(e->coord->sync(std::move(freq), 5));
        co_await settle();
        CHECK_FALSE(fs->has_value());
        co_await e->coord->close();
        co_await settle();
        REQUIRE(fs->has_value());
        CHECK((*fs)->error_code == kerr::coordinator_not_available);
        kafka::DescribeGroupsRequest d;
        d.groups = {"g"};
        CHECK(e->coord->describe_groups(d, 5).groups[0].error_code == kerr::coordinator_not_available);
    }(&e));
}

TEST_CASE("group offsets keys are valid store keys and distinct", "[broker][group][offsets]") {
    std::vector<std::string> ids{"g", ".", "..", ".tmp.x", "a/b", "a%2Fb", "sp ace", std::string(1, '\0'),
                                 std::string(300, 'x'), std::string(299, 'x') + "y", std::string(100, '/'),
                                 "\xff\xfe", "~", "-_.ok"};
    std::set<std::string> keys;
    for (const auto& id : ids) {
        auto k = group_offsets_key("ns", id);
        INFO(k);
        CHECK_FALSE(check_key(k).has_value());
        CHECK(k.rfind("ns/skiff~meta/groups/", 0) == 0);
        CHECK(k.size() < 260);
        keys.insert(k);
    }
    CHECK(keys.size() == ids.size());
    CHECK(group_offsets_key("ns", "plain-id_1.x") == "ns/skiff~meta/groups/plain-id_1.x/offsets.json");
    CHECK(group_offsets_key("ns", "a/b") == "ns/skiff~meta/groups/a%2Fb/offsets.json");
}

TEST_CASE("arbitrary field values never crash the coordinator", "[broker][group]") {
    env e;
    e.run([](env* e) -> task<void> {
        std::mt19937 rng(12345);
        auto pick = [&](std::vector<std::string> v) { return v[rng() % v.size()]; };
        std::vector<std::string> members{""};
        const std::vector<std::string> groups{"", "g", "h", std::string(3, '\0')};
        for (int i = 0; i < 400; ++i) {
            std::string g = pick(groups);
            std::string m = pick(members);
            auto version = static_cast<std::int16_t>(rng() % 10);
            switch (rng() % 7) {
            case 0: {
                auto req = join_req(g, m, static_cast<std::int32_t>(rng() % 20000) - 1000,
                                    static_cast<std::int32_t>(rng() % 40000) - 1000);
                if (rng() % 3 == 0) req.group_instance_id = pick({"", "i1", "i2"});
                if (rng() % 5 == 0) req.protocols.clear();
                auto s = e->start(e->coord->join(std::move(req), version, "c", "/h"));
                co_await settle(3);
                if (s->has_value() && !(*s)->member_id.empty()) members.push_back((*s)->member_id);
                break;
            }
            case 1: {
                auto req = sync_req(g, static_cast<std::int32_t>(rng() % 4) - 1, m, {{m, "x"}, {"", ""}});
                (void)e->start(e->coord->sync(std::move(req), static_cast<std::int16_t>(rng() % 6)));
                break;
            }
            case 2: (void)heartbeat(e, g, static_cast<std::int32_t>(rng() % 4) - 1, m); break;
            case 3: {
                kafka::LeaveGroupRequest req;
                req.group_id = g;
                req.member_id = m;
                req.members.resize(rng() % 3);
                for (auto& x : req.members) x.member_id = pick(members);
                (void)e->coord->leave(req, static_cast<std::int16_t>(rng() % 6));
                break;
            }
            case 4: {
                auto req = commit_req(g, {{pick({"t", "", "\xff"}), static_cast<int>(rng() % 3) - 1, 5}},
                                      static_cast<std::int32_t>(rng() % 4) - 1, m);
                (void)e->start(e->coord->commit_offsets(std::move(req), version));
                break;
            }
            case 5: {
                kafka::OffsetFetchRequest req;
                req.group_id = g;
                if (rng() % 2) req.topics = std::nullopt;
                req.groups.resize(rng() % 2);
                for (auto& x : req.groups) x.group_id = g;
                (void)e->start(e->coord->fetch_offsets(std::move(req), version));
                break;
            }
            case 6: {
                kafka::DeleteGroupsRequest req;
                req.groups_names = {g};
                (void)e->start(e->coord->delete_groups(std::move(req), 1));
                (void)list(e, {pick({"", "Stable", "x"})});
                (void)describe(e, g);
                break;
            }
            }
            co_await pass_time(e, std::chrono::milliseconds(rng() % 3000));
        }
        auto st = e->coord->stats();
        CHECK(st.groups <= 4);
    }(&e));
}
