// Shared fixtures of the group coordinator tests (test_group_membership.cpp,
// test_group_offsets.cpp): a manual-clock reactor, an in-memory bucket and a coordinator, plus
// request builders and multi-member join/sync drivers.
#pragma once

#include "run_task.hpp"

#include <skiff/broker/group_coordinator.hpp>
#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/memory_store.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace group_test {

using namespace skiff;
using namespace skiff::broker;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;

using kafka::JoinGroupResponse;
using kafka::SyncGroupResponse;

template <typename T>
using slot = std::shared_ptr<std::optional<T>>;

template <typename T>
inline task<void> fill(task<T> t, slot<T> out) {
    auto v = co_await std::move(t);
    out->emplace(std::move(v));
}

inline group_config test_config() {
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
inline task<void> settle(int turns = 20) {
    for (int i = 0; i < turns; ++i) co_await next_turn{};
}
inline task<void> pass_time(env* e, duration d) {
    e->clk->advance(d);
    co_await settle();
}

inline kafka::JoinGroupRequest join_req(std::string group, std::string member, std::int32_t session_ms = 10000,
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

inline kafka::HeartbeatResponse heartbeat(env* e, std::string group, std::int32_t gen, std::string member,
                                   std::optional<std::string> instance = std::nullopt) {
    kafka::HeartbeatRequest r;
    r.group_id = std::move(group);
    r.generation_id = gen;
    r.member_id = std::move(member);
    r.group_instance_id = std::move(instance);
    return e->coord->heartbeat(r, 4);
}

inline kafka::SyncGroupRequest sync_req(std::string group, std::int32_t gen, std::string member,
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

inline std::vector<std::string> split(std::string_view s) {
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
inline task<std::string> handshake(env* e, std::string group, std::string client, std::int32_t session_ms = 10000) {
    auto req = join_req(std::move(group), "", session_ms);
    auto r = co_await e->coord->join(std::move(req), 5, client, "/10.0.0.1");
    CHECK(r.error_code == kerr::member_id_required);
    co_return r.member_id;
}

// Joins every client into `group` (v5 with the handshake); returns the JoinGroup answers in
// client order once the rebalance completed.
// (Braced lists inside a co_await expression break g++ 12, so the clients come as "c1,c2".)
inline task<std::vector<JoinGroupResponse>> join_all(env* e, std::string group, std::string_view client_list,
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
inline task<std::vector<SyncGroupResponse>> sync_all(env* e, std::string group, const std::vector<JoinGroupResponse>& joined) {
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

inline kafka::OffsetCommitRequest commit_req(std::string group, std::vector<std::tuple<std::string, int, std::int64_t>> offs,
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

inline std::vector<kafka::error_code> commit_errors(const kafka::OffsetCommitResponse& r) {
    std::vector<kafka::error_code> out;
    for (const auto& t : r.topics)
        for (const auto& p : t.partitions) out.push_back(p.error_code);
    return out;
}

// Committed offsets of the listed partitions via OffsetFetch v7 (-1: none).
// `spec`: "topic:partition,topic:partition".
inline task<std::vector<std::int64_t>> fetch(env* e, std::string group, std::string_view spec) {
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

inline kafka::DescribeGroupsResponse::DescribedGroup describe(env* e, std::string group) {
    kafka::DescribeGroupsRequest req;
    req.groups.push_back(std::move(group));
    auto r = e->coord->describe_groups(req, 5);
    REQUIRE(r.groups.size() == 1);
    return r.groups[0];
}

inline std::vector<std::pair<std::string, std::string>> list(env* e, std::vector<std::string> states = {}) {
    kafka::ListGroupsRequest req;
    req.states_filter = std::move(states);
    auto r = e->coord->list_groups(req, 4);
    CHECK(r.error_code == kerr::none);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& g : r.groups) out.emplace_back(g.group_id, g.group_state);
    return out;
}


} // namespace group_test
