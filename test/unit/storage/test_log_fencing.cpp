// Storage-side fencing for cluster mode (docs/cluster.md, "Storage"): if-absent uploads that
// tell a lost answer from another owner's object, the fenced state, leader epoch stamping, the
// takeover gap, readers across gaps, the pending-records bound, and the deposed-owner story
// end to end on one bucket.
#include "fake_s3.hpp"
#include "log_audit.hpp"
#include "run_task.hpp"

#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/storage/fsck.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/s3_store.hpp>
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
using skiff::test::audit;
using skiff::test::batch_of;
using skiff::test::outcome;
using skiff::test::produce;
using skiff::test::read_all;

namespace {

const partition_id pid("fenced", 0);

log_config test_config() {
    log_config c;
    c.linger = 1ms;
    c.max_age = 20ms;
    c.retry_base = 1ms;
    c.retry_cap = 5ms;
    c.append_timeout = 5s;
    c.close_timeout = 2s;
    c.wall_ms = [] { return std::int64_t{1700000000000}; };
    return c;
}

task<std::unique_ptr<partition_log>> open_log(object_store* store, io_budget* budget, log_config cfg) {
    auto l = co_await partition_log::open(*store, *budget, "default", pid, std::move(cfg));
    REQUIRE(l.has_value());
    co_return std::move(*l);
}

std::string kfs_key(std::int64_t base) { return segment_key("default", pid, base); }
std::string idx_key(std::int64_t base) { return index_key("default", pid, base); }

// A memory store whose PUTs, while held, wait before they are applied until release(): a
// broker paused (SIGSTOP) with its flush in flight.
class held_store final : public object_store {
public:
    explicit held_store(std::shared_ptr<memory_bucket> b) : _inner(std::move(b)) {}
    void hold() { _latch = std::make_shared<oneshot<void>>(); }
    void release() {
        if (_latch) _latch->set();
        _latch.reset();
    }
    int held() const noexcept { return _held; }

    task<result<void, store_error>> put(std::string key, std::span<const char> body, bool if_absent,
                                        std::stop_token st) override {
        if (auto latch = _latch) {
            ++_held;
            auto waited = co_await latch->wait(st);
            --_held;
            if (!waited) co_return failure{store_error(storage::errc::cancelled, "held put cancelled")};
        }
        auto r = co_await _inner.put(std::move(key), body, if_absent, std::move(st));
        co_return r;
    }
    task<result<get_result, store_error>> get(std::string key, std::optional<byte_range> range,
                                              std::stop_token st) override {
        return _inner.get(std::move(key), range, std::move(st));
    }
    task<result<std::uint64_t, store_error>> size(std::string key, std::stop_token st) override {
        return _inner.size(std::move(key), std::move(st));
    }
    task<result<void, store_error>> remove(std::string key, std::stop_token st) override {
        return _inner.remove(std::move(key), std::move(st));
    }
    task<result<list_result, store_error>> list(std::string prefix, std::string start_after, std::string token,
                                                int max_keys, std::stop_token st) override {
        return _inner.list(std::move(prefix), std::move(start_after), std::move(token), max_keys, std::move(st));
    }
    std::string describe() const override { return "held-mem://"; }

private:
    memory_store _inner;
    std::shared_ptr<oneshot<void>> _latch;
    int _held = 0;
};

// Reads the whole log and returns offset -> (value, partitionLeaderEpoch of its batch).
task<std::map<std::int64_t, std::pair<std::string, std::int32_t>>> read_with_epochs(partition_log* log) {
    std::map<std::int64_t, std::pair<std::string, std::int32_t>> out;
    std::int64_t off = log->log_start_offset();
    while (off < log->high_watermark()) {
        auto r = co_await log->read(off, 1 << 20);
        REQUIRE(r.has_value());
        auto batches = split_batches(std::span<const char>(r->records.data(), r->records.size()));
        REQUIRE(batches.has_value()); // CRCs still valid after stamping
        REQUIRE_FALSE(batches->empty());
        for (auto& b : *batches) {
            auto recs = parse_records(b);
            REQUIRE(recs.has_value());
            for (auto& rec : *recs) {
                auto o = b.base_offset + rec.offset_delta;
                REQUIRE(out.count(o) == 0);
                out[o] = {std::string(*rec.value), b.partition_leader_epoch};
            }
            off = b.next_offset();
        }
    }
    co_return out;
}

// The base offset of the first batch a read from `offset` returns (-1: none).
task<std::int64_t> first_batch_at(partition_log* log, std::int64_t offset) {
    auto r = co_await log->read(offset, 1 << 20);
    REQUIRE(r.has_value());
    auto batches = split_batches(std::span<const char>(r->records.data(), r->records.size()));
    REQUIRE(batches.has_value());
    co_return batches->empty() ? -1 : (*batches)[0].base_offset;
}

// A different segment (other values) with the same base, as another owner would write it. Its
// index differs from ours too (an index entry per batch): two segments with the same batch
// layout would have byte-identical indexes, which are then interchangeable.
std::pair<std::string, std::string> foreign_segment(std::int64_t base) {
    segment_builder sb(base, 1);
    for (int i = 0; i < 2; ++i) {
        auto batch = build_batch(0, {record(std::string("k"), std::string("someone else's"))});
        REQUIRE(sb.append(std::span<const char>(batch.data(), batch.size())).has_value());
    }
    auto built = std::move(sb).finish(1600000000000);
    return {built.kfs, built.index};
}

} // namespace

TEST_CASE("a retry of a PUT that landed with its answer lost is not a fence", "[storage][log][fence]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        store.add_fault(mem_fault_rule("put", ".kfs", mem_fault::lost_answer, 1));
        store.add_fault(mem_fault_rule("put", ".index", mem_fault::lost_answer, 1));
        io_budget budget(8, nullptr);
        auto log = co_await open_log(&store, &budget, test_config());
        auto o = co_await produce(log.get(), batch_of(0, 4));
        CHECK(o.acked);
        CHECK_FALSE(log->fenced());
        CHECK(log->stats().upload_already_landed == 2); // .kfs and .index
        CHECK(log->high_watermark() == 4);
        auto more = co_await produce(log.get(), batch_of(4, 2));
        CHECK(more.acked);
        CHECK(more.base == 4);
        const std::vector<outcome> outs{o, more};
        const std::vector<int> seqs{0, 4};
        audit(outs, seqs, co_await read_all(log.get()));
        co_await log->close();
        // Acknowledged once: a fresh reader finds each record once.
        memory_store again(b);
        auto log2 = co_await open_log(&again, &budget, test_config());
        auto all = co_await read_all(log2.get());
        CHECK(all.size() == 6);
        audit(outs, seqs, all);
        co_await log2->close();
    };
    run_task(t(bucket));
}

TEST_CASE("S3: a retried PUT whose first attempt was applied (answer lost) counts as landed",
          "[storage][log][fence][s3_store]") {
    skiff::test::fake_s3 srv;
    // The first .kfs PUT is applied, then the connection is reset: the log sees a failure
    // and tries again with If-None-Match, which S3 refuses with 412.
    srv.add_rule({.method = "PUT", .pattern = "\\.kfs$", .action = skiff::test::fault_action::reset,
                  .when = skiff::test::fault_when::after, .count = 1});
    log_stats stats;
    bool acked = false, fenced = true;
    auto t = [](skiff::test::fake_s3* s, log_stats* out, bool* ok, bool* f) -> task<void> {
        s3::client_config cc;
        cc.endpoint = s->endpoint();
        cc.path_style = true;
        cc.creds = {"AKIDFENCE", "fence/secret", ""};
        cc.retry.base = 1ms;
        cc.retry.cap = 5ms;
        cc.attempt_timeout = 5s;
        cc.operation_deadline = 20s;
        auto client = s3::client::create(std::move(cc));
        REQUIRE(client.has_value());
        auto store = s3_store::create(**client, "s3://test-bucket/fence");
        REQUIRE(store.has_value());
        io_budget budget(8, nullptr);
        auto log = co_await open_log(store->get(), &budget, test_config());
        auto o = co_await produce(log.get(), batch_of(0, 3));
        *ok = o.acked;
        *f = log->fenced();
        *out = log->stats();
        co_await log->close();
    };
    run_task(t(&srv, &stats, &acked, &fenced));
    CHECK(acked);
    CHECK_FALSE(fenced);
    CHECK(srv.stats().faults_injected == 1);
    CHECK(stats.upload_already_landed >= 1);
    auto seen = srv.stats();
    CHECK(seen.by_status[412] >= 1); // the retry's If-None-Match was refused
}

TEST_CASE("another owner's segment under the next key fences the log; committed data stays readable",
          "[storage][log][fence]") {
    // Either object of the next segment may be the other owner's; the other one, if ours
    // landed, is taken back so that no reader pairs an index with someone else's segment.
    for (const bool foreign_kfs : {true, false}) {
        INFO("the other owner's object: " << (foreign_kfs ? ".kfs" : ".index"));
        auto bucket = std::make_shared<memory_bucket>();
        std::uint64_t removes = 0;
        auto t = [](std::shared_ptr<memory_bucket> b, bool kfs_theirs, std::uint64_t* removed) -> task<void> {
            memory_store store(b);
            io_budget budget(8, nullptr);
            auto cfg = test_config();
            if (kfs_theirs) {
                store.set_latency(5ms); // both PUTs in flight at once: our .index lands
            } else {
                cfg.mode = upload_mode::sequential; // our .kfs lands, then the .index is refused
            }
            auto log = co_await open_log(&store, &budget, cfg);
            auto first = co_await produce(log.get(), batch_of(0, 3));
            REQUIRE(first.acked);
            auto theirs = foreign_segment(3);
            if (kfs_theirs) {
                b->objects[kfs_key(3)] = theirs.first;
            } else {
                b->objects[idx_key(3)] = theirs.second;
            }
            int fenced_calls = 0;
            log->on_fenced([&fenced_calls] { ++fenced_calls; });
            std::vector<task<outcome>> ps;
            for (int i = 0; i < 3; ++i) ps.push_back(produce(log.get(), batch_of(3 + i * 2, 2)));
            auto outs = co_await when_all(std::move(ps));
            for (auto& o : outs) {
                CHECK_FALSE(o.acked);
                REQUIRE(o.error.has_value());
                CHECK(*o.error == append_errc::fenced);
            }
            CHECK(log->fenced());
            CHECK(fenced_calls == 1);
            CHECK(log->high_watermark() == 3);
            // Later appends fail at once; reads go on over what was committed.
            auto later = co_await produce(log.get(), batch_of(100, 1));
            REQUIRE(later.error.has_value());
            CHECK(*later.error == append_errc::fenced);
            auto all = co_await read_all(log.get());
            CHECK(all.size() == 3);
            const std::vector<outcome> acked{first};
            const std::vector<int> seqs{0};
            audit(acked, seqs, all);
            bool durable_answer = true;
            log->on_durable(3, [&durable_answer](bool d) { durable_answer = d; });
            CHECK_FALSE(durable_answer); // nothing pending becomes durable here any more
            co_await log->close();
            *removed = store.stats().removes;
        };
        run_task(t(bucket, foreign_kfs, &removes));
        // Ours of the pair, and (when it landed beside their .kfs) our .kfst sidecar.
        CHECK(removes == (foreign_kfs ? 2u : 1u));
        CHECK(bucket->objects.count(time_index_key("default", pid, 3)) == 0);
        auto theirs = foreign_segment(3);
        if (foreign_kfs) {
            CHECK(bucket->objects.count(idx_key(3)) == 0);
            CHECK(bucket->objects.at(kfs_key(3)) == theirs.first);
        } else {
            CHECK(bucket->objects.count(kfs_key(3)) == 0);
            CHECK(bucket->objects.at(idx_key(3)) == theirs.second);
        }
    }
}

TEST_CASE("leader epoch: stamped into every batch when set; bytes unchanged when unset", "[storage][log][fence]") {
    const std::string set = batch_of(0, 3);
    auto unset_bucket = std::make_shared<memory_bucket>();
    auto set_bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> plain, std::shared_ptr<memory_bucket> stamped,
                std::string batch) -> task<void> {
        io_budget budget(8, nullptr);
        {
            memory_store store(plain);
            auto log = co_await open_log(&store, &budget, test_config());
            auto o = co_await produce(log.get(), batch);
            CHECK(o.acked);
            co_await log->close();
        }
        memory_store store(stamped);
        auto cfg = test_config();
        cfg.leader_epoch = 7;
        auto log = co_await open_log(&store, &budget, cfg);
        auto a = co_await produce(log.get(), batch);
        auto c = co_await produce(log.get(), batch_of(3, 2));
        CHECK(a.acked);
        CHECK(c.acked);
        auto read = co_await read_with_epochs(log.get());
        REQUIRE(read.size() == 5);
        for (auto& [off, v] : read) CHECK(v.second == 7);
        co_await log->close();
    };
    run_task(t(unset_bucket, set_bucket, set));
    // Unset: the .kfs is what the segment format makes of the producer's batch, untouched.
    segment_builder sb(0);
    REQUIRE(sb.append(std::span<const char>(set.data(), set.size())).has_value());
    auto expected = std::move(sb).finish(1700000000000);
    CHECK(unset_bucket->objects.at(kfs_key(0)) == expected.kfs);
    CHECK(unset_bucket->objects.at(idx_key(0)) == expected.index);
    auto producer_epoch = parse_batch(std::span<const char>(set.data(), set.size()), true);
    REQUIRE(producer_epoch.has_value());
    CHECK(producer_epoch->partition_leader_epoch != 7);
    // Set: the same bytes but for the epoch field (offset 12 of the batch, outside its CRC).
    const auto& stamped = set_bucket->objects.at(kfs_key(0));
    REQUIRE(stamped.size() == expected.kfs.size());
    const std::size_t epoch_at = segment_header_size + 12;
    CHECK(stamped.substr(0, epoch_at) == expected.kfs.substr(0, epoch_at));
    CHECK(stamped.substr(epoch_at, 4) == std::string("\0\0\0\x07", 4));
    CHECK(stamped.substr(epoch_at + 4, set.size() - 16) == expected.kfs.substr(epoch_at + 4, set.size() - 16));
}

TEST_CASE("takeover gap: new data starts at next + G; reads and restores skip the gap", "[storage][log][fence]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        io_budget budget(8, nullptr);
        outcome before;
        {
            memory_store store(b);
            auto log = co_await open_log(&store, &budget, test_config());
            before = co_await produce(log.get(), batch_of(0, 5));
            REQUIRE(before.acked);
            co_await log->close();
        }
        memory_store store(b);
        auto cfg = test_config();
        cfg.takeover_gap = 100;
        auto log = co_await open_log(&store, &budget, cfg);
        CHECK(log->next_offset() == 105);
        CHECK(log->high_watermark() == 5); // nothing committed in the gap
        co_await log->flush();             // nothing appended: returns at once
        CHECK_FALSE(co_await log->wait_for_data(5, 10ms));
        auto r = co_await log->read(5, 1 << 20);
        REQUIRE(r.has_value());
        CHECK(r->records.empty());
        auto after = co_await produce(log.get(), batch_of(5, 3));
        REQUIRE(after.acked);
        CHECK(after.base == 105);
        CHECK(log->high_watermark() == 108);
        const auto first1 = co_await first_batch_at(log.get(), 5);
        CHECK(first1 == 105);
        const auto first2 = co_await first_batch_at(log.get(), 50);
        CHECK(first2 == 105);
        const auto first3 = co_await first_batch_at(log.get(), 104);
        CHECK(first3 == 105);
        const std::vector<outcome> outs{before, after};
        const std::vector<int> seqs{0, 5};
        audit(outs, seqs, co_await read_all(log.get()));
        co_await log->close();

        memory_store again(b);
        auto log2 = co_await open_log(&again, &budget, test_config());
        CHECK(log2->next_offset() == 108);
        const auto first4 = co_await first_batch_at(log2.get(), 5);
        CHECK(first4 == 105);
        const auto first5 = co_await first_batch_at(log2.get(), 60);
        CHECK(first5 == 105);
        auto all = co_await read_all(log2.get());
        CHECK(all.size() == 8);
        audit(outs, seqs, all);
        co_await log2->close();
        auto report = co_await fsck(again, "default", false);
        REQUIRE(report.has_value());
        CHECK(report->clean());
        REQUIRE(report->partitions.size() == 1);
        CHECK(report->partitions[0].gaps.size() == 1);
    };
    run_task(t(bucket));
}

namespace {

// What the deposed-owner scenario hands back for the checks after it.
struct takeover_run {
    std::vector<outcome> acked;
    std::vector<int> seqs;
    outcome late; // the deposed owner's append whose PUTs were held
    bool a_fenced = false;
    std::map<std::int64_t, std::pair<std::string, std::int32_t>> c_reads;
    std::int64_t c_read_past_late = -1; // first batch a fresh reader returns from offset 15
    std::int64_t c_read_in_late = -1;   // ... from offset 12
    bool fsck_clean = false;
};

// Log A (epoch 1) acks offsets 0..9, then its next flush (10..14) is held in the store. Log B
// (epoch 2) takes the partition over with `gap` and acks two appends. Then A's PUTs are
// released. A fresh log C restores the bucket afterwards. The late append's producer gives
// up before the release when `late_timeout` is short: the broker refusing to ack once its
// lease may have expired, which is not storage's part.
task<takeover_run> deposed_owner(std::shared_ptr<memory_bucket> b, std::int64_t gap,
                                 std::chrono::milliseconds late_timeout) {
    takeover_run run;
    io_budget budget(16, nullptr);
    held_store a_store(b);
    auto cfg_a = test_config();
    cfg_a.leader_epoch = 1;
    cfg_a.append_timeout = late_timeout;
    auto a = co_await open_log(&a_store, &budget, cfg_a);
    for (int i = 0; i < 2; ++i) {
        auto o = co_await produce(a.get(), batch_of(i * 5, 5));
        REQUIRE(o.acked);
        run.acked.push_back(o);
        run.seqs.push_back(i * 5);
    }
    a_store.hold();

    auto late_producer = [](partition_log* l) -> task<outcome> { co_return co_await produce(l, batch_of(10, 5)); };
    auto takeover = [](std::shared_ptr<memory_bucket> bk, io_budget* bud, held_store* as, std::int64_t g,
                       takeover_run* out) -> task<outcome> {
        while (as->held() < 2) (void)co_await sleep(1ms); // A's .kfs and .index PUTs are in flight
        memory_store b_store(bk);
        auto cfg_b = test_config();
        cfg_b.leader_epoch = 2;
        cfg_b.takeover_gap = g;
        auto blog = co_await open_log(&b_store, bud, cfg_b);
        CHECK(blog->next_offset() == 10 + g);
        for (int i = 0; i < 2; ++i) {
            auto o = co_await produce(blog.get(), batch_of(100 + i * 5, 5));
            REQUIRE(o.acked);
            CHECK(o.base == 10 + g + i * 5);
            out->acked.push_back(o);
            out->seqs.push_back(100 + i * 5);
        }
        (void)co_await sleep(300ms);
        as->release();
        co_await blog->close();
        co_return outcome{};
    };
    auto [late, _] = co_await when_all(late_producer(a.get()), takeover(b, &budget, &a_store, gap, &run));
    run.late = late;
    co_await a->close(); // waits for A's released uploads
    run.a_fenced = a->fenced();

    memory_store c_store(b);
    auto cfg_c = test_config();
    cfg_c.lifecycle_tick = 1ms;
    auto c = co_await open_log(&c_store, &budget, cfg_c);
    // B's manifest does not list A's late segment (it landed after B restored): the check
    // that follows a restore from a manifest finds it in the bucket and serves it.
    (void)co_await sleep(50ms);
    run.c_reads = co_await read_with_epochs(c.get());
    run.c_read_past_late = co_await first_batch_at(c.get(), 15);
    run.c_read_in_late = co_await first_batch_at(c.get(), 12);
    co_await c->close();
    auto report = co_await fsck(c_store, "default", false);
    REQUIRE(report.has_value());
    run.fsck_clean = report->clean();
    co_return run;
}

void check_acked_once(const takeover_run& run) {
    std::map<std::int64_t, std::string> values;
    for (auto& [off, v] : run.c_reads) values[off] = v.first;
    audit(run.acked, run.seqs, values);
    // B's records carry B's epoch, A's acknowledged ones A's.
    for (std::size_t i = 0; i < run.acked.size(); ++i) {
        for (auto o = run.acked[i].base; o <= run.acked[i].last; ++o) {
            CHECK(run.c_reads.at(o).second == (run.seqs[i] >= 100 ? 2 : 1));
        }
    }
}

} // namespace

TEST_CASE("deposed owner with a takeover gap: its late segment lands only inside the gap",
          "[storage][log][fence][takeover]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto run = run_task(deposed_owner(bucket, 100, 100ms));
    CHECK_FALSE(run.late.acked);
    CHECK_FALSE(run.a_fenced); // its key was free: nothing told it, the gap kept it harmless
    check_acked_once(run);
    // A's late, never acknowledged records: at 10..14, inside the gap [10, 110), epoch 1.
    for (auto& [off, v] : run.c_reads) {
        if (v.first >= "v10" && v.first <= "v14" && v.first.size() == 3) {
            CHECK(off >= 10);
            CHECK(off < 110);
            CHECK(v.second == 1);
        }
    }
    CHECK(run.c_reads.size() == 10 + 5 + 10);
    CHECK(run.c_read_in_late == 10);
    CHECK(run.c_read_past_late == 110); // past the late segment's end: on to the next one
    CHECK(run.fsck_clean);
    CHECK(bucket->objects.count(kfs_key(10)) == 1);
    CHECK(bucket->objects.count(kfs_key(110)) == 1);
}

TEST_CASE("deposed owner without a gap collides with the new owner's segment and is fenced",
          "[storage][log][fence][takeover]") {
    auto bucket = std::make_shared<memory_bucket>();
    auto run = run_task(deposed_owner(bucket, 0, 5s));
    CHECK(run.a_fenced);
    REQUIRE(run.late.error.has_value());
    CHECK(*run.late.error == append_errc::fenced);
    check_acked_once(run);
    CHECK(run.c_reads.size() == 20); // A's 10 and B's 10; A's late records nowhere
    for (auto& [off, v] : run.c_reads) CHECK_FALSE((v.first >= "v10" && v.first <= "v14" && v.first.size() == 3));
    CHECK(run.fsck_clean);
}

TEST_CASE("max_pending_records: appends wait while buffered + in-flight offsets are at the bound",
          "[storage][log][fence]") {
    auto t = []() -> task<void> {
        auto bucket = std::make_shared<memory_bucket>();
        held_store store(bucket);
        io_budget budget(8, nullptr);
        auto cfg = test_config();
        cfg.max_pending_records = 4;
        auto log = co_await open_log(&store, &budget, cfg);
        store.hold();
        auto two = batch_of(0, 2);
        for (int i = 0; i < 2; ++i) {
            auto r = co_await log->append(std::span<const char>(two.data(), two.size()), ack_mode::leader);
            REQUIRE(r.has_value());
        }
        CHECK(log->next_offset() == 4);
        auto third = [](partition_log* l, std::string set, bool* done) -> task<std::int64_t> {
            auto r = co_await l->append(std::span<const char>(set.data(), set.size()), ack_mode::leader);
            REQUIRE(r.has_value());
            *done = true;
            co_return r->base_offset;
        };
        auto releaser = [](held_store* s, partition_log* l, bool* done) -> task<std::int64_t> {
            (void)co_await sleep(60ms);
            CHECK_FALSE(*done); // still waiting for room
            CHECK(l->next_offset() == 4);
            s->release();
            co_return 0;
        };
        bool done = false;
        auto [base, _] = co_await when_all(third(log.get(), batch_of(4, 1), &done), releaser(&store, log.get(), &done));
        CHECK(done);
        CHECK(base == 4);
        co_await log->flush();
        CHECK(log->high_watermark() == 5);
        co_await log->close();
    };
    run_task(t());
}

TEST_CASE("a reader whose index belongs to another segment with the same base walks the segment instead",
          "[storage][log][fence]") {
    auto bucket = std::make_shared<memory_bucket>();
    // Our segment: one batch of 30 records at 0. The other owner's index for base 0 has an
    // entry (1, 101) that falls inside our batch: it fits the size, not the layout.
    std::vector<record> recs;
    for (int i = 0; i < 30; ++i) recs.emplace_back(std::string("k"), fmt::format("v{}", i));
    const auto batch = build_batch(0, recs);
    segment_builder ours(0);
    REQUIRE(ours.append(std::span<const char>(batch.data(), batch.size())).has_value());
    bucket->objects[kfs_key(0)] = std::move(ours).finish(1700000000000).kfs;
    bucket->objects[idx_key(0)] = foreign_segment(0).second;
    auto t = [](std::shared_ptr<memory_bucket> b) -> task<void> {
        memory_store store(b);
        io_budget budget(8, nullptr);
        auto log = co_await open_log(&store, &budget, test_config());
        CHECK(log->high_watermark() == 30);
        const auto first6 = co_await first_batch_at(log.get(), 5);
        CHECK(first6 == 0);
        auto all = co_await read_all(log.get());
        REQUIRE(all.size() == 30);
        CHECK(all.at(29) == "v29");
        co_await log->close();
    };
    run_task(t(bucket));
}
