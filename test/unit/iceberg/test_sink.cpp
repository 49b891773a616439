// The sink over a memory bucket: a step commits every record once with the table's offsets;
// a racing commit that covers other partitions is rebased on, one that covers ours makes the
// step give its files up; a step killed before its commit leaves files maintenance deletes;
// expiry keeps the rows readable.
#include "../reader/reader_fixtures.hpp"
#include "run_task.hpp"

#include <skiff/iceberg/maintenance.hpp>
#include <skiff/iceberg/manifest.hpp>
#include <skiff/iceberg/sink.hpp>
#include <skiff/iceberg/table_store.hpp>

#include <catch2/catch.hpp>

#include <chrono>

using namespace skiff;
using namespace skiff::iceberg;
using namespace skiff::test;
using skiff::runtime::task;

namespace {

sink_config config_for(const std::string& topic) {
    sink_config c;
    c.ns = reader_ns;
    c.topic = topic;
    c.table_prefix = "iceberg/default/" + topic;
    c.location = "s3://bucket/iceberg/default/" + topic;
    c.partition_by = partitioning::identity_partition;
    c.projections = {};
    return c;
}

result<step_result, iceberg_error> step(sink& s) {
    return run_task([&]() -> task<result<step_result, iceberg_error>> { co_return co_await s.step({}); }());
}

loaded_table load(table_store& t) {
    auto r = run_task([&]() -> task<result<loaded_table, iceberg_error>> { co_return co_await t.load({}); }());
    REQUIRE(r);
    return std::move(*r);
}

// Rows per partition over every data file the current snapshot references.
std::map<std::int32_t, std::int64_t> rows_in_table(table_store& t) {
    auto l = load(t);
    std::map<std::int32_t, std::int64_t> out;
    auto cur = l.metadata.current_snapshot();
    if (!cur) return out;
    auto body = run_task([&]() -> task<result<std::string, iceberg_error>> {
        co_return co_await t.read(*t.key_of(cur->manifest_list), {});
    }());
    REQUIRE(body);
    auto list = read_manifest_list(*body);
    REQUIRE(list);
    for (const auto& mf : list->manifests) {
        auto mb = run_task([&]() -> task<result<std::string, iceberg_error>> { co_return co_await t.read(*t.key_of(mf.manifest_path), {}); }());
        REQUIRE(mb);
        auto m = read_manifest(*mb);
        REQUIRE(m);
        for (const auto& e : m->entries) {
            if (e.status == entry_status::deleted) continue; // replaced by a rewrite
            REQUIRE(e.file.partition.size() == 1);
            out[*e.file.partition[0].get_if<std::int32_t>()] += e.file.record_count;
        }
    }
    return out;
}

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

TEST_CASE("a step commits what is new, once, and records where each partition resumes", "[iceberg][sink]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 5), value_batch(5, 5)});
    put_segment(*bucket, "t", 1, 0, {value_batch(0, 3)});
    storage::memory_store store(bucket);
    sink s(store, config_for("t"));
    auto r = step(s);
    REQUIRE(r);
    CHECK(r->committed);
    CHECK(r->rows == 13);
    CHECK(r->files == 2); // identity(partition): one file per Kafka partition
    CHECK(r->next_offsets == std::map<std::int32_t, std::int64_t>{{0, 10}, {1, 3}});
    table_store t(store, "iceberg/default/t", "s3://bucket/iceberg/default/t");
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 10}, {1, 3}});
    // Nothing new: no commit. New records: only they are added.
    auto again = step(s);
    REQUIRE(again);
    CHECK_FALSE(again->committed);
    put_segment(*bucket, "t", 1, 3, {value_batch(3, 4)});
    auto more = step(s);
    REQUIRE(more);
    CHECK(more->committed);
    CHECK(more->rows == 4);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 10}, {1, 7}});
    CHECK(load(t).metadata.current_snapshot()->summary.at("total-records") == "17");
    // A second sink (a restart) resumes from the table, not from its own memory.
    sink restarted(store, config_for("t"));
    auto none = step(restarted);
    REQUIRE(none);
    CHECK_FALSE(none->committed);
    CHECK(none->next_offsets == std::map<std::int32_t, std::int64_t>{{0, 10}, {1, 7}});
}

TEST_CASE("sinks of different partitions rebase on each other; a covered step gives its files up", "[iceberg][sink]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 4)});
    put_segment(*bucket, "t", 1, 0, {value_batch(0, 6)});
    storage::memory_store store(bucket);
    table_store t(store, "iceberg/default/t", "s3://bucket/iceberg/default/t");

    auto c0 = config_for("t");
    c0.owns_partition = [](std::int32_t p) { return p == 0; };
    auto c1 = config_for("t");
    c1.owns_partition = [](std::int32_t p) { return p == 1; };
    sink s1(store, c1);
    // Sink 0 is about to commit when sink 1 commits partition 1: sink 0 loses the race on that
    // version, sees partition 0 untouched, and rebases.
    bool raced = false;
    c0.before_stage = [&](std::string_view stage) {
        if (stage == "commit" && !raced) {
            raced = true;
            auto r = step(s1);
            REQUIRE(r);
            CHECK(r->committed);
        }
        return true;
    };
    sink s0(store, c0);
    auto r0 = step(s0);
    REQUIRE(r0);
    CHECK(raced);
    CHECK(r0->committed);
    CHECK(r0->conflicts == 1);
    CHECK(r0->next_offsets == std::map<std::int32_t, std::int64_t>{{0, 4}, {1, 6}});
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 4}, {1, 6}});
    CHECK(load(t).metadata.current_snapshot()->summary.at("total-records") == "10");

    // Two sinks of the same partition: the one that loses the race drops its step.
    put_segment(*bucket, "t", 0, 4, {value_batch(4, 2)});
    auto ca = config_for("t");
    sink b(store, config_for("t"));
    bool raced2 = false;
    ca.before_stage = [&](std::string_view stage) {
        if (stage == "commit" && !raced2) {
            raced2 = true;
            REQUIRE(step(b)->committed);
        }
        return true;
    };
    sink a(store, ca);
    const auto files_before = bucket->objects.size();
    auto ra = step(a);
    REQUIRE(ra);
    CHECK(ra->abandoned);
    CHECK_FALSE(ra->committed);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 6}, {1, 6}});
    // b's step added its data file, manifest, list and a metadata version; a left nothing
    // (its data file, manifest and list were deleted).
    CHECK(bucket->objects.size() == files_before + 4);
}

TEST_CASE("a step stopped before its commit leaves files that maintenance deletes", "[iceberg][sink][maintenance]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 4)});
    storage::memory_store store(bucket);
    table_store t(store, "iceberg/default/t", "s3://bucket/iceberg/default/t");
    {
        auto c = config_for("t");
        c.before_stage = [](std::string_view stage) { return stage != "commit"; };
        sink dying(store, c);
        auto r = step(dying);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == errc::cancelled);
    }
    sink s(store, config_for("t"));
    auto r = step(s);
    REQUIRE(r);
    CHECK(r->committed);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 4}});
    auto count = [&](std::string_view part) {
        std::size_t n = 0;
        for (auto& [k, v] : bucket->objects) n += k.find(part) != std::string::npos;
        return n;
    };
    CHECK(count(".parquet") == 2);
    CHECK(count("/snap-") == 2);
    maintenance_config mc;
    // Within the grace period nothing goes (a commit in flight would look the same).
    auto young = run_task([&]() -> task<result<maintenance_result, iceberg_error>> { co_return co_await maintain(t, mc, now_ms(), {}); }());
    REQUIRE(young);
    CHECK(young->deleted_files == 0);
    CHECK(young->kept_young == 3);
    mc.orphan_grace = std::chrono::milliseconds(0);
    auto m = run_task([&]() -> task<result<maintenance_result, iceberg_error>> { co_return co_await maintain(t, mc, now_ms() + 1, {}); }());
    REQUIRE(m);
    CHECK(m->deleted_files == 3); // the dead step's data file, manifest and list
    CHECK(count(".parquet") == 1);
    CHECK(count("/snap-") == 1);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 4}});
}

TEST_CASE("expiry removes old snapshots and their lists; rows stay", "[iceberg][maintenance]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    storage::memory_store store(bucket);
    table_store t(store, "iceberg/default/t", "s3://bucket/iceberg/default/t");
    sink s(store, config_for("t"));
    for (int k = 0; k < 4; ++k) {
        put_segment(*bucket, "t", 0, k * 3, {value_batch(k * 3, 3)});
        REQUIRE(step(s)->committed);
    }
    CHECK(load(t).metadata.snapshots().size() == 4);
    maintenance_config mc;
    mc.expire_after = std::chrono::milliseconds(0);
    mc.keep_snapshots = 2;
    mc.orphan_grace = std::chrono::milliseconds(0);
    auto m = run_task([&]() -> task<result<maintenance_result, iceberg_error>> { co_return co_await maintain(t, mc, now_ms() + 1, {}); }());
    REQUIRE(m);
    CHECK(m->expired_snapshots == 2);
    CHECK(m->deleted_files == 2); // the two expired manifest lists; manifests are still listed
    CHECK(load(t).metadata.snapshots().size() == 2);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 12}});
    CHECK(file_time_ms("x/metadata/snap-12-1-1700000000000-ab-1.avro") == 1700000000000);
    CHECK(file_time_ms("x/data/p=1/1700000000000-ab-1-0.parquet") == 1700000000000);
    CHECK_FALSE(file_time_ms("x/metadata/v3.metadata.json"));
    CHECK_FALSE(file_time_ms("x/data/00000-0-foreign.parquet"));
}

namespace {

// The S3 client's view of a commit whose answer was lost: it retried the conditional PUT, and
// the retry found the object there (412). The first metadata version PUT after `arm` lands and
// answers precondition_failed.
class retried_commit_store final : public storage::object_store {
public:
    explicit retried_commit_store(std::shared_ptr<storage::memory_bucket> b) : _inner(std::move(b)) {}
    bool armed = false;
    runtime::task<result<void, storage::store_error>> put(std::string key, std::span<const char> body, bool if_absent,
                                                          std::stop_token st) override {
        const bool hit = armed && if_absent && key.ends_with(".metadata.json");
        auto r = co_await _inner.put(key, body, if_absent, st);
        if (hit && r) {
            armed = false;
            co_return storage::store_error(storage::errc::precondition_failed, "the retry found the object");
        }
        co_return r;
    }
    runtime::task<result<storage::get_result, storage::store_error>> get(std::string key, std::optional<storage::byte_range> range,
                                                                         std::stop_token st) override {
        return _inner.get(std::move(key), range, std::move(st));
    }
    runtime::task<result<std::uint64_t, storage::store_error>> size(std::string key, std::stop_token st) override {
        return _inner.size(std::move(key), std::move(st));
    }
    runtime::task<result<void, storage::store_error>> remove(std::string key, std::stop_token st) override {
        return _inner.remove(std::move(key), std::move(st));
    }
    runtime::task<result<storage::list_result, storage::store_error>> list(std::string prefix, std::string start_after,
                                                                           std::string token, int max_keys,
                                                                           std::stop_token st) override {
        return _inner.list(std::move(prefix), std::move(start_after), std::move(token), max_keys, std::move(st));
    }
    std::string describe() const override { return "retried-commit"; }

private:
    storage::memory_store _inner;
};

} // namespace

TEST_CASE("a commit whose answer was lost is the step's own success, never a reason to delete", "[iceberg][sink]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 5)});
    retried_commit_store store(bucket);
    table_store t(store, "iceberg/default/t", "s3://bucket/iceberg/default/t");
    sink s(store, config_for("t"));
    REQUIRE(step(s)->committed); // creates the table (version 1) and commits version 2
    put_segment(*bucket, "t", 0, 5, {value_batch(5, 3)});
    store.armed = true;
    auto r = step(s);
    REQUIRE(r);
    CHECK(r->committed);
    CHECK_FALSE(r->abandoned);
    CHECK(r->conflicts == 0);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 8}});
    // Every data file the table references is still there.
    std::size_t parquet = 0;
    for (auto& [k, v] : bucket->objects) parquet += k.ends_with(".parquet");
    CHECK(parquet == 2);

    // The same with the answer lost outright (a transient error, the PUT applied): the step
    // fails, keeps its files, and the next step finds its offsets committed.
    storage::memory_store plain(bucket);
    plain.add_fault(storage::mem_fault_rule("put", ".metadata.json", storage::mem_fault::lost_answer, 1));
    sink s2(plain, config_for("t"));
    put_segment(*bucket, "t", 0, 8, {value_batch(8, 2)});
    auto failed = step(s2);
    REQUIRE_FALSE(failed);
    auto after = step(s2);
    REQUIRE(after);
    CHECK_FALSE(after->committed);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 10}});
}

TEST_CASE("small files of a partition are rewritten into one; rows, offsets and later appends stay right", "[iceberg][maintenance]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    storage::memory_store store(bucket);
    table_store t(store, "iceberg/default/t", "s3://bucket/iceberg/default/t");
    sink s(store, config_for("t"));
    for (int k = 0; k < 5; ++k) {
        put_segment(*bucket, "t", 0, k * 3, {value_batch(k * 3, 3)});
        put_segment(*bucket, "t", 1, k * 2, {value_batch(k * 2, 2)});
        REQUIRE(step(s)->committed);
    }
    auto count_parquet = [&] {
        std::size_t n = 0;
        for (auto& [k, v] : bucket->objects) n += k.ends_with(".parquet");
        return n;
    };
    CHECK(count_parquet() == 10);
    maintenance_config mc;
    mc.rewrite_min_files = 3;
    auto m = run_task([&]() -> task<result<maintenance_result, iceberg_error>> { co_return co_await maintain(t, mc, now_ms(), {}); }());
    REQUIRE(m);
    CHECK(m->rewritten_files == 10);
    CHECK(m->new_files == 2); // one per Kafka partition (identity partitioning)
    CHECK(m->deleted_files == 0); // older snapshots still reference the small files
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 15}, {1, 10}});
    auto cur = load(t).metadata.current_snapshot();
    REQUIRE(cur);
    CHECK(cur->summary.at("operation") == "replace");
    CHECK(cur->summary.at("total-data-files") == "2");
    CHECK(cur->summary.at("total-records") == "25");
    CHECK(parse_next_offsets(cur->summary).value() == std::map<std::int32_t, std::int64_t>{{0, 15}, {1, 10}});
    // The sink goes on from the replace snapshot.
    put_segment(*bucket, "t", 0, 15, {value_batch(15, 4)});
    auto r = step(s);
    REQUIRE(r);
    CHECK(r->committed);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 19}, {1, 10}});
    // Once the old snapshots expire, the replaced files go.
    mc.rewrite_min_files = 0;
    mc.expire_after = std::chrono::milliseconds(0);
    mc.keep_snapshots = 1;
    mc.orphan_grace = std::chrono::milliseconds(0);
    auto m2 = run_task([&]() -> task<result<maintenance_result, iceberg_error>> { co_return co_await maintain(t, mc, now_ms() + 1, {}); }());
    REQUIRE(m2);
    CHECK(count_parquet() == 3); // the two rewritten files and the last append
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 19}, {1, 10}});
}

TEST_CASE("the sink's and maintenance's requests take permits of the S3 budget", "[iceberg][sink][budget]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    put_segment(*bucket, "t", 0, 0, {value_batch(0, 6)});
    put_segment(*bucket, "t", 1, 0, {value_batch(0, 6)});
    storage::memory_store store(bucket);
    storage::global_io_cap cap(2);
    storage::io_budget budget(2, &cap); // a small budget: nothing may hold a permit across another request
    auto c = config_for("t");
    c.scan.budget = &budget;
    sink s(store, c);
    REQUIRE(step(s)->committed);
    const auto after_step = budget.stats().acquired;
    CHECK(after_step >= 8); // table loads and commits, data file, manifest, list, segment GETs
    table_store t(store, "iceberg/default/t", "s3://bucket/iceberg/default/t");
    t.set_budget(&budget);
    maintenance_config mc;
    auto m = run_task([&]() -> task<result<maintenance_result, iceberg_error>> { co_return co_await maintain(t, mc, now_ms(), {}); }());
    REQUIRE(m);
    CHECK(budget.stats().acquired > after_step);
    CHECK(rows_in_table(t) == std::map<std::int32_t, std::int64_t>{{0, 6}, {1, 6}});
}

TEST_CASE("a topic's table lives at <warehouse>/<topic>, under the store's URI or the given base", "[iceberg][sink]") {
    auto p = place_table("", "prod", "", "s3://bucket/", "orders");
    CHECK(p.prefix == "iceberg/prod/orders");
    CHECK(p.location == "s3://bucket/iceberg/prod/orders");
    auto q = place_table("lake/", "prod", "s3a://bucket//", "s3://bucket/", "orders");
    CHECK(q.prefix == "lake/orders");
    CHECK(q.location == "s3a://bucket/lake/orders");
}
