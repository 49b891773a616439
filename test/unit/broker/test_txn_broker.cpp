// Transactions through the broker's own paths on a one-core shard over an in-memory store:
// transactional produces verified against the coordinator, markers appended on the partition,
// a read_committed Fetch cut at the LSO with the aborted list, ListOffsets' LSO, and, after a
// "restart" that replays too little of the log, the aborted transaction found again through
// the partition's abort index (and not found when that index is gone).
#include "decode_answer.hpp"
#include "fake_shard.hpp"
#include "run_task.hpp"

#include "../../../src/broker/handlers.hpp"
#include "../../../src/broker/transactions.hpp"
#include "../../../src/broker/txn/abort_index.hpp"

#include <skiff/broker/kafka_errors.hpp>

#include <catch2/catch.hpp>

using namespace skiff;
using namespace skiff::broker;
using skiff::test::decode_answer;
using skiff::test::fake_shard;
using skiff::test::produce_request;
using skiff::test::records_of;

namespace {

kafka::FetchRequest committed_fetch(std::int64_t offset, std::int8_t isolation) {
    kafka::FetchRequest req;
    req.max_wait_ms = 0;
    req.isolation_level = isolation;
    kafka::FetchRequest::FetchTopic ft;
    ft.topic = "out";
    kafka::FetchRequest::FetchPartition fp;
    fp.partition = 0;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    ft.partitions.push_back(fp);
    req.topics.push_back(std::move(ft));
    return req;
}

// (base offset, control?) of every batch fetched.
std::vector<std::pair<std::int64_t, bool>> batches_of(const kafka::FetchResponse& r) {
    std::vector<std::pair<std::int64_t, bool>> out;
    const auto& recs = r.responses.at(0).partitions.at(0).records;
    if (!recs) return out;
    std::span<const char> rest(*recs);
    while (!rest.empty()) {
        auto b = storage::parse_batch(rest);
        REQUIRE(b.has_value());
        out.emplace_back(b->base_offset, b->is_control());
        rest = rest.subspan(b->size());
    }
    return out;
}

std::vector<std::pair<std::int64_t, std::int64_t>> aborted_of(const kafka::FetchResponse& r) {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    const auto& a = r.responses.at(0).partitions.at(0).aborted_transactions;
    if (!a) return out;
    for (auto& t : *a) out.emplace_back(t.producer_id, t.first_offset);
    return out;
}

runtime::task<kafka::error_code> produce_txn(fake_shard& f, std::string id, std::string records) {
    auto req = produce_request({{"out", 0, std::move(records)}});
    req.transactional_id = std::move(id);
    auto r = co_await produce(f.sh, std::move(req));
    co_return r.responses.at(0).partition_responses.at(0).error_code;
}

// WriteTxnMarkers for producer `pid` at `epoch`: topic -> partitions.
kafka::WriteTxnMarkersRequest markers_request(std::int64_t pid, std::int16_t epoch, bool commit,
                                              const std::vector<std::pair<std::string, std::int32_t>>& tps) {
    kafka::WriteTxnMarkersRequest req;
    kafka::WriteTxnMarkersRequest::WritableTxnMarker m;
    m.producer_id = pid;
    m.producer_epoch = epoch;
    m.transaction_result = commit;
    for (auto& [t, p] : tps) {
        kafka::WriteTxnMarkersRequest::WritableTxnMarkerTopic mt;
        mt.name = t;
        mt.partition_indexes.push_back(p);
        m.topics.push_back(std::move(mt));
    }
    req.markers.push_back(std::move(m));
    return req;
}

} // namespace

TEST_CASE("WriteTxnMarkers: the marker another broker's coordinator asks for closes the transaction here",
          "[txn][broker]") {
    auto t = []() -> runtime::task<void> {
        fake_shard f({{"out", 1}});
        f.sh.txns = make_txn_coordinator(f.sh);
        const std::string id = "remote-coordinated";
        auto init = co_await f.sh.txns->init_producer_id(id, 10000, -1, -1, true);
        REQUIRE(init.error == kerr::none);
        const std::int64_t pid = init.producer_id;
        std::vector<txn::topic_partition> tps{{"out", 0}};
        auto add = co_await f.sh.txns->add_partitions(id, pid, 0, tps, true);
        REQUIRE(add == kerr::none);
        auto p1 = co_await produce_txn(f, id, records_of(0, 3, pid, 0, true));
        REQUIRE(p1 == kerr::none);
        auto open = co_await fetch(f.sh, committed_fetch(0, 1));
        CHECK(open.responses.at(0).partitions.at(0).last_stable_offset == 0);

        conn_info ci;
        for (std::int16_t v : {std::int16_t{0}, std::int16_t{1}}) {
            request_ctx ctx{f.sh, ci, v, 9, "test"};
            // An unknown topic and a negative epoch answer for themselves; nothing is appended.
            auto bad_req = markers_request(pid, 0, true, {{"nope", 0}, {"out", 7}});
            auto bad_frame = co_await handle_write_txn_markers(ctx, std::move(bad_req));
            auto bad = decode_answer<kafka::WriteTxnMarkersResponse>(bad_frame, v);
            REQUIRE(bad.markers.size() == 1);
            REQUIRE(bad.markers[0].topics.size() == 2);
            CHECK(bad.markers[0].producer_id == pid);
            CHECK(bad.markers[0].topics[0].partitions.at(0).error_code == kerr::unknown_topic_or_partition);
            CHECK(bad.markers[0].topics[1].partitions.at(0).error_code == kerr::unknown_topic_or_partition);
            auto neg_req = markers_request(pid, -1, true, {{"out", 0}});
            auto neg_frame = co_await handle_write_txn_markers(ctx, std::move(neg_req));
            auto neg = decode_answer<kafka::WriteTxnMarkersResponse>(neg_frame, v);
            CHECK(neg.markers.at(0).topics.at(0).partitions.at(0).error_code == kerr::invalid_producer_epoch);
        }
        auto still = co_await fetch(f.sh, committed_fetch(0, 1));
        CHECK(still.responses.at(0).partitions.at(0).last_stable_offset == 0);
        CHECK(still.responses.at(0).partitions.at(0).high_watermark == 3);

        request_ctx ctx{f.sh, ci, 1, 10, "test"};
        auto ok_req = markers_request(pid, 0, true, {{"out", 0}});
        auto ok_frame = co_await handle_write_txn_markers(ctx, std::move(ok_req));
        auto ok = decode_answer<kafka::WriteTxnMarkersResponse>(ok_frame, 1);
        CHECK(ok.markers.at(0).topics.at(0).name == "out");
        CHECK(ok.markers.at(0).topics.at(0).partitions.at(0).error_code == kerr::none);
        // The commit marker is at offset 3; the transaction is stable and committed.
        auto after = co_await fetch(f.sh, committed_fetch(0, 1));
        const auto& pd = after.responses.at(0).partitions.at(0);
        CHECK(pd.high_watermark == 4);
        CHECK(pd.last_stable_offset == 4);
        using B = std::vector<std::pair<std::int64_t, bool>>;
        CHECK(batches_of(after) == B{{0, false}, {3, true}});
        CHECK(aborted_of(after).empty());
        co_await f.sh.txns->close();
        co_await f.close();
    };
    runtime::run_task(t());
}

TEST_CASE("transactions through the broker: LSO, read_committed fetch, abort index across a restart",
          "[txn][broker]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    std::int64_t pid = -1;
    runtime::run_task([](std::shared_ptr<storage::memory_bucket> bucket, std::int64_t* pid_out) -> runtime::task<void> {
        fake_shard f({{"out", 1}}, bucket);
        f.sh.txns = make_txn_coordinator(f.sh);
        const std::string id = "tx";
        auto init = co_await f.sh.txns->init_producer_id(id, 10000, -1, -1, true);
        REQUIRE(init.error == kerr::none);
        const std::int64_t pid = init.producer_id;
        *pid_out = pid;
        const std::vector<txn::topic_partition> tps{{"out", 0}};

        // Not added to the transaction yet: refused, nothing written.
        auto early = co_await produce_txn(f, id, records_of(0, 3, pid, 0, true));
        CHECK(early == kerr::invalid_txn_state);

        // Committed: offsets 0-2, marker 3.
        auto add1 = co_await f.sh.txns->add_partitions(id, pid, 0, tps, true);
        REQUIRE(add1 == kerr::none);
        auto p1 = co_await produce_txn(f, id, records_of(0, 3, pid, 0, true));
        CHECK(p1 == kerr::none);
        auto c1 = co_await f.sh.txns->end_txn(id, pid, 0, true, true);
        CHECK(c1 == kerr::none);
        // Aborted: offsets 4-5, marker 6.
        auto add2 = co_await f.sh.txns->add_partitions(id, pid, 0, tps, true);
        REQUIRE(add2 == kerr::none);
        auto p2 = co_await produce_txn(f, id, records_of(10, 2, pid, 3, true));
        CHECK(p2 == kerr::none);
        auto a2 = co_await f.sh.txns->end_txn(id, pid, 0, false, true);
        CHECK(a2 == kerr::none);
        // Open: offsets 7-8; then a plain record at 9.
        auto add3 = co_await f.sh.txns->add_partitions(id, pid, 0, tps, true);
        REQUIRE(add3 == kerr::none);
        auto p3 = co_await produce_txn(f, id, records_of(20, 2, pid, 5, true));
        CHECK(p3 == kerr::none);
        auto plain_req = produce_request({{"out", 0, records_of(30, 1)}});
        auto plain = co_await produce(f.sh, std::move(plain_req));
        CHECK(plain.responses.at(0).partition_responses.at(0).base_offset == 9);

        auto rc = co_await fetch(f.sh, committed_fetch(0, 1));
        const auto& pd = rc.responses.at(0).partitions.at(0);
        CHECK(pd.high_watermark == 10);
        CHECK(pd.last_stable_offset == 7);
        using B = std::vector<std::pair<std::int64_t, bool>>;
        CHECK(batches_of(rc) == B{{0, false}, {3, true}, {4, false}, {6, true}});
        CHECK(aborted_of(rc) == std::vector<std::pair<std::int64_t, std::int64_t>>{{pid, 4}});
        // From past the abort marker the aborted transaction is no longer listed.
        auto rc7 = co_await fetch(f.sh, committed_fetch(7, 1));
        CHECK(batches_of(rc7).empty());
        CHECK(aborted_of(rc7).empty());
        auto ru = co_await fetch(f.sh, committed_fetch(0, 0));
        CHECK(batches_of(ru).size() == 6);
        CHECK_FALSE(ru.responses.at(0).partitions.at(0).aborted_transactions.has_value());

        // The abort is in the partition's index.
        const std::string prefix = storage::partition_prefix(f.sh.cfg().ns, storage::partition_id("out", 0));
        txn::aborted_txn want;
        want.producer_id = pid;
        want.first_offset = 4;
        want.last_offset = 6;
        CHECK(bucket->objects.count(txn::abort_index_key(prefix, want)) == 1);

        // Committing the open one makes everything stable.
        auto c3 = co_await f.sh.txns->end_txn(id, pid, 0, true, true);
        CHECK(c3 == kerr::none);
        auto after = co_await fetch(f.sh, committed_fetch(0, 1));
        CHECK(after.responses.at(0).partitions.at(0).last_stable_offset == 11);
        co_await f.sh.txns->close();
        co_await f.close();
    }(bucket, &pid));

    // A restart that replays only the last `window` offsets: the abort comes from the index.
    // Window 1 replays from offset 10, past the whole aborted transaction (4-5, marker 6);
    // window 5 from offset 6, its marker alone: the replay cannot see where it began, so the
    // index entry is needed there too (a regression: entries were taken only for markers
    // below the window, and a partition taken back after a takeover gap showed aborted
    // records to read_committed consumers).
    auto check_restart = [&](bool index_kept, std::int64_t window) {
        runtime::run_task([](std::shared_ptr<storage::memory_bucket> bucket, std::int64_t pid, bool index_kept,
                             std::int64_t window) -> runtime::task<void> {
            fake_shard g({{"out", 1}}, bucket);
            g.shared.cfg.producer_state_window = window;
            auto rc = co_await fetch(g.sh, committed_fetch(0, 1));
            CHECK(rc.responses.at(0).partitions.at(0).last_stable_offset == 11);
            if (index_kept) {
                CHECK(aborted_of(rc) == std::vector<std::pair<std::int64_t, std::int64_t>>{{pid, 4}});
            } else {
                CHECK(aborted_of(rc).empty()); // what the index is for
            }
            co_await g.close();
        }(bucket, pid, index_kept, window));
    };
    check_restart(true, 1);
    check_restart(true, 5);
    for (auto it = bucket->objects.begin(); it != bucket->objects.end();) {
        it = it->first.find("/txn-aborted-") != std::string::npos ? bucket->objects.erase(it) : std::next(it);
    }
    check_restart(false, 1);
    check_restart(false, 5);
}
