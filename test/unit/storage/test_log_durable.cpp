// The partition log's interface for the broker: appending batches the caller already parsed,
// and being told (instead of polling) when an offset becomes durable.
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/runtime/timer.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::batch_of;
using skiff::test::read_all;
using skiff::test::open_log;

namespace {

const partition_id pid("durable", 0);

log_config test_config() {
    log_config c = skiff::test::fast_log_config();
    c.close_timeout = 200ms;
    return c;
}

// What on_durable reported: how many calls, and the last answer.
struct durable_probe {
    int calls = 0;
    bool durable = false;
    std::function<void(bool)> fn() {
        return [this](bool d) {
            ++calls;
            durable = d;
        };
    }
};

} // namespace

TEST_CASE("append takes batches the caller parsed: offsets, durability and reads as for bytes",
          "[storage][log][durable]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        std::string set = batch_of(0, 3) + batch_of(3, 2);
        auto parsed = split_batches(std::span<const char>(set.data(), set.size()));
        REQUIRE(parsed.has_value());
        REQUIRE(parsed->size() == 2);
        const std::span<const batch_view> views(*parsed);
        auto r = co_await log->append(views, ack_mode::durable);
        REQUIRE(r.has_value());
        CHECK(r->base_offset == 0);
        CHECK(r->last_offset == 4);
        CHECK(log->high_watermark() == 5);
        auto all = co_await read_all(log.get());
        REQUIRE(all.size() == 5);
        CHECK(all[0] == "v0");
        CHECK(all[4] == "v4");

        const std::span<const batch_view> none;
        auto empty = co_await log->append(none, ack_mode::durable);
        REQUIRE_FALSE(empty.has_value());
        CHECK(empty.error().code == append_errc::corrupt_message);
        CHECK(log->next_offset() == 5);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("on_durable fires once the commit passes the offset, not before", "[storage][log][durable]") {
    auto t = []() -> task<void> {
        memory_store store;
        store.set_latency(20ms);
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        std::string set = batch_of(0, 4);
        auto r = co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::leader);
        REQUIRE(r.has_value());
        durable_probe last, beyond;
        log->on_durable(r->last_offset, last.fn());
        log->on_durable(r->last_offset + 1, beyond.fn()); // not written yet
        CHECK(last.calls == 0);
        co_await log->flush();
        CHECK(log->high_watermark() == 4);
        CHECK(last.calls == 1);
        CHECK(last.durable);
        CHECK(beyond.calls == 0);
        co_await log->close();
        // The log closed before offset 4 became durable.
        CHECK(beyond.calls == 1);
        CHECK_FALSE(beyond.durable);
        CHECK(last.calls == 1);
    };
    run_task(t());
}

TEST_CASE("on_durable answers at once for an offset already durable, and after close",
          "[storage][log][durable]") {
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        std::string set = batch_of(0, 2);
        auto r = co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::durable);
        REQUIRE(r.has_value());
        durable_probe done;
        log->on_durable(1, done.fn());
        CHECK(done.calls == 1); // before on_durable returned
        CHECK(done.durable);
        co_await log->close();
        durable_probe late, old;
        log->on_durable(2, late.fn());
        CHECK(late.calls == 1);
        CHECK_FALSE(late.durable);
        log->on_durable(0, old.fn());
        CHECK(old.calls == 1);
        CHECK(old.durable);
    };
    run_task(t());
}

TEST_CASE("on_durable reports false when the log closes with the data still failing to upload",
          "[storage][log][durable][faults]") {
    auto t = []() -> task<void> {
        memory_store store;
        store.add_fault(mem_fault_rule("put", "", mem_fault::fail_transient, -1));
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        std::string set = batch_of(0, 2);
        auto r = co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::leader);
        REQUIRE(r.has_value());
        durable_probe p;
        log->on_durable(r->last_offset, p.fn());
        (void)co_await sleep(20ms); // several failed attempts
        CHECK(p.calls == 0);
        co_await log->close();
        CHECK(p.calls == 1);
        CHECK_FALSE(p.durable);
        CHECK(log->high_watermark() == 0);
    };
    run_task(t());
}

TEST_CASE("on_durable reports false when the log is destroyed without close", "[storage][log][durable]") {
    durable_probe p;
    auto t = [](durable_probe* probe) -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, test_config());
        log->on_durable(10, probe->fn());
        log.reset();
    };
    run_task(t(&p));
    CHECK(p.calls == 1);
    CHECK_FALSE(p.durable);
}
