// Compaction: the record rules (compaction.hpp) on single batches, plain and compressed, and a
// compacted partition log (log_compact.cpp) read back before and after, across a restart and a
// failed request: the latest record of every key at its own offset, nothing else.
#include "../metrics/metric_probe.hpp"
#include "log_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/runtime/timer.hpp>
#include <skiff/storage/compaction.hpp>
#include <skiff/storage/compression.hpp>
#include <skiff/storage/fsck.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;
using skiff::test::open_log;
using skiff::test::counter_value;
using skiff::test::test_ns;

namespace {

const partition_id pid("changelog", 0);
constexpr std::int64_t t0 = 1'700'000'000'000;

record rec(std::string key, std::optional<std::string> value) { return record(std::move(key), std::move(value)); }

batch_view view_of(const std::string& bytes) {
    auto b = parse_batch(std::span<const char>(bytes.data(), bytes.size()));
    REQUIRE(b.has_value());
    return *b;
}

struct read_record {
    std::string key;
    std::optional<std::string> value;
};

std::map<std::int64_t, read_record> records_of(std::span<const char> batch_bytes) {
    std::map<std::int64_t, read_record> out;
    auto batches = split_batches(batch_bytes);
    REQUIRE(batches.has_value());
    for (auto& b : *batches) {
        auto decoded = decode_records(b, 1 << 26);
        REQUIRE(decoded.has_value());
        for (auto& r : decoded->records) {
            read_record rr;
            rr.key = r.key ? std::string(*r.key) : std::string();
            if (r.value) rr.value = std::string(*r.value);
            out[b.base_offset + r.offset_delta] = rr;
        }
    }
    return out;
}

task<std::map<std::int64_t, read_record>> read_log(partition_log* log) {
    std::map<std::int64_t, read_record> out;
    std::int64_t off = log->log_start_offset();
    while (off < log->high_watermark()) {
        auto r = co_await log->read(off, 1 << 16);
        INFO((r ? std::string() : r.error().message));
        REQUIRE(r.has_value());
        auto batches = split_batches(std::span<const char>(r->records.data(), r->records.size()));
        REQUIRE(batches.has_value());
        if (batches->empty()) break;
        for (auto& b : *batches) {
            REQUIRE(b.base_offset + b.last_offset_delta >= off);
            auto part = records_of(b.bytes);
            for (auto& [o, rr] : part) {
                REQUIRE(out.count(o) == 0); // each offset once
                out[o] = rr;
            }
            off = b.next_offset();
        }
    }
    co_return out;
}

log_config compact_config() {
    auto c = skiff::test::fast_log_config();
    c.lifecycle_tick = 5ms;
    c.delete_delay = 20ms;
    c.manifest_every_segments = 1000;
    c.manifest_interval = 1h;
    c.compact = true;
    c.compaction_interval = 0ms;
    c.merge_target_bytes = 4000;
    c.merge_age = 1h;
    c.delete_retention_ms = 1000;
    return c;
}

} // namespace

TEST_CASE("compaction rules: the latest record of each key stays, at its offset", "[storage][compaction]") {
    key_index index;
    batch_options o;
    o.base_timestamp = t0;
    auto first = build_batch(0, {rec("a", "a1"), rec("b", "b1"), rec("a", "a2"), rec("c", "c1")}, o);
    auto second = build_batch(4, {rec("b", "b2"), rec("c", std::nullopt)}, o);
    REQUIRE(index.add(view_of(first), 1 << 20).has_value());
    REQUIRE(index.add(view_of(second), 1 << 20).has_value());
    CHECK(index.keys() == 3);
    CHECK(index.latest("a") == 2);
    CHECK(index.latest("c") == 5);
    CHECK_FALSE(index.latest("zz").has_value());

    compaction_rules rules;
    rules.now_ms = t0 + 10;
    rules.delete_retention_ms = 1000;
    auto f = filter_batch(view_of(first), index, rules);
    REQUIRE(f.has_value());
    CHECK(f->fate == batch_fate::rewritten);
    CHECK(f->records_out == 1);
    auto kept = view_of(f->bytes); // parse_batch checks the new CRC
    CHECK(kept.base_offset == 0);
    CHECK(kept.last_offset_delta == 3);
    CHECK(kept.record_count == 1);
    auto recs = records_of(f->bytes);
    REQUIRE(recs.size() == 1);
    CHECK(recs.at(2).key == "a");
    CHECK(recs.at(2).value == "a2");

    // The tombstone stays within delete.retention.ms, then goes.
    auto g = filter_batch(view_of(second), index, rules);
    REQUIRE(g.has_value());
    CHECK(g->fate == batch_fate::kept);
    rules.now_ms = t0 + 5000;
    auto h = filter_batch(view_of(second), index, rules);
    REQUIRE(h.has_value());
    CHECK(h->fate == batch_fate::rewritten);
    CHECK(records_of(h->bytes).size() == 1);
    CHECK(records_of(h->bytes).count(4) == 1);
}

TEST_CASE("compaction rules: compressed batches stay compressed; emptied batches keep their producer's place",
          "[storage][compaction]") {
    key_index index;
    batch_options o;
    o.base_timestamp = t0;
    o.compress = compression_codec::zstd;
    o.producer_id = 7;
    o.producer_epoch = 1;
    o.base_sequence = 0;
    auto first = build_batch(10, {rec("k", "1"), rec("j", "1")}, o);
    o.base_sequence = 2;
    auto second = build_batch(12, {rec("k", "2"), rec("j", "2")}, o);
    o.base_sequence = 4;
    auto third = build_batch(14, {rec("k", "3"), rec("j", "3")}, o);
    for (auto* b : {&first, &second, &third}) REQUIRE(index.add(view_of(*b), 1 << 20).has_value());
    compaction_rules rules;
    rules.now_ms = t0;
    // Everything in the first two batches is superseded: the first goes, and so would the
    // second, but a producer's latest batch stays, even empty.
    auto f1 = filter_batch(view_of(first), index, rules);
    REQUIRE(f1.has_value());
    CHECK(f1->fate == batch_fate::dropped);
    auto f3 = filter_batch(view_of(third), index, rules);
    REQUIRE(f3.has_value());
    CHECK(f3->fate == batch_fate::kept);
    // A batch emptied while being its producer's latest: move the latest record elsewhere.
    key_index other;
    REQUIRE(other.add(view_of(second), 1 << 20).has_value());
    auto later = build_batch(20, {rec("k", "9"), rec("j", "9")}, batch_options{});
    REQUIRE(other.add(view_of(later), 1 << 20).has_value());
    auto f2 = filter_batch(view_of(second), other, rules);
    REQUIRE(f2.has_value());
    CHECK(f2->fate == batch_fate::emptied);
    auto empty = view_of(f2->bytes);
    CHECK(empty.record_count == 0);
    CHECK(empty.base_offset == 12);
    CHECK(empty.last_offset_delta == 1);
    CHECK(empty.producer_id == 7);
    CHECK(empty.base_sequence == 2);

    // A rewritten compressed batch is compressed with the same codec.
    key_index partial;
    REQUIRE(partial.add(view_of(first), 1 << 20).has_value());
    auto newer = build_batch(30, {rec("k", "x")}, batch_options{});
    REQUIRE(partial.add(view_of(newer), 1 << 20).has_value());
    auto f4 = filter_batch(view_of(first), partial, rules);
    REQUIRE(f4.has_value());
    CHECK(f4->fate == batch_fate::rewritten);
    auto rewritten = view_of(f4->bytes);
    CHECK(rewritten.compression() == compression_codec::zstd);
    auto recs = records_of(f4->bytes);
    REQUIRE(recs.size() == 1);
    CHECK(recs.at(11).key == "j");
}

TEST_CASE("compaction: a compacted log serves the latest value of each live key at its offset, across a restart",
          "[storage][compaction]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        memory_store store(b);
        auto cfg = compact_config();
        // The wall clock moves on, so tombstones can age past delete.retention.ms.
        auto clock = std::make_shared<std::int64_t>(t0);
        cfg.wall_ms = [clock] { return *clock; };
        auto log = co_await open_log(store, budget, pid, cfg);
        // 40 segments of 10 records over 25 keys; every 7th record a tombstone.
        // The latest record of each key among the compactable segments (all but the newest,
        // offsets below 390): the newest segment is neither compacted nor in the key map.
        std::map<std::string, std::pair<std::int64_t, std::optional<std::string>>> latest;
        std::int64_t offset = 0;
        for (int s = 0; s < 40; ++s) {
            std::vector<record> recs;
            for (int i = 0; i < 10; ++i) {
                const int n = s * 10 + i;
                std::string key = fmt::format("key-{}", (n * 7) % 25);
                std::optional<std::string> value;
                if (n % 7 != 3) value = fmt::format("v{}", n);
                if (offset + i < 390) latest[key] = {offset + i, value};
                recs.push_back(rec(key, value));
            }
            batch_options o;
            o.base_timestamp = t0;
            auto batch = build_batch(0, recs, o);
            auto r = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
            REQUIRE(r.has_value());
            offset += 10;
        }
        REQUIRE(co_await log->checkpoint());
        auto before = co_await read_log(log.get());
        CHECK(before.size() == 400);
        // Compaction runs; wait until the bucket shrank.
        auto count_kfs = [&] {
            std::size_t n = 0;
            for (auto& [k, _] : b->objects) n += k.ends_with(".kfs");
            return n;
        };
        for (int i = 0; i < 400 && count_kfs() > 5; ++i) (void)co_await runtime::sleep(5ms);
        CHECK(count_kfs() <= 5);
        auto check_latest = [&](const std::map<std::int64_t, read_record>& got, bool tombstones) {
            // Everything but the newest segment (never compacted) holds only latest records.
            std::size_t live = 0;
            for (auto& [off, rr] : got) {
                if (off >= 390) continue;
                auto it = latest.find(rr.key);
                REQUIRE(it != latest.end());
                CHECK(it->second.first == off);
                CHECK(it->second.second == rr.value);
                if (rr.value) ++live;
                else CHECK(tombstones);
            }
            for (auto& [key, lv] : latest) {
                if (lv.first >= 390) continue;
                if (lv.second || tombstones) CHECK(got.count(lv.first) == 1);
            }
            return live;
        };
        auto after = co_await read_log(log.get());
        CHECK(after.size() < 100);
        (void)check_latest(after, true);
        // Tombstones go once older than delete.retention.ms (the next pass: new segments first).
        *clock = t0 + 5000;
        {
            std::vector<record> recs{rec("key-0", "again")};
            batch_options o;
            o.base_timestamp = *clock;
            auto batch = build_batch(0, recs, o);
            auto r = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
            REQUIRE(r.has_value());
        }
        for (int i = 0; i < 100; ++i) (void)co_await runtime::sleep(5ms);
        auto final_ = co_await read_log(log.get());
        for (auto& [off, rr] : final_) {
            if (off < 390) CHECK(rr.value.has_value());
        }
        co_await log->close();
        memory_store store2(b);
        auto log2 = co_await open_log(store2, budget, pid, cfg);
        auto restored = co_await read_log(log2.get());
        CHECK(restored.size() == final_.size());
        for (auto& [off, rr] : final_) {
            REQUIRE(restored.count(off) == 1);
            CHECK(restored.at(off).value == rr.value);
        }
        co_await log2->close();
        memory_store store3(b);
        auto report = co_await fsck(store3, test_ns, false);
        REQUIRE(report.has_value());
        INFO(format_fsck_report(*report, "mem"));
        CHECK(report->clean());
    };
    run_task(t(bucket));
}

TEST_CASE("compaction: failed requests in the middle of a rewrite leave a readable log, finished later",
          "[storage][compaction]") {
    for (const char* op : {"remove", "put-kfs", "put-index"}) {
        DYNAMIC_SECTION(op) {
            auto bucket = std::make_shared<memory_bucket>();
            auto t = [](std::shared_ptr<memory_bucket> b, std::string op) -> task<void> {
                io_budget budget(8, nullptr);
                memory_store store(b);
                auto cfg = compact_config();
                cfg.compact = false;
                auto log = co_await open_log(store, budget, pid, cfg);
                for (int s = 0; s < 12; ++s) {
                    std::vector<record> recs;
                    for (int i = 0; i < 10; ++i) recs.push_back(rec(fmt::format("k{}", i % 3), fmt::format("v{}", s * 10 + i)));
                    batch_options o;
                    o.base_timestamp = t0;
                    auto batch = build_batch(0, recs, o);
                    auto r = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
                    REQUIRE(r.has_value());
                }
                REQUIRE(co_await log->checkpoint());
                if (op == "remove") store.add_fault(mem_fault_rule("remove", ".index", mem_fault::fail_transient, 2));
                if (op == "put-kfs") store.add_fault(mem_fault_rule("put", ".kfs", mem_fault::fail_reset, 2));
                if (op == "put-index") store.add_fault(mem_fault_rule("put", ".index", mem_fault::fail_reset, 2));
                log->set_compaction(true, 86400000, 0);
                // Reads stay whole while the faults hit; the rewrite finishes on a later pass.
                for (int i = 0; i < 60; ++i) {
                    auto got = co_await read_log(log.get());
                    // Segments not yet compacted hold every record; compacted ones the latest.
                    CHECK(got.count(119) == 1);
                    CHECK(got.count(118) == 1);
                    CHECK(got.count(117) == 1);
                    (void)co_await runtime::sleep(5ms);
                }
                CHECK(store.stats().faults >= 1);
                auto got = co_await read_log(log.get());
                // k0, k1, k2: the latest of each before the newest segment, plus the newest segment.
                std::size_t old = 0;
                for (auto& [off, rr] : got) old += off < 110;
                CHECK(old == 3);
                co_await log->close();
                memory_store store2(b);
                auto report = co_await fsck(store2, test_ns, false);
                REQUIRE(report.has_value());
                INFO(format_fsck_report(*report, "mem"));
                CHECK(report->clean());
            };
            run_task(t(bucket, op));
        }
    }
}

TEST_CASE("compaction: a key map smaller than the keys compacts in rounds, to the same log; producers' latest batches stay",
          "[storage][compaction]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        memory_store store(b);
        auto cfg = compact_config();
        cfg.compaction_map_bytes = 1;         // each round maps one new segment
        cfg.compaction_interval = std::chrono::hours(1); // only a cut round starts the next at once
        cfg.compaction_slots = std::make_shared<runtime::semaphore>(1, "compaction");
        cfg.merge_target_bytes = 1 << 20;     // one group: a producer's batch is never at its edge
        auto log = co_await open_log(store, budget, pid, cfg);
        const std::uint64_t passes_before = counter_value("skiff_compactions_total");
        // Segment 0: a plain record, then producer 42's only batch (key "p"); the later segments
        // overwrite "p" and 25 other keys with plain batches.
        constexpr std::int64_t producer = 42;
        {
            std::vector<record> recs{rec("first", "f")};
            batch_options o;
            o.base_timestamp = t0;
            auto batch = build_batch(0, recs, o);
            auto r = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
            REQUIRE(r.has_value());
        }
        std::map<std::string, std::pair<std::int64_t, std::string>> latest;
        std::int64_t offset = 0;
        {
            std::vector<record> recs{rec("p", "from-producer")};
            batch_options o;
            o.base_timestamp = t0;
            o.producer_id = producer;
            o.producer_epoch = 0;
            o.base_sequence = 0;
            auto batch = build_batch(0, recs, o);
            auto r = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
            REQUIRE(r.has_value());
        }
        latest["first"] = {0, "f"};
        offset = 2;
        for (int s = 0; s < 12; ++s) {
            std::vector<record> recs;
            for (int i = 0; i < 10; ++i) {
                const int n = s * 10 + i;
                std::string key = i == 0 ? std::string("p") : fmt::format("key-{}", (n * 7) % 25);
                std::string value = fmt::format("v{}", n);
                latest[key] = {offset + i, value};
                recs.push_back(rec(key, value));
            }
            batch_options o;
            o.base_timestamp = t0;
            auto batch = build_batch(0, recs, o);
            auto r = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
            REQUIRE(r.has_value());
            offset += 10;
        }
        // The newest segment is never compacted: one more so the last of those is.
        {
            std::vector<record> recs{rec("tail", "t")};
            batch_options o;
            o.base_timestamp = t0;
            auto batch = build_batch(0, recs, o);
            auto r = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
            REQUIRE(r.has_value());
        }
        REQUIRE(co_await log->checkpoint());
        auto compacted = [&](const std::map<std::int64_t, read_record>& got) {
            for (auto& [off, rr] : got) {
                if (off >= offset) continue;
                auto it = latest.find(rr.key);
                if (it == latest.end() || it->second.first != off) return false;
            }
            return true;
        };
        bool done = false;
        for (int i = 0; i < 400 && !done; ++i) {
            (void)co_await runtime::sleep(5ms);
            done = compacted(co_await read_log(log.get()));
        }
        CHECK(done);
        // Rounds: one per mapped segment (14 segments, the newest never mapped), not one pass.
        CHECK(counter_value("skiff_compactions_total") - passes_before >= 10);
        auto got = co_await read_log(log.get());
        for (auto& [key, lv] : latest) {
            INFO(key << " at " << lv.first);
            REQUIRE(got.count(lv.first) == 1);
            CHECK(got.at(lv.first).key == key);
            CHECK(got.at(lv.first).value == lv.second);
        }
        // Producer 42's batch lost its record to a later round but stays, empty, at offset 1:
        // it is still the producer's latest (its sequence state restores from it).
        auto r = co_await log->read(1, 1 << 16);
        REQUIRE(r.has_value());
        auto batches = split_batches(std::span<const char>(r->records.data(), r->records.size()));
        REQUIRE(batches.has_value());
        REQUIRE_FALSE(batches->empty());
        bool found = false;
        for (auto& batch : *batches) {
            if (batch.producer_id != producer) continue;
            found = true;
            CHECK(batch.base_offset == 1);
            CHECK(batch.record_count == 0);
        }
        CHECK(found);
        co_await log->close();
    };
    run_task(t(bucket));
}

TEST_CASE("fsck: a source a compaction rewrote into an earlier segment is a warning; other batch headers are an overlap",
          "[storage][compaction][fsck]") {
    auto bucket = std::make_shared<memory_bucket>();
    batch_options o;
    o.base_timestamp = t0;
    const std::string b0 = build_batch(0, {rec("x", "0")}, o);
    const std::string b1 = build_batch(10, {rec("k1", "v1"), rec("k2", "v2")}, o);
    const std::string b2 = build_batch(12, {rec("k1", "v3")}, o);
    key_index index;
    for (const auto* b : {&b1, &b2}) REQUIRE(index.add(view_of(*b), 1 << 20).has_value());
    auto f1 = filter_batch(view_of(b1), index, compaction_rules{});
    REQUIRE(f1.has_value());
    REQUIRE(f1->fate == batch_fate::rewritten);
    auto put_segment = [&](std::int64_t base, const std::vector<std::string_view>& batches) {
        segment_builder sb(base);
        for (auto b : batches) {
            auto v = parse_batch(std::span<const char>(b.data(), b.size()));
            REQUIRE(v.has_value());
            REQUIRE(sb.skip_to(v->base_offset).has_value());
            REQUIRE(sb.append(std::span<const char>(b.data(), b.size())).has_value());
        }
        auto built = std::move(sb).finish(t0);
        bucket->objects[segment_key(test_ns, pid, base)] = built.kfs;
        bucket->objects[index_key(test_ns, pid, base)] = built.index;
    };
    // The compacted segment under key 0 (offsets 0..12), and its source 10 still waiting for
    // its delete.
    put_segment(0, {b0, f1->bytes, b2});
    put_segment(10, {b1, b2});
    auto check = [](std::shared_ptr<memory_bucket> b) -> task<fsck_report> {
        memory_store store(b);
        auto r = co_await fsck(store, test_ns, false);
        REQUIRE(r.has_value());
        co_return std::move(*r);
    };
    auto report = run_task(check(bucket));
    INFO(format_fsck_report(report, "mem"));
    REQUIRE(report.partitions.size() == 1);
    CHECK(report.partitions[0].compacted_away == std::vector<std::int64_t>{10});
    CHECK(report.partitions[0].overlaps.empty());
    CHECK(report.clean());

    // A "source" whose batch at 10 ends elsewhere is not what the segment was compacted from.
    const std::string other = build_batch(10, {rec("k1", "v1")}, o);
    const std::string rest = build_batch(11, {rec("k2", "v2"), rec("k1", "v3")}, o);
    put_segment(10, {other, rest});
    auto report2 = run_task(check(bucket));
    INFO(format_fsck_report(report2, "mem"));
    CHECK(report2.partitions[0].compacted_away.empty());
    CHECK_FALSE(report2.partitions[0].overlaps.empty());
    CHECK_FALSE(report2.clean());
}
