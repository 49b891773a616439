// DescribeProducers against a one-core shard over an in-memory store: each partition's
// idempotent producers with epoch, last sequence and last timestamp, after appends and after a
// restart (rebuilt from the log); unknown partitions refused.
#include "fake_shard.hpp"
#include "run_task.hpp"

#include <skiff/broker/kafka_errors.hpp>

#include <catch2/catch.hpp>

using namespace skiff;
using namespace skiff::broker;
using skiff::test::fake_shard;
using skiff::test::produce_request;
using skiff::test::records_of;

namespace {

kafka::DescribeProducersRequest describe_request(std::string topic, std::vector<std::int32_t> partitions) {
    kafka::DescribeProducersRequest req;
    kafka::DescribeProducersRequest::TopicRequest t;
    t.name = std::move(topic);
    t.partition_indexes = std::move(partitions);
    req.topics.push_back(std::move(t));
    return req;
}

// The batch's max timestamp as built by records_of (a batch's stored timestamps are the
// client's: CreateTime).
std::int64_t max_timestamp_of(const std::string& batch) {
    auto v = storage::parse_batch(std::span<const char>(batch.data(), batch.size()));
    REQUIRE(v.has_value());
    return v->max_timestamp;
}

void check_two_producers(const kafka::DescribeProducersResponse& r, std::int64_t ts42) {
    REQUIRE(r.topics.size() == 1);
    REQUIRE(r.topics[0].partitions.size() == 2);
    const auto& p0 = r.topics[0].partitions[0];
    CHECK(p0.partition_index == 0);
    CHECK(p0.error_code == kerr::none);
    REQUIRE(p0.active_producers.size() == 2);
    CHECK(p0.active_producers[0].producer_id == 7);
    CHECK(p0.active_producers[0].last_sequence == 0);
    CHECK(p0.active_producers[1].producer_id == 42);
    CHECK(p0.active_producers[1].producer_epoch == 0);
    CHECK(p0.active_producers[1].last_sequence == 4);
    CHECK(p0.active_producers[1].last_timestamp == ts42);
    CHECK(p0.active_producers[1].coordinator_epoch == -1);
    CHECK(p0.active_producers[1].current_txn_start_offset == -1);
    // Partition 1 only had a plain producer.
    const auto& p1 = r.topics[0].partitions[1];
    CHECK(p1.error_code == kerr::none);
    CHECK(p1.active_producers.empty());
}

} // namespace

TEST_CASE("DescribeProducers lists each partition's idempotent producers, also after a restart",
          "[broker][describe_producers]") {
    auto t = []() -> runtime::task<void> {
        auto bucket = std::make_shared<storage::memory_bucket>();
        // Requests built outside the co_await expressions (g++ 12 and literals in them).
        const auto both = describe_request("orders", {0, 1});
        const std::string last42 = records_of(3, 2, 42, 3);
        const std::int64_t ts42 = max_timestamp_of(last42);
        {
            fake_shard f({{"orders", 2}}, bucket);
            auto a = produce_request({{"orders", 0, records_of(0, 3, 42, 0)}, {"orders", 1, records_of(0, 1)}});
            (void)co_await produce(f.sh, std::move(a));
            auto b = produce_request({{"orders", 0, last42}});
            (void)co_await produce(f.sh, std::move(b));
            auto c = produce_request({{"orders", 0, records_of(5, 1, 7, 0)}});
            (void)co_await produce(f.sh, std::move(c));
            auto r = co_await describe_producers(f.sh, both);
            check_two_producers(r, ts42);
            co_await f.close();
        }
        // A new broker over the same bucket rebuilds the table from the log to answer.
        fake_shard f({{"orders", 2}}, bucket);
        auto r = co_await describe_producers(f.sh, both);
        check_two_producers(r, ts42);
        // Unknown partitions and topics.
        auto bad_req = describe_request("orders", {5, -1});
        auto bad = co_await describe_producers(f.sh, std::move(bad_req));
        REQUIRE(bad.topics.at(0).partitions.size() == 2);
        CHECK(bad.topics[0].partitions[0].error_code == kerr::unknown_topic_or_partition);
        CHECK(bad.topics[0].partitions[1].error_code == kerr::unknown_topic_or_partition);
        auto none_req = describe_request("nope", {0});
        auto none = co_await describe_producers(f.sh, std::move(none_req));
        CHECK(none.topics.at(0).partitions.at(0).error_code == kerr::unknown_topic_or_partition);
        co_await f.close();
    };
    runtime::run_task(t());
}
