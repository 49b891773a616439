// The topic table's Iceberg schema and partition spec (include/skiff/iceberg/schema.hpp).
#include <skiff/iceberg/schema.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace skiff::iceberg {

namespace {

using json = nlohmann::json;

json field(int id, std::string_view name, bool required, json type) {
    return json{{"id", id}, {"name", name}, {"required", required}, {"type", std::move(type)}};
}

json fixed_fields() {
    json header = {{"type", "struct"},
                   {"fields", json::array({field(field_ids::header_key, "key", true, "string"),
                                           field(field_ids::header_value, "value", false, "binary")})}};
    json headers = {{"type", "list"},
                    {"element-id", field_ids::header_element},
                    {"element-required", true},
                    {"element", std::move(header)}};
    return json::array({field(field_ids::partition, "partition", true, "int"),
                        field(field_ids::offset, "offset", true, "long"),
                        field(field_ids::timestamp, "timestamp", true, "timestamptz"),
                        field(field_ids::key, "key", false, "binary"),
                        field(field_ids::value, "value", false, "binary"),
                        field(field_ids::headers, "headers", false, std::move(headers))});
}

bool valid_name(std::string_view n) {
    if (n.empty() || n.size() > 128) return false;
    if (!(n[0] == '_' || (n[0] >= 'a' && n[0] <= 'z'))) return false;
    return std::all_of(n.begin(), n.end(), [](char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

constexpr std::string_view fixed_names[] = {"partition", "offset", "timestamp", "key", "value", "headers"};
constexpr std::string_view projection_types[] = {"string", "long", "double", "boolean", "timestamptz"};

} // namespace

result<std::vector<std::string>, iceberg_error> parse_json_path(std::string_view path) {
    if (path.size() < 3 || path.substr(0, 2) != "$.") {
        return iceberg_error(errc::invalid_argument, fmt::format("JSON path '{}' must start with '$.' and name a member", path));
    }
    std::vector<std::string> parts;
    std::string_view rest = path.substr(2);
    while (true) {
        const auto dot = rest.find('.');
        const std::string_view part = rest.substr(0, dot);
        if (part.empty()) return iceberg_error(errc::invalid_argument, fmt::format("JSON path '{}' has an empty member name", path));
        if (part.find_first_of("[]*$") != std::string_view::npos) {
            return iceberg_error(errc::invalid_argument,
                                 fmt::format("JSON path '{}': only object members are supported ('$.a.b')", path));
        }
        parts.emplace_back(part);
        if (dot == std::string_view::npos) break;
        rest = rest.substr(dot + 1);
    }
    return parts;
}

result<void, iceberg_error> check_projections(std::span<const projection> ps) {
    std::set<std::string, std::less<>> seen;
    for (const auto& p : ps) {
        if (!valid_name(p.name)) {
            return iceberg_error(errc::invalid_argument,
                                 fmt::format("projected column '{}': names are [a-z_][a-z0-9_]*, at most 128 bytes", p.name));
        }
        if (std::find(std::begin(fixed_names), std::end(fixed_names), p.name) != std::end(fixed_names)) {
            return iceberg_error(errc::invalid_argument, fmt::format("projected column '{}' would replace a fixed column", p.name));
        }
        if (std::find(std::begin(projection_types), std::end(projection_types), p.type) == std::end(projection_types)) {
            return iceberg_error(errc::invalid_argument,
                                 fmt::format("projected column '{}': type '{}' is not one of string, long, double, boolean, timestamptz",
                                             p.name, p.type));
        }
        auto path = parse_json_path(p.path);
        if (!path) return path.error();
        if (!seen.insert(p.name).second) {
            return iceberg_error(errc::invalid_argument, fmt::format("projected column '{}' is named twice", p.name));
        }
    }
    return ok();
}

result<scoped_projection, iceberg_error> parse_projection_spec(std::string_view spec) {
    scoped_projection out;
    const auto a = spec.find(':');
    const auto b = a == std::string_view::npos ? a : spec.find(':', a + 1);
    if (b == std::string_view::npos) {
        return iceberg_error(errc::invalid_argument, fmt::format("'{}': expected NAME:TYPE:PATH or TOPIC/NAME:TYPE:PATH", spec));
    }
    std::string_view name = spec.substr(0, a);
    if (const auto slash = name.find('/'); slash != std::string_view::npos) {
        out.topic = std::string(name.substr(0, slash));
        name = name.substr(slash + 1);
        if (out.topic.empty()) return iceberg_error(errc::invalid_argument, fmt::format("'{}': empty topic before '/'", spec));
    }
    out.column = projection(std::string(name), std::string(spec.substr(a + 1, b - a - 1)), std::string(spec.substr(b + 1)));
    const projection one[] = {out.column};
    if (auto c = check_projections(one); !c) return c.error();
    return out;
}

result<std::vector<projection>, iceberg_error> projections_for(std::span<const scoped_projection> specs, std::string_view topic) {
    std::vector<projection> out;
    for (const auto& s : specs) {
        if (s.topic.empty()) out.push_back(s.column);
    }
    for (const auto& s : specs) {
        if (s.topic == topic) out.push_back(s.column);
    }
    if (auto c = check_projections(out); !c) {
        return iceberg_error(errc::invalid_argument, fmt::format("topic {}: {}", topic, c.error().message));
    }
    return out;
}

result<evolved_schema, iceberg_error> evolve_schema(const json* current, int last_column_id, std::span<const projection> ps,
                                                    int schema_id) {
    if (auto c = check_projections(ps); !c) return c.error();
    evolved_schema out;
    json fields = fixed_fields();
    out.last_column_id = std::max(last_column_id, field_ids::last_fixed);
    // Columns of the current schema beyond the fixed ones stay, in order, even when no longer
    // projected: Iceberg never drops a column implicitly (a dropped one would lose its data).
    if (current) {
        const auto it = current->find("fields");
        if (it == current->end() || !it->is_array()) {
            return iceberg_error(errc::invalid_metadata, "the table's current schema has no fields array");
        }
        for (const auto& f : *it) {
            const int id = f.value("id", 0);
            if (id <= field_ids::last_fixed) continue;
            fields.push_back(f);
            out.last_column_id = std::max(out.last_column_id, id);
        }
    }
    for (const auto& p : ps) {
        auto same = std::find_if(fields.begin(), fields.end(), [&](const json& f) { return f.value("name", "") == p.name; });
        if (same != fields.end()) {
            if (!(*same)["type"].is_string() || (*same)["type"].get<std::string>() != p.type) {
                return iceberg_error(errc::invalid_argument,
                                     fmt::format("projected column '{}' is {} in the table; it cannot become {}", p.name,
                                                 (*same)["type"].dump(), p.type));
            }
            continue;
        }
        fields.push_back(field(++out.last_column_id, p.name, false, p.type));
    }
    out.schema = json{{"type", "struct"}, {"schema-id", schema_id}, {"fields", std::move(fields)}};
    out.changed = !current || (*current)["fields"] != out.schema["fields"];
    return out;
}

result<partitioning, iceberg_error> parse_partitioning(std::string_view s) {
    if (s == "day") return partitioning::day;
    if (s == "partition") return partitioning::identity_partition;
    if (s == "none") return partitioning::none;
    return iceberg_error(errc::invalid_argument, fmt::format("partitioning '{}' is not one of day, partition, none", s));
}

const char* to_string(partitioning p) noexcept {
    switch (p) {
    case partitioning::day: return "day";
    case partitioning::identity_partition: return "partition";
    case partitioning::none: return "none";
    }
    return "unknown";
}

json partition_spec_json(partitioning p, int spec_id) {
    json fields = json::array();
    if (p == partitioning::day) {
        fields.push_back({{"name", "timestamp_day"}, {"transform", "day"}, {"source-id", field_ids::timestamp},
                          {"field-id", field_ids::first_partition_field}});
    } else if (p == partitioning::identity_partition) {
        fields.push_back({{"name", "partition"}, {"transform", "identity"}, {"source-id", field_ids::partition},
                          {"field-id", field_ids::first_partition_field}});
    }
    return json{{"spec-id", spec_id}, {"fields", std::move(fields)}};
}

} // namespace skiff::iceberg
