// Client quotas from the Kafka API: the stored table and Kafka's resolution order.
#include <skiff/broker/client_quotas.hpp>

#include <nlohmann/json.hpp>

#include <vector>
#include <cmath>

namespace skiff::broker {

std::string client_quotas_key(std::string_view ns) { return std::string(ns) + "/skiff~meta/quotas.json"; }

namespace {
nlohmann::json part_json(const quota_entity_part& p) {
    return p.is_default ? nlohmann::json(nullptr) : nlohmann::json(p.name);
}

bool read_part(const nlohmann::json& entity, const char* type, quota_entity_part& out, std::string& why) {
    auto it = entity.find(type);
    if (it == entity.end()) return true;
    if (it->is_null()) {
        out = quota_entity_part::default_entity();
        return true;
    }
    if (!it->is_string() || it->get<std::string>().empty()) {
        why = std::string("entity ") + type + " must be a non-empty string or null";
        return false;
    }
    out = quota_entity_part::named(it->get<std::string>());
    return true;
}
} // namespace

// {"version":1,"entries":[{"entity":{"user":"alice","client-id":null},
//                          "quotas":{"producer_byte_rate":1048576}}]}
// An entity type left out of "entity" is not part of it; null is its default.
std::string encode_client_quotas(const client_quota_table& t) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& [e, values] : t.entries) {
        nlohmann::json entity = nlohmann::json::object();
        if (e.user.present) entity["user"] = part_json(e.user);
        if (e.client_id.present) entity["client-id"] = part_json(e.client_id);
        nlohmann::json q = nlohmann::json::object();
        for (const auto& [k, v] : values) q[k] = v;
        entries.push_back({{"entity", entity}, {"quotas", q}});
    }
    nlohmann::json j{{"version", 1}, {"entries", entries}};
    return j.dump(2) + "\n";
}

result<client_quota_table, std::string> decode_client_quotas(std::string_view json) {
    auto j = nlohmann::json::parse(json, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return failure{std::string("not a JSON object")};
    auto v = j.find("version");
    if (v == j.end() || !v->is_number_integer() || v->get<int>() != 1) {
        return failure{std::string("unknown or missing version (this broker reads version 1)")};
    }
    auto entries = j.find("entries");
    if (entries == j.end() || !entries->is_array()) return failure{std::string("\"entries\" must be an array")};
    client_quota_table out;
    for (const auto& item : *entries) {
        if (!item.is_object()) return failure{std::string("an entry is not an object")};
        auto entity = item.find("entity");
        auto quotas = item.find("quotas");
        if (entity == item.end() || !entity->is_object() || quotas == item.end() || !quotas->is_object()) {
            return failure{std::string("an entry needs an \"entity\" and a \"quotas\" object")};
        }
        quota_entity e;
        std::string why;
        if (!read_part(*entity, "user", e.user, why) || !read_part(*entity, "client-id", e.client_id, why)) {
            return failure{why};
        }
        if (!e.user.present && !e.client_id.present) return failure{std::string("an entry's entity is empty")};
        quota_values values;
        for (const auto& [k, val] : quotas->items()) {
            if (!val.is_number() || !(val.get<double>() > 0) || !std::isfinite(val.get<double>())) {
                return failure{"quota " + k + " must be a positive number"};
            }
            values[k] = val.get<double>();
        }
        if (!values.empty()) out.entries[e] = std::move(values);
    }
    return out;
}

quota_limits resolve_quota(const client_quota_table& t, const quota_config& flags, std::string_view user,
                           std::optional<std::string_view> client_id) {
    const auto u = quota_entity_part::named(std::string(user));
    const auto d = quota_entity_part::default_entity();
    const quota_entity_part none;
    std::vector<quota_entity> order;
    if (client_id) {
        const auto c = quota_entity_part::named(std::string(*client_id));
        order = {{u, c}, {u, d}, {u, none}, {d, c}, {d, d}, {d, none}, {none, c}, {none, d}};
    } else {
        order = {{u, d}, {u, none}, {d, d}, {d, none}, {none, d}};
    }
    auto lookup = [&](std::string_view key, double fallback) {
        for (const auto& e : order) {
            auto it = t.entries.find(e);
            if (it == t.entries.end()) continue;
            if (auto v = it->second.find(key); v != it->second.end()) return v->second;
        }
        return fallback;
    };
    const quota_limits* base = &flags.defaults;
    if (client_id) {
        if (auto flag = flags.clients.find(*client_id); flag != flags.clients.end()) base = &flag->second;
    }
    quota_limits out;
    out.produce_bytes_per_second = lookup(producer_byte_rate, base->produce_bytes_per_second);
    out.fetch_bytes_per_second = lookup(consumer_byte_rate, base->fetch_bytes_per_second);
    return out;
}

} // namespace skiff::broker
