// The ACL store's JSON form (include/skiff/acl/json.hpp).
#include <skiff/acl/json.hpp>
#include <skiff/acl/validate.hpp>

#include <skiff/core/printable.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>

namespace skiff::acl {

namespace {

failure<std::string> bad(std::string message) { return failure<std::string>{std::move(message)}; }

constexpr std::array<std::string_view, 7> binding_members = {
    "resourceType", "resourceName", "patternType", "principal", "host", "operation", "permissionType"};

template <typename Array>
bool known(const Array& names, std::string_view key) {
    return std::find(names.begin(), names.end(), key) != names.end();
}

// Checks j is an object with exactly `names` as members; `where` prefixes the sentence.
template <typename Array>
result<void, std::string> exact_members(const nlohmann::json& j, const Array& names, std::string_view where) {
    if (!j.is_object()) return bad(fmt::format("{}: not a JSON object", where));
    for (const auto& item : j.items())
        if (!known(names, item.key()))
            return bad(fmt::format("{}: unknown member '{}'", where, printable(item.key(), 64)));
    for (auto n : names)
        if (!j.contains(std::string(n))) return bad(fmt::format("{}: missing member '{}'", where, n));
    return ok();
}

result<std::string, std::string> string_member(const nlohmann::json& j, std::string_view member,
                                               std::string_view where) {
    const auto& v = j.at(std::string(member));
    if (!v.is_string()) return bad(fmt::format("{}: '{}' is not a string", where, member));
    return v.get<std::string>();
}

result<acl_binding, std::string> binding_at(const nlohmann::json& j, std::string_view where) {
    auto m = exact_members(j, binding_members, where);
    if (!m) return bad(std::move(m).error());
    std::array<std::string, 7> v;
    for (std::size_t i = 0; i < binding_members.size(); ++i) {
        auto s = string_member(j, binding_members[i], where);
        if (!s) return bad(std::move(s).error());
        v[i] = std::move(*s);
    }
    acl_binding b;
    b.pattern.type = parse_resource_type(v[0]);
    b.pattern.name = std::move(v[1]);
    b.pattern.pattern = parse_pattern_type(v[2]);
    b.entry.principal = std::move(v[3]);
    b.entry.host = std::move(v[4]);
    b.entry.op = parse_operation(v[5]);
    b.entry.perm = parse_permission(v[6]);
    // Unrecognized names parse as UNKNOWN (Kafka's fromString); say which word was wrong
    // rather than "Invalid operation UNKNOWN".
    if (b.pattern.type == resource_type::unknown)
        return bad(fmt::format("{}: 'resourceType' \"{}\" is not a Kafka resource type", where, printable(v[0], 64)));
    if (b.pattern.pattern == pattern_type::unknown)
        return bad(fmt::format("{}: 'patternType' \"{}\" is not a Kafka pattern type", where, printable(v[2], 64)));
    if (b.entry.op == operation::unknown)
        return bad(fmt::format("{}: 'operation' \"{}\" is not a Kafka ACL operation", where, printable(v[5], 64)));
    if (b.entry.perm == permission::unknown)
        return bad(fmt::format("{}: 'permissionType' \"{}\" is not a Kafka permission type", where,
                               printable(v[6], 64)));
    auto valid = validate_new_binding(b);
    if (!valid) return bad(fmt::format("{}: {}", where, valid.error().message));
    return b;
}

template <typename Range>
nlohmann::json list_to_json(const Range& bindings) {
    auto arr = nlohmann::json::array();
    for (const auto& b : bindings) arr.push_back(binding_to_json(b));
    return nlohmann::json{{"version", store_format_version}, {"acls", std::move(arr)}};
}

} // namespace

nlohmann::json binding_to_json(const acl_binding& b) {
    return nlohmann::json{{"resourceType", std::string(name(b.pattern.type))},
                          {"resourceName", b.pattern.name},
                          {"patternType", std::string(name(b.pattern.pattern))},
                          {"principal", b.entry.principal},
                          {"host", b.entry.host},
                          {"operation", std::string(name(b.entry.op))},
                          {"permissionType", std::string(name(b.entry.perm))}};
}

result<acl_binding, std::string> binding_from_json(const nlohmann::json& j) { return binding_at(j, "ACL binding"); }

nlohmann::json acls_to_json(const std::set<acl_binding>& bindings) { return list_to_json(bindings); }
nlohmann::json acls_to_json(const std::vector<acl_binding>& bindings) { return list_to_json(bindings); }
std::string acls_to_json_text(const std::set<acl_binding>& bindings) { return acls_to_json(bindings).dump(); }

result<std::vector<acl_binding>, std::string> acls_from_json(const nlohmann::json& j) {
    constexpr std::array<std::string_view, 2> top = {"version", "acls"};
    auto m = exact_members(j, top, "ACL store");
    if (!m) return bad(std::move(m).error());
    const auto& version = j.at("version");
    if (!version.is_number_integer()) return bad("ACL store: 'version' is not an integer");
    if (version.get<std::int64_t>() != store_format_version)
        return bad(fmt::format("ACL store: unsupported version {} (this skiff reads version {})",
                               version.get<std::int64_t>(), store_format_version));
    const auto& list = j.at("acls");
    if (!list.is_array()) return bad("ACL store: 'acls' is not an array");
    std::vector<acl_binding> out;
    out.reserve(list.size());
    std::set<acl_binding> seen;
    for (std::size_t i = 0; i < list.size(); ++i) {
        auto where = fmt::format("ACL store: acls[{}]", i);
        auto b = binding_at(list[i], where);
        if (!b) return bad(std::move(b).error());
        // A hand-edited file with the same binding twice is a mistake worth reporting; the
        // set semantics would hide it.
        if (!seen.insert(*b).second) return bad(fmt::format("{}: the same binding appears earlier", where));
        out.push_back(std::move(*b));
    }
    return out;
}

result<std::vector<acl_binding>, std::string> acls_from_json_text(std::string_view text) {
    // nlohmann keeps the last of duplicate members; refuse them instead (as sasl's credential
    // reader does), so a hand-edited file cannot carry a silently ignored value.
    std::vector<std::vector<std::string>> open_objects;
    bool duplicate = false;
    auto cb = [&](int, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
        using ev_t = nlohmann::json::parse_event_t;
        if (ev == ev_t::object_start) {
            open_objects.emplace_back();
        } else if (ev == ev_t::object_end) {
            if (!open_objects.empty()) open_objects.pop_back();
        } else if (ev == ev_t::key && !open_objects.empty() && parsed.is_string()) {
            auto& keys = open_objects.back();
            const auto& k = parsed.get_ref<const std::string&>();
            if (std::find(keys.begin(), keys.end(), k) != keys.end()) duplicate = true;
            keys.push_back(k);
        }
        return true;
    };
    auto j = nlohmann::json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
    if (j.is_discarded()) return bad("ACL store: not valid JSON");
    if (duplicate) return bad("ACL store: a member appears twice in one object");
    return acls_from_json(j);
}

} // namespace skiff::acl
