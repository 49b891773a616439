// The classic group coordinator on a real reactor with a manual clock and an in-memory store:
// membership (join / sync / heartbeat / leave, rebalances, timeouts, static members).
#include "group_test_env.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <set>

using namespace group_test;

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
