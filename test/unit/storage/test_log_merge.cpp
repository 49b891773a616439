// Segment merging (log_merge.cpp, docs/lifecycle.md "Merging"): small segments become few,
// every offset is read exactly once before, during and after, a merge stopped at any step is
// finished by the next owner, failed requests are retried, and fsck stays clean.
#include "log_audit.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/fsck.hpp>
#include <skiff/storage/manifest_format.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::open_log;
using skiff::test::read_all;
using skiff::test::test_ns;

namespace {

const partition_id pid("events", 1);

// Segments of 10 records are about 250 bytes: a 1500-byte target merges runs of 3 to 6.
log_config merge_config() {
    auto c = skiff::test::fast_log_config();
    c.lifecycle_tick = 5ms;
    c.delete_delay = 20ms;
    c.manifest_every_segments = 1000;
    c.manifest_interval = 1h;
    c.merge_target_bytes = 1500;
    c.merge_age = 1h; // the fixed test clock never ages a segment: merges by size only
    return c;
}

std::string batch_at(int first, int n) {
    std::vector<record> recs;
    for (int i = 0; i < n; ++i) recs.emplace_back(fmt::format("k{}", (first + i) % 7), fmt::format("v{}", first + i));
    batch_options o;
    o.base_timestamp = 1'700'000'000'000 + first;
    return build_batch(0, recs, o);
}

task<void> fill(partition_log* log, int segments, int first = 0) {
    for (int s = 0; s < segments; ++s) {
        auto b = batch_at(first + s * 10, 10);
        auto r = co_await log->append(std::span<const char>(b.data(), b.size()), ack_mode::durable);
        REQUIRE(r.has_value());
    }
}

std::size_t count_kfs(const memory_bucket& b) {
    std::size_t n = 0;
    for (auto& [k, _] : b.objects) n += k.size() > 4 && k.compare(k.size() - 4, 4, ".kfs") == 0;
    return n;
}

std::vector<std::string> values(const std::map<std::int64_t, std::string>& m) {
    std::vector<std::string> out;
    for (auto& [_, v] : m) out.push_back(v);
    return out;
}

std::vector<std::string> expected(int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) out.push_back(fmt::format("v{}", i));
    return out;
}

// How many segments the newest stored manifest lists.
std::size_t newest_manifest_segments(const memory_bucket& b) {
    const auto prefix = manifest_prefix(test_ns, pid);
    const std::string* newest = nullptr;
    for (auto& [k, v] : b.objects) {
        if (k.rfind(prefix, 0) == 0) newest = &v;
    }
    if (!newest) return 0;
    auto m = decode_manifest(*newest);
    return m ? m->segments.size() : 0;
}

// Waits (on the reactor's clock) until the bucket holds at most `kfs` segments.
task<bool> settle(const memory_bucket& b, std::size_t kfs) {
    for (int i = 0; i < 400; ++i) {
        if (count_kfs(b) <= kfs) co_return true;
        (void)co_await runtime::sleep(5ms);
    }
    co_return false;
}

task<fsck_report> check(std::shared_ptr<memory_bucket> b) {
    memory_store store(b);
    auto r = co_await fsck(store, test_ns, false);
    REQUIRE(r.has_value());
    co_return std::move(*r);
}

// What a merge's first PUT leaves: the sources `bases` merged by hand into the first one's
// key, the others untouched.
void merge_by_hand(memory_bucket& b, const std::vector<std::int64_t>& bases, bool with_index) {
    segment_builder sb(bases.front());
    std::vector<std::string> keep; // the sources' bytes outlive the views into them
    for (auto base : bases) keep.push_back(b.objects.at(segment_key(test_ns, pid, base)));
    for (const auto& bytes : keep) {
        auto seg = decode_segment(bytes);
        REQUIRE(seg.has_value());
        for (auto& batch : seg->batches) {
            REQUIRE(sb.skip_to(batch.base_offset).has_value());
            REQUIRE(sb.append(batch.bytes).has_value());
        }
    }
    auto built = std::move(sb).finish(1700000000000);
    b.objects[segment_key(test_ns, pid, bases.front())] = built.kfs;
    if (with_index) b.objects[index_key(test_ns, pid, bases.front())] = built.index;
}

} // namespace

TEST_CASE("merge: small segments become few, each offset read once, the first source's bytes kept as a prefix",
          "[storage][merge]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, merge_config());
        co_await fill(log.get(), 40);
        REQUIRE(count_kfs(*b) == 40);
        const std::string first_before = b->objects.at(segment_key(test_ns, pid, 0));
        // Nothing merges before the first manifest: a merge stopped before any existed would
        // be found by no one.
        (void)co_await runtime::sleep(50ms);
        CHECK(count_kfs(*b) == 40);
        REQUIRE(co_await log->checkpoint());

        // A reader going over the whole log again and again while the merges happen.
        bool stop = false;
        int rounds = 0;
        bool all_equal = true;
        gate readers("readers");
        auto reader = [](partition_log* l, bool* stop, int* rounds, bool* all_equal) -> task<void> {
            while (!*stop) {
                auto got = values(co_await read_all(l));
                if (got != expected(0, 400)) *all_equal = false;
                ++*rounds;
                (void)co_await runtime::sleep(1ms);
            }
        };
        REQUIRE(readers.spawn(reader(log.get(), &stop, &rounds, &all_equal)));
        const bool settled = co_await settle(*b, 12);
        stop = true;
        co_await readers.close();
        CHECK(settled);
        CHECK(rounds > 3);
        CHECK(all_equal);
        CHECK(count_kfs(*b) <= 12);
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(0, 400));
        }
        // Prefix-stable: the merged object at key 0 starts with the old one's batches.
        const std::string& first_after = b->objects.at(segment_key(test_ns, pid, 0));
        REQUIRE(first_after.size() > first_before.size());
        CHECK(first_after.compare(segment_header_size, first_before.size() - segment_header_size - segment_footer_size,
                                  first_before, segment_header_size,
                                  first_before.size() - segment_header_size - segment_footer_size) == 0);
        auto seg = decode_segment(first_after, true);
        REQUIRE(seg.has_value());
        CHECK(seg->base_offset() == 0);
        CHECK(seg->batches.size() > 1);
        co_await log->close();

        auto report = co_await check(b);
        INFO(format_fsck_report(report, "mem"));
        CHECK(report.clean());
        REQUIRE(report.partitions.size() == 1);
        CHECK(report.partitions[0].merged_away.empty());
        CHECK(report.partitions[0].overlaps.empty());

        // The next owner restores the merged log from the manifest, and appends after it.
        memory_store store2(b);
        auto log2 = co_await open_log(store2, budget, pid, merge_config());
        CHECK(log2->restored().from_manifest);
        CHECK(log2->high_watermark() == 400);
        co_await fill(log2.get(), 2, 400);
        {
            auto got = values(co_await read_all(log2.get()));
            CHECK(got == expected(0, 420));
        }
        co_await log2->close();
    };
    run_task(t(bucket));
}

TEST_CASE("merge: a merge stopped after its PUTs (no manifest yet) is finished by the next owner",
          "[storage][merge]") {
    for (bool with_index : {true, false}) {
        DYNAMIC_SECTION((with_index ? "both objects stored" : "only the .kfs stored")) {
            auto bucket = std::make_shared<memory_bucket>();
            auto t = [](std::shared_ptr<memory_bucket> b, bool with_index) -> task<void> {
                io_budget budget(8, nullptr);
                auto cfg = merge_config();
                cfg.merge_target_bytes = 0;
                {
                    memory_store store(b);
                    auto log = co_await open_log(store, budget, pid, cfg);
                    co_await fill(log.get(), 8);
                    co_await log->close(); // the manifest lists 8 segments
                }
                // The crash: segments 10, 20, 30 merged into 10's key; nothing else happened.
                merge_by_hand(*b, {10, 20, 30}, with_index);
                {
                    auto report = co_await check(b);
                    INFO(format_fsck_report(report, "mem"));
                    CHECK(report.clean());
                    CHECK(report.partitions.at(0).merged_away == std::vector<std::int64_t>{20, 30});
                }
                memory_store store(b);
                auto log = co_await open_log(store, budget, pid, cfg);
                CHECK(log->restored().from_manifest);
                {
                    auto got = values(co_await read_all(log.get()));
                    CHECK(got == expected(0, 80));
                }
                CHECK(co_await settle(*b, 6)); // the check after restore finished the merge
                CHECK(b->objects.count(index_key(test_ns, pid, 20)) == 0);
                {
                    auto got = values(co_await read_all(log.get()));
                    CHECK(got == expected(0, 80));
                }
                co_await log->close();
                auto report = co_await check(b);
                INFO(format_fsck_report(report, "mem"));
                CHECK(report.clean());
                CHECK(report.partitions.at(0).merged_away.empty());
                memory_store store2(b);
                auto log2 = co_await open_log(store2, budget, pid, cfg);
                CHECK(log2->restored().segments == 6);
                auto got = values(co_await read_all(log2.get()));
                CHECK(got == expected(0, 80));
                co_await log2->close();
            };
            run_task(t(bucket, with_index));
        }
    }
}

TEST_CASE("merge: sources a restart kept from their delete are deleted by the next owner, never served twice",
          "[storage][merge]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto cfg = merge_config();
            cfg.delete_delay = 1h; // the process stops before the sources are deleted
            auto log = co_await open_log(store, budget, pid, cfg);
            co_await fill(log.get(), 20);
            REQUIRE(co_await log->checkpoint());
            for (int i = 0; i < 200 && newest_manifest_segments(*b) > 8; ++i) (void)co_await runtime::sleep(5ms);
            CHECK(newest_manifest_segments(*b) <= 8);
            co_await log->close();
        }
        CHECK(count_kfs(*b) == 20); // merged, but nothing deleted
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, merge_config());
        CHECK(log->restored().from_manifest);
        CHECK(log->restored().segments < 20); // the manifest knows the merged log
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(0, 200));
        }
        CHECK(co_await settle(*b, log->restored().segments));
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(0, 200));
        }
        co_await log->close();
        auto report = co_await check(b);
        INFO(format_fsck_report(report, "mem"));
        CHECK(report.clean());
    };
    run_task(t(bucket));
}

TEST_CASE("merge: failed GETs and PUTs are retried; nothing is lost or served twice", "[storage][merge]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto cfg = merge_config();
            cfg.merge_target_bytes = 0;
            auto log = co_await open_log(store, budget, pid, cfg);
            co_await fill(log.get(), 30);
            co_await log->close();
        }
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, merge_config());
        // Restored segments are not in memory: the merge GETs them. Some GETs and PUTs fail.
        store.add_fault(mem_fault_rule("get", ".kfs", mem_fault::fail_reset, 3));
        store.add_fault(mem_fault_rule("put", ".kfs", mem_fault::fail_transient, 2));
        store.add_fault(mem_fault_rule("put", ".index", mem_fault::lost_answer, 2));
        CHECK(co_await settle(*b, 10));
        {
            auto got = values(co_await read_all(log.get()));
            CHECK(got == expected(0, 300));
        }
        CHECK(store.stats().faults >= 7);
        co_await log->close();
        auto report = co_await check(b);
        INFO(format_fsck_report(report, "mem"));
        CHECK(report.clean());
        memory_store store2(b);
        auto log2 = co_await open_log(store2, budget, pid, merge_config());
        auto got = values(co_await read_all(log2.get()));
        CHECK(got == expected(0, 300));
        co_await log2->close();
    };
    run_task(t(bucket));
}

TEST_CASE("fsck: a later segment that is not a byte copy of the earlier one it overlaps is a problem",
          "[storage][merge][fsck]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(b);
            auto cfg = merge_config();
            cfg.merge_target_bytes = 0;
            auto log = co_await open_log(store, budget, pid, cfg);
            co_await fill(log.get(), 4);
            co_await log->close();
        }
        merge_by_hand(*b, {0, 10, 20}, true);
        // Segment 10 now holds other records under the same offsets.
        segment_builder sb(10);
        auto other = batch_at(1000, 10);
        REQUIRE(sb.append(std::span<const char>(other.data(), other.size())).has_value());
        auto built = std::move(sb).finish(1700000000000);
        b->objects[segment_key(test_ns, pid, 10)] = built.kfs;
        b->objects[index_key(test_ns, pid, 10)] = built.index;
        auto report = co_await check(b);
        INFO(format_fsck_report(report, "mem"));
        CHECK_FALSE(report.clean());
        CHECK(report.partitions.at(0).overlaps.size() == 1);
        CHECK(report.partitions.at(0).merged_away == std::vector<std::int64_t>{20});
    };
    run_task(t(bucket));
}

TEST_CASE("merge: a merged segment larger than the cache is read in windows, not to its end on every fetch",
          "[storage][merge]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        auto cfg = merge_config();
        cfg.merge_target_bytes = 2 << 20;
        cfg.cache_bytes = 256 << 10;
        std::uint64_t written = 0;
        {
            memory_store store(b);
            auto log = co_await open_log(store, budget, pid, cfg);
            // 60 segments of 20 records of 1 KiB: about 1.2 MiB, merged into one or two.
            for (int s = 0; s < 60; ++s) {
                std::vector<record> recs;
                for (int i = 0; i < 20; ++i) recs.emplace_back(std::string("k"), fmt::format("{:04}{}", s * 20 + i, std::string(1020, 'x')));
                auto batch = build_batch(0, recs);
                auto r = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
                REQUIRE(r.has_value());
                written += batch.size();
            }
            REQUIRE(co_await log->checkpoint());
            CHECK(co_await settle(*b, 3));
            co_await log->close();
        }
        REQUIRE(count_kfs(*b) <= 3);
        memory_store store(b);
        auto log = co_await open_log(store, budget, pid, cfg);
        const auto before = store.stats().bytes_read;
        // A consumer fetching 64 KiB at a time from the start.
        std::int64_t off = 0;
        int records = 0;
        while (off < log->high_watermark()) {
            auto r = co_await log->read(off, 64 << 10);
            REQUIRE(r.has_value());
            auto batches = split_batches(std::span<const char>(r->records.data(), r->records.size()));
            REQUIRE(batches.has_value());
            REQUIRE_FALSE(batches->empty());
            for (auto& batch : *batches) {
                auto recs = parse_records(batch);
                REQUIRE(recs.has_value());
                for (auto& rec : *recs) {
                    CHECK(batch.base_offset + rec.offset_delta == records);
                    CHECK(rec.value->substr(0, 4) == fmt::format("{:04}", records));
                    ++records;
                }
                off = batch.next_offset();
            }
        }
        CHECK(records == 1200);
        const auto read = store.stats().bytes_read - before;
        for (auto& [k, n] : store.stats().gets_by_key) UNSCOPED_INFO(k << ": " << n << " GETs");
        // Each byte about once (windows overlap by at most a batch, plus indexes and footers);
        // reading to the end of the object on every fetch would be about 10 times the data.
        CHECK(read < written * 5 / 4);
        CHECK(read >= written);
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("merge: a broker whose owner check fails (a deposed owner) merges, deletes and stores nothing until it passes",
          "[storage][merge][fence]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        memory_store store(b);
        auto cfg = merge_config();
        auto log = co_await open_log(store, budget, pid, cfg);
        co_await fill(log.get(), 40);
        REQUIRE(co_await log->checkpoint());
        bool owner = false;
        int asked = 0;
        log->set_owner_check([&owner, &asked] {
            ++asked;
            return owner;
        });
        const auto objects_before = b->objects;
        // DeleteRecords moves the start here, but without a stored manifest nothing is deleted.
        auto dr = co_await log->delete_records(100);
        CHECK_FALSE(dr.has_value());
        CHECK(log->log_start_offset() == 100);
        (void)co_await runtime::sleep(100ms);
        CHECK(asked > 0);
        const bool unchanged = b->objects == objects_before;
        CHECK(unchanged);
        CHECK(count_kfs(*b) == 40);

        // The lease is proven again: the backlog merges and the retired segments go.
        owner = true;
        const bool settled = co_await settle(*b, 10);
        CHECK(settled);
        CHECK_FALSE(b->objects.count(segment_key(test_ns, pid, 0)));
        auto got = values(co_await read_all(log.get()));
        CHECK(got == expected(100, 400));
        co_await log->close();
        auto report = co_await check(b);
        INFO(format_fsck_report(report, "mem"));
        CHECK(report.clean());
    };
    run_task(t(bucket));
}
