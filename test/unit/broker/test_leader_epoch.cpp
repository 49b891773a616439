// Leader epochs as clients check them (cluster mode): Fetch, ListOffsets and
// OffsetForLeaderEpoch answer FENCED_LEADER_EPOCH to a client behind the owner's epoch and
// UNKNOWN_LEADER_EPOCH to one ahead of it, and OffsetForLeaderEpoch says where each epoch ends.
// A one-core fake shard is put in cluster mode by hand: a claim at epoch 5 after an unclean
// takeover, and a lease that stays valid.
#include "fake_shard.hpp"
#include "run_task.hpp"

#include <skiff/broker/kafka_errors.hpp>

#include <catch2/catch.hpp>

#include <limits>

using namespace skiff;
using namespace skiff::broker;
using skiff::test::fake_shard;
using skiff::test::produce_request;
using skiff::test::records_of;

namespace {

constexpr std::int32_t owner_epoch = 5;
constexpr std::int64_t gap = 1000;

void make_owner(fake_shard& f, const std::string& topic, std::int32_t partition) {
    f.shared.cfg.etcd_endpoints = {"http://127.0.0.1:1"}; // never contacted: no cluster loop runs here
    f.shared.cfg.takeover_gap = gap;
    f.shared.lease_valid_until_ns.store(std::numeric_limits<std::int64_t>::max());
    cluster::claim c;
    c.epoch = owner_epoch;
    c.previous.clean = false;
    f.sh.claims[std::pair{topic, partition}] = c;
}

template <typename Resp>
Resp decode_response(const std::string& frame, std::int16_t version) {
    // size, correlation id, then the body (non-flexible versions: no header tags)
    kafka::reader rd(std::span<const char>(frame).subspan(8));
    auto r = Resp::decode(rd, version);
    REQUIRE(r.has_value());
    return std::move(*r);
}

request_ctx ctx_for(fake_shard& f, const conn_info& ci, std::int16_t version) {
    return request_ctx{f.sh, ci, version, 7, "test"};
}

kafka::FetchRequest fetch_at(std::int64_t offset, std::int32_t current_epoch) {
    kafka::FetchRequest req;
    kafka::FetchRequest::FetchTopic ft;
    ft.topic = "t";
    kafka::FetchRequest::FetchPartition fp;
    fp.partition = 0;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    fp.current_leader_epoch = current_epoch;
    ft.partitions.push_back(fp);
    req.topics.push_back(std::move(ft));
    return req;
}

runtime::task<kafka::ListOffsetsResponse::ListOffsetsPartitionResponse> list_offset(fake_shard& f, std::int64_t ts,
                                                                                    std::int32_t current_epoch) {
    kafka::ListOffsetsRequest req;
    req.replica_id = -1;
    kafka::ListOffsetsRequest::ListOffsetsTopic t;
    t.name = "t";
    kafka::ListOffsetsRequest::ListOffsetsPartition p;
    p.partition_index = 0;
    p.timestamp = ts;
    p.current_leader_epoch = current_epoch;
    t.partitions.push_back(p);
    req.topics.push_back(std::move(t));
    conn_info ci;
    auto frame = co_await handle_list_offsets(ctx_for(f, ci, 4), std::move(req));
    auto r = decode_response<kafka::ListOffsetsResponse>(frame, 4);
    co_return r.topics.at(0).partitions.at(0);
}

runtime::task<kafka::OffsetForLeaderEpochResponse::EpochEndOffset> epoch_end(fake_shard& f, std::int32_t requested,
                                                                             std::int32_t current_epoch) {
    kafka::OffsetForLeaderEpochRequest req;
    req.replica_id = -1;
    kafka::OffsetForLeaderEpochRequest::OffsetForLeaderTopic t;
    t.topic = "t";
    kafka::OffsetForLeaderEpochRequest::OffsetForLeaderPartition p;
    p.partition = 0;
    p.current_leader_epoch = current_epoch;
    p.leader_epoch = requested;
    t.partitions.push_back(p);
    req.topics.push_back(std::move(t));
    conn_info ci;
    auto frame = co_await handle_offset_for_leader_epoch(ctx_for(f, ci, 3), std::move(req));
    auto r = decode_response<kafka::OffsetForLeaderEpochResponse>(frame, 3);
    co_return r.topics.at(0).partitions.at(0);
}

} // namespace

TEST_CASE("leader epochs: fenced and unknown epochs, epoch stamps, and where epochs end", "[broker][cluster]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        make_owner(f, "t", 0);
        auto req = produce_request({{"t", 0, records_of(0, 3)}});
        auto pr = co_await produce(f.sh, std::move(req));
        const auto& pp = pr.responses.at(0).partition_responses.at(0);
        REQUIRE(pp.error_code == kerr::none);
        CHECK(pp.base_offset == gap); // an unclean takeover starts past the gap

        // Fetch: the owner's epoch and "unknown" are served; the stored batches carry the epoch.
        const std::vector<std::int32_t> served_epochs{-1, owner_epoch};
        for (std::int32_t e : served_epochs) {
            auto got = co_await fetch(f.sh, fetch_at(gap, e));
            const auto& pd = got.responses.at(0).partitions.at(0);
            CHECK(pd.error_code == kerr::none);
            REQUIRE(pd.records.has_value());
            auto b = storage::parse_batch(std::span<const char>(*pd.records));
            REQUIRE(b.has_value());
            CHECK(b->partition_leader_epoch == owner_epoch);
        }
        auto behind = co_await fetch(f.sh, fetch_at(gap, owner_epoch - 1));
        CHECK(behind.responses.at(0).partitions.at(0).error_code == kerr::fenced_leader_epoch);
        CHECK_FALSE(behind.responses.at(0).partitions.at(0).records.value_or("").size() > 0);
        auto ahead = co_await fetch(f.sh, fetch_at(gap, owner_epoch + 1));
        CHECK(ahead.responses.at(0).partitions.at(0).error_code == kerr::unknown_leader_epoch);

        // ListOffsets answers with the owner's epoch, and checks the client's.
        auto latest = co_await list_offset(f, -1, owner_epoch);
        CHECK(latest.error_code == kerr::none);
        CHECK(latest.offset == gap + 3);
        CHECK(latest.leader_epoch == owner_epoch);
        auto by_time = co_await list_offset(f, 0, -1);
        CHECK(by_time.offset == gap);
        CHECK(by_time.leader_epoch == owner_epoch); // the epoch of the batch found
        auto r1 = co_await list_offset(f, -2, 2);
        CHECK(r1.error_code == kerr::fenced_leader_epoch);
        auto r2 = co_await list_offset(f, -2, 9);
        CHECK(r2.error_code == kerr::unknown_leader_epoch);

        // OffsetForLeaderEpoch: the current epoch ends at the log end; an older one where the
        // current one began; a newer or undefined one is undefined.
        auto cur = co_await epoch_end(f, owner_epoch, owner_epoch);
        CHECK(cur.error_code == kerr::none);
        CHECK(cur.leader_epoch == owner_epoch);
        CHECK(cur.end_offset == gap + 3);
        auto older = co_await epoch_end(f, 2, -1);
        CHECK(older.error_code == kerr::none);
        CHECK(older.leader_epoch == 2);
        CHECK(older.end_offset == gap);
        auto newer = co_await epoch_end(f, owner_epoch + 3, -1);
        CHECK(newer.error_code == kerr::none);
        CHECK(newer.leader_epoch == -1);
        CHECK(newer.end_offset == -1);
        auto r3 = co_await epoch_end(f, owner_epoch, owner_epoch - 1);
        CHECK(r3.error_code == kerr::fenced_leader_epoch);
        auto r4 = co_await epoch_end(f, owner_epoch, owner_epoch + 1);
        CHECK(r4.error_code == kerr::unknown_leader_epoch);
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("leader epochs: a partition not owned answers NOT_LEADER_OR_FOLLOWER", "[broker][cluster]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        make_owner(f, "t", 0);
        f.sh.claims.clear();
        auto got = co_await fetch(f.sh, fetch_at(0, owner_epoch));
        CHECK(got.responses.at(0).partitions.at(0).error_code == kerr::not_leader_or_follower);
        auto r5 = co_await list_offset(f, -1, -1);
        CHECK(r5.error_code == kerr::not_leader_or_follower);
        auto r6 = co_await epoch_end(f, 0, -1);
        CHECK(r6.error_code == kerr::not_leader_or_follower);
        co_await f.close();
    };
    runtime::run_task(t());
}
