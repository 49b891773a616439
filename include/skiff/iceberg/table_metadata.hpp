// An Iceberg v2 table metadata file (Iceberg spec, "Table Metadata"): parsed, checked, and
// changed only by producing the next version. The whole JSON document is kept, so fields this
// module does not model (another writer's properties, statistics, refs) survive our commits.
// Pure; any core.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/iceberg/errc.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::iceberg {

struct snapshot {
    snapshot() = default;
    std::int64_t id = 0;
    std::optional<std::int64_t> parent;
    std::int64_t sequence_number = 0;
    std::int64_t timestamp_ms = 0;
    std::string manifest_list; // location (URI) of the manifest list
    std::map<std::string, std::string> summary; // "operation" and the rest, strings as the spec says
    int schema_id = 0;
};

class table_metadata {
public:
    table_metadata() = default;
    // A new v2 table: one schema, one partition spec, no snapshots. `schema` and `spec` as
    // schema.hpp makes them; uuid as 36-char text.
    static table_metadata create(std::string location, std::string uuid, const nlohmann::json& schema,
                                 int last_column_id, const nlohmann::json& spec,
                                 const std::map<std::string, std::string>& properties, std::int64_t now_ms);
    // Parses and checks a metadata file: format-version 2, every required field with its type,
    // the current schema, spec and snapshot present. invalid_metadata names what is wrong.
    static result<table_metadata, iceberg_error> parse(std::string_view text);

    std::string dump() const { return _doc.dump(2); }
    const nlohmann::json& doc() const noexcept { return _doc; }

    std::string uuid() const { return _doc.value("table-uuid", ""); }
    std::string location() const { return _doc.value("location", ""); }
    std::int64_t last_sequence_number() const { return _doc.value("last-sequence-number", std::int64_t{0}); }
    std::int64_t last_updated_ms() const { return _doc.value("last-updated-ms", std::int64_t{0}); }
    int last_column_id() const { return _doc.value("last-column-id", 0); }
    int current_schema_id() const { return _doc.value("current-schema-id", 0); }
    const nlohmann::json& current_schema() const; // checked by parse/create to exist
    int default_spec_id() const { return _doc.value("default-spec-id", 0); }
    const nlohmann::json& default_spec() const;
    std::map<std::string, std::string> properties() const;

    std::optional<snapshot> current_snapshot() const;
    std::optional<snapshot> find_snapshot(std::int64_t id) const;
    std::vector<snapshot> snapshots() const; // in the file's order (oldest first as we write them)

    // The next version with `s` appended and made current (main branch, snapshot log, and the
    // metadata log gaining `previous_metadata_file`, the location of this version's file).
    // s.sequence_number must be last_sequence_number() + 1 and s.parent the current snapshot.
    result<table_metadata, iceberg_error> with_snapshot(const snapshot& s, const std::string& previous_metadata_file,
                                                        std::int64_t now_ms) const;
    // The next version with `schema` (a new schema id) current.
    table_metadata with_schema(const nlohmann::json& schema, int last_column_id, const std::string& previous_metadata_file,
                               std::int64_t now_ms) const;
    // The next version without the snapshots in `ids` (never the current one; refuses it).
    result<table_metadata, iceberg_error> without_snapshots(const std::set<std::int64_t>& ids,
                                                            const std::string& previous_metadata_file,
                                                            std::int64_t now_ms) const;

private:
    explicit table_metadata(nlohmann::json doc) : _doc(std::move(doc)) {}
    void log_previous(const std::string& previous_metadata_file, std::int64_t now_ms);
    nlohmann::json _doc;
};

// A number in a snapshot summary ("total-records"...): 0 when absent or not a number (the
// summary is informational; another writer may leave keys out).
std::int64_t summary_number(const std::map<std::string, std::string>& summary, std::string_view key);

// 36-character lowercase text of a random v4 UUID, and a random positive snapshot id (both
// from a per-call seeded engine: ids only need to be unique).
std::string new_uuid();
std::int64_t new_snapshot_id();

} // namespace skiff::iceberg
