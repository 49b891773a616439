// The group coordinator's façade on a real reactor with a manual clock and an in-memory store:
// the admin calls (ListGroups, DescribeGroups), shutdown, and robustness against arbitrary
// field values in every call. Membership and offsets have their own files.
#include "group_test_env.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <set>

using namespace group_test;

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

// ---- shutdown, robustness ------------------------------------------------------------------

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
        CHECK((*s1)->error_code == kerr::not_coordinator);
        CHECK_FALSE(closing->has_value()); // the write in flight is still landing
        co_await pass_time(e, 10ms);
        REQUIRE(cs->has_value());
        CHECK(commit_errors(**cs) == std::vector<kafka::error_code>{kerr::none}); // accepted before close: written
        REQUIRE(closing->has_value());

        auto r2 = join_req("g", "");
        auto j2 = co_await e->coord->join(std::move(r2), 5, "c2", "/h");
        CHECK(j2.error_code == kerr::not_coordinator);
        CHECK(heartbeat(e, "g", 0, "x").error_code == kerr::not_coordinator);
        auto c2 = commit_req("h", {{"t", 0, 2}});
        auto rc = co_await e->coord->commit_offsets(std::move(c2), 8);
        CHECK(commit_errors(rc) == std::vector<kafka::error_code>{kerr::not_coordinator});
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
        CHECK((*fs)->error_code == kerr::not_coordinator);
        kafka::DescribeGroupsRequest d;
        d.groups = {"g"};
        CHECK(e->coord->describe_groups(d, 5).groups[0].error_code == kerr::not_coordinator);
    }(&e));
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
