// The persisted form of committed offsets (see offsets_format.hpp). Byte-compatible with what
// wave 1 wrote: test_offsets_format.cpp holds the known answers.
#include "offsets_format.hpp"

#include <skiff/broker/group_coordinator.hpp>
#include <skiff/core/base64.hpp>
#include <skiff/core/hash.hpp>
#include <skiff/core/hex.hpp>
#include <skiff/core/percent.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <optional>

namespace skiff::broker::groups {

// ---- offsets object ----------------------------------------------------------------------
//
// `{ns}/skiff~meta/groups/{escaped id}/offsets.json`, rewritten whole on every commit:
//
//   {
//     "version": 1,
//     "group_id": "my-group",                 // or "group_id_base64" when not valid UTF-8
//     "offsets": [
//       { "topic": "orders",
//         "partitions": [
//           { "partition": 0, "offset": 42, "leader_epoch": -1,
//             "metadata": "",                  // or "metadata_base64" when not valid UTF-8
//             "commit_timestamp_ms": 1700000000000 } ] } ]
//   }
//
// Readers reject other versions and any structural error (the object is then skipped with a
// warning). Topic names are always valid UTF-8 (commits of other names are refused).

bool valid_utf8(std::string_view s) noexcept {
    std::size_t i = 0;
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    while (i < s.size()) {
        unsigned char c = p[i];
        std::size_t n;
        std::uint32_t cp;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            n = 1;
            cp = c & 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            n = 2;
            cp = c & 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (s.size() - i < n + 1) return false; // truncated sequence
        for (std::size_t k = 1; k <= n; ++k) {
            unsigned char cc = p[i + k];
            if ((cc & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false; // overlong or out of range
        if (cp >= 0xD800 && cp <= 0xDFFF) return false; // surrogates
        i += n + 1;
    }
    return true;
}

namespace {

void put_bytes(nlohmann::json& j, const char* key, std::string_view v) {
    if (valid_utf8(v))
        j[key] = std::string(v);
    else
        j[std::string(key) + "_base64"] = base64_encode(v);
}

// The bytes under `key` or `key`_base64; nullopt when neither is a valid string.
std::optional<std::string> get_bytes(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    if (it != j.end()) {
        if (!it->is_string()) return std::nullopt;
        return it->get<std::string>();
    }
    auto b = j.find(std::string(key) + "_base64");
    if (b == j.end() || !b->is_string()) return std::nullopt;
    return base64_decode(b->get<std::string>());
}

bool escape_plain(char c, std::size_t pos) noexcept {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           (c == '.' && pos != 0); // a leading '.' could form ".", ".." or ".tmp." (invalid keys)
}

} // namespace

std::string serialize_offsets(std::string_view group_id, const offset_map& offsets) {
    nlohmann::json j = nlohmann::json::object();
    j["version"] = offsets_format_version;
    put_bytes(j, "group_id", group_id);
    auto topics = nlohmann::json::array();
    for (const auto& [topic, parts] : offsets) {
        nlohmann::json t = nlohmann::json::object();
        t["topic"] = topic;
        auto ps = nlohmann::json::array();
        for (const auto& [p, o] : parts) {
            nlohmann::json e = nlohmann::json::object();
            e["partition"] = p;
            e["offset"] = o.offset;
            e["leader_epoch"] = o.leader_epoch;
            put_bytes(e, "metadata", o.metadata);
            e["commit_timestamp_ms"] = o.commit_timestamp_ms;
            ps.push_back(std::move(e));
        }
        t["partitions"] = std::move(ps);
        topics.push_back(std::move(t));
    }
    j["offsets"] = std::move(topics);
    return j.dump();
}

// The object's contents, or a sentence saying why it is unusable.
result<parsed_offsets, std::string> parse_offsets(std::string_view body) {
    auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return failure{std::string("not valid JSON")};
    try {
        if (!j.is_object()) return failure{std::string("not a JSON object")};
        auto v = j.find("version");
        if (v == j.end() || !v->is_number_integer()) return failure{std::string("no version field")};
        if (v->get<std::int64_t>() != offsets_format_version)
            return failure{fmt::format("unsupported version {}", v->get<std::int64_t>())};
        parsed_offsets out;
        auto gid = get_bytes(j, "group_id");
        if (!gid) return failure{std::string("no group_id")};
        out.group_id = std::move(*gid);
        auto offs = j.find("offsets");
        if (offs == j.end() || !offs->is_array()) return failure{std::string("no offsets array")};
        for (const auto& t : *offs) {
            if (!t.is_object()) return failure{std::string("a topic entry is not an object")};
            auto name = t.find("topic");
            auto parts = t.find("partitions");
            if (name == t.end() || !name->is_string() || parts == t.end() || !parts->is_array())
                return failure{std::string("a topic entry lacks topic/partitions")};
            auto& dst = out.offsets[name->get<std::string>()];
            for (const auto& p : *parts) {
                if (!p.is_object()) return failure{std::string("a partition entry is not an object")};
                auto pi = p.find("partition");
                auto off = p.find("offset");
                if (pi == p.end() || !pi->is_number_integer() || off == p.end() || !off->is_number_integer())
                    return failure{std::string("a partition entry lacks partition/offset")};
                auto idx = pi->get<std::int64_t>();
                if (idx < 0 || idx > std::numeric_limits<std::int32_t>::max())
                    return failure{std::string("a partition index is out of range")};
                committed_offset o;
                o.offset = off->get<std::int64_t>();
                auto ep = p.find("leader_epoch");
                if (ep != p.end()) {
                    if (!ep->is_number_integer()) return failure{std::string("leader_epoch is not an integer")};
                    auto e = ep->get<std::int64_t>();
                    o.leader_epoch = (e < std::numeric_limits<std::int32_t>::min() ||
                                      e > std::numeric_limits<std::int32_t>::max())
                                         ? -1
                                         : static_cast<std::int32_t>(e);
                }
                if (p.contains("metadata") || p.contains("metadata_base64")) {
                    auto md = get_bytes(p, "metadata");
                    if (!md) return failure{std::string("metadata is not a string")};
                    o.metadata = std::move(*md);
                }
                auto ts = p.find("commit_timestamp_ms");
                if (ts != p.end() && ts->is_number_integer()) o.commit_timestamp_ms = ts->get<std::int64_t>();
                dst[static_cast<std::int32_t>(idx)] = std::move(o);
            }
        }
        return out;
    } catch (const nlohmann::json::exception& e) {
        return failure{std::string("malformed: ") + e.what()};
    }
}

std::string groups_prefix(std::string_view ns) { return fmt::format("{}/skiff~meta/groups/", ns); }

offsets_key classify_offsets_key(std::string_view ns, std::string_view key) {
    offsets_key out;
    const std::string prefix = groups_prefix(ns);
    if (key.size() <= prefix.size() || key.substr(0, prefix.size()) != prefix) return out;
    std::string_view rest = key.substr(prefix.size());
    constexpr std::string_view suffix = "/offsets.json";
    if (rest.size() <= suffix.size() || rest.substr(rest.size() - suffix.size()) != suffix) return out;
    std::string_view esc = rest.substr(0, rest.size() - suffix.size());
    if (esc.find('/') != std::string_view::npos) return out;
    if (esc.find('~') != std::string_view::npos) {
        out.kind = offsets_key_kind::hashed;
        return out;
    }
    // Strict: a malformed escape means group_offsets_key did not write this key.
    auto id = percent_decode(esc, plus_sign::literal, bad_escape::reject);
    if (!id || id->empty()) {
        out.kind = offsets_key_kind::malformed;
        return out;
    }
    out.kind = offsets_key_kind::plain;
    out.group_id = std::move(*id);
    return out;
}

} // namespace skiff::broker::groups

namespace skiff::broker {

using groups::groups_prefix;

std::string escape_meta_id(std::string_view id) {
    std::string esc;
    esc.reserve(id.size());
    for (std::size_t i = 0; i < id.size(); ++i) {
        char c = id[i];
        if (groups::escape_plain(c, i)) {
            esc.push_back(c);
        } else {
            esc.push_back('%');
            append_hex(esc, static_cast<std::uint8_t>(c), hex_case::upper);
        }
    }
    if (esc.empty()) esc.push_back('%'); // no id is empty; still a valid key, never loaded
    if (esc.size() > 200) {
        // '~' never occurs in an escaped id, so shortened names cannot collide with plain ones.
        std::size_t cut = 160;
        while (cut > 0 && (esc[cut - 1] == '%' || (cut >= 2 && esc[cut - 2] == '%'))) --cut;
        esc = fmt::format("{}~{:016x}", esc.substr(0, cut), fnv1a64(id));
    }
    return esc;
}

std::string group_offsets_key(std::string_view ns, std::string_view group_id) {
    return fmt::format("{}{}/offsets.json", groups_prefix(ns), escape_meta_id(group_id));
}
} // namespace skiff::broker
