// The Iceberg schema of a topic's table and its partition spec, as the JSON the table
// metadata stores (Iceberg spec, "Schemas and Data Types", "Partitioning").
//
// Every topic's table starts with the same six columns, each with a fixed field id so that
// every sink (and every restart of one) writes the same ids:
//   1 partition int, 2 offset long, 3 timestamp timestamptz, 4 key binary, 5 value binary,
//   6 headers list<7: struct<8 key string, 9 value binary>>.
// Typed columns projected from JSON values come after, with ids above the table's
// last-column-id; a projection keeps its id for the life of the table (Iceberg's evolution
// rules: columns are added, never renumbered). Pure; any core.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/iceberg/errc.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace skiff::iceberg {

namespace field_ids {
inline constexpr int partition = 1, offset = 2, timestamp = 3, key = 4, value = 5, headers = 6,
                     header_element = 7, header_key = 8, header_value = 9;
inline constexpr int last_fixed = 9;
inline constexpr int first_partition_field = 1000; // partition fields count from here (spec)
} // namespace field_ids

// A typed column taken from each record's JSON value. Values that are not JSON, or whose
// path holds something of another type, leave the column null and count as dead letters.
struct projection {
    projection() = default;
    projection(std::string n, std::string t, std::string p) : name(std::move(n)), type(std::move(t)), path(std::move(p)) {}
    std::string name; // column name: [a-z_][a-z0-9_]*, not one of the fixed columns
    std::string type; // string | long | double | boolean | timestamptz (epoch ms in JSON, or ISO-8601)
    std::string path; // "$.a.b" (object members only)
};
// The projection's path as member names ("$.a.b" -> {"a","b"}); an error names the problem.
result<std::vector<std::string>, iceberg_error> parse_json_path(std::string_view path);
// Checks names, types and paths of a set of projections (no duplicates, no fixed names).
result<void, iceberg_error> check_projections(std::span<const projection> ps);

// `NAME:TYPE:PATH` for every topic, or `TOPIC/NAME:TYPE:PATH` for one (a '/' is in no topic
// name and no column name), as --project and --iceberg-project take them. Checks the pieces.
struct scoped_projection {
    std::string topic; // empty: every topic
    projection column;
};
result<scoped_projection, iceberg_error> parse_projection_spec(std::string_view spec);
// The projections that apply to `topic`, in order (every-topic ones first); an error when two
// share a name.
result<std::vector<projection>, iceberg_error> projections_for(std::span<const scoped_projection> specs, std::string_view topic);

// A schema (Iceberg JSON, "type":"struct") with the fixed columns and `ps`. `current` is the
// table's current schema or null for a new table; a projection already in it (same name)
// keeps its id and must keep its type; new ones are numbered from last_column_id + 1.
struct evolved_schema {
    nlohmann::json schema;
    int last_column_id = 0;
    bool changed = false; // differs from `current` (a new schema id is needed)
};
result<evolved_schema, iceberg_error> evolve_schema(const nlohmann::json* current, int last_column_id,
                                                    std::span<const projection> ps, int schema_id);

enum class partitioning { day, identity_partition, none };
result<partitioning, iceberg_error> parse_partitioning(std::string_view s); // day | partition | none
const char* to_string(partitioning p) noexcept;
// {"spec-id": id, "fields": [...]} with field id 1000, named as Iceberg names them by default:
// day(timestamp) is "timestamp_day", identity(partition) is "partition"; none has no fields.
nlohmann::json partition_spec_json(partitioning p, int spec_id);

} // namespace skiff::iceberg
