// table_store: the latest version from the hint and past it, the commit by exclusive create
// (one winner among writers of the same version, on the memory and the local store), and the
// key/URI mapping that keeps deletes inside the table.
#include "run_task.hpp"

#include <skiff/iceberg/schema.hpp>
#include <skiff/iceberg/table_store.hpp>
#include <skiff/storage/local_store.hpp>
#include <skiff/storage/memory_store.hpp>

#include <catch2/catch.hpp>

#include <filesystem>
#include <stdlib.h>

using namespace skiff;
using namespace skiff::iceberg;
using namespace skiff::test;
using skiff::runtime::task;

namespace {

table_metadata fresh(const std::string& location) {
    auto s = evolve_schema(nullptr, 0, {}, 0);
    return table_metadata::create(location, new_uuid(), s.value().schema, s.value().last_column_id,
                                  partition_spec_json(partitioning::none, 0), {}, 1);
}

table_metadata with_snap(const loaded_table& t, std::int64_t id) {
    snapshot s;
    s.id = id;
    auto cur = t.metadata.current_snapshot();
    if (cur) s.parent = cur->id;
    s.sequence_number = t.metadata.last_sequence_number() + 1;
    s.timestamp_ms = 10;
    s.manifest_list = "m";
    s.summary = {{"operation", "append"}};
    return t.metadata.with_snapshot(s, "prev", 10).value();
}

// Two writers load the same version and both commit the next one: exactly one wins.
task<void> race(table_store& a, table_store& b) {
    std::stop_source ss;
    auto first = co_await a.commit(0, fresh(a.location()), ss.get_token());
    REQUIRE(first);
    CHECK(*first == 1);
    auto again = co_await b.commit(0, fresh(b.location()), ss.get_token());
    REQUIRE_FALSE(again);
    CHECK(again.error().code == errc::conflict);

    auto la = co_await a.load(ss.get_token());
    auto lb = co_await b.load(ss.get_token());
    REQUIRE(la);
    REQUIRE(lb);
    CHECK(la->version == 1);
    auto ca = co_await a.commit(la->version, with_snap(*la, 100), ss.get_token());
    auto cb = co_await b.commit(lb->version, with_snap(*lb, 200), ss.get_token());
    REQUIRE(ca);
    REQUIRE_FALSE(cb);
    CHECK(cb.error().code == errc::conflict);
    // The loser rebases on what won and commits the version after it.
    auto lb2 = co_await b.load(ss.get_token());
    REQUIRE(lb2);
    CHECK(lb2->version == 2);
    CHECK(lb2->metadata.current_snapshot()->id == 100);
    auto cb2 = co_await b.commit(lb2->version, with_snap(*lb2, 200), ss.get_token());
    REQUIRE(cb2);
    CHECK(*cb2 == 3);
    auto end = co_await a.load(ss.get_token());
    REQUIRE(end);
    CHECK(end->version == 3);
    CHECK(end->metadata.current_snapshot()->parent == 100);
}

} // namespace

TEST_CASE("an empty location has no table", "[iceberg][store]") {
    storage::memory_store store;
    table_store t(store, "wh/orders", "s3://b/wh/orders");
    auto r = run_task([&]() -> task<result<loaded_table, iceberg_error>> { co_return co_await t.load({}); }());
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::not_found);
}

TEST_CASE("one writer wins each version on the memory store", "[iceberg][store]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    storage::memory_store sa(bucket), sb(bucket);
    table_store a(sa, "wh/orders", "s3://b/wh/orders"), b(sb, "wh/orders", "s3://b/wh/orders");
    run_task(race(a, b));
    CHECK(bucket->objects.at("wh/orders/metadata/version-hint.text") == "3");
}

TEST_CASE("one writer wins each version on the local store (exclusive create)", "[iceberg][store]") {
    std::string tmpl = (std::filesystem::temp_directory_path() / "skiff-iceberg-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    {
        auto s1 = storage::local_store::create(tmpl);
        auto s2 = storage::local_store::create(tmpl);
        REQUIRE(s1);
        REQUIRE(s2);
        table_store a(**s1, "wh/orders", "file://" + tmpl + "/wh/orders");
        table_store b(**s2, "wh/orders", "file://" + tmpl + "/wh/orders");
        run_task(race(a, b));
    }
    std::filesystem::remove_all(tmpl);
}

TEST_CASE("the latest version is found past a stale, garbage or missing hint", "[iceberg][store]") {
    auto bucket = std::make_shared<storage::memory_bucket>();
    storage::memory_store store(bucket);
    table_store t(store, "wh/t", "s3://b/wh/t");
    auto load_version = [&]() -> int {
        auto r = run_task([&]() -> task<result<loaded_table, iceberg_error>> { co_return co_await t.load({}); }());
        REQUIRE(r);
        return r->version;
    };
    auto commit = [&](int base, table_metadata m) {
        auto r = run_task([&]() -> task<result<int, iceberg_error>> { co_return co_await t.commit(base, m, {}); }());
        REQUIRE(r);
    };
    commit(0, fresh(t.location()));
    loaded_table l;
    l.version = 1;
    l.metadata = table_metadata::parse(bucket->objects.at("wh/t/metadata/v1.metadata.json")).value();
    commit(1, with_snap(l, 7));
    l.version = 2;
    l.metadata = table_metadata::parse(bucket->objects.at("wh/t/metadata/v2.metadata.json")).value();
    commit(2, with_snap(l, 8));
    auto& hint = bucket->objects["wh/t/metadata/version-hint.text"];
    CHECK(load_version() == 3);
    hint = "1"; // a writer died before its hint: probed past, and the hint healed
    CHECK(load_version() == 3);
    CHECK(bucket->objects.at("wh/t/metadata/version-hint.text") == "3");
    hint = "banana\n"; // not a number: the listing decides
    CHECK(load_version() == 3);
    hint = "9"; // names a version that does not exist: the listing decides
    CHECK(load_version() == 3);
    bucket->objects.erase("wh/t/metadata/version-hint.text");
    bucket->objects["wh/t/metadata/v10.metadata.json.tmp"] = "x"; // not a version file
    CHECK(load_version() == 3);
    CHECK(bucket->objects.at("wh/t/metadata/version-hint.text") == "3");
    // A corrupt latest version is an error naming the file, never an older table silently.
    bucket->objects["wh/t/metadata/v4.metadata.json"] = "{";
    auto r = run_task([&]() -> task<result<loaded_table, iceberg_error>> { co_return co_await t.load({}); }());
    REQUIRE_FALSE(r);
    CHECK(r.error().code == errc::invalid_metadata);
    CHECK(r.error().message.find("v4.metadata.json") != std::string::npos);
}

TEST_CASE("keys and URIs map both ways only inside the table", "[iceberg][store]") {
    storage::memory_store store;
    table_store t(store, "wh/orders", "s3://b/wh/orders/");
    CHECK(t.location() == "s3://b/wh/orders");
    CHECK(t.uri_of("wh/orders/data/a.parquet") == "s3://b/wh/orders/data/a.parquet");
    CHECK(t.key_of("s3://b/wh/orders/data/a.parquet") == "wh/orders/data/a.parquet");
    CHECK_FALSE(t.key_of("s3://b/wh/orders2/data/a.parquet"));
    CHECK_FALSE(t.key_of("s3://b/wh/other/data/a.parquet"));
    CHECK_FALSE(t.key_of("s3://b/wh/orders/../other/x"));
    CHECK_FALSE(t.key_of("s3://b/wh/orders"));
    CHECK(metadata_version("a/metadata/v12.metadata.json") == 12);
    CHECK_FALSE(metadata_version("a/metadata/v012.metadata.json"));
    CHECK_FALSE(metadata_version("a/metadata/v.metadata.json"));
    CHECK_FALSE(metadata_version("a/metadata/12.metadata.json"));
}
