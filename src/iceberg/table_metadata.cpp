// Iceberg v2 table metadata (include/skiff/iceberg/table_metadata.hpp).
#include <skiff/iceberg/table_metadata.hpp>

#include <skiff/core/uuid.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <random>

namespace skiff::iceberg {

namespace {

using json = nlohmann::json;

// Java's default for write.metadata.previous-versions-max: the metadata log stays bounded.
constexpr std::size_t previous_versions_max = 100;

iceberg_error bad(std::string m) { return iceberg_error(errc::invalid_metadata, std::move(m)); }

bool fits_i64(const json& j) {
    return j.is_number_integer() && (!j.is_number_unsigned() || j.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
}

bool fits_i32(const json& j) {
    if (!fits_i64(j)) return false;
    const auto v = j.get<std::int64_t>();
    return v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max();
}

const json* find_by(const json& arr, const char* key, std::int64_t id) {
    if (!arr.is_array()) return nullptr;
    for (const auto& e : arr) {
        const auto it = e.find(key);
        if (it != e.end() && it->is_number_integer() && it->get<std::int64_t>() == id) return &e;
    }
    return nullptr;
}

std::optional<snapshot> to_snapshot(const json& j) {
    snapshot s;
    try {
        s.id = j.at("snapshot-id").get<std::int64_t>();
        if (auto p = j.find("parent-snapshot-id"); p != j.end() && p->is_number_integer()) s.parent = p->get<std::int64_t>();
        s.sequence_number = j.value("sequence-number", std::int64_t{0});
        s.timestamp_ms = j.at("timestamp-ms").get<std::int64_t>();
        s.manifest_list = j.at("manifest-list").get<std::string>();
        s.schema_id = j.value("schema-id", 0);
        if (auto sum = j.find("summary"); sum != j.end() && sum->is_object()) {
            for (auto& [k, v] : sum->items()) s.summary[k] = v.is_string() ? v.get<std::string>() : v.dump();
        }
    } catch (const json::exception&) {
        return std::nullopt;
    }
    return s;
}

json from_snapshot(const snapshot& s) {
    json j = {{"snapshot-id", s.id},
              {"sequence-number", s.sequence_number},
              {"timestamp-ms", s.timestamp_ms},
              {"manifest-list", s.manifest_list},
              {"summary", s.summary},
              {"schema-id", s.schema_id}};
    if (s.parent) j["parent-snapshot-id"] = *s.parent;
    return j;
}

} // namespace

table_metadata table_metadata::create(std::string location, std::string uuid, const json& schema, int last_column_id,
                                      const json& spec, const std::map<std::string, std::string>& properties,
                                      std::int64_t now_ms) {
    int last_partition_id = 999; // the spec's value for a table without partition fields
    for (const auto& f : spec.value("fields", json::array())) last_partition_id = std::max(last_partition_id, f.value("field-id", 0));
    json doc = {{"format-version", 2},
                {"table-uuid", std::move(uuid)},
                {"location", std::move(location)},
                {"last-sequence-number", 0},
                {"last-updated-ms", now_ms},
                {"last-column-id", last_column_id},
                {"current-schema-id", schema.value("schema-id", 0)},
                {"schemas", json::array({schema})},
                {"default-spec-id", spec.value("spec-id", 0)},
                {"partition-specs", json::array({spec})},
                {"last-partition-id", last_partition_id},
                {"default-sort-order-id", 0},
                {"sort-orders", json::array({json{{"order-id", 0}, {"fields", json::array()}}})},
                {"properties", properties},
                {"current-snapshot-id", -1},
                {"refs", json::object()},
                {"snapshots", json::array()},
                {"statistics", json::array()},
                {"snapshot-log", json::array()},
                {"metadata-log", json::array()}};
    return table_metadata(std::move(doc));
}

result<table_metadata, iceberg_error> table_metadata::parse(std::string_view text) {
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) return bad("the metadata file is not a JSON object");
    auto need = [&](const char* key, auto pred, const char* what) -> std::optional<iceberg_error> {
        const auto it = doc.find(key);
        if (it == doc.end() || !pred(*it)) return bad(fmt::format("the metadata file's \"{}\" is missing or not {}", key, what));
        return std::nullopt;
    };
    const auto is_int = [](const json& j) { return j.is_number_integer(); };
    const auto is_str = [](const json& j) { return j.is_string(); };
    const auto is_arr = [](const json& j) { return j.is_array(); };
    for (auto e : {need("format-version", is_int, "an integer"), need("table-uuid", is_str, "a string"),
                   need("location", is_str, "a string"), need("last-sequence-number", is_int, "an integer"),
                   need("last-updated-ms", is_int, "an integer"), need("last-column-id", is_int, "an integer"),
                   need("schemas", is_arr, "an array"), need("current-schema-id", is_int, "an integer"),
                   need("partition-specs", is_arr, "an array"), need("default-spec-id", is_int, "an integer")}) {
        if (e) return *e;
    }
    if (!fits_i32(doc["format-version"]) || doc["format-version"].get<int>() != 2) {
        return bad(fmt::format("format-version {} is not supported (skiff writes and appends to v2 tables)",
                               doc["format-version"].dump()));
    }
    // Every number this module reads back must be an integer in range: a float, or an integer
    // beyond int64, would otherwise convert with undefined behaviour (the fuzzer found both).
    for (const char* k : {"last-sequence-number", "last-updated-ms"}) {
        if (!fits_i64(doc[k])) return bad(fmt::format("\"{}\" is not a 64-bit integer", k));
    }
    for (const char* k : {"last-column-id", "current-schema-id", "default-spec-id"}) {
        if (!fits_i32(doc[k])) return bad(fmt::format("\"{}\" is not a 32-bit integer", k));
    }
    if (doc["last-sequence-number"].get<std::int64_t>() < 0 ||
        doc["last-sequence-number"].get<std::int64_t>() == std::numeric_limits<std::int64_t>::max()) {
        return bad("last-sequence-number is out of range");
    }
    for (const auto& sc : doc["schemas"]) {
        if (!sc.is_object() || !fits_i32(sc.value("schema-id", json())) || !sc.contains("fields") || !sc["fields"].is_array()) {
            return bad("a schema is not an object with an integer schema-id and a fields array");
        }
    }
    for (const auto& sp : doc["partition-specs"]) {
        if (!sp.is_object() || !fits_i32(sp.value("spec-id", json())) || !sp.contains("fields") || !sp["fields"].is_array()) {
            return bad("a partition spec is not an object with an integer spec-id and a fields array");
        }
    }
    if (!find_by(doc["schemas"], "schema-id", doc["current-schema-id"].get<std::int64_t>())) {
        return bad(fmt::format("current-schema-id {} names no schema", doc["current-schema-id"].get<std::int64_t>()));
    }
    if (!find_by(doc["partition-specs"], "spec-id", doc["default-spec-id"].get<std::int64_t>())) {
        return bad(fmt::format("default-spec-id {} names no partition spec", doc["default-spec-id"].get<std::int64_t>()));
    }
    if (!doc.contains("snapshots")) doc["snapshots"] = json::array();
    if (!doc["snapshots"].is_array()) return bad("the metadata file's \"snapshots\" is not an array");
    for (const auto& s : doc["snapshots"]) {
        const bool ok_shape = s.is_object() && fits_i64(s.value("snapshot-id", json())) && fits_i64(s.value("timestamp-ms", json())) &&
                              s.value("manifest-list", json()).is_string() &&
                              (!s.contains("parent-snapshot-id") || s["parent-snapshot-id"].is_null() || fits_i64(s["parent-snapshot-id"])) &&
                              (!s.contains("sequence-number") || fits_i64(s["sequence-number"])) &&
                              (!s.contains("schema-id") || fits_i32(s["schema-id"])) &&
                              (!s.contains("summary") || s["summary"].is_object());
        if (!ok_shape || !to_snapshot(s)) {
            return bad(fmt::format("a snapshot is missing snapshot-id, timestamp-ms or manifest-list, or has a field of the wrong type: {}",
                                   s.dump().substr(0, 200)));
        }
    }
    for (const char* k : {"snapshot-log", "metadata-log"}) {
        if (!doc.contains(k)) doc[k] = json::array();
        if (!doc[k].is_array()) return bad(fmt::format("\"{}\" is not an array", k));
        for (const auto& e : doc[k]) {
            if (!e.is_object() || (e.contains("snapshot-id") && !fits_i64(e["snapshot-id"])) ||
                (e.contains("timestamp-ms") && !fits_i64(e["timestamp-ms"]))) {
                return bad(fmt::format("an entry of \"{}\" is not an object with integer ids and times", k));
            }
        }
    }
    if (!doc.contains("refs")) doc["refs"] = json::object();
    if (!doc["refs"].is_object()) return bad("\"refs\" is not an object");
    for (auto& [name, r] : doc["refs"].items()) {
        if (!r.is_object() || !fits_i64(r.value("snapshot-id", json()))) {
            return bad(fmt::format("ref \"{}\" is not an object with an integer snapshot-id", name));
        }
    }
    if (doc.contains("properties") && !doc["properties"].is_object()) return bad("\"properties\" is not an object");
    // Readers treat a missing or null current snapshot as "no snapshot"; -1 is Java's spelling.
    auto cur = doc.find("current-snapshot-id");
    if (cur == doc.end() || cur->is_null()) doc["current-snapshot-id"] = -1;
    else if (!fits_i64(*cur)) return bad("current-snapshot-id is not an integer");
    const auto cid = doc["current-snapshot-id"].get<std::int64_t>();
    if (cid != -1 && !find_by(doc["snapshots"], "snapshot-id", cid)) {
        return bad(fmt::format("current-snapshot-id {} names no snapshot", cid));
    }
    return table_metadata(std::move(doc));
}

const json& table_metadata::current_schema() const {
    return *find_by(_doc["schemas"], "schema-id", current_schema_id());
}

const json& table_metadata::default_spec() const {
    return *find_by(_doc["partition-specs"], "spec-id", default_spec_id());
}

std::map<std::string, std::string> table_metadata::properties() const {
    std::map<std::string, std::string> out;
    if (auto it = _doc.find("properties"); it != _doc.end() && it->is_object()) {
        for (auto& [k, v] : it->items()) out[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
    return out;
}

std::optional<snapshot> table_metadata::current_snapshot() const {
    const auto id = _doc.value("current-snapshot-id", std::int64_t{-1});
    if (id == -1) return std::nullopt;
    return find_snapshot(id);
}

std::optional<snapshot> table_metadata::find_snapshot(std::int64_t id) const {
    const json* s = find_by(_doc["snapshots"], "snapshot-id", id);
    if (!s) return std::nullopt;
    return to_snapshot(*s);
}

std::vector<snapshot> table_metadata::snapshots() const {
    std::vector<snapshot> out;
    for (const auto& s : _doc["snapshots"]) {
        if (auto v = to_snapshot(s)) out.push_back(std::move(*v));
    }
    return out;
}

void table_metadata::log_previous(const std::string& previous_metadata_file, std::int64_t now_ms) {
    auto& log = _doc["metadata-log"];
    if (!log.is_array()) log = json::array();
    log.push_back({{"timestamp-ms", last_updated_ms()}, {"metadata-file", previous_metadata_file}});
    while (log.size() > previous_versions_max) log.erase(log.begin());
    _doc["last-updated-ms"] = std::max(now_ms, last_updated_ms());
}

result<table_metadata, iceberg_error> table_metadata::with_snapshot(const snapshot& s, const std::string& previous_metadata_file,
                                                                    std::int64_t now_ms) const {
    if (s.sequence_number != last_sequence_number() + 1) {
        return iceberg_error(errc::invalid_argument, fmt::format("snapshot sequence number {} after last-sequence-number {}",
                                                                 s.sequence_number, last_sequence_number()));
    }
    const auto cur = current_snapshot();
    if ((cur ? std::optional<std::int64_t>(cur->id) : std::nullopt) != s.parent) {
        return iceberg_error(errc::invalid_argument, "the snapshot's parent is not the table's current snapshot");
    }
    if (find_snapshot(s.id)) return iceberg_error(errc::invalid_argument, fmt::format("snapshot id {} exists", s.id));
    table_metadata next(_doc);
    next.log_previous(previous_metadata_file, now_ms);
    next._doc["snapshots"].push_back(from_snapshot(s));
    next._doc["current-snapshot-id"] = s.id;
    next._doc["last-sequence-number"] = s.sequence_number;
    next._doc["refs"]["main"] = {{"snapshot-id", s.id}, {"type", "branch"}};
    auto& slog = next._doc["snapshot-log"];
    if (!slog.is_array()) slog = json::array();
    slog.push_back({{"timestamp-ms", s.timestamp_ms}, {"snapshot-id", s.id}});
    return next;
}

table_metadata table_metadata::with_schema(const json& schema, int last_column_id, const std::string& previous_metadata_file,
                                           std::int64_t now_ms) const {
    table_metadata next(_doc);
    next.log_previous(previous_metadata_file, now_ms);
    next._doc["schemas"].push_back(schema);
    next._doc["current-schema-id"] = schema.value("schema-id", 0);
    next._doc["last-column-id"] = std::max(last_column_id, this->last_column_id());
    return next;
}

result<table_metadata, iceberg_error> table_metadata::without_snapshots(const std::set<std::int64_t>& ids,
                                                                        const std::string& previous_metadata_file,
                                                                        std::int64_t now_ms) const {
    const auto cur = current_snapshot();
    if (cur && ids.count(cur->id)) return iceberg_error(errc::invalid_argument, "the current snapshot cannot be expired");
    table_metadata next(_doc);
    next.log_previous(previous_metadata_file, now_ms);
    auto drop = [&](json& arr) {
        if (!arr.is_array()) return;
        json kept = json::array();
        for (auto& e : arr) {
            if (!ids.count(e.value("snapshot-id", std::int64_t{-1}))) kept.push_back(std::move(e));
        }
        arr = std::move(kept);
    };
    drop(next._doc["snapshots"]);
    drop(next._doc["snapshot-log"]);
    // Refs other than main (tags, branches another writer made) that point at an expired
    // snapshot would dangle: they go too.
    if (auto refs = next._doc.find("refs"); refs != next._doc.end() && refs->is_object()) {
        for (auto it = refs->begin(); it != refs->end();) {
            if (ids.count(it->value("snapshot-id", std::int64_t{-1}))) it = refs->erase(it);
            else ++it;
        }
    }
    return next;
}

std::int64_t summary_number(const std::map<std::string, std::string>& summary, std::string_view key) {
    auto it = summary.find(std::string(key));
    if (it == summary.end()) return 0;
    std::int64_t v = 0;
    const auto* b = it->second.data();
    const auto* e = b + it->second.size();
    auto [end, ec] = std::from_chars(b, e, v);
    return ec == std::errc() && end == e ? v : 0;
}

std::string new_uuid() {
    std::mt19937_64 rng{std::random_device{}()};
    const auto b = random_uuid_v4(rng);
    std::string s;
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
        s += fmt::format("{:02x}", b[i]);
    }
    return s;
}

std::int64_t new_snapshot_id() {
    std::mt19937_64 rng{(std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
    std::int64_t id = 0;
    while (id <= 0) id = static_cast<std::int64_t>(rng() >> 1);
    return id;
}

} // namespace skiff::iceberg
