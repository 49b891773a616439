// The Produce handler against a one-core shard over an in-memory store: offsets, per-partition
// error codes, one bad partition not failing the others, idempotent duplicates.
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
const kafka::ProduceResponse::PartitionProduceResponse& part(const kafka::ProduceResponse& r, std::size_t t,
                                                             std::size_t p) {
    return r.responses.at(t).partition_responses.at(p);
}
} // namespace

TEST_CASE("produce assigns consecutive offsets per partition", "[broker][produce]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"orders", 2}});
        auto r1_req = produce_request({{"orders", 0, records_of(0, 3)}, {"orders", 1, records_of(0, 2)}});
        auto r1 = co_await produce(f.sh, std::move(r1_req));
        REQUIRE(r1.responses.size() == 1);
        REQUIRE(r1.responses[0].partition_responses.size() == 2);
        CHECK(part(r1, 0, 0).error_code == kerr::none);
        CHECK(part(r1, 0, 0).base_offset == 0);
        CHECK(part(r1, 0, 0).log_start_offset == 0);
        CHECK(part(r1, 0, 1).error_code == kerr::none);
        CHECK(part(r1, 0, 1).base_offset == 0);
        auto r2_req = produce_request({{"orders", 0, records_of(3, 4)}}, 1);
        auto r2 = co_await produce(f.sh, std::move(r2_req));
        CHECK(part(r2, 0, 0).error_code == kerr::none);
        CHECK(part(r2, 0, 0).base_offset == 3);
        auto r3_req = produce_request({{"orders", 0, records_of(7, 1)}});
        auto r3 = co_await produce(f.sh, std::move(r3_req));
        CHECK(part(r3, 0, 0).base_offset == 7);
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("a bad partition does not fail the others in the same request", "[broker][produce]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"orders", 2}, {"audit", 1}});
        std::string corrupt = records_of(0, 2);
        corrupt.back() ^= 0x5a; // the CRC no longer matches
        std::string two_batches = records_of(0, 1) + records_of(1, 1);
        auto r_req = produce_request({{"audit", 0, corrupt},
                                                         {"nope", 0, records_of(0, 1)},
                                                         {"orders", 0, records_of(0, 2)},
                                                         {"orders", 1, two_batches},
                                                         {"orders", 9, records_of(0, 1)}});
        auto r = co_await produce(f.sh, std::move(r_req));
        REQUIRE(r.responses.size() == 3);
        CHECK(r.responses[0].name == "audit");
        CHECK(part(r, 0, 0).error_code == kerr::corrupt_message);
        CHECK(part(r, 0, 0).base_offset == -1);
        CHECK(part(r, 1, 0).error_code == kerr::unknown_topic_or_partition);
        CHECK(part(r, 2, 0).error_code == kerr::none);
        CHECK(part(r, 2, 0).base_offset == 0);
        CHECK(part(r, 2, 1).error_code == kerr::invalid_record);
        CHECK(part(r, 2, 2).error_code == kerr::unknown_topic_or_partition);
        // Nothing of the rejected partitions reached a log.
        auto again_req = produce_request({{"audit", 0, records_of(0, 1)}, {"orders", 1, records_of(0, 1)}});
        auto again = co_await produce(f.sh, std::move(again_req));
        CHECK(part(again, 0, 0).base_offset == 0);
        CHECK(part(again, 1, 0).base_offset == 0);
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("invalid acks and unverifiable transactional produce are refused", "[broker][produce]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"orders", 1}});
        auto r_req = produce_request({{"orders", 0, records_of(0, 1)}}, 2);
        auto r = co_await produce(f.sh, std::move(r_req));
        CHECK(part(r, 0, 0).error_code == kerr::invalid_required_acks);
        // A transactional batch needs its transactional id ...
        auto bare = produce_request({{"orders", 0, records_of(0, 1, 7, 0, true)}});
        auto r1 = co_await produce(f.sh, std::move(bare));
        CHECK(part(r1, 0, 0).error_code == kerr::invalid_record);
        // ... the principal's WRITE on it ...
        auto denied = produce_request({{"orders", 0, records_of(0, 1, 7, 0, true)}});
        denied.transactional_id = "tx";
        auto r2 = co_await produce(f.sh, std::move(denied), false);
        CHECK(part(r2, 0, 0).error_code == kerr::transactional_id_authorization_failed);
        // ... and a coordinator that has the partition in the transaction (none here: the
        // retriable NOT_ENOUGH_REPLICAS, as Kafka answers a produce it cannot verify yet).
        auto req = produce_request({{"orders", 0, records_of(0, 1, 7, 0, true)}});
        req.transactional_id = "tx";
        auto r3 = co_await produce(f.sh, std::move(req));
        CHECK(part(r3, 0, 0).error_code == kerr::not_enough_replicas);
        for (auto& [_, slot] : f.sh.parts) CHECK(slot->log->next_offset() == 0); // nothing appended
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("an idempotent retry is answered with the original offsets and not written twice", "[broker][produce]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"orders", 1}});
        const std::int64_t pid = 42;
        auto a_req = produce_request({{"orders", 0, records_of(0, 3, pid, 0)}});
        auto a = co_await produce(f.sh, std::move(a_req));
        auto b_req = produce_request({{"orders", 0, records_of(3, 2, pid, 3)}});
        auto b = co_await produce(f.sh, std::move(b_req));
        CHECK(part(a, 0, 0).base_offset == 0);
        CHECK(part(b, 0, 0).base_offset == 3);
        // The first batch again (its answer was lost): the same offsets, nothing appended.
        auto retry_req = produce_request({{"orders", 0, records_of(0, 3, pid, 0)}});
        auto retry = co_await produce(f.sh, std::move(retry_req));
        CHECK(part(retry, 0, 0).error_code == kerr::none);
        CHECK(part(retry, 0, 0).base_offset == 0);
        // A gap in the sequence is refused.
        auto gap_req = produce_request({{"orders", 0, records_of(9, 1, pid, 9)}});
        auto gap = co_await produce(f.sh, std::move(gap_req));
        CHECK(part(gap, 0, 0).error_code == kerr::out_of_order_sequence_number);
        auto next_req = produce_request({{"orders", 0, records_of(5, 1, pid, 5)}});
        auto next = co_await produce(f.sh, std::move(next_req));
        CHECK(part(next, 0, 0).error_code == kerr::none);
        CHECK(part(next, 0, 0).base_offset == 5);
        CHECK(f.sh.parts.begin()->second->log->high_watermark() == 6);
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("pipelined idempotent produces are appended in request order", "[broker][produce]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"orders", 1}});
        const std::int64_t pid = 7;
        // Open the partition and load its producer table first, as a running broker would
        // have; then five requests in flight at once, as a producer with max.in.flight 5.
        auto first_req = produce_request({{"orders", 0, records_of(0, 1, pid, 0)}});
        auto first = co_await produce(f.sh, std::move(first_req));
        CHECK(part(first, 0, 0).base_offset == 0);
        std::vector<runtime::task<kafka::ProduceResponse>> inflight;
        for (int i = 1; i <= 5; ++i) {
            auto req = produce_request({{"orders", 0, records_of(i, 1, pid, i)}});
            inflight.push_back(produce(f.sh, std::move(req)));
        }
        auto rs = co_await runtime::when_all(std::move(inflight));
        for (int i = 0; i < 5; ++i) {
            CHECK(part(rs[i], 0, 0).error_code == kerr::none);
            CHECK(part(rs[i], 0, 0).base_offset == i + 1);
        }
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("after a restart an idempotent retry is recognised from the log", "[broker][produce]") {
    auto t = []() -> runtime::task<void> {
        auto bucket = std::make_shared<storage::memory_bucket>();
        const std::int64_t pid = 99;
        {
            fake_shard f({{"orders", 1}}, bucket);
            auto plain = produce_request({{"orders", 0, records_of(0, 2)}});
            auto a = co_await produce(f.sh, std::move(plain));
            auto idem = produce_request({{"orders", 0, records_of(2, 3, pid, 0)}});
            auto b = co_await produce(f.sh, std::move(idem));
            CHECK(part(a, 0, 0).base_offset == 0);
            CHECK(part(b, 0, 0).base_offset == 2);
            co_await f.close();
        }
        fake_shard f({{"orders", 1}}, bucket);
        // Two retries in flight at once: both wait for the table rebuild, both are duplicates.
        std::vector<runtime::task<kafka::ProduceResponse>> retries;
        for (int i = 0; i < 2; ++i) {
            auto req = produce_request({{"orders", 0, records_of(2, 3, pid, 0)}});
            retries.push_back(produce(f.sh, std::move(req)));
        }
        auto rs = co_await runtime::when_all(std::move(retries));
        for (auto& r : rs) {
            CHECK(part(r, 0, 0).error_code == kerr::none);
            CHECK(part(r, 0, 0).base_offset == 2);
        }
        auto next_req = produce_request({{"orders", 0, records_of(5, 1, pid, 3)}});
        auto next = co_await produce(f.sh, std::move(next_req));
        CHECK(part(next, 0, 0).base_offset == 5);
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("a timed-out idempotent append answers its retry as a duplicate once it is durable", "[broker][produce]") {
    auto t = []() -> runtime::task<void> {
        using namespace std::chrono_literals;
        fake_shard f({{"orders", 1}});
        f.shared.cfg.log.append_timeout = 50ms;
        const std::int64_t pid = 5;
        auto warm = produce_request({{"orders", 0, records_of(0, 1, pid, 0)}});
        auto w = co_await produce(f.sh, std::move(warm));
        CHECK(part(w, 0, 0).base_offset == 0);
        // Slow uploads: the append outlives its timeout but is still being stored.
        f.store->set_latency(300ms);
        auto slow = produce_request({{"orders", 0, records_of(1, 2, pid, 1)}});
        auto s = co_await produce(f.sh, std::move(slow));
        CHECK(part(s, 0, 0).error_code == kerr::request_timed_out);
        // The producer retries: the same batch, answered with the offsets it was stored at
        // once the log reports them durable, and not written twice.
        auto retry = produce_request({{"orders", 0, records_of(1, 2, pid, 1)}});
        auto r = co_await produce(f.sh, std::move(retry));
        CHECK(part(r, 0, 0).error_code == kerr::none);
        CHECK(part(r, 0, 0).base_offset == 1);
        CHECK(f.sh.parts.begin()->second->log->high_watermark() == 3);
        co_await f.close();
    };
    runtime::run_task(t());
}
