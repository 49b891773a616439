// Kafka's error semantics where skiff used to differ (issue 16): topic configs as Kafka's
// LogConfig defines and validates them (storage/.../log/LogConfig.java, LogConfigTest.java),
// the admin answers of Kafka's CreateTopics/CreatePartitions/DeleteTopics tests, and
// OffsetCommit/OffsetFetch for topics and partitions that do not exist
// (KafkaApis.handleOffsetCommitRequest, KafkaApisTest.scala). Each case names the Kafka
// behaviour it mirrors.
#include "decode_answer.hpp"
#include "fake_shard.hpp"
#include "run_task.hpp"

#include "handlers.hpp"
#include "shard.hpp"

#include <skiff/broker/group_coordinator.hpp>
#include <skiff/broker/kafka_errors.hpp>
#include <skiff/broker/topic_configs.hpp>
#include <skiff/cluster/records.hpp>
#include <skiff/kafka/frame.hpp>

#include <catch2/catch.hpp>

#include <functional>
#include <set>

using namespace skiff;
using namespace skiff::broker;
using skiff::test::decode_answer;
using skiff::test::fake_shard;

namespace {

void run_on_core0(std::function<runtime::task<void>()> body) {
    auto group = runtime::make_test_smp(1);
    group->run([&body](unsigned) { return body(); });
}

std::optional<std::string> check(std::string_view name, std::string_view value) {
    const topic_config_def* d = find_topic_config(name);
    REQUIRE(d != nullptr);
    return invalid_topic_config_value(*d, value);
}

kafka::OffsetCommitRequest commit_request(std::string group,
                                          const std::vector<std::tuple<std::string, std::int32_t, std::int64_t>>& parts) {
    kafka::OffsetCommitRequest req;
    req.group_id = std::move(group);
    req.generation_id_or_member_epoch = -1;
    for (auto& [topic_binding, p, offset] : parts) {
        const std::string& topic = topic_binding; // clang 14 cannot capture a structured binding
        auto it = std::find_if(req.topics.begin(), req.topics.end(), [&](auto& t) { return t.name == topic; });
        if (it == req.topics.end()) {
            req.topics.emplace_back();
            req.topics.back().name = topic;
            it = std::prev(req.topics.end());
        }
        kafka::OffsetCommitRequest::OffsetCommitRequestPartition rp;
        rp.partition_index = p;
        rp.committed_offset = offset;
        it->partitions.push_back(rp);
    }
    return req;
}

// (topic, partition) -> error of an OffsetCommit answer.
std::map<std::pair<std::string, std::int32_t>, kafka::error_code> errors_of(const kafka::OffsetCommitResponse& r) {
    std::map<std::pair<std::string, std::int32_t>, kafka::error_code> out;
    for (auto& t : r.topics)
        for (auto& p : t.partitions) out[{t.name, p.partition_index}] = p.error_code;
    return out;
}

runtime::task<kafka::OffsetCommitResponse> commit(fake_shard& f, kafka::OffsetCommitRequest req, std::int16_t v) {
    conn_info ci;
    request_ctx ctx{f.sh, ci, v, 5, "test"};
    auto frame = co_await handle_offset_commit(ctx, std::move(req));
    co_return decode_answer<kafka::OffsetCommitResponse>(frame, v);
}

runtime::task<kafka::OffsetFetchResponse> fetch(fake_shard& f, kafka::OffsetFetchRequest req, std::int16_t v) {
    conn_info ci;
    request_ctx ctx{f.sh, ci, v, 6, "test"};
    auto frame = co_await handle_offset_fetch(ctx, std::move(req));
    co_return decode_answer<kafka::OffsetFetchResponse>(frame, v);
}

kafka::OffsetFetchRequest fetch_request(std::string group, std::optional<std::vector<std::pair<std::string, std::vector<std::int32_t>>>> topics) {
    kafka::OffsetFetchRequest req;
    req.group_id = std::move(group);
    if (!topics) {
        req.topics.reset();
        return req;
    }
    req.topics.emplace();
    for (auto& [name, parts] : *topics) {
        kafka::OffsetFetchRequest::OffsetFetchRequestTopic t;
        t.name = name;
        t.partition_indexes = parts;
        req.topics->push_back(std::move(t));
    }
    return req;
}

void add_coordinator(fake_shard& f) {
    f.sh.groups = std::make_unique<group_coordinator>(*f.sh.store, group_config_for(f.shared.cfg));
}

} // namespace

// ---- topic configs -------------------------------------------------------------------------

TEST_CASE("LogConfig.configNames: every topic config Kafka defines is known, nothing else is",
          "[broker][kafka-semantics]") {
    // Kafka's LogConfig.CONFIG (the commit the docs cite); the case is delete.retention.ms.
    const std::set<std::string_view> kafka_names{
        "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
        "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
        "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
        "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
        "message.downconversion.enable", "message.format.version", "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms", "message.timestamp.type",
        "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
        "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes",
        "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
        "unclean.leader.election.enable"};
    std::set<std::string_view> ours;
    for (auto& d : topic_config_defs()) ours.insert(d.name);
    CHECK(ours == kafka_names);
    for (auto n : kafka_names) CHECK(find_topic_config(n) != nullptr);
    // Every default is a value Kafka's own validation accepts.
    for (auto& d : topic_config_defs()) {
        INFO(d.name << "=" << d.default_value);
        CHECK_FALSE(invalid_topic_config_value(d, d.default_value));
    }
    CHECK(find_topic_config("retention.msec") == nullptr);
    CHECK(find_topic_config("log.retention.ms") == nullptr); // a broker config, not a topic's
    CHECK(is_list_topic_config("cleanup.policy"));
    CHECK(is_list_topic_config("leader.replication.throttled.replicas"));
    CHECK_FALSE(is_list_topic_config("retention.ms"));
}

TEST_CASE("LogConfig.validateNames: a key Kafka does not define is 'Unknown topic config name'",
          "[broker][kafka-semantics]") {
    auto why = invalid_topic_configs({{"retention.ms", "1000"}, {"retention.msec", "1"}});
    REQUIRE(why);
    CHECK(*why == "Unknown topic config name: retention.msec");
    CHECK_FALSE(invalid_topic_configs({{"delete.retention.ms", "1000"}, {"min.insync.replicas", "2"}}));
}

TEST_CASE("ConfigDef.parseType and LogConfig's validators: values as Kafka validates them",
          "[broker][kafka-semantics]") {
    for (auto [k, v] : std::vector<std::pair<std::string_view, std::string_view>>{
             {"delete.retention.ms", "0"},
             {"retention.ms", "-1"},
             {"retention.ms", " 100 "}, // ConfigDef trims
             {"retention.bytes", "-5"}, // no validator: any long
             {"segment.bytes", "14"},
             {"min.cleanable.dirty.ratio", "0.25"},
             {"min.cleanable.dirty.ratio", "1"},
             {"cleanup.policy", ""}, // the empty list: ValidList accepts it
             {"cleanup.policy", "compact, delete"},
             {"unclean.leader.election.enable", "TRUE"},
             {"message.format.version", "2.8"},
             {"message.format.version", "3.0-IV1"},
             {"message.format.version", "0.10.2"},
             {"compression.gzip.level", "-1"},
             {"compression.gzip.level", "9"},
             {"compression.zstd.level", "-5"},
             {"leader.replication.throttled.replicas", "*"},
             {"follower.replication.throttled.replicas", "0:1, 1:2"},
             {"local.retention.ms", "-2"},
             {"flush.messages", "1"},
             {"message.timestamp.before.max.ms", "3600000"}}) {
        INFO(k << "=" << v);
        CHECK_FALSE(check(k, v));
    }
    for (auto [k, v, why] : std::vector<std::tuple<std::string_view, std::string_view, std::string_view>>{
             {"segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 14"},
             {"segment.bytes", "2147483648", "Not a number of type INT"},
             {"retention.ms", "-2", "Value must be at least -1"},
             {"retention.bytes", "much", "Not a number of type LONG"},
             {"min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"},
             {"min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"},
             {"cleanup.policy", "compact,", "String must be one of: compact, delete"},
             {"cleanup.policy", "compacted", "String must be one of: compact, delete"},
             {"preallocate", "yes", "Expected value to be either true or false"},
             {"message.format.version", "2.9", "Version 2.9 is not a valid version"},
             {"compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"},
             {"compression.lz4.level", "18", "Value must be no more than 17"},
             {"compression.zstd.level", "23", "Value must be no more than 22"},
             {"leader.replication.throttled.replicas", "0-1", "must be the literal '*'"},
             {"min.insync.replicas", "0", "Value must be at least 1"},
             {"max.compaction.lag.ms", "0", "Value must be at least 1"},
             {"local.retention.bytes", "-3", "Value must be at least -2"},
             {"message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime"},
             {"delete.retention.ms", "-1", "Value must be at least 0"}}) {
        INFO(k << "=" << v);
        auto got = check(k, v);
        REQUIRE(got);
        CHECK_THAT(*got, Catch::Contains(std::string(why)));
        CHECK_THAT(*got, Catch::Contains(std::string(k)));
    }
}

TEST_CASE("LogConfigTest.testInvalidCompactionLagConfig: min.compaction.lag.ms above max.compaction.lag.ms",
          "[broker][kafka-semantics]") {
    auto why = invalid_topic_configs({{"min.compaction.lag.ms", "10000"}, {"max.compaction.lag.ms", "5000"}});
    REQUIRE(why);
    CHECK(*why == "conflict topic config setting min.compaction.lag.ms (10000) > max.compaction.lag.ms (5000)");
    CHECK_FALSE(invalid_topic_configs({{"min.compaction.lag.ms", "5000"}, {"max.compaction.lag.ms", "5000"}}));
}

TEST_CASE("DescribeConfigs: every Kafka topic config with its source (ConfigHelper.describeConfigs)",
          "[broker][kafka-semantics]") {
    topic_info t;
    t.name = "t";
    t.partitions = 1;
    t.configs = {{"delete.retention.ms", "1000"}, {"min.insync.replicas", "2"}};
    broker_config cfg;
    cfg.retention_ms = 3600000; // --retention-ms: Kafka's log.retention.ms in server.properties
    auto all = effective_configs(t, cfg);
    REQUIRE(all.size() == topic_config_defs().size());
    std::map<std::string, effective_config> by_name;
    for (auto& e : all) by_name.emplace(std::string(e.name), e);
    CHECK(by_name.at("delete.retention.ms").value == "1000");
    CHECK(by_name.at("delete.retention.ms").source == dynamic_topic_config);
    CHECK(by_name.at("min.insync.replicas").source == dynamic_topic_config); // stored, shown, no effect
    CHECK(by_name.at("retention.ms").value == "3600000");
    CHECK(by_name.at("retention.ms").source == static_broker_config);
    CHECK(by_name.at("retention.bytes").value == "-1");
    CHECK(by_name.at("retention.bytes").source == default_config); // the flag's default is Kafka's
    CHECK(by_name.at("segment.bytes").value == std::to_string(cfg.log.segment_bytes));
    CHECK(by_name.at("segment.bytes").source == static_broker_config);
    CHECK(by_name.at("preallocate").value == "false");
    CHECK(by_name.at("preallocate").source == default_config);
    CHECK(by_name.at("cleanup.policy").type == static_cast<std::int8_t>(topic_config_type::list));
    CHECK(by_name.at("min.cleanable.dirty.ratio").type == static_cast<std::int8_t>(topic_config_type::float64));
}

// ---- topic admin ---------------------------------------------------------------------------

TEST_CASE("CreateTopics: every Kafka topic config accepted, unknown ones INVALID_CONFIG, TOPIC_ALREADY_EXISTS, "
          "INVALID_PARTITIONS (CreateTopicsRequestTest)",
          "[broker][kafka-semantics]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({});
        // The case: the standard delete.retention.ms.
        std::string a_name = "with-delete-retention";
        std::map<std::string, std::string> a_configs{{"delete.retention.ms", "3600000"}};
        auto a = co_await create_topic(f.sh, std::move(a_name), 1, std::move(a_configs), false);
        CHECK(a.error == kerr::none);
        // Every config Kafka defines, at Kafka's default, in one topic.
        std::map<std::string, std::string> every;
        for (auto& d : topic_config_defs()) every.emplace(std::string(d.name), std::string(d.default_value));
        std::string b_name = "every-config";
        auto b = co_await create_topic(f.sh, std::move(b_name), 2, every, false);
        CHECK(b.error == kerr::none);
        REQUIRE(f.sh.cat->find("every-config"));
        CHECK(f.sh.cat->find("every-config")->configs == every);

        std::string c_name = "unknown-config";
        std::map<std::string, std::string> c_configs{{"retention.msec", "1"}};
        auto c = co_await create_topic(f.sh, std::move(c_name), 1, std::move(c_configs), false);
        CHECK(c.error == kerr::invalid_config);
        CHECK(c.message == "Unknown topic config name: retention.msec");
        std::string d_name = "bad-value";
        std::map<std::string, std::string> d_configs{{"min.insync.replicas", "0"}};
        auto d = co_await create_topic(f.sh, std::move(d_name), 1, std::move(d_configs), false);
        CHECK(d.error == kerr::invalid_config);
        CHECK(f.sh.cat->find("unknown-config") == nullptr);
        CHECK(f.sh.cat->find("bad-value") == nullptr);

        std::string e_name = "with-delete-retention";
        std::map<std::string, std::string> e_configs{};
        auto e = co_await create_topic(f.sh, std::move(e_name), 1, std::move(e_configs), false);
        CHECK(e.error == kerr::topic_already_exists);
        std::string e2_name = "with-delete-retention";
        std::map<std::string, std::string> e2_configs{};
        auto e2 = co_await create_topic(f.sh, std::move(e2_name), 1, std::move(e2_configs), true); // validate_only too
        CHECK(e2.error == kerr::topic_already_exists);
        std::string g_name = "zero-partitions";
        std::map<std::string, std::string> g_configs{};
        auto g = co_await create_topic(f.sh, std::move(g_name), 0, std::move(g_configs), false);
        CHECK(g.error == kerr::invalid_partitions);
        std::string h_name = "bad/name";
        std::map<std::string, std::string> h_configs{};
        auto h = co_await create_topic(f.sh, std::move(h_name), 1, std::move(h_configs), false);
        CHECK(h.error == kerr::invalid_topic_exception);
        co_await f.close();
    });
}

TEST_CASE("CreatePartitions and DeleteTopics: UNKNOWN_TOPIC_OR_PARTITION and INVALID_PARTITIONS "
          "(CreatePartitionsRequestTest, DeleteTopicsRequestTest)",
          "[broker][kafka-semantics]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({});
        std::string made_name = "t";
        std::map<std::string, std::string> made_configs{};
        auto made = co_await create_topic(f.sh, std::move(made_name), 2, std::move(made_configs), false);
        REQUIRE(made.error == kerr::none);
        std::string a_name = "missing";
        auto a = co_await create_partitions(f.sh, std::move(a_name), 3, false);
        CHECK(a.error == kerr::unknown_topic_or_partition);
        std::string b_name = "t";
        auto b = co_await create_partitions(f.sh, std::move(b_name), 2, false); // not more than it has
        CHECK(b.error == kerr::invalid_partitions);
        std::string c_name = "t";
        auto c = co_await create_partitions(f.sh, std::move(c_name), 1, false);
        CHECK(c.error == kerr::invalid_partitions);
        std::string d_name = "t";
        auto d = co_await create_partitions(f.sh, std::move(d_name), 3, false);
        CHECK(d.error == kerr::none);
        CHECK(f.sh.cat->find("t")->partitions == 3);
        std::string e_name = "missing";
        auto e = co_await delete_topic(f.sh, std::move(e_name));
        CHECK(e.error == kerr::unknown_topic_or_partition);
        std::string g_name = "t";
        auto g = co_await delete_topic(f.sh, std::move(g_name));
        CHECK(g.error == kerr::none);
        std::string h_name = "t";
        auto h = co_await delete_topic(f.sh, std::move(h_name));
        CHECK(h.error == kerr::unknown_topic_or_partition);
        co_await f.close();
    });
}

// ---- committed offsets ---------------------------------------------------------------------

TEST_CASE("KafkaApisTest.testOffsetCommitWithInvalidPartition: unknown topics and partitions are "
          "UNKNOWN_TOPIC_OR_PARTITION, the rest is committed",
          "[broker][kafka-semantics]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"orders", 2}});
        add_coordinator(f);
        for (std::int16_t v : {std::int16_t{2}, std::int16_t{8}}) {
            INFO("OffsetCommit v" << v);
            auto req = commit_request("g", {{"orders", 0, 10}, {"orders", 2, 5}, {"orders", -1, 5}, {"nosuch", 0, 1}});
            auto r = co_await commit(f, std::move(req), v);
            auto errs = errors_of(r);
            CHECK(errs.size() == 4);
            CHECK(errs[{"orders", 0}] == kerr::none);
            CHECK(errs[{"orders", 2}] == kerr::unknown_topic_or_partition);
            CHECK(errs[{"orders", -1}] == kerr::unknown_topic_or_partition);
            CHECK(errs[{"nosuch", 0}] == kerr::unknown_topic_or_partition);
            // Request order is kept.
            REQUIRE(r.topics.size() == 2);
            CHECK(r.topics[0].name == "orders");
            CHECK(r.topics[1].name == "nosuch");
        }
        // Nothing known left: answered without the coordinator, so even a group id it would
        // refuse (INVALID_GROUP_ID) gets the topic's error, as in KafkaApis.
        auto only_unknown = commit_request("", {{"nosuch", 0, 1}});
        auto u = co_await commit(f, std::move(only_unknown), 8);
        CHECK(errors_of(u) == std::map<std::pair<std::string, std::int32_t>, kafka::error_code>{
                                  {{"nosuch", 0}, kerr::unknown_topic_or_partition}});
        // The commit of the known partition is there; nothing of the unknown ones.
        auto fr = fetch_request("g", std::nullopt);
        auto all = co_await fetch(f, std::move(fr), 7);
        REQUIRE(all.topics.size() == 1);
        CHECK(all.topics[0].name == "orders");
        REQUIRE(all.topics[0].partitions.size() == 1);
        CHECK(all.topics[0].partitions[0].committed_offset == 10);
        co_await f.sh.groups->close();
        co_await f.close();
    });
}

TEST_CASE("OffsetFetch for unknown topics and partitions: no offset and no error (v1+), "
          "UNKNOWN_TOPIC_OR_PARTITION in v0; a deleted topic's offsets are not listed",
          "[broker][kafka-semantics]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"orders", 2}, {"gone", 1}});
        add_coordinator(f);
        auto req = commit_request("g", {{"orders", 1, 7}, {"gone", 0, 3}});
        auto c = co_await commit(f, std::move(req), 8);
        CHECK(errors_of(c)[{"gone", 0}] == kerr::none);
        // The topic is deleted (its catalog entry goes; the group still holds the offset).
        auto next = std::make_shared<catalog>(*f.sh.cat);
        next->topics.erase("gone");
        f.sh.cat = next;

        std::vector<std::pair<std::string, std::vector<std::int32_t>>> asked{{"orders", {1, 5}}, {"gone", {0}}, {"nosuch", {0}}};
        auto fr = fetch_request("g", asked);
        auto v7 = co_await fetch(f, std::move(fr), 7);
        REQUIRE(v7.topics.size() == 3);
        CHECK(v7.topics[0].partitions[0].committed_offset == 7);
        CHECK(v7.topics[0].partitions[0].error_code == kerr::none);
        CHECK(v7.topics[0].partitions[1].committed_offset == -1); // partition 5 does not exist
        CHECK(v7.topics[0].partitions[1].error_code == kerr::none);
        CHECK(v7.topics[1].partitions[0].committed_offset == -1); // deleted: no stale offset
        CHECK(v7.topics[1].partitions[0].error_code == kerr::none);
        CHECK(v7.topics[2].partitions[0].committed_offset == -1);
        CHECK(v7.topics[2].partitions[0].error_code == kerr::none);

        // v0 (KafkaApis.handleOffsetFetchRequestFromZookeeper): UNKNOWN_TOPIC_OR_PARTITION.
        auto fr0 = fetch_request("g", asked);
        auto v0 = co_await fetch(f, std::move(fr0), 0);
        REQUIRE(v0.topics.size() == 3);
        CHECK(v0.topics[0].partitions[0].error_code == kerr::none);
        CHECK(v0.topics[0].partitions[1].error_code == kerr::unknown_topic_or_partition);
        CHECK(v0.topics[1].partitions[0].error_code == kerr::unknown_topic_or_partition);
        CHECK(v0.topics[1].partitions[0].committed_offset == -1);

        // All of the group's offsets (v7 null topics, v8 a group with null topics): only live topics.
        auto all_req = fetch_request("g", std::nullopt);
        auto all = co_await fetch(f, std::move(all_req), 7);
        REQUIRE(all.topics.size() == 1);
        CHECK(all.topics[0].name == "orders");
        kafka::OffsetFetchRequest v8req;
        v8req.groups.resize(1);
        v8req.groups[0].group_id = "g";
        v8req.groups[0].topics.reset();
        auto v8 = co_await fetch(f, std::move(v8req), 8);
        REQUIRE(v8.groups.size() == 1);
        REQUIRE(v8.groups[0].topics.size() == 1);
        CHECK(v8.groups[0].topics[0].name == "orders");
        co_await f.sh.groups->close();
        co_await f.close();
    });
}

TEST_CASE("GroupCoordinator.onPartitionsDeleted: a deleted topic's committed offsets go with it, so the topic "
          "created again starts with none",
          "[broker][kafka-semantics]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"orders", 1}, {"gone", 2}});
        add_coordinator(f);
        auto req = commit_request("g", {{"orders", 0, 7}, {"gone", 0, 3}, {"gone", 1, 4}});
        auto c = co_await commit(f, std::move(req), 8);
        CHECK(errors_of(c)[{"gone", 1}] == kerr::none);

        // The catalog without the topic, as DeleteTopics installs it on every core.
        auto without = std::make_shared<catalog>(*f.sh.cat);
        without->topics.erase("gone");
        ++without->version;
        co_await apply_catalog(f.sh, without);
        // A later commit is written after the removal: once it is answered, the removal is stored.
        auto later = commit_request("g", {{"orders", 0, 8}});
        auto l = co_await commit(f, std::move(later), 8);
        CHECK(errors_of(l)[{"orders", 0}] == kerr::none);

        // Created again under the same name: no stale offsets.
        auto again = std::make_shared<catalog>(*without);
        topic_info t;
        t.name = "gone";
        t.partitions = 2;
        again->topics.emplace("gone", std::move(t));
        ++again->version;
        co_await apply_catalog(f.sh, again);
        std::vector<std::pair<std::string, std::vector<std::int32_t>>> asked{{"gone", {0, 1}}, {"orders", {0}}};
        auto fr = fetch_request("g", asked);
        auto got = co_await fetch(f, std::move(fr), 7);
        REQUIRE(got.topics.size() == 2);
        CHECK(got.topics[0].partitions[0].committed_offset == -1);
        CHECK(got.topics[0].partitions[1].committed_offset == -1);
        CHECK(got.topics[1].partitions[0].committed_offset == 8);
        co_await f.sh.groups->close();

        // And in the stored object: a coordinator loading it again has none either.
        add_coordinator(f);
        auto loaded = co_await f.sh.groups->load(nullptr);
        CHECK(loaded.has_value());
        auto fr2 = fetch_request("g", asked);
        auto reloaded = co_await fetch(f, std::move(fr2), 7);
        REQUIRE(reloaded.topics.size() == 2);
        CHECK(reloaded.topics[0].partitions[0].committed_offset == -1);
        CHECK(reloaded.topics[1].partitions[0].committed_offset == 8);
        co_await f.sh.groups->close();
        co_await f.close();
    });
}

TEST_CASE("GroupCoordinator.validateGroupStatus: group requests while the coordinator loads its offsets are "
          "COORDINATOR_LOAD_IN_PROGRESS",
          "[broker][kafka-semantics]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"orders", 1}});
        add_coordinator(f);
        // Cluster mode, the group's slot claimed by this core and not yet loaded (install_claim).
        f.shared.cfg.etcd_endpoints = {"http://127.0.0.1:1"};
        f.sh.claims[{std::string(cluster::groups_topic), cluster::group_slot("g")}] = cluster::claim{};
        auto req = commit_request("g", {{"orders", 0, 5}, {"nosuch", 0, 1}});
        auto c = co_await commit(f, std::move(req), 8);
        auto errs = errors_of(c);
        CHECK(errs[{"orders", 0}] == kerr::coordinator_load_in_progress);
        CHECK(errs[{"nosuch", 0}] == kerr::unknown_topic_or_partition); // KafkaApis answers it first

        std::vector<std::pair<std::string, std::vector<std::int32_t>>> asked{{"orders", {0}}};
        auto fr7 = fetch_request("g", asked);
        auto v7 = co_await fetch(f, std::move(fr7), 7);
        CHECK(v7.error_code == kerr::coordinator_load_in_progress);
        auto fr1 = fetch_request("g", asked);
        auto v1 = co_await fetch(f, std::move(fr1), 1);
        REQUIRE(v1.topics.size() == 1);
        CHECK(v1.topics[0].partitions[0].error_code == kerr::coordinator_load_in_progress);
        kafka::OffsetFetchRequest v8req;
        v8req.groups.resize(1);
        v8req.groups[0].group_id = "g";
        v8req.groups[0].topics.reset();
        auto v8 = co_await fetch(f, std::move(v8req), 8);
        REQUIRE(v8.groups.size() == 1);
        CHECK(v8.groups[0].error_code == kerr::coordinator_load_in_progress);

        // The other group requests likewise.
        conn_info ci;
        {
            kafka::HeartbeatRequest hb;
            hb.group_id = "g";
            hb.member_id = "m";
            hb.generation_id = 1;
            request_ctx ctx{f.sh, ci, 4, 1, "test"};
            auto frame = co_await handle_heartbeat(ctx, std::move(hb));
            CHECK(decode_answer<kafka::HeartbeatResponse>(frame, 4).error_code == kerr::coordinator_load_in_progress);
        }
        {
            kafka::JoinGroupRequest jg;
            jg.group_id = "g";
            jg.session_timeout_ms = 10000;
            jg.rebalance_timeout_ms = 10000;
            jg.protocol_type = "consumer";
            request_ctx ctx{f.sh, ci, 7, 2, "test"};
            auto frame = co_await handle_join_group(ctx, std::move(jg));
            CHECK(decode_answer<kafka::JoinGroupResponse>(frame, 7).error_code == kerr::coordinator_load_in_progress);
        }
        {
            kafka::SyncGroupRequest sg;
            sg.group_id = "g";
            sg.member_id = "m";
            request_ctx ctx{f.sh, ci, 3, 3, "test"};
            auto frame = co_await handle_sync_group(ctx, std::move(sg));
            CHECK(decode_answer<kafka::SyncGroupResponse>(frame, 3).error_code == kerr::coordinator_load_in_progress);
        }
        {
            kafka::LeaveGroupRequest lg;
            lg.group_id = "g";
            lg.member_id = "m";
            request_ctx ctx{f.sh, ci, 1, 4, "test"};
            auto frame = co_await handle_leave_group(ctx, std::move(lg));
            CHECK(decode_answer<kafka::LeaveGroupResponse>(frame, 1).error_code == kerr::coordinator_load_in_progress);
        }
        {
            kafka::DescribeGroupsRequest dg;
            dg.groups = {"g"};
            request_ctx ctx{f.sh, ci, 1, 5, "test"};
            auto frame = co_await handle_describe_groups(ctx, std::move(dg));
            auto r = decode_answer<kafka::DescribeGroupsResponse>(frame, 1);
            REQUIRE(r.groups.size() == 1);
            CHECK(r.groups[0].error_code == kerr::coordinator_load_in_progress);
        }
        {
            kafka::DeleteGroupsRequest del;
            del.groups_names = {"g"};
            request_ctx ctx{f.sh, ci, 1, 6, "test"};
            auto frame = co_await handle_delete_groups(ctx, std::move(del));
            auto r = decode_answer<kafka::DeleteGroupsResponse>(frame, 1);
            REQUIRE(r.results.size() == 1);
            CHECK(r.results[0].error_code == kerr::coordinator_load_in_progress);
        }

        // Loaded (the slot's coordinator installed): answered by it.
        f.sh.slot_groups[cluster::group_slot("g")] =
            std::make_unique<group_coordinator>(*f.sh.store, group_config_for(f.shared.cfg));
        auto again = commit_request("g", {{"orders", 0, 5}});
        auto a = co_await commit(f, std::move(again), 8);
        CHECK(errors_of(a)[{"orders", 0}] == kerr::none);
        co_await f.sh.slot_groups.begin()->second->close();
        co_await f.sh.groups->close();
        co_await f.close();
    });
}

namespace {
kafka::CreateTopicsRequest::CreatableTopic creatable(std::string name, std::int32_t partitions, std::int16_t rf) {
    kafka::CreateTopicsRequest::CreatableTopic t;
    t.name = std::move(name);
    t.num_partitions = partitions;
    t.replication_factor = rf;
    return t;
}

runtime::task<kafka::CreateTopicsResponse> create_topics(fake_shard& f, kafka::CreateTopicsRequest req) {
    conn_info ci;
    request_ctx ctx{f.sh, ci, 5, 7, "test"};
    auto frame = co_await handle_create_topics(ctx, std::move(req));
    co_return decode_answer<kafka::CreateTopicsResponse>(frame, 5);
}
} // namespace

TEST_CASE("CreateTopicsRequestTest / ReplicationControlManager.createTopic: invalid counts, manual assignments with "
          "counts, null config values",
          "[broker][kafka-semantics]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({});
        kafka::CreateTopicsRequest req;
        req.timeout_ms = 10000;
        req.topics.push_back(creatable("rf0", 1, 0));
        req.topics.push_back(creatable("np0", 0, 1));
        req.topics.push_back(creatable("np-2", -2, 1));
        auto assigned = creatable("assigned", 3, -1);
        kafka::CreateTopicsRequest::CreatableReplicaAssignment a;
        a.partition_index = 0;
        a.broker_ids = {0};
        assigned.assignments.push_back(a);
        req.topics.push_back(assigned);
        auto nulls = creatable("nullcfg", 1, 1);
        kafka::CreateTopicsRequest::CreatableTopicConfig nc;
        nc.name = "retention.bytes";
        nc.value.reset();
        nulls.configs.push_back(nc);
        req.topics.push_back(nulls);
        auto ok = creatable("ok", -1, -1);
        kafka::CreateTopicsRequest::CreatableTopicConfig dr;
        dr.name = "delete.retention.ms";
        dr.value = "1000";
        ok.configs.push_back(dr);
        req.topics.push_back(ok);
        auto r = co_await create_topics(f, std::move(req));
        REQUIRE(r.topics.size() == 6);
        CHECK(r.topics[0].error_code == kerr::invalid_replication_factor);
        CHECK(r.topics[0].error_message ==
              std::optional<std::string>("Replication factor must be larger than 0, or -1 to use the default value."));
        CHECK(r.topics[1].error_code == kerr::invalid_partitions);
        CHECK(r.topics[1].error_message ==
              std::optional<std::string>("Number of partitions was set to an invalid non-positive value."));
        CHECK(r.topics[2].error_code == kerr::invalid_partitions);
        CHECK(r.topics[3].error_code == kerr::invalid_request);
        CHECK_THAT(r.topics[3].error_message.value_or(""), Catch::Contains("numPartitions was not set to -1"));
        CHECK(r.topics[4].error_code == kerr::invalid_config);
        CHECK(r.topics[4].error_message ==
              std::optional<std::string>("Null value not supported for topic configs: retention.bytes"));
        CHECK(r.topics[5].error_code == kerr::none);
        CHECK(r.topics[5].num_partitions == f.shared.cfg.default_partitions);
        // Its configs: every Kafka config, the one set as DYNAMIC_TOPIC_CONFIG.
        REQUIRE(r.topics[5].configs.has_value());
        CHECK(r.topics[5].configs->size() == topic_config_defs().size());
        bool seen = false;
        for (auto& c : *r.topics[5].configs) {
            if (c.name != "delete.retention.ms") continue;
            seen = true;
            CHECK(c.value == std::optional<std::string>("1000"));
            CHECK(c.config_source == dynamic_topic_config);
        }
        CHECK(seen);
        for (auto name : {"rf0", "np0", "np-2", "assigned", "nullcfg"}) CHECK(f.sh.cat->find(name) == nullptr);
        co_await f.close();
    });
}

TEST_CASE("DescribeConfigs v4 of a topic: every Kafka config with source, type, synonyms and documentation; "
          "an unknown topic UNKNOWN_TOPIC_OR_PARTITION",
          "[broker][kafka-semantics]") {
    fake_shard f({{"t", 1}});
    f.shared.cfg.retention_ms = 3600000;
    auto cat = std::make_shared<catalog>(*f.sh.cat);
    cat->topics.at("t").configs = {{"retention.ms", "1000"}, {"preallocate", "true"}};
    f.sh.cat = cat;
    kafka::DescribeConfigsRequest req;
    req.include_synonyms = true;
    req.include_documentation = true;
    kafka::DescribeConfigsRequest::DescribeConfigsResource res;
    res.resource_type = 2;
    res.resource_name = "t";
    res.configuration_keys.reset(); // all
    req.resources.push_back(res);
    res.resource_name = "nosuch";
    req.resources.push_back(res);
    conn_info ci;
    request_ctx ctx{f.sh, ci, 4, 9, "test"};
    auto r = decode_answer<kafka::DescribeConfigsResponse>(describe_configs(ctx, req), 4);
    REQUIRE(r.results.size() == 2);
    CHECK(r.results[1].error_code == kerr::unknown_topic_or_partition);
    const auto& configs = r.results[0].configs;
    CHECK(configs.size() == topic_config_defs().size());
    std::map<std::string, kafka::DescribeConfigsResponse::DescribeConfigsResourceResult> by_name;
    for (auto& c : configs) by_name.emplace(c.name, c);
    const auto& retention = by_name.at("retention.ms");
    CHECK(retention.value == std::optional<std::string>("1000"));
    CHECK(retention.config_source == dynamic_topic_config);
    CHECK(retention.config_type == static_cast<std::int8_t>(topic_config_type::int64));
    REQUIRE(retention.synonyms.size() == 2);
    CHECK(retention.synonyms[0].name == "retention.ms");
    CHECK(retention.synonyms[0].source == dynamic_topic_config);
    CHECK(retention.synonyms[1].name == "log.retention.ms");
    CHECK(retention.synonyms[1].value == std::optional<std::string>("3600000"));
    CHECK(retention.synonyms[1].source == static_broker_config);
    CHECK(by_name.at("cleanup.policy").config_type == static_cast<std::int8_t>(topic_config_type::list));
    CHECK(by_name.at("cleanup.policy").config_source == default_config);
    CHECK(by_name.at("preallocate").value == std::optional<std::string>("true"));
    CHECK_THAT(by_name.at("preallocate").documentation.value_or(""), Catch::StartsWith("No effect in skiff"));
    CHECK_THAT(by_name.at("delete.retention.ms").documentation.value_or(""), Catch::Contains("tombstones"));
}
