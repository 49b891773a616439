#include <skiff/cluster/records.hpp>

#include <skiff/core/hash.hpp>
#include <skiff/core/parse_int.hpp>

#include <nlohmann/json.hpp>

#include <limits>
#include <type_traits>

namespace skiff::cluster {

namespace {
using json = nlohmann::json;

result<json, std::string> parse_object(std::string_view s, const char* what) {
    auto j = json::parse(s, nullptr, false);
    if (!j.is_object()) return failure{std::string(what) + " is not a JSON object"};
    return j;
}

template <typename T>
bool read(const json& j, const char* field, T& out) {
    auto it = j.find(field);
    if (it == j.end()) return false;
    if constexpr (std::is_same_v<T, bool>) {
        if (!it->is_boolean()) return false;
    } else if constexpr (std::is_integral_v<T>) {
        if (!it->is_number_integer()) return false;
        const auto v = it->get<std::int64_t>();
        if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
    } else {
        if (!it->is_string()) return false;
    }
    out = it->get<T>();
    return true;
}
} // namespace

std::string encode(const member& m) {
    json j = {{"id", m.id}, {"host", m.host}, {"port", m.port}};
    if (!m.rack.empty()) j["rack"] = m.rack;
    if (!m.listeners.empty()) j["listeners"] = m.listeners;
    return j.dump();
}
std::string encode(const owner& o) { return json{{"broker", o.broker}, {"epoch", o.epoch}}.dump(); }
std::string encode(const takeover& t) {
    return json{{"epoch", t.epoch}, {"clean", t.clean}, {"next_offset", t.next_offset}}.dump();
}

result<member, std::string> decode_member(std::string_view s) {
    auto j = parse_object(s, "member record");
    if (!j) return failure{j.error()};
    member m;
    if (!read(*j, "id", m.id) || !read(*j, "host", m.host) || !read(*j, "port", m.port) || m.port <= 0 ||
        m.port > 65535) {
        return failure{std::string("member record lacks a valid id, host or port")};
    }
    if (j->contains("rack") && !read(*j, "rack", m.rack)) return failure{std::string("member rack is not a string")};
    if (auto it = j->find("listeners"); it != j->end()) {
        if (!it->is_object()) return failure{std::string("member listeners is not an object")};
        for (const auto& [name, addr] : it->items()) {
            if (!addr.is_string()) return failure{"member listener " + name + " is not a string"};
            m.listeners[name] = addr.get<std::string>();
        }
    }
    return m;
}

result<owner, std::string> decode_owner(std::string_view s) {
    auto j = parse_object(s, "owner record");
    if (!j) return failure{j.error()};
    owner o;
    if (!read(*j, "broker", o.broker) || !read(*j, "epoch", o.epoch) || o.epoch < 0) {
        return failure{std::string("owner record lacks a valid broker or epoch")};
    }
    return o;
}

result<takeover, std::string> decode_takeover(std::string_view s) {
    auto j = parse_object(s, "partition state");
    if (!j) return failure{j.error()};
    takeover t;
    if (!read(*j, "epoch", t.epoch) || !read(*j, "clean", t.clean) || !read(*j, "next_offset", t.next_offset) ||
        t.epoch < 0) {
        return failure{std::string("partition state lacks a valid epoch, clean flag or next offset")};
    }
    return t;
}

std::int32_t group_slot(std::string_view group) noexcept {
    return static_cast<std::int32_t>(fnv1a64(group) % static_cast<std::uint64_t>(group_slots));
}

keys::keys(std::string_view ns) : root("/skiff/" + std::string(ns) + "/") {}

std::string keys::owner(std::string_view topic, std::int32_t p) const {
    return owners() + std::string(topic) + "/" + std::to_string(p);
}
std::string keys::state(std::string_view topic, std::int32_t p) const {
    return root + "state/" + std::string(topic) + "/" + std::to_string(p);
}

std::optional<std::int32_t> keys::parse_member(std::string_view key) const {
    const std::string prefix = members();
    if (!key.starts_with(prefix)) return std::nullopt;
    key.remove_prefix(prefix.size());
    auto id = parse_unsigned<std::uint32_t>(key);
    if (!id || *id > 0x7fffffffu) return std::nullopt;
    return static_cast<std::int32_t>(*id);
}

std::string keys::placement(std::string_view topic, std::int32_t p) const {
    return placements() + std::string(topic) + "/" + std::to_string(p);
}

namespace {
std::optional<std::pair<std::string, std::int32_t>> parse_partition_key(std::string_view key, const std::string& prefix) {
    if (!key.starts_with(prefix)) return std::nullopt;
    key.remove_prefix(prefix.size());
    const auto slash = key.rfind('/');
    if (slash == std::string_view::npos || slash == 0) return std::nullopt;
    auto p = parse_unsigned<std::uint32_t>(key.substr(slash + 1));
    if (!p || *p > 0x7fffffffu) return std::nullopt;
    return std::pair{std::string(key.substr(0, slash)), static_cast<std::int32_t>(*p)};
}
} // namespace

std::optional<std::pair<std::string, std::int32_t>> keys::parse_placement(std::string_view key) const {
    return parse_partition_key(key, placements());
}

std::optional<std::pair<std::string, std::int32_t>> keys::parse_owner(std::string_view key) const {
    return parse_partition_key(key, owners());
}

} // namespace skiff::cluster
