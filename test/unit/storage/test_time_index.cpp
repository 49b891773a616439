// The .kfst time-index sidecar as the log writes it (docs/format.md, "Time index"): a flush
// stores it beside the pair in the same round trip without waiting for it; its failure never
// holds back an acknowledgement; restore, retention, merge, compaction and fsck keep it
// consistent with its segment.
#include "../metrics/metric_probe.hpp"
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/fsck.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/local_store.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::counter_value;
using skiff::test::open_log;
using skiff::test::test_ns;

namespace {

const partition_id pid("clicks", 2);

bool ends_with(const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::size_t count_suffix(const memory_bucket& b, std::string_view suffix) {
    std::size_t n = 0;
    for (auto& [k, _] : b.objects) n += ends_with(k, suffix);
    return n;
}

// One batch of `n` records, first timestamp `ts`, the others 1 ms apart.
std::string batch_at(std::int64_t ts, int n, int key_mod = 1000) {
    std::vector<record> recs;
    for (int i = 0; i < n; ++i) recs.emplace_back(fmt::format("k{}", i % key_mod), fmt::format("v{}", i), std::vector<record_header>{}, i);
    batch_options o;
    o.base_timestamp = ts;
    return build_batch(0, recs, o);
}

task<bool> append_one(partition_log* log, std::string set) {
    auto r = co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::durable);
    co_return r.has_value();
}

// Every .kfst names a .kfs and describes it (its batches as decoded); "" when all do.
std::string sidecar_problems(const memory_bucket& b) {
    std::string out;
    for (auto& [k, v] : b.objects) {
        if (!ends_with(k, ".kfst")) continue;
        const std::string kfs_key = k.substr(0, k.size() - 1);
        auto it = b.objects.find(kfs_key);
        if (it == b.objects.end()) {
            out += k + ": no .kfs\n";
            continue;
        }
        auto seg = decode_segment(it->second);
        auto t = decode_time_index(v);
        if (!seg || !t || v.size() != time_index_size || !(*t == time_index_of(*seg))) out += k + ": wrong\n";
    }
    return out;
}

} // namespace

TEST_CASE("time index: a flush stores .kfs, .index and .kfst; the sidecar describes the segment",
          "[storage][time_index]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto cfg = skiff::test::fast_log_config();
        cfg.linger = 50ms; // the three sets share one segment
        auto log = co_await open_log(store, budget, pid, cfg);
        // Out of time order on purpose: min and max come from all batches, not the first/last.
        std::vector<task<bool>> ps;
        ps.push_back(append_one(log.get(), batch_at(5000, 3)));
        ps.push_back(append_one(log.get(), batch_at(1000, 2)));
        ps.push_back(append_one(log.get(), batch_at(9000, 4)));
        auto oks = co_await when_all(std::move(ps));
        for (bool ok : oks) CHECK(ok);
        co_await log->close();
    };
    run_task(t(bucket));
    REQUIRE(bucket->objects.count(segment_key(test_ns, pid, 0)) == 1);
    REQUIRE(bucket->objects.count(index_key(test_ns, pid, 0)) == 1);
    REQUIRE(bucket->objects.count(time_index_key(test_ns, pid, 0)) == 1);
    CHECK(count_suffix(*bucket, ".kfs") == 1);
    const auto& side = bucket->objects.at(time_index_key(test_ns, pid, 0));
    CHECK(side.size() == 40);
    auto ti = decode_time_index(side);
    REQUIRE(ti.has_value());
    CHECK(ti->min_timestamp == 1000);
    CHECK(ti->max_timestamp == 9003);
    CHECK(ti->min_offset == 0);
    CHECK(ti->max_offset == 8);
    CHECK(sidecar_problems(*bucket).empty());
}

TEST_CASE("time index: the sidecar is sent alongside the pair, not after it", "[storage][time_index]") {
    auto t = []() -> task<std::int64_t> {
        memory_store store;
        store.set_latency(5ms);
        io_budget budget(8, nullptr);
        auto cfg = skiff::test::fast_log_config();
        cfg.max_inflight_flushes = 1;
        auto log = co_await open_log(store, budget, pid, cfg);
        const bool ok = co_await append_one(log.get(), batch_at(1, 1));
        CHECK(ok);
        co_await log->close();
        co_return store.stats().max_concurrent_puts;
    };
    CHECK(run_task(t()) == 3);
}

TEST_CASE("time index: off, no sidecar is written", "[storage][time_index]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto cfg = skiff::test::fast_log_config();
        cfg.time_index = false;
        auto log = co_await open_log(store, budget, pid, cfg);
        const bool ok = co_await append_one(log.get(), batch_at(1, 1));
        CHECK(ok);
        co_await log->close();
    };
    run_task(t(bucket));
    CHECK(count_suffix(*bucket, ".kfs") == 1);
    CHECK(count_suffix(*bucket, ".kfst") == 0);
}

TEST_CASE("time index: a failing or hanging .kfst PUT still acknowledges and commits, and is counted",
          "[storage][time_index][faults]") {
    for (auto fault : {mem_fault::fail_permanent, mem_fault::fail_reset, mem_fault::hang}) {
        INFO("fault " << static_cast<int>(fault));
        auto bucket = std::make_shared<memory_bucket>();
        const auto failures0 = counter_value("skiff_store_time_index_failures_total");
        auto t = [](std::shared_ptr<memory_bucket> b, mem_fault f) -> task<std::int64_t> {
            memory_store store(b);
            store.set_latency(2ms);
            store.add_fault(mem_fault_rule("put", ".kfst", f, -1));
            io_budget budget(8, nullptr);
            auto log = co_await open_log(store, budget, pid, skiff::test::fast_log_config());
            const auto t0 = reactor::local().now();
            const bool ok = co_await append_one(log.get(), batch_at(7, 3));
            const auto took = reactor::local().now() - t0;
            CHECK(ok);
            CHECK(log->high_watermark() == 3);
            auto more = co_await append_one(log.get(), batch_at(8, 2));
            CHECK(more);
            CHECK(log->high_watermark() == 5);
            co_await log->close();
            co_return std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
        };
        const auto ack_ms = run_task(t(bucket, fault));
        // One round trip of 2 ms plus the linger; nowhere near a sidecar's retries or timeout.
        CHECK(ack_ms < 200);
        CHECK(count_suffix(*bucket, ".kfs") == 2);
        CHECK(count_suffix(*bucket, ".index") == 2);
        CHECK(count_suffix(*bucket, ".kfst") == 0);
        REQUIRE(metrics::metrics_enabled());
        CHECK(counter_value("skiff_store_time_index_failures_total") - failures0 == 2);
        // The data is whole after a restart, read without sidecars.
        auto again = [](std::shared_ptr<memory_bucket> b) -> task<std::size_t> {
            memory_store store(b);
            io_budget budget(8, nullptr);
            auto log = co_await open_log(store, budget, pid, skiff::test::fast_log_config());
            auto all = co_await skiff::test::read_all(log.get());
            co_await log->close();
            co_return all.size();
        };
        CHECK(run_task(again(bucket)) == 5);
    }
}

TEST_CASE("time index: a lost answer to the .kfst PUT is recognized as ours", "[storage][time_index][faults]") {
    auto bucket = std::make_shared<memory_bucket>();
    const auto writes0 = counter_value("skiff_store_time_index_writes_total");
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        store.add_fault(mem_fault_rule("put", ".kfst", mem_fault::lost_answer, 1));
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store, budget, pid, skiff::test::fast_log_config());
        const bool ok = co_await append_one(log.get(), batch_at(7, 3));
        CHECK(ok);
        co_await log->close();
    };
    run_task(t(bucket));
    CHECK(sidecar_problems(*bucket).empty());
    CHECK(count_suffix(*bucket, ".kfst") == 1);
    REQUIRE(metrics::metrics_enabled());
    CHECK(counter_value("skiff_store_time_index_writes_total") - writes0 == 1);
}

TEST_CASE("time index: restore ignores sidecars; one without its .kfs reserves its base", "[storage][time_index]") {
    auto bucket = std::make_shared<memory_bucket>();
    skiff::test::write_segments(*bucket, pid, 3, [](int i) { return batch_at(100 + i, 1); });
    for (int i = 0; i < 3; ++i) {
        auto seg = decode_segment(bucket->objects.at(segment_key(test_ns, pid, i)));
        REQUIRE(seg.has_value());
        bucket->objects[time_index_key(test_ns, pid, i)] = encode_time_index(time_index_of(*seg));
    }
    // A flush cut short after its sidecar landed.
    bucket->objects[time_index_key(test_ns, pid, 3)] = encode_time_index(time_index{5, 5, 3, 3});
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto cfg = skiff::test::fast_log_config();
        cfg.manifests = false;
        auto log = co_await open_log(store, budget, pid, cfg);
        CHECK(log->restored().segments == 3);
        CHECK(log->restored().orphan_kfs == 0);
        CHECK(log->restored().orphan_index == 0);
        CHECK(log->restored().corrupt == 0);
        CHECK(log->next_offset() == 4); // never a new segment under the stale sidecar
        const bool ok = co_await append_one(log.get(), batch_at(7, 1));
        CHECK(ok);
        co_await log->close();
    };
    run_task(t(bucket));
    CHECK(bucket->objects.count(segment_key(test_ns, pid, 3)) == 0);
    CHECK(bucket->objects.count(segment_key(test_ns, pid, 4)) == 1);
    CHECK(bucket->objects.count(time_index_key(test_ns, pid, 4)) == 1);
}

TEST_CASE("time index: DeleteRecords deletes the sidecars with their segments", "[storage][time_index][lifecycle]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto cfg = skiff::test::fast_log_config();
        cfg.lifecycle_tick = 5ms;
        cfg.delete_delay = 10ms;
        auto log = co_await open_log(store, budget, pid, cfg);
        for (int i = 0; i < 4; ++i) {
            const bool ok = co_await append_one(log.get(), batch_at(10 * i, 2));
            CHECK(ok);
        }
        REQUIRE(count_suffix(*b, ".kfst") == 4);
        auto moved = co_await log->delete_records(6);
        REQUIRE(moved.has_value());
        for (int i = 0; i < 200 && count_suffix(*b, ".kfst") > 1; ++i) (void)co_await runtime::sleep(5ms);
        co_await log->close();
    };
    run_task(t(bucket));
    CHECK(count_suffix(*bucket, ".kfs") == 1);
    CHECK(count_suffix(*bucket, ".kfst") == 1);
    CHECK(bucket->objects.count(time_index_key(test_ns, pid, 6)) == 1);
    CHECK(sidecar_problems(*bucket).empty());
}

TEST_CASE("time index: a merge rewrites the first source's sidecar and deletes the others'",
          "[storage][time_index][merge]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto cfg = skiff::test::fast_log_config();
        cfg.lifecycle_tick = 5ms;
        cfg.delete_delay = 10ms;
        cfg.manifest_every_segments = 1000;
        cfg.manifest_interval = 1h;
        cfg.merge_target_bytes = 1500;
        cfg.merge_age = 1h;
        auto log = co_await open_log(store, budget, pid, cfg);
        for (int i = 0; i < 12; ++i) {
            const bool ok = co_await append_one(log.get(), batch_at(1000 * (12 - i), 10));
            CHECK(ok);
        }
        REQUIRE(co_await log->checkpoint());
        for (int i = 0; i < 400 && count_suffix(*b, ".kfs") > 4; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(count_suffix(*b, ".kfs") <= 4);
        co_await log->close();
    };
    run_task(t(bucket));
    INFO(sidecar_problems(*bucket));
    CHECK(sidecar_problems(*bucket).empty());
    CHECK(count_suffix(*bucket, ".kfst") == count_suffix(*bucket, ".kfs"));
    // The merged first segment covers the later, older batches too.
    auto ti = decode_time_index(bucket->objects.at(time_index_key(test_ns, pid, 0)));
    REQUIRE(ti.has_value());
    CHECK(ti->max_timestamp == 12009);
    CHECK(ti->min_timestamp < 12000);
    CHECK(ti->max_offset > 9);
}

TEST_CASE("time index: compaction replaces the sidecar of each rewritten segment", "[storage][time_index][compaction]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto cfg = skiff::test::fast_log_config();
        cfg.lifecycle_tick = 5ms;
        cfg.delete_delay = 10ms;
        cfg.manifest_every_segments = 1000;
        cfg.manifest_interval = 1h;
        cfg.compact = true;
        cfg.compaction_interval = 0ms;
        cfg.merge_target_bytes = 4000;
        cfg.merge_age = 1h;
        auto log = co_await open_log(store, budget, pid, cfg);
        // Every segment rewrites the same 3 keys: compaction keeps the newest of each.
        for (int i = 0; i < 8; ++i) {
            const bool ok = co_await append_one(log.get(), batch_at(100 * i, 6, 3));
            CHECK(ok);
        }
        REQUIRE(co_await log->checkpoint());
        for (int i = 0; i < 400 && count_suffix(*b, ".kfs") > 2; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(count_suffix(*b, ".kfs") <= 2);
        co_await log->close();
    };
    run_task(t(bucket));
    INFO(sidecar_problems(*bucket));
    CHECK(sidecar_problems(*bucket).empty());
    CHECK(count_suffix(*bucket, ".kfst") == count_suffix(*bucket, ".kfs"));
    // The compacted first segment kept only the newest versions in its range.
    auto seg = decode_segment(bucket->objects.at(segment_key(test_ns, pid, 0)));
    REQUIRE(seg.has_value());
    auto ti = decode_time_index(bucket->objects.at(time_index_key(test_ns, pid, 0)));
    REQUIRE(ti.has_value());
    CHECK(*ti == time_index_of(*seg));
}

TEST_CASE("time index: fsck checks sidecars, is quiet about good ones, repairs wrong ones", "[storage][time_index][fsck]") {
    auto bucket = std::make_shared<memory_bucket>();
    skiff::test::write_segments(*bucket, pid, 3, [](int i) { return batch_at(100 + i, 1); });
    for (int i = 0; i < 3; ++i) {
        auto seg = decode_segment(bucket->objects.at(segment_key(test_ns, pid, i)));
        REQUIRE(seg.has_value());
        bucket->objects[time_index_key(test_ns, pid, i)] = encode_time_index(time_index_of(*seg));
    }
    auto check = [](std::shared_ptr<memory_bucket> b, bool repair) -> task<fsck_report> {
        memory_store store(b);
        auto r = co_await fsck(store, test_ns, repair);
        REQUIRE(r.has_value());
        co_return std::move(*r);
    };
    {
        auto r = run_task(check(bucket, false));
        INFO(format_fsck_report(r, "mem"));
        CHECK(r.clean());
        CHECK(r.foreign_keys == 0);
        REQUIRE(r.partitions.size() == 1);
        CHECK(r.partitions[0].time_indexes == 3);
        CHECK(r.partitions[0].orphan_time_index.empty());
    }
    // A leftover sidecar is harmless; a wrong one is a problem that repair fixes.
    bucket->objects[time_index_key(test_ns, pid, 9)] = encode_time_index(time_index{1, 2, 9, 9});
    bucket->objects[time_index_key(test_ns, pid, 1)] = encode_time_index(time_index{500, 600, 1, 1});
    {
        auto r = run_task(check(bucket, false));
        INFO(format_fsck_report(r, "mem"));
        CHECK_FALSE(r.clean());
        CHECK(r.foreign_keys == 0);
        CHECK(r.partitions.at(0).orphan_time_index == std::vector<std::int64_t>{9});
        CHECK(r.partitions.at(0).bad_time_index.size() == 1);
    }
    {
        auto r = run_task(check(bucket, true));
        CHECK(r.partitions.at(0).repaired_time_index == std::vector<std::int64_t>{1});
    }
    auto r = run_task(check(bucket, false));
    INFO(format_fsck_report(r, "mem"));
    CHECK(r.clean());
    CHECK(r.partitions.at(0).orphan_time_index == std::vector<std::int64_t>{9});
}

TEST_CASE("time index: the local store keeps the sidecar beside its segment", "[storage][time_index][local_store]") {
    std::string tmpl = (std::filesystem::temp_directory_path() / "skiff-kfst-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    const std::string root = tmpl + "/root";
    auto t = [](std::string r) -> task<void> {
        auto store = local_store::create(r);
        REQUIRE(store.has_value());
        io_budget budget(8, nullptr);
        auto log = co_await open_log(**store, budget, pid, skiff::test::fast_log_config());
        const bool ok = co_await append_one(log.get(), batch_at(4242, 3));
        CHECK(ok);
        co_await log->close();
    };
    run_task(t(root));
    const auto path = std::filesystem::path(root) / time_index_key(test_ns, pid, 0);
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto ti = decode_time_index(bytes);
    REQUIRE(ti.has_value());
    CHECK(*ti == time_index{4242, 4244, 0, 2});
    std::filesystem::remove_all(tmpl);
}
