// Idempotent-producer sequence rules (KIP-98/KIP-360) as the broker applies them per partition.
#include <skiff/broker/producer_state.hpp>

#include <catch2/catch.hpp>

using skiff::broker::producer_table;
using v = producer_table::verdict;

TEST_CASE("producer_table: in-order batches are accepted, duplicates get their original offsets") {
    producer_table t;
    REQUIRE(t.check_and_reserve(7, 0, 0, 9, 1).v == v::accept);
    t.complete(7, 0, 0, 100, 109);
    REQUIRE(t.check_and_reserve(7, 0, 10, 19, 2).v == v::accept);
    t.complete(7, 0, 10, 110, 119);

    auto dup = t.check_and_reserve(7, 0, 0, 9, 3);
    CHECK(dup.v == v::duplicate);
    CHECK(dup.base_offset == 100);
    CHECK(dup.last_offset == 109);
    auto dup2 = t.check_and_reserve(7, 0, 10, 19, 3);
    CHECK(dup2.v == v::duplicate);
    CHECK(dup2.base_offset == 110);
}

TEST_CASE("producer_table: a gap is out of order and reserves nothing") {
    producer_table t;
    REQUIRE(t.check_and_reserve(1, 0, 0, 4, 1).v == v::accept);
    t.complete(1, 0, 0, 0, 4);
    CHECK(t.check_and_reserve(1, 0, 6, 8, 2).v == v::out_of_order);
    // The batch that fills the gap is still accepted.
    CHECK(t.check_and_reserve(1, 0, 5, 5, 2).v == v::accept);
}

TEST_CASE("producer_table: pipelined batches are checked against reservations, not completions") {
    producer_table t;
    REQUIRE(t.check_and_reserve(1, 0, 0, 4, 1).v == v::accept);
    REQUIRE(t.check_and_reserve(1, 0, 5, 9, 1).v == v::accept); // first not complete yet
    CHECK(t.check_and_reserve(1, 0, 0, 4, 1).v == v::duplicate_pending);
    t.complete(1, 0, 0, 0, 4);
    CHECK(t.check_and_reserve(1, 0, 0, 4, 1).v == v::duplicate);
}

TEST_CASE("producer_table: an aborted reservation lets the retry in") {
    producer_table t;
    REQUIRE(t.check_and_reserve(1, 0, 0, 4, 1).v == v::accept);
    t.complete(1, 0, 0, 0, 4);
    REQUIRE(t.check_and_reserve(1, 0, 5, 9, 1).v == v::accept);
    t.abort(1, 0, 5);
    CHECK(t.check_and_reserve(1, 0, 5, 9, 1).v == v::accept);
}

TEST_CASE("producer_table: epochs fence old producers and a bumped epoch restarts at 0") {
    producer_table t;
    REQUIRE(t.check_and_reserve(1, 3, 0, 0, 1).v == v::accept);
    t.complete(1, 3, 0, 0, 0);
    CHECK(t.check_and_reserve(1, 2, 1, 1, 1).v == v::stale_epoch);
    CHECK(t.check_and_reserve(1, 4, 5, 5, 1).v == v::out_of_order);
    CHECK(t.check_and_reserve(1, 4, 0, 0, 1).v == v::accept);
    // The old epoch is now stale too.
    CHECK(t.check_and_reserve(1, 3, 1, 1, 1).v == v::stale_epoch);
}

TEST_CASE("producer_table: sequences wrap at INT32_MAX") {
    CHECK(producer_table::next_seq(2147483647, 1) == 0);
    CHECK(producer_table::next_seq(2147483646, 3) == 1);
    producer_table t;
    REQUIRE(t.check_and_reserve(1, 0, 2147483640, 2147483647, 1).v == v::accept);
    t.complete(1, 0, 2147483640, 0, 7);
    CHECK(t.check_and_reserve(1, 0, 0, 3, 1).v == v::accept);
}

TEST_CASE("producer_table: only the last five batches are remembered") {
    producer_table t;
    for (int i = 0; i < 7; ++i) {
        REQUIRE(t.check_and_reserve(1, 0, i, i, 1).v == v::accept);
        t.complete(1, 0, i, i, i);
    }
    CHECK(t.check_and_reserve(1, 0, 6, 6, 1).v == v::duplicate);
    CHECK(t.check_and_reserve(1, 0, 2, 2, 1).v == v::duplicate);
    // Older than the window: neither a known duplicate nor next in line.
    CHECK(t.check_and_reserve(1, 0, 1, 1, 1).v == v::out_of_order);
}

TEST_CASE("producer_table: the table is bounded; idle producers are evicted first") {
    producer_table t(3);
    for (int pid = 0; pid < 3; ++pid) {
        REQUIRE(t.check_and_reserve(pid, 0, 0, 0, static_cast<std::uint64_t>(10 + pid)).v == v::accept);
        t.complete(pid, 0, 0, pid, pid);
    }
    REQUIRE(t.check_and_reserve(99, 0, 0, 0, 20).v == v::accept);
    CHECK(t.size() == 3);
    // Producer 0 (least recently used) is gone: its next batch is accepted as a new producer's.
    CHECK(t.check_and_reserve(0, 0, 0, 0, 21).v == v::accept);
    CHECK(t.check_and_reserve(2, 0, 0, 0, 21).v == v::duplicate);
}

TEST_CASE("producer_table: replaying the log's batches recognises a retry after a restart") {
    producer_table t;
    // The log held: producer 5 epoch 0, seqs 0-9 at 100-109, 10-19 at 110-119; producer 6 epoch
    // 2 then 3 (a bump restarted its sequence).
    t.replay(5, 0, 0, 9, 100, 109, 1);
    t.replay(5, 0, 10, 19, 110, 119, 1);
    t.replay(6, 2, 40, 49, 120, 129, 1);
    t.replay(6, 3, 0, 4, 130, 134, 1);
    t.replay(6, 2, 50, 59, 135, 144, 1); // an older epoch seen later is ignored

    auto dup = t.check_and_reserve(5, 0, 10, 19, 2);
    CHECK(dup.v == v::duplicate);
    CHECK(dup.base_offset == 110);
    CHECK(t.check_and_reserve(5, 0, 20, 29, 2).v == v::accept);
    CHECK(t.check_and_reserve(5, 0, 35, 39, 2).v == v::out_of_order);
    CHECK(t.check_and_reserve(6, 2, 60, 60, 2).v == v::stale_epoch);
    auto dup6 = t.check_and_reserve(6, 3, 0, 4, 2);
    CHECK(dup6.v == v::duplicate);
    CHECK(dup6.base_offset == 130);
    CHECK(t.check_and_reserve(6, 3, 5, 5, 2).v == v::accept);
}
