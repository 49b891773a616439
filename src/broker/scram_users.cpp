// SCRAM users: lookup and the users.json codec.
#include <skiff/broker/scram_users.hpp>
#include <skiff/sasl/scram.hpp>

#include <nlohmann/json.hpp>

namespace skiff::broker {

std::string scram_users_key(std::string_view ns) { return std::string(ns) + "/skiff~meta/users.json"; }

std::optional<sasl::scram_credential> scram_user_table::find(std::string_view user, sasl::scram_mechanism m) const {
    auto it = users.find(user);
    if (it == users.end()) return std::nullopt;
    auto c = it->second.find(m);
    if (c == it->second.end()) return std::nullopt;
    return c->second;
}

std::optional<sasl::scram_credential> scram_user_table::find_any(std::string_view user) const {
    if (auto c = find(user, sasl::scram_mechanism::sha_512)) return c;
    return find(user, sasl::scram_mechanism::sha_256);
}

std::string encode_scram_users(const scram_user_table& t) {
    nlohmann::json users = nlohmann::json::object();
    for (const auto& [name, creds] : t.users) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& [m, c] : creds) list.push_back(sasl::credential_to_json(c));
        users[name] = std::move(list);
    }
    nlohmann::json j{{"version", 1}, {"users", std::move(users)}};
    return j.dump(2) + "\n";
}

result<scram_user_table, std::string> decode_scram_users(std::string_view json) {
    auto j = nlohmann::json::parse(json, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return failure{std::string("not a JSON object")};
    auto v = j.find("version");
    if (v == j.end() || !v->is_number_integer() || v->get<int>() != 1) {
        return failure{std::string("unknown or missing version (this broker reads version 1)")};
    }
    auto users = j.find("users");
    if (users == j.end() || !users->is_object()) return failure{std::string("\"users\" must be an object")};
    scram_user_table out;
    for (const auto& [name, list] : users->items()) {
        if (name.empty() || name.size() > sasl::max_name_bytes) {
            return failure{std::string("a user name must have 1 to 255 bytes")};
        }
        if (!list.is_array()) return failure{"user '" + name + "': credentials must be an array"};
        auto& creds = out.users[name];
        for (const auto& item : list) {
            auto c = sasl::credential_from_json(item);
            if (!c) return failure{"user '" + name + "': " + c.error()};
            const auto m = c->mechanism;
            if (!creds.emplace(m, std::move(*c)).second) {
                return failure{"user '" + name + "' has two " + std::string(sasl::mechanism_name(m)) + " credentials"};
            }
        }
        if (creds.empty()) out.users.erase(name);
    }
    return out;
}

} // namespace skiff::broker
