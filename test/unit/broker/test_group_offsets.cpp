// Committed offsets through the group coordinator: commit and fetch, validation, write
// coalescing, failed writes, restarts and loading, DeleteGroups.
#include "group_test_env.hpp"

#include <catch2/catch.hpp>

#include <random>
#include <set>

using namespace group_test;

// ---- offsets -------------------------------------------------------------------------------

TEST_CASE("offset commit and fetch round trip", "[broker][group][offsets]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto req = commit_req("g", {{"orders", 0, 42}, {"orders", 1, 7}, {"audit", 3, 100}});
        auto r = co_await e->coord->commit_offsets(std::move(req), 8);
        CHECK(commit_errors(r) == std::vector<kafka::error_code>{kerr::none, kerr::none, kerr::none});
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
        CHECK(commit_errors(r2) == std::vector<kafka::error_code>{kerr::none});
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
        CHECK(commit_errors(rb) == std::vector<kafka::error_code>{kerr::offset_metadata_too_large, kerr::none,
                                                             kerr::unknown_topic_or_partition});
        auto empty_id = commit_req("", {{"t", 0, 1}});
        auto re = co_await e->coord->commit_offsets(std::move(empty_id), 8);
        CHECK(commit_errors(re) == std::vector<kafka::error_code>{kerr::invalid_group_id});
        // A generation on a group this coordinator does not know.
        auto stale = commit_req("nope", {{"t", 0, 1}}, 3, "m");
        auto rs = co_await e->coord->commit_offsets(std::move(stale), 8);
        CHECK(commit_errors(rs) == std::vector<kafka::error_code>{kerr::illegal_generation});

        auto j = co_await join_all(e, "cg", "c1,c2");
        // CompletingRebalance: retry after the rebalance.
        auto early = commit_req("cg", {{"t", 0, 1}}, 1, j[0].member_id);
        auto rr = co_await e->coord->commit_offsets(std::move(early), 8);
        CHECK(commit_errors(rr) == std::vector<kafka::error_code>{kerr::rebalance_in_progress});
        (void)co_await sync_all(e, "cg", j);
        auto good = commit_req("cg", {{"t", 0, 5}}, 1, j[1].member_id);
        auto rg = co_await e->coord->commit_offsets(std::move(good), 8);
        CHECK(commit_errors(rg) == std::vector<kafka::error_code>{kerr::none});
        auto wrong_gen = commit_req("cg", {{"t", 0, 6}}, 0, j[1].member_id);
        auto rw = co_await e->coord->commit_offsets(std::move(wrong_gen), 8);
        CHECK(commit_errors(rw) == std::vector<kafka::error_code>{kerr::illegal_generation});
        auto unknown = commit_req("cg", {{"t", 0, 6}}, 1, "stranger");
        auto ru = co_await e->coord->commit_offsets(std::move(unknown), 8);
        CHECK(commit_errors(ru) == std::vector<kafka::error_code>{kerr::unknown_member_id});
        // A standalone commit into a group with members is refused.
        auto standalone = commit_req("cg", {{"t", 0, 6}});
        auto rsa = co_await e->coord->commit_offsets(std::move(standalone), 8);
        CHECK(commit_errors(rsa) == std::vector<kafka::error_code>{kerr::unknown_member_id});
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
            CHECK(commit_errors(**x) == std::vector<kafka::error_code>{kerr::none});
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
        CHECK(commit_errors(r1) == std::vector<kafka::error_code>{kerr::none});

        e->store->add_fault(mem_fault_rule("put", "offsets.json", mem_fault::fail_transient, 1));
        auto failing = commit_req("g", {{"t", 0, 2}});
        auto r2 = co_await e->coord->commit_offsets(std::move(failing), 8);
        CHECK(commit_errors(r2) == std::vector<kafka::error_code>{kerr::coordinator_not_available});
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
        CHECK(commit_errors(**s) == std::vector<kafka::error_code>{kerr::request_timed_out});
        auto got2 = co_await fetch(e, "g", "t:0");
        CHECK(got2 == std::vector<std::int64_t>{1});

        // The store works again: commits go through.
        auto ok = commit_req("g", {{"t", 0, 4}});
        auto r4 = co_await e->coord->commit_offsets(std::move(ok), 8);
        CHECK(commit_errors(r4) == std::vector<kafka::error_code>{kerr::none});
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
            CHECK(commit_errors(r) == std::vector<kafka::error_code>{kerr::none, kerr::none});
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
        CHECK(commit_errors(r) == std::vector<kafka::error_code>{kerr::none});
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
        CHECK(commit_errors(**c) == std::vector<kafka::error_code>{kerr::none});
        CHECK((*d)->results[0].error_code == kerr::none);
        CHECK(e->bucket->objects.empty());
    }(&e));
}

namespace {
kafka::OffsetDeleteRequest offset_delete_req(const std::string& group,
                                             std::vector<std::pair<std::string, std::int32_t>> parts) {
    kafka::OffsetDeleteRequest req;
    req.group_id = group;
    for (auto& [t, p] : parts) {
        if (req.topics.empty() || req.topics.back().name != t) {
            kafka::OffsetDeleteRequest::OffsetDeleteRequestTopic rt;
            rt.name = t;
            req.topics.push_back(std::move(rt));
        }
        kafka::OffsetDeleteRequest::OffsetDeleteRequestPartition rp;
        rp.partition_index = p;
        req.topics.back().partitions.push_back(rp);
    }
    return req;
}
} // namespace

TEST_CASE("offset delete: removed with the next write, the later of a commit and a delete wins, kept across a restart",
          "[broker][group][offsets][offset_delete]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto c0 = commit_req("g", {{"t", 0, 10}, {"t", 1, 11}, {"u", 0, 12}});
        auto r0 = co_await e->coord->commit_offsets(std::move(c0), 8);
        CHECK(commit_errors(r0) == std::vector<kafka::error_code>{kerr::none, kerr::none, kerr::none});
        // While one write is out: a commit then a delete of t/0 (the delete wins), a delete then
        // a commit of t/1 (the commit wins). They share the next PUT.
        // (Requests built outside co_await expressions: g++ 12 and string literals in them.)
        auto hold_req = commit_req("g", {{"u", 1, 1}});
        auto a_req = commit_req("g", {{"t", 0, 20}});
        auto d_req = offset_delete_req("g", {{"t", 0}, {"t", 1}});
        auto b_req = commit_req("g", {{"t", 1, 21}});
        auto nothing_req = offset_delete_req("g", {{"v", 3}});
        auto unknown_req = offset_delete_req("nope", {{"t", 0}});
        auto empty_req = offset_delete_req("", {{"t", 0}});
        const std::string all4 = "t:0,t:1,u:0,u:1";
        e->store->set_latency(10ms); // the manual clock moves only in pass_time
        auto hold = e->start(e->coord->commit_offsets(std::move(hold_req), 8));
        co_await settle();
        auto a = e->start(e->coord->commit_offsets(std::move(a_req), 8));
        auto d1 = e->start(e->coord->delete_offsets(std::move(d_req), 0));
        auto b = e->start(e->coord->commit_offsets(std::move(b_req), 8));
        for (int i = 0; i < 5; ++i) co_await pass_time(e, 10ms);
        REQUIRE(hold->has_value());
        REQUIRE(a->has_value());
        REQUIRE(b->has_value());
        REQUIRE(d1->has_value());
        e->store->set_latency(0ms);
        CHECK((**d1).error_code == kerr::none);
        REQUIRE((**d1).topics.size() == 1);
        CHECK((**d1).topics[0].partitions[0].error_code == kerr::none);
        CHECK((**d1).topics[0].partitions[1].error_code == kerr::none);
        auto got = co_await fetch(e, "g", all4);
        CHECK(got == std::vector<std::int64_t>{-1, 21, 12, 1});
        co_await e->restart({});
        auto again = co_await fetch(e, "g", all4);
        CHECK(again == std::vector<std::int64_t>{-1, 21, 12, 1});
        // Nothing committed there: answered at once, no write.
        const auto puts = e->store->stats().puts;
        auto nothing = co_await e->coord->delete_offsets(std::move(nothing_req), 0);
        CHECK(nothing.error_code == kerr::none);
        CHECK(nothing.topics.at(0).partitions.at(0).error_code == kerr::none);
        CHECK(e->store->stats().puts == puts);
        // Group errors.
        auto unknown = co_await e->coord->delete_offsets(std::move(unknown_req), 0);
        CHECK(unknown.error_code == kerr::group_id_not_found);
        CHECK(unknown.topics.empty());
        auto empty_id = co_await e->coord->delete_offsets(std::move(empty_req), 0);
        CHECK(empty_id.error_code == kerr::invalid_group_id);
    }(&e));
}

TEST_CASE("TxnOffsetCommit's group metadata (KIP-447): only the current member and generation pass",
          "[broker][group][offsets][txn]") {
    env e;
    e.run([](env* e) -> task<void> {
        auto j = co_await join_all(e, "eos", "c1");
        REQUIRE(j.size() == 1);
        const std::string member = j[0].member_id;
        const std::int32_t gen = j[0].generation_id;
        const std::optional<std::string> no_instance;
        CHECK(e->coord->validate_txn_member("eos", member, gen, no_instance) == kerr::none);
        CHECK(e->coord->validate_txn_member("eos", member, gen + 1, no_instance) == kerr::illegal_generation);
        CHECK(e->coord->validate_txn_member("eos", "ghost", gen, no_instance) == kerr::unknown_member_id);
        CHECK(e->coord->validate_txn_member("nosuch", member, gen, no_instance) == kerr::unknown_member_id);
        // A producer outside group management (generation -1, no member) is not checked.
        CHECK(e->coord->validate_txn_member("eos", "", -1, no_instance) == kerr::none);
        CHECK(e->coord->validate_txn_member("nosuch", "", -1, no_instance) == kerr::none);
    }(&e));
}
