// walk_committed: the committed batches of a log, in order, across segments.
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/storage/log_walk.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::batch_of;

namespace {

log_config small_segments() {
    log_config c;
    c.linger = 1ms;
    c.max_age = 50ms;
    c.segment_records = 6; // several segments for a few batches
    c.close_timeout = 2s;
    c.wall_ms = [] { return std::int64_t{1700000000000}; };
    return c;
}

// Appends ten batches of three records: offsets 0..29.
task<std::unique_ptr<partition_log>> filled_log(object_store* store, io_budget* budget) {
    auto log = co_await skiff::test::open_log(*store, *budget, partition_id("walk", 1), small_segments());
    for (int i = 0; i < 10; ++i) {
        std::string set = batch_of(i * 3, 3);
        auto r = co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::durable);
        REQUIRE(r.has_value());
    }
    co_await log->flush();
    co_return log;
}

} // namespace

TEST_CASE("walk_committed visits every committed batch in order across segments", "[storage][log][walk]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto log = co_await filled_log(&store, &budget);
        REQUIRE(log->high_watermark() == 30);
        std::vector<std::int64_t> bases;
        auto all = co_await walk_committed(*log, 0, [&bases](const batch_view& b) {
            bases.push_back(b.base_offset);
            return true;
        });
        REQUIRE(all.has_value());
        CHECK(bases == std::vector<std::int64_t>{0, 3, 6, 9, 12, 15, 18, 21, 24, 27});

        // From the middle of a batch: that whole batch comes first.
        std::vector<std::int64_t> from_mid;
        auto mid = co_await walk_committed(*log, 13, [&from_mid](const batch_view& b) {
            from_mid.push_back(b.base_offset);
            return true;
        });
        REQUIRE(mid.has_value());
        CHECK(from_mid == std::vector<std::int64_t>{12, 15, 18, 21, 24, 27});

        // The visitor stops the walk.
        int seen = 0;
        auto stopped = co_await walk_committed(*log, 0, [&seen](const batch_view&) { return ++seen < 4; });
        CHECK(stopped.has_value());
        CHECK(seen == 4);

        // At the high watermark there is nothing to visit; past it the read fails.
        int none = 0;
        auto at_end = co_await walk_committed(*log, 30, [&none](const batch_view&) { return ++none > 0; });
        CHECK(at_end.has_value());
        CHECK(none == 0);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("walk_committed reports a bad start offset and a stop", "[storage][log][walk]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto log = co_await filled_log(&store, &budget);
        int visits = 0;
        auto before = co_await walk_committed(*log, -1, [&visits](const batch_view&) { return ++visits > 0; });
        REQUIRE_FALSE(before.has_value());
        CHECK(before.error().code == storage::errc::invalid_argument);
        std::stop_source src;
        src.request_stop();
        auto stopped =
            co_await walk_committed(*log, 0, [&visits](const batch_view&) { return ++visits > 0; }, src.get_token());
        REQUIRE_FALSE(stopped.has_value());
        CHECK(stopped.error().code == storage::errc::cancelled);
        CHECK(visits == 0);
        co_await log->close();
    };
    run_task(t());
}
