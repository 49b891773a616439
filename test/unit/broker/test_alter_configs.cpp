// AlterConfigs, IncrementalAlterConfigs and DeleteRecords against a one-core shard over an
// in-memory store. Config changes go through core 0's catalog path (store the topic object,
// install the catalog on every core), which crosses cores with submit_to: those cases run in a
// one-core smp group rather than on a bare reactor.
#include "fake_shard.hpp"
#include "run_task.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/timer.hpp>

#include <catch2/catch.hpp>

#include <functional>

using namespace skiff;
using namespace skiff::broker;
using namespace std::chrono_literals;
using skiff::test::fake_shard;
using skiff::test::produce_request;
using skiff::test::records_of;

namespace {

using config_map = std::map<std::string, std::string>;

// Runs body on core 0 of a one-core smp group, on this (the test's) thread.
void run_on_core0(std::function<runtime::task<void>()> body) {
    auto group = runtime::make_test_smp(1);
    group->run([&body](unsigned) { return body(); });
}

kafka::AlterConfigsRequest alter(std::int8_t type, const std::string& name, const config_map& configs,
                                 bool validate_only = false) {
    kafka::AlterConfigsRequest req;
    kafka::AlterConfigsRequest::AlterConfigsResource res;
    res.resource_type = type;
    res.resource_name = name;
    for (auto& [k, v] : configs) {
        kafka::AlterConfigsRequest::AlterableConfig c;
        c.name = k;
        c.value = v;
        res.configs.push_back(std::move(c));
    }
    req.resources.push_back(std::move(res));
    req.validate_only = validate_only;
    return req;
}

struct op {
    std::string name;
    std::int8_t operation;
    std::optional<std::string> value;
};

kafka::IncrementalAlterConfigsRequest incremental(const std::string& topic, const std::vector<op>& ops) {
    kafka::IncrementalAlterConfigsRequest req;
    kafka::IncrementalAlterConfigsRequest::AlterConfigsResource res;
    res.resource_type = 2;
    res.resource_name = topic;
    for (auto& o : ops) {
        kafka::IncrementalAlterConfigsRequest::AlterableConfig c;
        c.name = o.name;
        c.config_operation = o.operation;
        c.value = o.value;
        res.configs.push_back(std::move(c));
    }
    req.resources.push_back(std::move(res));
    return req;
}

constexpr std::int8_t set_op = 0, delete_op = 1, append_op = 2, subtract_op = 3;

// One resource's answer of either API.
struct answer {
    kafka::error_code error = kerr::none;
    std::string message;
};

runtime::task<answer> alter_one(fake_shard& f, kafka::AlterConfigsRequest req) {
    auto r = co_await alter_configs(f.sh, std::move(req));
    REQUIRE(r.responses.size() == 1);
    co_return answer{r.responses[0].error_code, r.responses[0].error_message.value_or("")};
}

runtime::task<answer> incremental_one(fake_shard& f, kafka::IncrementalAlterConfigsRequest req) {
    auto r = co_await incremental_alter_configs(f.sh, std::move(req));
    REQUIRE(r.responses.size() == 1);
    co_return answer{r.responses[0].error_code, r.responses[0].error_message.value_or("")};
}

config_map configs_of(fake_shard& f, const std::string& topic) {
    const topic_info* t = f.sh.cat->find(topic);
    REQUIRE(t);
    return t->configs;
}

// The topic's configs as stored (what a restart reads), or nullopt when no object is stored.
runtime::task<std::optional<config_map>> stored_configs(fake_shard& f, std::string_view topic) {
    const std::string ns = f.shared.cfg.ns;
    auto cat = co_await load_catalog(*f.sh.store, ns, {});
    REQUIRE(cat.has_value());
    const topic_info* t = cat->find(topic);
    if (!t) co_return std::nullopt;
    co_return t->configs;
}

kafka::DeleteRecordsRequest delete_request(const std::string& topic, std::int32_t partition, std::int64_t offset) {
    kafka::DeleteRecordsRequest req;
    kafka::DeleteRecordsRequest::DeleteRecordsTopic t;
    t.name = topic;
    kafka::DeleteRecordsRequest::DeleteRecordsPartition p;
    p.partition_index = partition;
    p.offset = offset;
    t.partitions.push_back(p);
    req.topics.push_back(std::move(t));
    req.timeout_ms = 5000;
    return req;
}

// Topic names are string_views (of literals) so that no std::string is made inside the callers'
// co_await expressions (g++ 12 miscompiles such temporaries).
runtime::task<kafka::DeleteRecordsResponse::DeleteRecordsPartitionResult> delete_one(fake_shard& f,
                                                                                    std::string_view topic,
                                                                                    std::int32_t partition,
                                                                                    std::int64_t offset) {
    auto req = delete_request(std::string(topic), partition, offset);
    auto r = co_await delete_records(f.sh, std::move(req));
    REQUIRE(r.topics.size() == 1);
    REQUIRE(r.topics[0].partitions.size() == 1);
    co_return r.topics[0].partitions[0];
}

runtime::task<void> produce_batches(fake_shard& f, std::string_view topic, int batches, int per_batch) {
    for (int i = 0; i < batches; ++i) {
        auto req = produce_request({{std::string(topic), 0, records_of(i * per_batch, per_batch)}});
        auto r = co_await produce(f.sh, std::move(req));
        REQUIRE(r.responses.at(0).partition_responses.at(0).error_code == kerr::none);
    }
}

storage::partition_log& log_of(fake_shard& f, const std::string& topic, std::int32_t partition) {
    auto it = f.sh.parts.find(std::pair{topic, partition});
    REQUIRE(it != f.sh.parts.end());
    return *it->second->log;
}

} // namespace

TEST_CASE("AlterConfigs: a retention change is stored and applies to open partitions at once",
          "[broker][configs]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        f.shared.cfg.log.lifecycle_tick = 20ms;
        co_await produce_batches(f, "t", 3, 5); // three segments, offsets 0..14
        auto& log = log_of(f, "t", 0);
        CHECK(log.high_watermark() == 15);
        CHECK(log.log_start_offset() == 0);

        auto req = alter(2, "t", {{"retention.ms", "3600000"}, {"retention.bytes", "0"}});
        auto a = co_await alter_one(f, std::move(req));
        CHECK(a.error == kerr::none);
        CHECK(policy_of(f.sh, "t").retention_ms == 3600000);
        CHECK(policy_of(f.sh, "t").retention_bytes == 0);
        CHECK(configs_of(f, "t") == config_map{{"retention.bytes", "0"}, {"retention.ms", "3600000"}});
        auto stored = co_await stored_configs(f, "t");
        CHECK(stored == config_map{{"retention.bytes", "0"}, {"retention.ms", "3600000"}});
        bool custom_retention = false;
        for (auto& e : effective_configs(*f.sh.cat->find("t"), f.shared.cfg)) {
            if (e.name == "retention.ms") custom_retention = e.custom && e.value == "3600000";
        }
        CHECK(custom_retention);

        // retention.bytes=0 keeps nothing: the open log drops every segment by itself.
        for (int i = 0; i < 250 && log.log_start_offset() < 15; ++i) {
            auto slept = co_await runtime::sleep(20ms);
            (void)slept;
        }
        CHECK(log.log_start_offset() == 15);
        co_await f.close();
    });
}

TEST_CASE("AlterConfigs replaces the topic's configs; bad values and unknown names store nothing",
          "[broker][configs]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        auto first = alter(2, "t", {{"retention.ms", "5000"}, {"cleanup.policy", "compact"}});
        auto ok = co_await alter_one(f, std::move(first));
        CHECK(ok.error == kerr::none);
        const auto version = f.sh.cat->version;

        auto negative = alter(2, "t", {{"retention.ms", "-5"}});
        auto bad = co_await alter_one(f, std::move(negative));
        CHECK(bad.error == kerr::invalid_config);
        CHECK_THAT(bad.message, Catch::Contains("retention.ms"));
        auto junk = alter(2, "t", {{"retention.bytes", "lots"}});
        auto bad_bytes = co_await alter_one(f, std::move(junk));
        CHECK(bad_bytes.error == kerr::invalid_config);
        auto delete_retention = alter(2, "t", {{"delete.retention.ms", "-1"}});
        auto bad_delete = co_await alter_one(f, std::move(delete_retention));
        CHECK(bad_delete.error == kerr::invalid_config);
        CHECK_THAT(bad_delete.message, Catch::Contains("delete.retention.ms"));
        auto unknown = alter(2, "t", {{"retention.mss", "5"}, {"retention.ms", "1"}});
        auto bad_name = co_await alter_one(f, std::move(unknown));
        CHECK(bad_name.error == kerr::invalid_config);
        CHECK_THAT(bad_name.message, Catch::Contains("retention.mss"));

        // None of them reached the catalog or the store.
        CHECK(f.sh.cat->version == version);
        CHECK(configs_of(f, "t") == config_map{{"cleanup.policy", "compact"}, {"retention.ms", "5000"}});
        auto stored = co_await stored_configs(f, "t");
        CHECK(stored == config_map{{"cleanup.policy", "compact"}, {"retention.ms", "5000"}});
        CHECK(policy_of(f.sh, "t").retention_ms == 5000);

        // What a later AlterConfigs leaves out returns to its default.
        auto replace = alter(2, "t", {{"max.message.bytes", "2000"}});
        auto replaced = co_await alter_one(f, std::move(replace));
        CHECK(replaced.error == kerr::none);
        CHECK(configs_of(f, "t") == config_map{{"max.message.bytes", "2000"}});
        CHECK(policy_of(f.sh, "t").retention_ms == f.shared.cfg.retention_ms);
        CHECK_FALSE(policy_of(f.sh, "t").compact);
        CHECK(policy_of(f.sh, "t").max_message_bytes == 2000);
        co_await f.close();
    });
}

TEST_CASE("AlterConfigs and IncrementalAlterConfigs with validate_only store nothing", "[broker][configs]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        auto dry = alter(2, "t", {{"retention.ms", "1000"}}, true);
        auto a = co_await alter_one(f, std::move(dry));
        CHECK(a.error == kerr::none);
        auto dry_bad = alter(2, "t", {{"retention.ms", "-7"}}, true);
        auto b = co_await alter_one(f, std::move(dry_bad));
        CHECK(b.error == kerr::invalid_config);
        auto inc = incremental("t", {{"retention.bytes", set_op, "10"}});
        inc.validate_only = true;
        auto c = co_await incremental_one(f, std::move(inc));
        CHECK(c.error == kerr::none);

        CHECK(f.sh.cat->version == 0);
        CHECK(configs_of(f, "t").empty());
        auto stored = co_await stored_configs(f, "t");
        CHECK_FALSE(stored.has_value()); // the fake's topic was never stored, and still is not
        CHECK(policy_of(f.sh, "t").retention_ms == f.shared.cfg.retention_ms);
        co_await f.close();
    });
}

TEST_CASE("IncrementalAlterConfigs: SET, DELETE back to the default, APPEND and SUBTRACT on lists only",
          "[broker][configs]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        f.shared.cfg.retention_ms = 86400000; // the broker's --retention-ms
        auto set = incremental("t", {{"retention.ms", set_op, "1000"}, {"max.message.bytes", set_op, "2000"}});
        auto a = co_await incremental_one(f, std::move(set));
        CHECK(a.error == kerr::none);
        CHECK(configs_of(f, "t") == config_map{{"max.message.bytes", "2000"}, {"retention.ms", "1000"}});
        CHECK(policy_of(f.sh, "t").retention_ms == 1000);

        auto del = incremental("t", {{"retention.ms", delete_op, std::nullopt}});
        auto b = co_await incremental_one(f, std::move(del));
        CHECK(b.error == kerr::none);
        CHECK(configs_of(f, "t") == config_map{{"max.message.bytes", "2000"}});
        CHECK(policy_of(f.sh, "t").retention_ms == 86400000);
        auto stored = co_await stored_configs(f, "t");
        CHECK(stored == config_map{{"max.message.bytes", "2000"}});

        // APPEND starts from the default of an unset list config.
        auto append = incremental("t", {{"cleanup.policy", append_op, "compact"}});
        auto c = co_await incremental_one(f, std::move(append));
        CHECK(c.error == kerr::none);
        CHECK(configs_of(f, "t").at("cleanup.policy") == "delete,compact");
        CHECK(policy_of(f.sh, "t").compact);
        auto subtract = incremental("t", {{"cleanup.policy", subtract_op, "delete"}});
        auto d = co_await incremental_one(f, std::move(subtract));
        CHECK(d.error == kerr::none);
        CHECK(configs_of(f, "t").at("cleanup.policy") == "compact");

        const auto version = f.sh.cat->version;
        auto not_list = incremental("t", {{"retention.ms", append_op, "5"}});
        auto e = co_await incremental_one(f, std::move(not_list));
        CHECK(e.error == kerr::invalid_config);
        CHECK_THAT(e.message, Catch::Contains("retention.ms"));
        auto bad_item = incremental("t", {{"cleanup.policy", append_op, "compacted"}});
        auto g = co_await incremental_one(f, std::move(bad_item));
        CHECK(g.error == kerr::invalid_config);
        auto bad_value = incremental("t", {{"retention.ms", set_op, "-5"}});
        auto h = co_await incremental_one(f, std::move(bad_value));
        CHECK(h.error == kerr::invalid_config);
        auto unknown = incremental("t", {{"no.such.config", delete_op, std::nullopt}});
        auto i = co_await incremental_one(f, std::move(unknown));
        CHECK(i.error == kerr::invalid_config);
        CHECK_THAT(i.message, Catch::Contains("no.such.config"));
        // Malformed operations are the request's fault, not the configs'.
        auto null_set = incremental("t", {{"retention.ms", set_op, std::nullopt}});
        auto j = co_await incremental_one(f, std::move(null_set));
        CHECK(j.error == kerr::invalid_request);
        auto twice = incremental("t", {{"retention.ms", set_op, "1"}, {"retention.ms", set_op, "2"}});
        auto k = co_await incremental_one(f, std::move(twice));
        CHECK(k.error == kerr::invalid_request);
        auto bad_op = incremental("t", {{"retention.ms", 7, "1"}});
        auto l = co_await incremental_one(f, std::move(bad_op));
        CHECK(l.error == kerr::invalid_request);
        CHECK(f.sh.cat->version == version);
        CHECK(configs_of(f, "t") == config_map{{"cleanup.policy", "compact"}, {"max.message.bytes", "2000"}});
        co_await f.close();
    });
}

TEST_CASE("config changes: unknown topics, broker resources, repeated resources", "[broker][configs]") {
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        auto missing = alter(2, "nope", {{"retention.ms", "1"}});
        auto a = co_await alter_one(f, std::move(missing));
        CHECK(a.error == kerr::unknown_topic_or_partition);
        auto missing_inc = incremental("nope", {{"retention.ms", set_op, "1"}});
        auto b = co_await incremental_one(f, std::move(missing_inc));
        CHECK(b.error == kerr::unknown_topic_or_partition);

        auto brokers = alter(4, "0", {{"log.retention.ms", "1"}});
        auto c = co_await alter_one(f, std::move(brokers));
        CHECK(c.error == kerr::invalid_request);
        CHECK_THAT(c.message, Catch::Contains("dynamic broker configs"));
        auto brokers_inc = incremental("0", {{"log.retention.ms", set_op, "1"}});
        brokers_inc.resources[0].resource_type = 4;
        auto d = co_await incremental_one(f, std::move(brokers_inc));
        CHECK(d.error == kerr::invalid_request);
        auto logger = alter(8, "0", {{"kafka.server", "DEBUG"}});
        auto e = co_await alter_one(f, std::move(logger));
        CHECK(e.error == kerr::invalid_request);

        auto twice = alter(2, "t", {{"retention.ms", "1"}});
        twice.resources.push_back(twice.resources[0]);
        auto r = co_await alter_configs(f.sh, std::move(twice));
        REQUIRE(r.responses.size() == 2);
        CHECK(r.responses[0].error_code == kerr::invalid_request);
        CHECK(r.responses[1].error_code == kerr::invalid_request);
        CHECK(configs_of(f, "t").empty());
        co_await f.close();
    });
}

TEST_CASE("DeleteRecords on a topic whose cleanup.policy lacks delete is POLICY_VIOLATION",
          "[broker][delete_records]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"compacted", 1}, {"both", 1}});
        auto cat = std::make_shared<catalog>(*f.sh.cat);
        cat->topics["compacted"].configs["cleanup.policy"] = "compact";
        cat->topics["both"].configs["cleanup.policy"] = "compact, delete";
        co_await apply_catalog(f.sh, cat); // as the broker installs a catalog: with its policies
        auto compacted = co_await delete_one(f, "compacted", 0, 0);
        CHECK(compacted.error_code == kerr::policy_violation);
        CHECK(compacted.low_watermark == -1);
        auto both = co_await delete_one(f, "both", 0, 0);
        CHECK(both.error_code == kerr::none);
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("DeleteRecords moves the log start, past the high watermark is OFFSET_OUT_OF_RANGE",
          "[broker][delete_records]") {
    auto data = std::make_shared<storage::memory_bucket>();
    auto t = [](std::shared_ptr<storage::memory_bucket> bucket) -> runtime::task<void> {
        fake_shard f({{"t", 2}}, bucket);
        co_await produce_batches(f, "t", 2, 5); // offsets 0..9
        auto a = co_await delete_one(f, "t", 0, 4);
        CHECK(a.error_code == kerr::none);
        CHECK(a.low_watermark == 4);
        CHECK(log_of(f, "t", 0).log_start_offset() == 4);
        auto past = co_await delete_one(f, "t", 0, 11);
        CHECK(past.error_code == kerr::offset_out_of_range);
        CHECK(past.low_watermark == -1);
        auto negative = co_await delete_one(f, "t", 0, -2);
        CHECK(negative.error_code == kerr::offset_out_of_range);
        auto lower = co_await delete_one(f, "t", 0, 2); // the start never moves back
        CHECK(lower.error_code == kerr::none);
        CHECK(lower.low_watermark == 4);
        auto all = co_await delete_one(f, "t", 0, -1); // -1: the high watermark
        CHECK(all.error_code == kerr::none);
        CHECK(all.low_watermark == 10);
        auto empty = co_await delete_one(f, "t", 1, 0); // nothing produced there
        CHECK(empty.error_code == kerr::none);
        CHECK(empty.low_watermark == 0);
        auto unknown = co_await delete_one(f, "nope", 0, 1);
        CHECK(unknown.error_code == kerr::unknown_topic_or_partition);
        auto no_partition = co_await delete_one(f, "t", 2, 1);
        CHECK(no_partition.error_code == kerr::unknown_topic_or_partition);
        co_await f.close();
    };
    runtime::run_task(t(data));
    // A restart on the same data keeps the start.
    auto again = [](std::shared_ptr<storage::memory_bucket> bucket) -> runtime::task<void> {
        fake_shard f({{"t", 2}}, bucket);
        auto r = co_await delete_one(f, "t", 0, 0);
        CHECK(r.error_code == kerr::none);
        CHECK(r.low_watermark == 10);
        co_await f.close();
    };
    runtime::run_task(again(data));
}

namespace {
// Sends `req` as a framed request of `version` through the dispatcher, decodes the answer.
template <typename Resp, typename Req>
runtime::task<Resp> round_trip(fake_shard& f, Req req, std::int16_t version) {
    auto frame = kafka::encode_request(req, version, 42, std::string("test"));
    REQUIRE(frame.has_value());
    conn_info ci;
    auto out = co_await handle_request(f.sh, ci, std::move(*frame), kafka::size_prefix_bytes);
    REQUIRE(out.has_value());
    const auto header_version = kafka::response_header_version(static_cast<std::int16_t>(Resp::api), version);
    auto parsed = kafka::parse_response_header(std::span<const char>(*out).subspan(kafka::size_prefix_bytes),
                                               header_version);
    REQUIRE(parsed.has_value());
    CHECK(parsed->header.correlation_id == 42);
    kafka::reader rd(parsed->body);
    auto r = Resp::decode(rd, version);
    REQUIRE(r.has_value());
    co_return std::move(*r);
}

bool served(kafka::api_key key, std::int16_t min, std::int16_t max) {
    for (auto& a : served_apis()) {
        if (a.key == key) return a.min_version == min && a.max_version == max;
    }
    return false;
}
} // namespace

TEST_CASE("AlterConfigs, IncrementalAlterConfigs and DeleteRecords in every served version", "[broker][configs]") {
    CHECK(served(kafka::api_key::alter_configs, 0, 2));
    CHECK(served(kafka::api_key::incremental_alter_configs, 0, 1));
    CHECK(served(kafka::api_key::delete_records, 0, 2));
    run_on_core0([]() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        for (std::int16_t v = 0; v <= 2; ++v) {
            const std::string value = std::to_string(1000 + v);
            auto req = alter(2, "t", {{"retention.ms", value}});
            auto r = co_await round_trip<kafka::AlterConfigsResponse>(f, std::move(req), v);
            REQUIRE(r.responses.size() == 1);
            CHECK(r.responses[0].error_code == kerr::none);
            CHECK(r.responses[0].resource_name == "t");
            CHECK(configs_of(f, "t") == config_map{{"retention.ms", value}});
        }
        for (std::int16_t v = 0; v <= 1; ++v) {
            const std::string value = std::to_string(2000 + v);
            auto req = incremental("t", {{"retention.bytes", set_op, value}});
            auto r = co_await round_trip<kafka::IncrementalAlterConfigsResponse>(f, std::move(req), v);
            REQUIRE(r.responses.size() == 1);
            CHECK(r.responses[0].error_code == kerr::none);
            CHECK(configs_of(f, "t").at("retention.bytes") == value);
        }
        co_await produce_batches(f, "t", 1, 5);
        for (std::int16_t v = 0; v <= 2; ++v) {
            auto req = delete_request("t", 0, v + 1);
            auto r = co_await round_trip<kafka::DeleteRecordsResponse>(f, std::move(req), v);
            REQUIRE(r.topics.size() == 1);
            REQUIRE(r.topics[0].partitions.size() == 1);
            CHECK(r.topics[0].partitions[0].error_code == kerr::none);
            CHECK(r.topics[0].partitions[0].low_watermark == v + 1);
        }
        co_await f.close();
    });
}
