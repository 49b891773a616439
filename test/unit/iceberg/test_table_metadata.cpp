// The topic table's schema and partition spec, and table metadata: create, parse (and its
// refusals), snapshots appended, schemas evolved, snapshots expired.
#include <skiff/iceberg/schema.hpp>
#include <skiff/iceberg/table_metadata.hpp>

#include <catch2/catch.hpp>

using namespace skiff;
using namespace skiff::iceberg;
using nlohmann::json;

namespace {

table_metadata new_table() {
    auto s = evolve_schema(nullptr, 0, {}, 0);
    REQUIRE(s);
    return table_metadata::create("s3://b/wh/orders", "0f8fad5b-d9cb-469f-a165-70867728950e", s->schema, s->last_column_id,
                                  partition_spec_json(partitioning::day, 0), {{"write.format.default", "parquet"}}, 1000);
}

snapshot snap(std::int64_t id, std::optional<std::int64_t> parent, std::int64_t seq) {
    snapshot s;
    s.id = id;
    s.parent = parent;
    s.sequence_number = seq;
    s.timestamp_ms = 2000 + seq;
    s.manifest_list = "s3://b/wh/orders/metadata/snap-" + std::to_string(id) + ".avro";
    s.summary = {{"operation", "append"}, {"skiff.next-offsets", "{\"0\":10}"}};
    return s;
}

} // namespace

TEST_CASE("the fixed columns carry their field ids; projections get new ids and keep them", "[iceberg][schema]") {
    auto base = evolve_schema(nullptr, 0, {}, 0);
    REQUIRE(base);
    CHECK(base->last_column_id == 9);
    const auto& f = base->schema["fields"];
    REQUIRE(f.size() == 6);
    CHECK(f[0] == json{{"id", 1}, {"name", "partition"}, {"required", true}, {"type", "int"}});
    CHECK(f[2]["type"] == "timestamptz");
    CHECK(f[5]["type"]["element-id"] == 7);
    CHECK(f[5]["type"]["element"]["fields"][0]["id"] == 8);
    CHECK(f[5]["type"]["element"]["fields"][1]["id"] == 9);

    std::vector<projection> ps{{"amount", "double", "$.order.amount"}, {"customer", "string", "$.customer"}};
    auto v1 = evolve_schema(&base->schema, base->last_column_id, ps, 1);
    REQUIRE(v1);
    CHECK(v1->changed);
    CHECK(v1->last_column_id == 11);
    CHECK(v1->schema["fields"][6] == json{{"id", 10}, {"name", "amount"}, {"required", false}, {"type", "double"}});
    // Same projections again: nothing changes. One removed and one added: the removed column
    // stays (never dropped implicitly), the new one gets the next id.
    auto same = evolve_schema(&v1->schema, v1->last_column_id, ps, 2);
    REQUIRE(same);
    CHECK_FALSE(same->changed);
    std::vector<projection> ps2{{"customer", "string", "$.customer"}, {"paid", "boolean", "$.paid"}};
    auto v2 = evolve_schema(&v1->schema, v1->last_column_id, ps2, 2);
    REQUIRE(v2);
    CHECK(v2->changed);
    REQUIRE(v2->schema["fields"].size() == 9);
    CHECK(v2->schema["fields"][6]["name"] == "amount");
    CHECK(v2->schema["fields"][8] == json{{"id", 12}, {"name", "paid"}, {"required", false}, {"type", "boolean"}});
    // A type change is refused (Iceberg allows only widening, and a JSON projection's type is
    // the operator's promise to readers).
    std::vector<projection> bad{{"amount", "string", "$.amount"}};
    auto r = evolve_schema(&v1->schema, v1->last_column_id, bad, 2);
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("cannot become string") != std::string::npos);
}

TEST_CASE("projections with bad names, types or paths are refused with a sentence", "[iceberg][schema]") {
    auto refuse = [](projection p, std::string_view words) {
        std::vector<projection> ps{std::move(p)};
        auto r = check_projections(ps);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == errc::invalid_argument);
        INFO(r.error().message);
        CHECK(r.error().message.find(words) != std::string::npos);
    };
    refuse({"Amount", "double", "$.a"}, "names are");
    refuse({"offset", "long", "$.a"}, "fixed column");
    refuse({"a", "decimal", "$.a"}, "not one of");
    refuse({"a", "long", "a.b"}, "must start with");
    refuse({"a", "long", "$.a..b"}, "empty member");
    refuse({"a", "long", "$.a[0]"}, "only object members");
    std::vector<projection> twice{{"a", "long", "$.a"}, {"a", "long", "$.b"}};
    REQUIRE_FALSE(check_projections(twice));
    auto path = parse_json_path("$.order.amount");
    REQUIRE(path);
    CHECK(*path == std::vector<std::string>{"order", "amount"});
}

TEST_CASE("partition specs: day(timestamp), identity(partition), none", "[iceberg][schema]") {
    CHECK(partition_spec_json(partitioning::day, 0)["fields"][0] ==
          json{{"name", "timestamp_day"}, {"transform", "day"}, {"source-id", 3}, {"field-id", 1000}});
    CHECK(partition_spec_json(partitioning::identity_partition, 0)["fields"][0]["transform"] == "identity");
    CHECK(partition_spec_json(partitioning::none, 0)["fields"].empty());
    CHECK(parse_partitioning("partition").value() == partitioning::identity_partition);
    CHECK_FALSE(parse_partitioning("hour"));
}

TEST_CASE("a new table's metadata parses back with every required field", "[iceberg][metadata]") {
    auto t = new_table();
    auto back = table_metadata::parse(t.dump());
    REQUIRE(back);
    CHECK(back->uuid() == "0f8fad5b-d9cb-469f-a165-70867728950e");
    CHECK(back->location() == "s3://b/wh/orders");
    CHECK(back->last_sequence_number() == 0);
    CHECK(back->last_column_id() == 9);
    CHECK(back->current_schema()["fields"].size() == 6);
    CHECK(back->default_spec()["fields"][0]["transform"] == "day");
    CHECK(back->doc()["last-partition-id"] == 1000);
    CHECK_FALSE(back->current_snapshot());
    CHECK(back->properties().at("write.format.default") == "parquet");
}

TEST_CASE("snapshots append in sequence, move main and log the previous metadata file", "[iceberg][metadata]") {
    auto t = new_table();
    auto v2 = t.with_snapshot(snap(11, std::nullopt, 1), "s3://b/wh/orders/metadata/v1.metadata.json", 5000);
    REQUIRE(v2);
    auto v3 = v2->with_snapshot(snap(22, 11, 2), "s3://b/wh/orders/metadata/v2.metadata.json", 6000);
    REQUIRE(v3);
    auto back = table_metadata::parse(v3->dump());
    REQUIRE(back);
    REQUIRE(back->current_snapshot());
    CHECK(back->current_snapshot()->id == 22);
    CHECK(back->current_snapshot()->parent == 11);
    CHECK(back->current_snapshot()->summary.at("skiff.next-offsets") == "{\"0\":10}");
    CHECK(back->last_sequence_number() == 2);
    CHECK(back->doc()["refs"]["main"] == json{{"snapshot-id", 22}, {"type", "branch"}});
    CHECK(back->doc()["snapshot-log"].size() == 2);
    CHECK(back->doc()["metadata-log"].size() == 2);
    CHECK(back->doc()["metadata-log"][1]["metadata-file"] == "s3://b/wh/orders/metadata/v2.metadata.json");
    CHECK(back->last_updated_ms() == 6000);
    // Out of sequence, a stale parent, a reused id: refused.
    CHECK_FALSE(back->with_snapshot(snap(33, 22, 4), "x", 7000));
    CHECK_FALSE(back->with_snapshot(snap(33, 11, 3), "x", 7000));
    CHECK_FALSE(back->with_snapshot(snap(22, 22, 3), "x", 7000));
    // Expiry keeps the current snapshot and drops the others from snapshots and the log.
    CHECK_FALSE(back->without_snapshots({22}, "x", 7000));
    auto expired = back->without_snapshots({11}, "s3://b/wh/orders/metadata/v3.metadata.json", 7000);
    REQUIRE(expired);
    CHECK(expired->snapshots().size() == 1);
    CHECK(expired->doc()["snapshot-log"].size() == 1);
    CHECK(table_metadata::parse(expired->dump()));
}

TEST_CASE("metadata that breaks the spec is refused with what is wrong", "[iceberg][metadata]") {
    auto refuse = [](const std::string& text, std::string_view words) {
        auto r = table_metadata::parse(text);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == errc::invalid_metadata);
        INFO(r.error().message);
        CHECK(r.error().message.find(words) != std::string::npos);
    };
    refuse("not json", "not a JSON object");
    refuse("[1,2]", "not a JSON object");
    json doc = new_table().doc();
    auto edited = [&](auto f) {
        json d = doc;
        f(d);
        return d.dump();
    };
    refuse(edited([](json& d) { d["format-version"] = 1; }), "format-version 1");
    refuse(edited([](json& d) { d.erase("location"); }), "\"location\"");
    refuse(edited([](json& d) { d["current-schema-id"] = 5; }), "names no schema");
    refuse(edited([](json& d) { d["default-spec-id"] = 3; }), "names no partition spec");
    refuse(edited([](json& d) { d["current-snapshot-id"] = 77; }), "names no snapshot");
    refuse(edited([](json& d) { d["snapshots"] = json::array({json{{"snapshot-id", 1}}}); }), "missing snapshot-id");
    refuse(edited([](json& d) { d["last-sequence-number"] = "1"; }), "last-sequence-number");
    // Another writer's null current-snapshot-id and unknown fields are accepted and kept.
    auto ok = table_metadata::parse(edited([](json& d) {
        d["current-snapshot-id"] = nullptr;
        d["x-other-writer"] = {{"k", 1}};
    }));
    REQUIRE(ok);
    CHECK_FALSE(ok->current_snapshot());
    auto next = ok->with_snapshot(snap(5, std::nullopt, 1), "f", 9000);
    REQUIRE(next);
    CHECK(next->doc()["x-other-writer"]["k"] == 1);
}

TEST_CASE("uuids and snapshot ids are well-formed and differ", "[iceberg][metadata]") {
    const auto a = new_uuid(), b = new_uuid();
    CHECK(a.size() == 36);
    CHECK(a[14] == '4');
    CHECK(a != b);
    CHECK(new_snapshot_id() > 0);
    CHECK(new_snapshot_id() != new_snapshot_id());
}

TEST_CASE("numbers and shapes that would convert badly are refused (fuzzer findings)", "[iceberg][metadata]") {
    json doc = new_table().doc();
    auto edited = [&](auto f) {
        json d = doc;
        f(d);
        return d.dump();
    };
    auto refused = [](const std::string& text) {
        auto r = table_metadata::parse(text);
        if (r) return false;
        CHECK(r.error().code == errc::invalid_metadata);
        return true;
    };
    json snap = {{"snapshot-id", 5}, {"timestamp-ms", 1}, {"manifest-list", "m"}, {"sequence-number", 1}};
    CHECK(refused(edited([&](json& d) { d["snapshots"] = json::array({snap}); d["snapshots"][0]["snapshot-id"] = 1e30; })));
    CHECK(refused(edited([&](json& d) { d["snapshots"] = json::array({snap}); d["snapshots"][0]["snapshot-id"] = 18446744073709551615ULL; })));
    CHECK(refused(edited([&](json& d) { d["snapshots"] = json::array({snap}); d["snapshots"][0]["sequence-number"] = 2.5; })));
    CHECK(refused(edited([](json& d) { d["current-schema-id"] = 4294967296LL; })));
    CHECK(refused(edited([](json& d) { d["refs"] = json::array(); })));
    CHECK(refused(edited([](json& d) { d["snapshot-log"] = json::array({1}); })));
    CHECK(refused(edited([](json& d) { d["snapshot-log"] = json::array({json{{"snapshot-id", 1.5}}}); })));
    CHECK(refused(edited([](json& d) { d["last-sequence-number"] = 9223372036854775807LL; })));
    CHECK(refused(edited([](json& d) { d["schemas"][0]["schema-id"] = "0"; })));
    CHECK(refused(edited([](json& d) { d["properties"] = json::array(); })));
    // The well-formed case with a snapshot still parses.
    auto ok = table_metadata::parse(edited([&](json& d) {
        d["snapshots"] = json::array({snap});
        d["current-snapshot-id"] = 5;
        d["last-sequence-number"] = 1;
    }));
    REQUIRE(ok);
    CHECK(ok->current_snapshot()->id == 5);
}

TEST_CASE("projection specs name every topic or one topic", "[iceberg][schema]") {
    auto all = parse_projection_spec("amount:double:$.order.amount");
    REQUIRE(all);
    CHECK(all->topic.empty());
    CHECK(all->column.name == "amount");
    CHECK(all->column.path == "$.order.amount");
    auto one = parse_projection_spec("orders/customer:string:$.customer");
    REQUIRE(one);
    CHECK(one->topic == "orders");
    CHECK(one->column.name == "customer");
    CHECK_FALSE(parse_projection_spec("amount-double"));
    CHECK_FALSE(parse_projection_spec("/amount:double:$.a"));
    CHECK_FALSE(parse_projection_spec("orders/Amount:double:$.a"));
    const std::vector<scoped_projection> specs{*all, *one, parse_projection_spec("clicks/customer:long:$.c").value()};
    auto orders = projections_for(specs, "orders");
    REQUIRE(orders);
    REQUIRE(orders->size() == 2);
    CHECK((*orders)[1].type == "string");
    auto clicks = projections_for(specs, "clicks");
    REQUIRE(clicks);
    CHECK((*clicks)[1].type == "long");
    CHECK(projections_for(specs, "other").value().size() == 1);
    const std::vector<scoped_projection> clash{*all, parse_projection_spec("orders/amount:long:$.b").value()};
    auto r = projections_for(clash, "orders");
    REQUIRE_FALSE(r);
    CHECK(r.error().message.find("orders") != std::string::npos);
}
