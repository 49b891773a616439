#include "txn_state.hpp"

#include "../group/offsets_format.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>

namespace skiff::broker::txn {

namespace {
constexpr int format_version = 1;

struct state_row {
    state s;
    std::string_view name;
};
constexpr state_row states[] = {
    {state::empty, "Empty"},
    {state::ongoing, "Ongoing"},
    {state::prepare_commit, "PrepareCommit"},
    {state::prepare_abort, "PrepareAbort"},
    {state::complete_commit, "CompleteCommit"},
    {state::complete_abort, "CompleteAbort"},
};

template <typename T>
bool get_int(const nlohmann::json& j, const char* key, T& out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer()) return false;
    const auto v = it->get<std::int64_t>();
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return false;
    out = static_cast<T>(v);
    return true;
}
} // namespace

std::string_view state_name(state s) noexcept {
    for (auto& r : states) {
        if (r.s == s) return r.name;
    }
    return "Unknown";
}

std::string serialize_txn(const txn_metadata& m) {
    nlohmann::json j;
    j["version"] = format_version;
    j["transactional_id"] = m.id;
    j["producer_id"] = m.producer_id;
    j["producer_epoch"] = m.producer_epoch;
    j["timeout_ms"] = m.timeout_ms;
    j["state"] = std::string(state_name(m.st));
    j["start_ms"] = m.start_ms;
    j["update_ms"] = m.update_ms;
    auto parts = nlohmann::json::array();
    for (auto& [t, p] : m.partitions) parts.push_back({{"topic", t}, {"partition", p}});
    j["partitions"] = std::move(parts);
    j["groups"] = m.groups;
    auto offs = nlohmann::json::array();
    for (auto& [g, topics] : m.offsets) {
        for (auto& [t, ps] : topics) {
            for (auto& [p, o] : ps) {
                offs.push_back({{"group", g},
                                {"topic", t},
                                {"partition", p},
                                {"offset", o.offset},
                                {"leader_epoch", o.leader_epoch},
                                {"metadata", o.metadata}});
            }
        }
    }
    j["offsets"] = std::move(offs);
    // Ids are arbitrary bytes; replace what is not UTF-8 rather than throw (the id itself is
    // also in the key, escaped, and the coordinator compares the two on load).
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

result<txn_metadata, std::string> parse_txn(std::string_view body) {
    auto j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return failure{std::string("not a JSON object")};
    int version = 0;
    if (!get_int(j, "version", version)) return failure{std::string("no format version")};
    if (version != format_version) return failure{fmt::format("format version {} is not {}", version, format_version)};
    txn_metadata m;
    auto id = j.find("transactional_id");
    if (id == j.end() || !id->is_string() || id->get<std::string>().empty())
        return failure{std::string("no transactional_id")};
    m.id = id->get<std::string>();
    if (!get_int(j, "producer_id", m.producer_id) || !get_int(j, "producer_epoch", m.producer_epoch) ||
        !get_int(j, "timeout_ms", m.timeout_ms) || !get_int(j, "start_ms", m.start_ms) ||
        !get_int(j, "update_ms", m.update_ms)) {
        return failure{std::string("a producer, timeout or time field is missing or not an integer")};
    }
    if (m.producer_id < 0 || m.producer_epoch < 0) return failure{std::string("negative producer id or epoch")};
    auto st = j.find("state");
    if (st == j.end() || !st->is_string()) return failure{std::string("no state")};
    bool known = false;
    for (auto& r : states) {
        if (r.name == st->get<std::string>()) {
            m.st = r.s;
            known = true;
        }
    }
    if (!known) return failure{fmt::format("unknown state '{}'", st->get<std::string>())};
    auto parts = j.find("partitions");
    if (parts == j.end() || !parts->is_array()) return failure{std::string("no partitions array")};
    for (auto& p : *parts) {
        std::int32_t idx = -1;
        auto t = p.find("topic");
        if (!p.is_object() || t == p.end() || !t->is_string() || !get_int(p, "partition", idx) || idx < 0)
            return failure{std::string("a malformed partition entry")};
        m.partitions.emplace(t->get<std::string>(), idx);
    }
    auto groups = j.find("groups");
    if (groups == j.end() || !groups->is_array()) return failure{std::string("no groups array")};
    for (auto& g : *groups) {
        if (!g.is_string()) return failure{std::string("a group that is not a string")};
        m.groups.insert(g.get<std::string>());
    }
    auto offs = j.find("offsets");
    if (offs == j.end() || !offs->is_array()) return failure{std::string("no offsets array")};
    for (auto& o : *offs) {
        if (!o.is_object()) return failure{std::string("a malformed offset entry")};
        auto g = o.find("group");
        auto t = o.find("topic");
        auto md = o.find("metadata");
        pending_offset po;
        std::int32_t p = -1;
        if (g == o.end() || !g->is_string() || t == o.end() || !t->is_string() || md == o.end() || !md->is_string() ||
            !get_int(o, "partition", p) || !get_int(o, "offset", po.offset) ||
            !get_int(o, "leader_epoch", po.leader_epoch)) {
            return failure{std::string("a malformed offset entry")};
        }
        po.metadata = md->get<std::string>();
        m.offsets[g->get<std::string>()][t->get<std::string>()][p] = std::move(po);
    }
    return m;
}

std::string txns_prefix(std::string_view ns) { return fmt::format("{}/skiff~meta/txns/", ns); }

std::string txn_state_key(std::string_view ns, std::string_view transactional_id) {
    return fmt::format("{}{}/state.json", txns_prefix(ns), escape_meta_id(transactional_id));
}

} // namespace skiff::broker::txn
