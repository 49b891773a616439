// The storage engine's metrics and traces: counters move as documented (docs/observability.md,
// "Storage engine"), the flush trace has its spans, a durable append names its flush, and
// metrics switched off leave every series untouched.
#include "../metrics/metric_probe.hpp"
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/metrics/registry.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::batch_of;
using skiff::test::counter_value;
using skiff::test::find_series;
using skiff::test::gauge_value;
using skiff::test::histogram_count;
using skiff::test::open_log;

namespace {


task<result<append_result, append_error>> append_durable(partition_log* log, std::string set) {
    co_return co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::durable);
}

// The values the tests compare, read in one place.
struct probe {
    std::uint64_t flushes = counter_value("skiff_flushes_total");
    std::uint64_t flush_records = counter_value("skiff_flush_records_total");
    std::uint64_t flush_kfs_bytes = counter_value("skiff_flush_bytes_total", {{"kind", "kfs"}});
    std::uint64_t flush_index_bytes = counter_value("skiff_flush_bytes_total", {{"kind", "index"}});
    std::uint64_t flush_hist = histogram_count("skiff_flush_duration_seconds");
    std::uint64_t flush_size_hist = histogram_count("skiff_flush_size_bytes");
    std::uint64_t put_kfs = counter_value("skiff_store_requests_total", {{"op", "put"}, {"kind", "kfs"}});
    std::uint64_t put_index = counter_value("skiff_store_requests_total", {{"op", "put"}, {"kind", "index"}});
    std::uint64_t put_kfs_hist =
        histogram_count("skiff_store_request_duration_seconds", {{"op", "put"}, {"kind", "kfs"}});
    std::uint64_t put_index_hist =
        histogram_count("skiff_store_request_duration_seconds", {{"op", "put"}, {"kind", "index"}});
    std::uint64_t lists = counter_value("skiff_store_requests_total", {{"op", "list"}, {"kind", "none"}});
    std::uint64_t put_transient = counter_value("skiff_store_errors_total", {{"op", "put"}, {"class", "transient"}});
    std::uint64_t kfs_retries = counter_value("skiff_flush_upload_retries_total", {{"kind", "kfs"}});
    std::uint64_t appends = counter_value("skiff_log_appends_total");
    std::uint64_t appended_records = counter_value("skiff_log_appended_records_total");
    std::uint64_t restores = counter_value("skiff_restores_total");
    std::uint64_t orphan_kfs = counter_value("skiff_restore_orphans_total", {{"kind", "kfs"}});
    std::uint64_t orphan_index = counter_value("skiff_restore_orphans_total", {{"kind", "index"}});
    std::uint64_t repairs = counter_value("skiff_restore_repairs_total");
    std::uint64_t cache_hits = counter_value("skiff_cache_hits_total");
    std::uint64_t permits = counter_value("skiff_io_budget_acquired_total");
};

const metrics::span_record* find_span(const std::vector<metrics::span_record>& spans, std::uint64_t trace,
                                      std::string_view name, std::string_view kind = {}) {
    for (const auto& s : spans) {
        if (s.trace_id != trace || s.name != name) continue;
        if (!kind.empty()) {
            auto* a = s.attribute("kind");
            if (!a || a->str != kind) continue;
        }
        return &s;
    }
    return nullptr;
}

std::int64_t int_attr(const metrics::span_record* s, std::string_view key) {
    if (!s) return -1;
    auto* a = s->attribute(key);
    return a && a->is_int ? a->num : -1;
}

std::string str_attr(const metrics::span_record* s, std::string_view key) {
    if (!s) return "<no span>";
    auto* a = s->attribute(key);
    return a && !a->is_int ? a->str : "<none>";
}

} // namespace

TEST_CASE("an append and a flush move the flush, store, log and partition metrics", "[storage][metrics]") {
    metrics::trace_buffer::local().clear();
    const probe before;
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        const partition_id pid("metrics-topic", 7);
        auto log = co_await open_log(store, budget, pid);
        const metrics::labels part{{"topic", "metrics-topic"}, {"partition", "7"}};
        CHECK(find_series("skiff_partition_high_watermark", part).has_value());

        auto r = co_await append_durable(log.get(), batch_of(0, 5));
        REQUIRE(r.has_value());
        CHECK(r->last_offset == 4);
        CHECK(gauge_value("skiff_partition_high_watermark", part) == 5);
        CHECK(gauge_value("skiff_partition_log_start_offset", part) == 0);
        // Committed: nothing buffered or in flight for this (the only) partition of the core.
        CHECK(gauge_value("skiff_log_buffered_bytes") == 0);
        CHECK(gauge_value("skiff_log_in_flight_bytes") == 0);
        CHECK(gauge_value("skiff_flushes_in_flight") == 0);
        CHECK(gauge_value("skiff_io_budget_in_flight") == 0);
        CHECK(gauge_value("skiff_io_budget_limit") == 8);

        // The durable append names the flush that committed it; its trace has the four steps.
        REQUIRE(r->flush_span.valid());
        const auto spans = metrics::trace_buffer::local().snapshot();
        const auto* root = find_span(spans, r->flush_span.trace_id, "flush");
        REQUIRE(root != nullptr);
        CHECK(root->span_id == r->flush_span.span_id);
        CHECK(root->parent_id == 0);
        CHECK(str_attr(root, "topic") == "metrics-topic");
        CHECK(int_attr(root, "partition") == 7);
        CHECK(int_attr(root, "segment") == 0);
        CHECK(int_attr(root, "records") == 5);
        CHECK(str_attr(root, "status") == "ok");
        const auto* build = find_span(spans, root->trace_id, "build");
        const auto* put_kfs = find_span(spans, root->trace_id, "put", "kfs");
        const auto* put_index = find_span(spans, root->trace_id, "put", "index");
        const auto* commit = find_span(spans, root->trace_id, "commit");
        REQUIRE(build != nullptr);
        REQUIRE(put_kfs != nullptr);
        REQUIRE(put_index != nullptr);
        REQUIRE(commit != nullptr);
        for (const auto* s : {build, put_kfs, put_index, commit}) {
            CHECK(s->parent_id == root->span_id);
            CHECK(s->start_ns >= root->start_ns);
            CHECK(s->end_ns <= root->end_ns);
        }
        CHECK(int_attr(put_kfs, "bytes") == int_attr(root, "bytes"));
        CHECK(int_attr(put_kfs, "retries") == 0);
        CHECK(str_attr(put_kfs, "status") == "ok");
        CHECK(str_attr(put_index, "key").ends_with(".index"));
        CHECK(commit->start_ns >= put_kfs->end_ns);

        co_await log->close();
        // close() removes the partition's own series.
        CHECK_FALSE(find_series("skiff_partition_high_watermark", part).has_value());
    };
    run_task(t());
    const probe after;
    CHECK(after.flushes - before.flushes == 1);
    CHECK(after.flush_records - before.flush_records == 5);
    CHECK(after.flush_kfs_bytes > before.flush_kfs_bytes);
    CHECK(after.flush_index_bytes > before.flush_index_bytes);
    CHECK(after.flush_hist - before.flush_hist == 1);
    CHECK(after.flush_size_hist - before.flush_size_hist == 1);
    CHECK(after.put_kfs - before.put_kfs == 1);
    CHECK(after.put_index - before.put_index == 1);
    CHECK(after.put_kfs_hist - before.put_kfs_hist == 1);
    CHECK(after.put_index_hist - before.put_index_hist == 1);
    CHECK(after.lists - before.lists == 2); // the restore at open: its manifests, its segments
    CHECK(after.restores - before.restores == 1);
    CHECK(after.appends - before.appends == 1);
    CHECK(after.appended_records - before.appended_records == 5);
    CHECK(after.permits - before.permits == 4); // the two objects, the .kfst, the manifest at close
    CHECK(after.put_transient == before.put_transient);
}

TEST_CASE("a failed PUT counts an error by class, a retry, and shows in its span", "[storage][metrics]") {
    metrics::trace_buffer::local().clear();
    const probe before;
    auto t = []() -> task<void> {
        memory_store store;
        store.add_fault(mem_fault_rule("put", ".kfs", mem_fault::fail_transient, 1));
        io_budget budget(8, nullptr);
        budget.listen_to(store);
        auto log = co_await open_log(store, budget, partition_id("metrics-fail", 0));
        auto r = co_await append_durable(log.get(), batch_of(0, 3));
        REQUIRE(r.has_value());
        const auto spans = metrics::trace_buffer::local().snapshot();
        const auto* put_kfs = find_span(spans, r->flush_span.trace_id, "put", "kfs");
        CHECK(int_attr(put_kfs, "retries") == 1);
        CHECK(str_attr(put_kfs, "status") == "ok");
        // The injected SlowDown halved the budget's limit (AIMD) and the gauge follows it.
        CHECK(gauge_value("skiff_io_budget_limit") == static_cast<std::int64_t>(budget.current_limit()));
        co_await log->close();
    };
    run_task(t());
    const probe after;
    CHECK(after.put_transient - before.put_transient == 1);
    CHECK(after.kfs_retries - before.kfs_retries == 1);
    CHECK(after.put_kfs - before.put_kfs == 2); // the failed attempt and the retry
    CHECK(after.put_index - before.put_index == 1);
    CHECK(after.flushes - before.flushes == 1);
    CHECK(counter_value("skiff_io_budget_throttled_total") >= 1);
}

TEST_CASE("a restore counts segments and orphans, and the repair", "[storage][metrics]") {
    auto bucket = std::make_shared<memory_bucket>();
    const partition_id pid("metrics-restore", 1);
    // Two segments; the first lost its .index; a stray .index without its .kfs further on.
    for (std::int64_t base : {0, 5}) {
        segment_builder sb(base);
        auto b = batch_of(static_cast<int>(base), 5);
        REQUIRE(sb.append(std::span<const char>(b.data(), b.size())).has_value());
        auto built = std::move(sb).finish(1700000000000);
        bucket->objects[segment_key("default", pid, base)] = std::move(built.kfs);
        if (base != 0) bucket->objects[index_key("default", pid, base)] = std::move(built.index);
    }
    bucket->objects[index_key("default", pid, 100)] = "stray";
    metrics::trace_buffer::local().clear();
    const probe before;
    auto t = [](std::shared_ptr<memory_bucket> b, partition_id id) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, id);
        CHECK(log->restored().orphan_kfs == 1);
        CHECK(log->restored().orphan_index == 1);
        // The repair runs in the background; give it a few turns.
        for (int i = 0; i < 200 && log->restored().repaired == 0; ++i) {
            auto slept = co_await sleep(1ms);
            (void)slept;
        }
        CHECK(log->restored().repaired == 1);
        // A read of a committed-before-restart segment misses the cache, then hits it.
        auto r1 = co_await log->read(0, 1 << 20);
        REQUIRE(r1.has_value());
        auto r2 = co_await log->read(0, 1 << 20);
        REQUIRE(r2.has_value());
        co_await log->close();
    };
    run_task(t(bucket, pid));
    const probe after;
    CHECK(after.restores - before.restores == 1);
    CHECK(after.orphan_kfs - before.orphan_kfs == 1);
    CHECK(after.orphan_index - before.orphan_index == 1);
    CHECK(after.repairs - before.repairs == 1);
    CHECK(after.cache_hits - before.cache_hits >= 1);
    CHECK(counter_value("skiff_restore_segments_total") >= 2);
    CHECK(histogram_count("skiff_restore_duration_seconds") >= 1);

    const auto spans = metrics::trace_buffer::local().snapshot();
    const metrics::span_record* root = nullptr;
    for (const auto& s : spans)
        if (s.name == "restore" && s.parent_id == 0) root = &s;
    REQUIRE(root != nullptr);
    CHECK(int_attr(root, "orphan_kfs") == 1);
    CHECK(int_attr(root, "segments") == 2);
    const auto* repair = find_span(spans, root->trace_id, "repair");
    REQUIRE(repair != nullptr);
    CHECK(str_attr(repair, "status") == "ok");
    CHECK(find_span(spans, root->trace_id, "list") != nullptr);
    CHECK(find_span(spans, root->trace_id, "footer") != nullptr);
}

TEST_CASE("io_budget counts waits and shows its queue depth", "[storage][metrics]") {
    const auto waits0 = counter_value("skiff_io_budget_waits_total");
    const auto hist0 = histogram_count("skiff_io_budget_wait_duration_seconds");
    auto t = []() -> task<void> {
        io_budget budget(1, nullptr);
        auto first = co_await budget.acquire(io_budget::priority::normal, {});
        REQUIRE(first.has_value());
        CHECK(gauge_value("skiff_io_budget_in_flight") == 1);
        auto second = [](io_budget* b) -> task<void> {
            auto p = co_await b->acquire(io_budget::priority::normal, {});
            CHECK(p.has_value());
        };
        auto release = [](io_budget::permit* p) -> task<void> {
            auto slept = co_await sleep(5ms);
            (void)slept;
            // The second acquire is queued behind the first permit now.
            CHECK(gauge_value("skiff_io_budget_waiting") == 1);
            p->release();
        };
        auto waiter = second(&budget);
        auto releaser = release(&*first);
        co_await when_all(std::move(waiter), std::move(releaser));
        CHECK(gauge_value("skiff_io_budget_waiting") == 0);
        CHECK(gauge_value("skiff_io_budget_in_flight") == 0);
    };
    run_task(t());
    CHECK(counter_value("skiff_io_budget_waits_total") - waits0 == 1);
    CHECK(histogram_count("skiff_io_budget_wait_duration_seconds") - hist0 == 2);
    CHECK(gauge_value("skiff_io_budget_limit") == 0); // the budget is gone
}

TEST_CASE("metrics and tracing switched off: nothing recorded, no flush named", "[storage][metrics]") {
    metrics::trace_buffer::local().clear();
    metrics::set_metrics_enabled(false);
    metrics::set_tracing_enabled(false);
    const probe before;
    auto t = []() -> task<void> {
        memory_store store;
        io_budget budget(8, nullptr);
        const partition_id pid("metrics-off", 0);
        auto log = co_await open_log(store, budget, pid);
        CHECK_FALSE(find_series("skiff_partition_high_watermark", {{"topic", "metrics-off"}, {"partition", "0"}})
                        .has_value());
        auto r = co_await append_durable(log.get(), batch_of(0, 2));
        REQUIRE(r.has_value());
        CHECK_FALSE(r->flush_span.valid());
        CHECK(log->high_watermark() == 2);
        co_await log->close();
    };
    run_task(t());
    metrics::set_metrics_enabled(true);
    metrics::set_tracing_enabled(true);
    const probe after;
    CHECK(after.flushes == before.flushes);
    CHECK(after.put_kfs == before.put_kfs);
    CHECK(after.appends == before.appends);
    CHECK(after.permits == before.permits);
    CHECK(after.restores == before.restores);
    CHECK(metrics::trace_buffer::local().snapshot().empty());
}

TEST_CASE("two logs of one partition on a core: the second opens, the first reports", "[storage][metrics]") {
    auto t = []() -> task<void> {
        auto bucket = std::make_shared<memory_bucket>();
        memory_store store(bucket);
        io_budget budget(8, nullptr);
        const partition_id pid("metrics-twice", 0);
        auto a = co_await open_log(store, budget, pid);
        auto b = co_await open_log(store, budget, pid);
        CHECK(find_series("skiff_partition_high_watermark", {{"topic", "metrics-twice"}, {"partition", "0"}})
                  .has_value());
        co_await b->close();
        co_await a->close();
    };
    run_task(t());
}
