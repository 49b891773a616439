// The Fetch handler against a one-core shard over an in-memory store: it returns what Produce
// appended, per-partition errors, and a long poll that wakes when data arrives.
#include "fake_shard.hpp"
#include "run_task.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/timer.hpp>

#include <catch2/catch.hpp>

#include <chrono>

using namespace skiff;
using namespace skiff::broker;
using namespace std::chrono_literals;
using skiff::test::fake_shard;
using skiff::test::produce_request;
using skiff::test::records_of;

namespace {

struct fetch_part {
    std::string topic;
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int32_t max_bytes = 1 << 20;
};

kafka::FetchRequest fetch_request(const std::vector<fetch_part>& parts, std::int32_t max_wait_ms = 0,
                                  std::int32_t min_bytes = 0) {
    kafka::FetchRequest req;
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = min_bytes;
    for (auto& p : parts) {
        if (req.topics.empty() || req.topics.back().topic != p.topic) {
            kafka::FetchRequest::FetchTopic ft;
            ft.topic = p.topic;
            req.topics.push_back(std::move(ft));
        }
        kafka::FetchRequest::FetchPartition fp;
        fp.partition = p.partition;
        fp.fetch_offset = p.offset;
        fp.partition_max_bytes = p.max_bytes;
        req.topics.back().partitions.push_back(fp);
    }
    return req;
}

const kafka::FetchResponse::PartitionData& part(const kafka::FetchResponse& r, std::size_t t, std::size_t p) {
    return r.responses.at(t).partitions.at(p);
}

// The values of every record in a fetched record set.
std::vector<std::string> values_of(const std::optional<kafka::record_bytes>& records) {
    std::vector<std::string> out;
    if (!records) return out;
    std::span<const char> rest(*records);
    while (!rest.empty()) {
        auto b = storage::parse_batch(rest);
        REQUIRE(b.has_value());
        auto recs = storage::parse_records(*b);
        REQUIRE(recs.has_value());
        for (auto& rec : *recs) out.emplace_back(rec.value.value_or("<null>"));
        rest = rest.subspan(b->size());
    }
    return out;
}

} // namespace

TEST_CASE("fetch returns what produce appended, from the offset asked", "[broker][fetch]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"orders", 2}});
        auto p1 = produce_request({{"orders", 0, records_of(0, 3)}, {"orders", 1, records_of(100, 1)}});
        auto r1 = co_await produce(f.sh, std::move(p1));
        auto p2 = produce_request({{"orders", 0, records_of(3, 2)}});
        auto r2 = co_await produce(f.sh, std::move(p2));
        CHECK(r2.responses[0].partition_responses[0].base_offset == 3);

        auto q = fetch_request({{"orders", 0, 0}, {"orders", 1, 0}});
        auto got = co_await fetch(f.sh, std::move(q));
        REQUIRE(got.responses.size() == 1);
        CHECK(part(got, 0, 0).error_code == kerr::none);
        CHECK(part(got, 0, 0).high_watermark == 5);
        CHECK(part(got, 0, 0).last_stable_offset == 5);
        CHECK(part(got, 0, 0).log_start_offset == 0);
        CHECK(values_of(part(got, 0, 0).records) == std::vector<std::string>{"v0", "v1", "v2", "v3", "v4"});
        CHECK(part(got, 0, 1).high_watermark == 1);
        CHECK(values_of(part(got, 0, 1).records) == std::vector<std::string>{"v100"});

        // From offset 3: the second batch (reads return whole batches).
        auto q2 = fetch_request({{"orders", 0, 3}});
        auto tail = co_await fetch(f.sh, std::move(q2));
        CHECK(values_of(part(tail, 0, 0).records) == std::vector<std::string>{"v3", "v4"});
        // At the end: nothing, no error, and no wait without max_wait.
        auto q3 = fetch_request({{"orders", 0, 5}});
        auto end = co_await fetch(f.sh, std::move(q3));
        CHECK(part(end, 0, 0).error_code == kerr::none);
        CHECK(part(end, 0, 0).records.has_value());
        CHECK(part(end, 0, 0).records->empty());
        (void)r1;
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("fetch errors are per partition", "[broker][fetch]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"orders", 1}});
        auto p = produce_request({{"orders", 0, records_of(0, 2)}});
        auto pr = co_await produce(f.sh, std::move(p));
        CHECK(pr.responses[0].partition_responses[0].error_code == kerr::none);
        auto q = fetch_request({{"nope", 0, 0}, {"orders", 0, 0}, {"orders", 0, 50}, {"orders", 3, 0}, {"orders", 0, 0, -1}});
        auto got = co_await fetch(f.sh, std::move(q));
        REQUIRE(got.responses.size() == 2);
        CHECK(part(got, 0, 0).error_code == kerr::unknown_topic_or_partition);
        CHECK(part(got, 1, 0).error_code == kerr::none);
        CHECK(values_of(part(got, 1, 0).records) == std::vector<std::string>{"v0", "v1"});
        CHECK(part(got, 1, 1).error_code == kerr::offset_out_of_range);
        CHECK(part(got, 1, 2).error_code == kerr::unknown_topic_or_partition);
        CHECK(part(got, 1, 3).error_code == kerr::invalid_fetch_size);
        co_await f.close();
    };
    runtime::run_task(t());
}

namespace {
runtime::task<void> produce_later(fake_shard* f) {
    auto slept = co_await runtime::sleep(50ms);
    (void)slept;
    auto p = produce_request({{"orders", 0, records_of(7, 1)}});
    auto r = co_await produce(f->sh, std::move(p));
    CHECK(r.responses[0].partition_responses[0].error_code == kerr::none);
}

runtime::task<kafka::FetchResponse> timed_fetch(fake_shard* f, std::chrono::steady_clock::duration* took) {
    const auto started = std::chrono::steady_clock::now();
    auto q = fetch_request({{"orders", 0, 0}}, 10000, 1);
    auto r = co_await fetch(f->sh, std::move(q));
    *took = std::chrono::steady_clock::now() - started;
    co_return r;
}
} // namespace

TEST_CASE("a long poll wakes when data arrives, well before max_wait", "[broker][fetch]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"orders", 1}});
        std::chrono::steady_clock::duration took{};
        auto both = co_await runtime::when_all(timed_fetch(&f, &took), produce_later(&f));
        auto& got = std::get<0>(both);
        CHECK(values_of(part(got, 0, 0).records) == std::vector<std::string>{"v7"});
        CHECK(took < 5s);
        co_await f.close();
    };
    runtime::run_task(t());
}
