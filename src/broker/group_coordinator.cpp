// Kafka's classic group coordinator (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) and the
// committed offsets of the groups one core owns. The state machine follows Apache Kafka's
// GroupCoordinator / GroupMetadata (kafka.coordinator.group, 3.x):
//
//   Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
//     ▲                 ▲      ▲                                      │ leader's SyncGroup
//     │                 │      └────── join / leave / expiry ─────────┤
//     └─ last member ───┘                                             ▼
//        gone                         Stable ◀────────────────────────┘
//   Dead: being deleted (DeleteGroups), every request answers as if the group were gone.
//
// Everything here runs on the owning core. The request handlers are synchronous state
// transitions; a JoinGroup or SyncGroup that must wait gets a `oneshot` slot that a later
// transition (another member's request, a timer, close()) fills. Timers are the group's own
// (join deadline / initial delay, pending-sync deadline, one session timer per member and per
// MEMBER_ID_REQUIRED member); none of them owns a coroutine.
//
// Not persisted (documented departures from Kafka): group membership and assignments live in
// memory only — after a restart members rejoin (UNKNOWN_MEMBER_ID makes them) and only the
// committed offsets come back. No group.max.size limit. Offsets never expire (Kafka's
// offsets.retention.minutes); they go with DeleteGroups.
#include <skiff/core/hash.hpp>
#include <skiff/core/ascii.hpp>
#include <skiff/broker/group_coordinator.hpp>
#include <skiff/broker/kafka_errors.hpp>
#include <skiff/core/base64.hpp>
#include <skiff/core/log.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <coroutine>
#include <limits>
#include <span>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace skiff::broker {

namespace group_impl {

using ms = std::chrono::milliseconds;
using kafka::JoinGroupResponse;
using kafka::SyncGroupResponse;

enum class gstate { empty, preparing_rebalance, completing_rebalance, stable, dead };

// Kafka's state names (GroupState.toString), as DescribeGroups / ListGroups report them.
std::string_view state_name(gstate s) noexcept {
    switch (s) {
    case gstate::empty: return "Empty";
    case gstate::preparing_rebalance: return "PreparingRebalance";
    case gstate::completing_rebalance: return "CompletingRebalance";
    case gstate::stable: return "Stable";
    case gstate::dead: return "Dead";
    }
    return "Dead";
}

// A result one coroutine waits for and a state transition provides. The waiter is resumed on a
// later loop turn (never inline: set() is called in the middle of group transitions). If the
// waiting coroutine is destroyed while suspended, its awaiter forgets the handle.
template <typename T>
class oneshot {
public:
    bool done() const noexcept { return _value.has_value(); }
    void set(T v) {
        if (_value) return;
        _value.emplace(std::move(v));
        if (_h) runtime::reactor::local().schedule(std::exchange(_h, {}));
    }

    class awaiter {
    public:
        explicit awaiter(oneshot* o) noexcept : _o(o) {}
        awaiter(const awaiter&) = delete;
        awaiter& operator=(const awaiter&) = delete;
        ~awaiter() { _o->_h = {}; }
        bool await_ready() const noexcept { return _o->_value.has_value(); }
        void await_suspend(std::coroutine_handle<> h) noexcept { _o->_h = h; }
        T await_resume() { return std::move(*_o->_value); }

    private:
        oneshot* _o;
    };
    awaiter wait() noexcept { return awaiter(this); }

private:
    std::optional<T> _value;
    std::coroutine_handle<> _h;
};

// A timer that calls a plain function. The function may destroy the timer (a member removed by
// its own session timer): fire() touches nothing after the call.
class cb_timer final : public runtime::timer_node {
public:
    using fn_t = void (*)(void*);
    cb_timer(fn_t f, void* ctx) noexcept : _f(f), _ctx(ctx) {}
    ~cb_timer() { cancel(); }
    cb_timer(const cb_timer&) = delete;
    cb_timer& operator=(const cb_timer&) = delete;

    void arm_after(runtime::duration d) {
        _r = &runtime::reactor::local();
        _r->arm(*this, _r->now() + d);
    }
    void cancel() noexcept {
        if (_r && armed()) _r->disarm(*this);
    }
    void fire() noexcept override {
        fn_t f = _f;
        void* c = _ctx;
        f(c);
    }

private:
    fn_t _f;
    void* _ctx;
    runtime::reactor* _r = nullptr;
};

struct protocol {
    std::string name;
    std::string metadata;
    bool operator==(const protocol&) const = default;
};

struct group;

struct member {
    member(group* g_, std::string id_) : g(g_), id(std::move(id_)) {}
    group* g;
    std::string id;
    std::optional<std::string> instance_id;
    std::string client_id;
    std::string client_host;
    std::int32_t rebalance_timeout_ms = 0;
    std::int32_t session_timeout_ms = 0;
    std::string protocol_type;
    std::vector<protocol> protocols; // in the member's order of preference
    std::string assignment;
    std::shared_ptr<oneshot<JoinGroupResponse>> join_waiter; // awaiting the end of PreparingRebalance
    std::shared_ptr<oneshot<SyncGroupResponse>> sync_waiter; // awaiting the leader's assignment
    bool is_new = false;                                      // joined, first join not completed
    cb_timer session{&on_session_timer, this};

    static void on_session_timer(void* self);

    const std::string* metadata_for(std::string_view proto) const {
        for (const auto& p : protocols)
            if (p.name == proto) return &p.metadata;
        return nullptr;
    }
    bool supports(std::string_view proto) const { return metadata_for(proto) != nullptr; }
};

// A member that was handed an id with MEMBER_ID_REQUIRED and has not joined with it yet.
struct pending_member {
    pending_member(group* g_, std::string id_) : g(g_), id(std::move(id_)) {}
    group* g;
    std::string id;
    cb_timer expiry{&on_expiry, this};
    static void on_expiry(void* self);
};

struct committed_offset {
    std::int64_t offset = -1;
    std::int32_t leader_epoch = -1;
    std::string metadata;
    std::int64_t commit_timestamp_ms = -1;
    bool operator==(const committed_offset&) const = default;
};
using offset_map = std::map<std::string, std::map<std::int32_t, committed_offset>>;

struct group {
    group(group_coordinator::state* s_, std::string id_) : s(s_), id(std::move(id_)) {}
    group_coordinator::state* s;
    std::string id;
    gstate st = gstate::empty;
    std::int32_t generation = 0;
    std::optional<std::string> protocol_type;
    std::optional<std::string> protocol_name;
    std::optional<std::string> leader;
    std::map<std::string, std::unique_ptr<member>> members;
    std::map<std::string, std::string> static_members; // instance id -> member id
    std::map<std::string, std::unique_ptr<pending_member>> pending;
    std::set<std::string> pending_sync; // members of this generation that have not synced yet
    bool new_member_added = false;      // during the initial delay: extend it

    enum class join_kind { none, initial, normal };
    join_kind jk = join_kind::none;
    ms initial_delay{0};
    ms initial_remaining{0};
    cb_timer join_timer{&on_join_timer, this};
    cb_timer sync_timer{&on_sync_timer, this};
    runtime::time_point empty_since{};

    // Committed offsets: `offsets` is what the store holds (the only view OffsetFetch shows);
    // `next_write` are accepted commits waiting for the next PUT, whose requests wait in
    // `write_waiters`. One PUT in flight per group (`writing`).
    offset_map offsets;
    offset_map next_write;
    std::vector<std::shared_ptr<oneshot<std::int16_t>>> write_waiters;
    bool writing = false;
    std::vector<std::shared_ptr<oneshot<bool>>> idle_waiters; // woken when `writing` ends

    static void on_join_timer(void* self);
    static void on_sync_timer(void* self);

    member* find(std::string_view mid) {
        auto it = members.find(std::string(mid));
        return it == members.end() ? nullptr : it->second.get();
    }
    bool is_leader(std::string_view mid) const { return leader && *leader == mid; }
    std::int32_t rebalance_timeout_ms() const {
        std::int32_t t = 0;
        for (const auto& [_, m] : members) t = std::max(t, m->rebalance_timeout_ms);
        return t;
    }
    bool all_joined() const {
        if (!pending.empty()) return false;
        for (const auto& [_, m] : members)
            if (!m->join_waiter) return false;
        return true;
    }
    // A static member registered under `instance` with another member id (Kafka's
    // isStaticMemberFenced).
    bool fenced(std::string_view mid, const std::optional<std::string>& instance) const {
        if (!instance) return false;
        auto it = static_members.find(*instance);
        return it != static_members.end() && it->second != mid;
    }
    bool prunable() const {
        return st == gstate::empty && members.empty() && pending.empty() && offsets.empty() &&
               next_write.empty() && write_waiters.empty() && !writing && idle_waiters.empty();
    }
};

// ---- responses -------------------------------------------------------------------------

JoinGroupResponse join_error(std::int16_t code, std::string member_id) {
    JoinGroupResponse r;
    r.error_code = code;
    r.generation_id = -1;
    r.protocol_name = std::nullopt;
    r.member_id = std::move(member_id);
    return r;
}

SyncGroupResponse sync_error(std::int16_t code) {
    SyncGroupResponse r;
    r.error_code = code;
    return r;
}

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

constexpr int offsets_format_version = 1;

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

std::string serialize_offsets(const std::string& group_id, const offset_map& offsets) {
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

struct parsed_offsets {
    std::string group_id;
    offset_map offsets;
};

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

bool escape_plain(char c, std::size_t pos) noexcept {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           (c == '.' && pos != 0); // a leading '.' could form ".", ".." or ".tmp." (invalid keys)
}

std::optional<std::string> unescape(std::string_view esc) {
    std::string out;
    for (std::size_t i = 0; i < esc.size(); ++i) {
        char c = esc[i];
        if (c != '%') {
            out.push_back(c);
            continue;
        }
        if (i + 2 >= esc.size()) return std::nullopt;
        auto hex = [](char h) -> int {
            if (h >= '0' && h <= '9') return h - '0';
            if (h >= 'A' && h <= 'F') return h - 'A' + 10;
            if (h >= 'a' && h <= 'f') return h - 'a' + 10;
            return -1;
        };
        int hi = hex(esc[i + 1]), lo = hex(esc[i + 2]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
    }
    return out;
}


std::string groups_prefix(std::string_view ns) { return fmt::format("{}/skiff~meta/groups/", ns); }

} // namespace group_impl

using namespace group_impl;

std::string group_offsets_key(std::string_view ns, std::string_view group_id) {
    static constexpr char hexdig[] = "0123456789ABCDEF";
    std::string esc;
    esc.reserve(group_id.size());
    for (std::size_t i = 0; i < group_id.size(); ++i) {
        char c = group_id[i];
        if (escape_plain(c, i)) {
            esc.push_back(c);
        } else {
            auto u = static_cast<unsigned char>(c);
            esc.push_back('%');
            esc.push_back(hexdig[u >> 4]);
            esc.push_back(hexdig[u & 15]);
        }
    }
    if (esc.empty()) esc = "%"; // no group has an empty id; still a valid key, never loaded
    if (esc.size() > 200) {
        // '~' never occurs in an escaped id, so shortened names cannot collide with plain ones.
        std::size_t cut = 160;
        while (cut > 0 && (esc[cut - 1] == '%' || (cut >= 2 && esc[cut - 2] == '%'))) --cut;
        esc = fmt::format("{}~{:016x}", esc.substr(0, cut), fnv1a64(group_id));
    }
    return fmt::format("{}{}/offsets.json", groups_prefix(ns), esc);
}

// ---- coordinator state ---------------------------------------------------------------------

struct group_coordinator::state {
    state(storage::object_store& st, group_config c) : store(st), cfg(std::move(c)), rng(std::random_device{}()) {}

    storage::object_store& store;
    group_config cfg;
    std::map<std::string, std::shared_ptr<group>, std::less<>> groups;
    runtime::gate writes{"group-offsets"};
    bool closed = false;
    std::uint64_t rebalances = 0;
    std::uint64_t offset_commits = 0;
    std::mt19937_64 rng;
    runtime::time_point last_sweep{};

    runtime::time_point now() const { return runtime::reactor::local().now(); }
    std::int64_t wall_ms() const {
        if (cfg.wall_ms) return cfg.wall_ms();
        return std::chrono::duration_cast<ms>(std::chrono::system_clock::now().time_since_epoch()).count();
    }

    std::string new_member_id(std::string_view prefix) {
        std::array<std::uint8_t, 16> b{};
        for (std::size_t i = 0; i < b.size(); i += 8) {
            std::uint64_t r = rng();
            for (std::size_t k = 0; k < 8; ++k) b[i + k] = static_cast<std::uint8_t>(r >> (8 * k));
        }
        b[6] = static_cast<std::uint8_t>((b[6] & 0x0F) | 0x40); // version 4
        b[8] = static_cast<std::uint8_t>((b[8] & 0x3F) | 0x80); // variant 1
        std::string hex;
        for (std::size_t i = 0; i < b.size(); ++i) {
            if (i == 4 || i == 6 || i == 8 || i == 10) hex.push_back('-');
            hex += fmt::format("{:02x}", b[i]);
        }
        return fmt::format("{}-{}", prefix, hex);
    }

    group* find_group(std::string_view id) {
        auto it = groups.find(id);
        return it == groups.end() ? nullptr : it->second.get();
    }
    group& create_group(const std::string& id) {
        auto g = std::make_shared<group>(this, id);
        g->empty_since = now();
        auto* raw = g.get();
        groups[id] = std::move(g);
        return *raw;
    }

    // Forgets groups that stayed Empty, without members or offsets, for the retention time.
    void sweep() {
        auto t = now();
        if (t - last_sweep < std::chrono::seconds(1)) return;
        last_sweep = t;
        for (auto it = groups.begin(); it != groups.end();) {
            if (it->second->prunable() && t - it->second->empty_since >= cfg.empty_group_retention)
                it = groups.erase(it);
            else
                ++it;
        }
    }

    // -- membership transitions (Kafka GroupCoordinator) --

    bool supports_protocols(const group& g, std::string_view type, const std::vector<protocol>& ps) const {
        if (g.st == gstate::empty || g.members.empty()) return !type.empty() && !ps.empty();
        if (!g.protocol_type || *g.protocol_type != type) return false;
        for (const auto& p : ps) {
            bool all = true;
            for (const auto& [_, m] : g.members)
                if (!m->supports(p.name)) {
                    all = false;
                    break;
                }
            if (all) return true;
        }
        return false;
    }

    // The protocol every member supports with the most first-choice votes (Kafka's
    // selectProtocol); ties go to the leader's choice, then to the smaller name.
    std::string select_protocol(const group& g) const {
        std::vector<std::string> candidates;
        if (g.members.empty()) return {};
        for (const auto& p : g.members.begin()->second->protocols) {
            bool all = true;
            for (const auto& [_, m] : g.members)
                if (!m->supports(p.name)) {
                    all = false;
                    break;
                }
            if (all && std::find(candidates.begin(), candidates.end(), p.name) == candidates.end())
                candidates.push_back(p.name);
        }
        if (candidates.empty()) return {};
        std::map<std::string, int> votes;
        std::string leader_vote;
        for (const auto& [id, m] : g.members) {
            for (const auto& p : m->protocols) {
                if (std::find(candidates.begin(), candidates.end(), p.name) != candidates.end()) {
                    ++votes[p.name];
                    if (g.is_leader(id)) leader_vote = p.name;
                    break;
                }
            }
        }
        std::string best;
        int best_votes = -1;
        for (const auto& [name, n] : votes) {
            if (n > best_votes || (n == best_votes && name == leader_vote)) {
                best = name;
                best_votes = n;
            }
        }
        return best.empty() ? candidates.front() : best;
    }

    std::vector<JoinGroupResponse::JoinGroupResponseMember> member_list(const group& g) const {
        std::vector<JoinGroupResponse::JoinGroupResponseMember> out;
        std::string proto = g.protocol_name.value_or("");
        for (const auto& [id, m] : g.members) {
            JoinGroupResponse::JoinGroupResponseMember e;
            e.member_id = id;
            e.group_instance_id = m->instance_id;
            if (const auto* md = m->metadata_for(proto)) e.metadata = *md;
            out.push_back(std::move(e));
        }
        return out;
    }

    JoinGroupResponse current_generation(const group& g, const std::string& mid, bool with_members) const {
        JoinGroupResponse r;
        r.generation_id = g.generation;
        r.protocol_type = g.protocol_type;
        r.protocol_name = g.protocol_name;
        r.leader = g.leader.value_or("");
        r.member_id = mid;
        if (with_members) r.members = member_list(g);
        return r;
    }

    void reset_session(member& m, std::optional<ms> timeout = std::nullopt) {
        m.session.arm_after(timeout.value_or(ms(m.session_timeout_ms)));
    }

    // Removes a member, answering whatever it waits for with `code`.
    void erase_member(group& g, const std::string& mid, std::int16_t code) {
        auto it = g.members.find(mid);
        if (it == g.members.end()) return;
        std::unique_ptr<member> m = std::move(it->second);
        g.members.erase(it);
        if (m->join_waiter) std::exchange(m->join_waiter, nullptr)->set(join_error(code, mid));
        if (m->sync_waiter) std::exchange(m->sync_waiter, nullptr)->set(sync_error(code));
        if (m->instance_id) {
            auto s = g.static_members.find(*m->instance_id);
            if (s != g.static_members.end() && s->second == mid) g.static_members.erase(s);
        }
        g.pending_sync.erase(mid);
        if (g.is_leader(mid)) {
            g.leader.reset();
            // Prefer a member that is rejoining, so the rebalance can complete with it.
            for (const auto& [id, other] : g.members)
                if (other->join_waiter) {
                    g.leader = id;
                    break;
                }
            if (!g.leader && !g.members.empty()) g.leader = g.members.begin()->first;
        }
        // `m` (and its session timer) is destroyed here, possibly from inside that timer.
    }

    void remove_member_and_update(group& g, const std::string& mid, std::string_view reason) {
        log::info("group '{}': removing member {}: {}", g.id, mid, reason);
        erase_member(g, mid, kerr::unknown_member_id);
        switch (g.st) {
        case gstate::stable:
        case gstate::completing_rebalance: maybe_prepare_rebalance(g, reason); break;
        case gstate::preparing_rebalance: try_complete_join(g); break;
        case gstate::empty:
        case gstate::dead: break;
        }
    }

    void reset_and_propagate_assignment_error(group& g, std::int16_t code) {
        for (auto& [_, m] : g.members) {
            m->assignment.clear();
            if (m->sync_waiter) std::exchange(m->sync_waiter, nullptr)->set(sync_error(code));
        }
    }

    void propagate_assignment(group& g) {
        for (auto& [_, m] : g.members) {
            if (!m->sync_waiter) continue;
            SyncGroupResponse r;
            r.protocol_type = g.protocol_type;
            r.protocol_name = g.protocol_name;
            r.assignment = m->assignment;
            std::exchange(m->sync_waiter, nullptr)->set(std::move(r));
            reset_session(*m);
        }
    }

    void maybe_prepare_rebalance(group& g, std::string_view reason) {
        if (g.st == gstate::stable || g.st == gstate::completing_rebalance || g.st == gstate::empty)
            prepare_rebalance(g, reason);
    }

    void prepare_rebalance(group& g, std::string_view reason) {
        if (g.st == gstate::completing_rebalance) reset_and_propagate_assignment_error(g, kerr::rebalance_in_progress);
        g.sync_timer.cancel();
        g.pending_sync.clear();
        bool initial = g.st == gstate::empty && cfg.initial_rebalance_delay.count() > 0;
        g.st = gstate::preparing_rebalance;
        log::info("group '{}': preparing to rebalance (generation {}): {}", g.id, g.generation, reason);
        if (initial) {
            // Kafka's InitialDelayedJoin: wait initial_rebalance_delay for more members; each
            // new member extends the wait, up to the group's rebalance timeout in total.
            g.jk = group::join_kind::initial;
            g.initial_delay = cfg.initial_rebalance_delay;
            g.initial_remaining = std::max(ms(g.rebalance_timeout_ms()) - cfg.initial_rebalance_delay, ms(0));
            g.join_timer.arm_after(g.initial_delay);
        } else {
            g.jk = group::join_kind::normal;
            g.join_timer.arm_after(ms(g.rebalance_timeout_ms()));
            try_complete_join(g);
        }
    }

    void try_complete_join(group& g) {
        if (g.st == gstate::preparing_rebalance && g.jk == group::join_kind::normal && g.all_joined()) complete_join(g);
    }

    void on_join_timer(group& g) {
        if (closed || g.st != gstate::preparing_rebalance) return;
        if (g.jk == group::join_kind::initial && g.new_member_added && g.initial_remaining.count() > 0) {
            g.new_member_added = false;
            ms delay = std::min(cfg.initial_rebalance_delay, g.initial_remaining);
            g.initial_remaining = std::max(g.initial_remaining - g.initial_delay, ms(0));
            g.initial_delay = delay;
            g.join_timer.arm_after(delay);
            return;
        }
        complete_join(g);
    }

    // Kafka's maybeElectNewJoinedLeader: keep the leader if it rejoined, else pick one that did.
    bool elect_joined_leader(group& g) {
        if (!g.leader) return false;
        auto* l = g.find(*g.leader);
        if (l && l->join_waiter) return true;
        for (const auto& [id, m] : g.members)
            if (m->join_waiter) {
                g.leader = id;
                return true;
            }
        return false;
    }

    void complete_join(group& g) {
        g.join_timer.cancel();
        g.jk = group::join_kind::none;
        // Dynamic members that did not rejoin in time are out; static ones stay (their
        // instance keeps its place until its session expires).
        std::vector<std::string> gone;
        for (const auto& [id, m] : g.members)
            if (!m->join_waiter && !m->instance_id) gone.push_back(id);
        for (const auto& id : gone) {
            log::info("group '{}': member {} did not rejoin in time", g.id, id);
            erase_member(g, id, kerr::unknown_member_id);
        }
        if (g.st == gstate::dead) return;
        if (!elect_joined_leader(g) && !g.members.empty()) {
            // Only static members that have not rejoined: wait another round (their sessions
            // will expire if they are gone).
            g.jk = group::join_kind::normal;
            g.join_timer.arm_after(ms(g.rebalance_timeout_ms()));
            return;
        }
        ++g.generation;
        ++rebalances;
        if (g.members.empty()) {
            g.protocol_name.reset();
            g.leader.reset();
            g.st = gstate::empty;
            g.empty_since = now();
            log::info("group '{}' with generation {} is now empty", g.id, g.generation);
            return;
        }
        g.protocol_name = select_protocol(g);
        g.st = gstate::completing_rebalance;
        log::info("group '{}': generation {} with {} members, protocol '{}', leader {}", g.id, g.generation,
                  g.members.size(), *g.protocol_name, g.leader.value_or(""));
        for (auto& [id, m] : g.members) {
            if (m->join_waiter) {
                auto r = current_generation(g, id, g.is_leader(id));
                std::exchange(m->join_waiter, nullptr)->set(std::move(r));
            }
            m->is_new = false;
            reset_session(*m);
            g.pending_sync.insert(id);
        }
        g.sync_timer.arm_after(ms(g.rebalance_timeout_ms()));
    }

    void on_sync_timer(group& g) {
        if (closed) return;
        if (g.st != gstate::completing_rebalance && g.st != gstate::stable) return;
        if (g.pending_sync.empty()) return;
        std::vector<std::string> late(g.pending_sync.begin(), g.pending_sync.end());
        for (const auto& id : late) {
            log::info("group '{}': member {} did not sync in time", g.id, id);
            erase_member(g, id, kerr::unknown_member_id);
        }
        prepare_rebalance(g, "members did not sync in time");
    }

    void on_session_expired(group& g, std::string mid) {
        if (closed) return;
        member* m = g.find(mid);
        if (!m) return;
        if (!m->is_new && (m->join_waiter || m->sync_waiter)) {
            // Members waiting in a rebalance need not heartbeat (Kafka's hasSatisfiedHeartbeat).
            reset_session(*m);
            return;
        }
        remove_member_and_update(g, mid, m->is_new ? "new member did not complete its join in time"
                                                   : "session timeout expired");
    }

    void on_pending_expired(group& g, std::string mid) {
        if (closed) return;
        g.pending.erase(mid);
        if (g.st == gstate::preparing_rebalance) try_complete_join(g);
    }

    void add_member_and_rebalance(group& g, const std::string& mid, std::optional<std::string> instance,
                                  const kafka::JoinGroupRequest& req, std::int32_t rebalance_ms,
                                  std::vector<protocol> protocols, const std::string& client_id,
                                  const std::string& client_host, std::shared_ptr<oneshot<JoinGroupResponse>> slot) {
        auto m = std::make_unique<member>(&g, mid);
        m->instance_id = std::move(instance);
        m->client_id = client_id;
        m->client_host = client_host;
        m->rebalance_timeout_ms = rebalance_ms;
        m->session_timeout_ms = req.session_timeout_ms;
        m->protocol_type = req.protocol_type;
        m->protocols = std::move(protocols);
        m->is_new = true;
        m->join_waiter = std::move(slot);
        if (g.st == gstate::preparing_rebalance && g.generation == 0) g.new_member_added = true;
        if (g.members.empty()) g.protocol_type = m->protocol_type;
        if (!g.leader) g.leader = mid;
        if (m->instance_id) g.static_members[*m->instance_id] = mid;
        auto* raw = m.get();
        g.members[mid] = std::move(m);
        // A new member cannot heartbeat until its join completes: bound that wait instead.
        reset_session(*raw, cfg.new_member_join_timeout);
        maybe_prepare_rebalance(g, fmt::format("adding new member {}", mid));
    }

    void update_member_and_rebalance(group& g, member& m, const kafka::JoinGroupRequest& req,
                                     std::int32_t rebalance_ms, std::vector<protocol> protocols,
                                     std::shared_ptr<oneshot<JoinGroupResponse>> slot, std::string_view reason) {
        m.protocols = std::move(protocols);
        m.rebalance_timeout_ms = rebalance_ms;
        m.session_timeout_ms = req.session_timeout_ms;
        if (m.join_waiter) {
            // The same member joined again while its previous JoinGroup waits (a client-side
            // timeout and retry): the newer request is the one that gets the result.
            std::exchange(m.join_waiter, nullptr)->set(join_error(kerr::rebalance_in_progress, m.id));
        }
        m.join_waiter = std::move(slot);
        reset_session(m);
        maybe_prepare_rebalance(g, reason);
    }

    // A known group.instance.id joined with an unknown member id: the new id replaces the old
    // one (the old holder is fenced). In a Stable group whose protocol would not change, this
    // completes without a rebalance (Kafka's updateStaticMemberAndRebalance).
    void static_member_rejoin(group& g, const std::string& old_id, const std::string& new_id, std::int16_t version,
                              const kafka::JoinGroupRequest& req, std::int32_t rebalance_ms,
                              std::vector<protocol> protocols,
                              std::shared_ptr<oneshot<JoinGroupResponse>> slot) {
        auto it = g.members.find(old_id);
        if (it == g.members.end()) {
            slot->set(join_error(kerr::unknown_member_id, new_id));
            return;
        }
        std::optional<std::string> old_leader = g.leader;
        std::unique_ptr<member> m = std::move(it->second);
        g.members.erase(it);
        if (m->join_waiter) std::exchange(m->join_waiter, nullptr)->set(join_error(kerr::fenced_instance_id, old_id));
        if (m->sync_waiter) std::exchange(m->sync_waiter, nullptr)->set(sync_error(kerr::fenced_instance_id));
        m->id = new_id;
        if (g.is_leader(old_id)) g.leader = new_id;
        if (g.pending_sync.erase(old_id)) g.pending_sync.insert(new_id);
        g.static_members[*m->instance_id] = new_id;
        member& mm = *m;
        g.members[new_id] = std::move(m);
        std::vector<protocol> old_protocols = mm.protocols;
        mm.protocols = std::move(protocols);
        mm.rebalance_timeout_ms = rebalance_ms;
        mm.session_timeout_ms = req.session_timeout_ms;
        reset_session(mm);
        log::info("group '{}': static member {} replaces {} in {}", g.id, new_id, old_id, state_name(g.st));
        switch (g.st) {
        case gstate::stable: {
            if (g.protocol_name && select_protocol(g) == *g.protocol_name) {
                bool leader = g.is_leader(new_id);
                auto r = current_generation(g, new_id, leader && version >= 9);
                // The old leader id keeps the new member from running a pointless assignment
                // that a Stable group would not broadcast; v9+ says so with skip_assignment.
                if (version >= 9) {
                    r.skip_assignment = leader;
                } else {
                    r.leader = old_leader.value_or("");
                }
                slot->set(std::move(r));
            } else {
                mm.join_waiter = std::move(slot);
                prepare_rebalance(g, "a static member rejoined with other protocols");
            }
            break;
        }
        case gstate::completing_rebalance:
            // The leader may have computed an assignment for the old id: start over.
            mm.join_waiter = std::move(slot);
            prepare_rebalance(g, "a static member rejoined during CompletingRebalance");
            break;
        case gstate::preparing_rebalance:
            mm.join_waiter = std::move(slot);
            break;
        case gstate::empty:
        case gstate::dead:
            mm.protocols = std::move(old_protocols);
            slot->set(join_error(kerr::unknown_member_id, new_id));
            break;
        }
    }

    std::shared_ptr<oneshot<JoinGroupResponse>> handle_join(const kafka::JoinGroupRequest& req, std::int16_t version,
                                                             const std::string& client_id,
                                                             const std::string& client_host) {
        auto slot = std::make_shared<oneshot<JoinGroupResponse>>();
        auto fail = [&](std::int16_t code, const std::string& mid) {
            slot->set(join_error(code, mid));
            return slot;
        };
        if (closed) return fail(kerr::coordinator_not_available, req.member_id);
        sweep();
        if (req.group_id.empty()) return fail(kerr::invalid_group_id, req.member_id);
        if (req.session_timeout_ms < cfg.min_session_timeout.count() ||
            req.session_timeout_ms > cfg.max_session_timeout.count())
            return fail(kerr::invalid_session_timeout, req.member_id);
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        std::int32_t rebalance_ms =
            (version >= 1 && req.rebalance_timeout_ms > 0) ? req.rebalance_timeout_ms : req.session_timeout_ms;
        std::optional<std::string> instance;
        if (version >= 5 && req.group_instance_id && !req.group_instance_id->empty())
            instance = req.group_instance_id;
        std::vector<protocol> protocols;
        protocols.reserve(req.protocols.size());
        for (const auto& p : req.protocols) {
            bool dup = false;
            for (const auto& q : protocols) dup = dup || q.name == p.name;
            if (!dup) protocols.push_back(protocol{p.name, p.metadata});
        }

        const bool unknown = req.member_id.empty();
        group* gp = find_group(req.group_id);
        if (!gp) {
            if (!unknown) return fail(kerr::unknown_member_id, req.member_id);
            gp = &create_group(req.group_id);
        }
        group& g = *gp;
        if (g.st == gstate::dead) return fail(kerr::coordinator_not_available, req.member_id);
        if (!supports_protocols(g, req.protocol_type, protocols))
            return fail(kerr::inconsistent_group_protocol, req.member_id);

        if (unknown) {
            std::string new_id = new_member_id(instance ? *instance : client_id);
            if (instance) {
                auto s = g.static_members.find(*instance);
                if (s != g.static_members.end()) {
                    std::string old_id = s->second;
                    static_member_rejoin(g, old_id, new_id, version, req, rebalance_ms, std::move(protocols), slot);
                } else {
                    add_member_and_rebalance(g, new_id, instance, req, rebalance_ms, std::move(protocols), client_id,
                                             client_host, slot);
                }
            } else if (version >= 4) {
                // KIP-394: hand out the id first; the member joins again with it.
                auto pm = std::make_unique<pending_member>(&g, new_id);
                pm->expiry.arm_after(ms(req.session_timeout_ms));
                g.pending[new_id] = std::move(pm);
                slot->set(join_error(kerr::member_id_required, new_id));
            } else {
                add_member_and_rebalance(g, new_id, std::nullopt, req, rebalance_ms, std::move(protocols), client_id,
                                         client_host, slot);
            }
        } else if (auto pit = g.pending.find(req.member_id); pit != g.pending.end()) {
            g.pending.erase(pit);
            add_member_and_rebalance(g, req.member_id, std::nullopt, req, rebalance_ms, std::move(protocols),
                                     client_id, client_host, slot);
        } else {
            if (g.fenced(req.member_id, instance)) return fail(kerr::fenced_instance_id, req.member_id);
            member* m = g.find(req.member_id);
            if (!m || (instance && !g.static_members.count(*instance)))
                return fail(kerr::unknown_member_id, req.member_id);
            switch (g.st) {
            case gstate::preparing_rebalance:
                update_member_and_rebalance(g, *m, req, rebalance_ms, std::move(protocols), slot,
                                            fmt::format("member {} rejoins", m->id));
                break;
            case gstate::completing_rebalance:
                if (m->protocols == protocols) {
                    // Lost our JoinGroup answer: repeat it.
                    reset_session(*m);
                    slot->set(current_generation(g, m->id, g.is_leader(m->id)));
                } else {
                    update_member_and_rebalance(g, *m, req, rebalance_ms, std::move(protocols), slot,
                                                fmt::format("member {} changed its metadata", m->id));
                }
                break;
            case gstate::stable:
                if (g.is_leader(m->id) || m->protocols != protocols) {
                    // A leader's join forces a rebalance (topic metadata changes it noticed).
                    update_member_and_rebalance(g, *m, req, rebalance_ms, std::move(protocols), slot,
                                                fmt::format("member {} rejoins a stable group", m->id));
                } else {
                    reset_session(*m);
                    slot->set(current_generation(g, m->id, false));
                }
                break;
            case gstate::empty:
            case gstate::dead: return fail(kerr::unknown_member_id, req.member_id);
            }
        }
        if (g.st == gstate::preparing_rebalance) try_complete_join(g);
        return slot;
    }

    std::shared_ptr<oneshot<SyncGroupResponse>> handle_sync(const kafka::SyncGroupRequest& req, std::int16_t version) {
        auto slot = std::make_shared<oneshot<SyncGroupResponse>>();
        auto fail = [&](std::int16_t code) {
            slot->set(sync_error(code));
            return slot;
        };
        if (closed) return fail(kerr::coordinator_not_available);
        sweep();
        if (req.group_id.empty()) return fail(kerr::invalid_group_id);
        group* gp = find_group(req.group_id);
        if (!gp) return fail(kerr::unknown_member_id);
        group& g = *gp;
        if (g.st == gstate::dead) return fail(kerr::coordinator_not_available);
        std::optional<std::string> instance;
        if (version >= 3 && req.group_instance_id && !req.group_instance_id->empty()) instance = req.group_instance_id;
        if (g.fenced(req.member_id, instance)) return fail(kerr::fenced_instance_id);
        member* m = g.find(req.member_id);
        if (!m) return fail(kerr::unknown_member_id);
        if (req.generation_id != g.generation) return fail(kerr::illegal_generation);
        if (version >= 5) {
            if (req.protocol_type && g.protocol_type != req.protocol_type) return fail(kerr::inconsistent_group_protocol);
            if (req.protocol_name && g.protocol_name != req.protocol_name) return fail(kerr::inconsistent_group_protocol);
        }
        switch (g.st) {
        case gstate::empty:
        case gstate::dead: return fail(kerr::unknown_member_id);
        case gstate::preparing_rebalance: return fail(kerr::rebalance_in_progress);
        case gstate::completing_rebalance:
            if (m->sync_waiter) std::exchange(m->sync_waiter, nullptr)->set(sync_error(kerr::rebalance_in_progress));
            m->sync_waiter = slot;
            g.pending_sync.erase(m->id);
            if (g.is_leader(m->id)) {
                for (auto& [_, other] : g.members) other->assignment.clear();
                for (const auto& a : req.assignments)
                    if (member* target = g.find(a.member_id)) target->assignment = a.assignment;
                g.st = gstate::stable;
                log::info("group '{}': generation {} is stable", g.id, g.generation);
                propagate_assignment(g);
            }
            return slot;
        case gstate::stable: {
            g.pending_sync.erase(m->id);
            SyncGroupResponse r;
            r.protocol_type = g.protocol_type;
            r.protocol_name = g.protocol_name;
            r.assignment = m->assignment;
            reset_session(*m);
            slot->set(std::move(r));
            return slot;
        }
        }
        return slot;
    }

    std::int16_t handle_heartbeat(const kafka::HeartbeatRequest& req, std::int16_t version) {
        if (closed) return kerr::coordinator_not_available;
        sweep();
        if (req.group_id.empty()) return kerr::invalid_group_id;
        group* gp = find_group(req.group_id);
        if (!gp) return kerr::unknown_member_id;
        group& g = *gp;
        if (g.st == gstate::dead) return kerr::coordinator_not_available;
        std::optional<std::string> instance;
        if (version >= 3 && req.group_instance_id && !req.group_instance_id->empty()) instance = req.group_instance_id;
        if (g.fenced(req.member_id, instance)) return kerr::fenced_instance_id;
        member* m = g.find(req.member_id);
        if (!m) return kerr::unknown_member_id;
        if (req.generation_id != g.generation) return kerr::illegal_generation;
        switch (g.st) {
        case gstate::empty:
        case gstate::dead: return kerr::unknown_member_id;
        case gstate::completing_rebalance:
        case gstate::stable: reset_session(*m); return kerr::none;
        case gstate::preparing_rebalance: reset_session(*m); return kerr::rebalance_in_progress;
        }
        return kerr::none;
    }

    std::int16_t leave_one(group& g, std::string mid, const std::optional<std::string>& instance) {
        if (mid.empty() && instance) {
            auto s = g.static_members.find(*instance);
            if (s == g.static_members.end()) return kerr::unknown_member_id;
            mid = s->second;
        }
        if (auto p = g.pending.find(mid); p != g.pending.end()) {
            g.pending.erase(p);
            if (g.st == gstate::preparing_rebalance) try_complete_join(g);
            return kerr::none;
        }
        if (g.fenced(mid, instance)) return kerr::fenced_instance_id;
        if (!g.find(mid)) return kerr::unknown_member_id;
        remove_member_and_update(g, mid, "the member left the group");
        return kerr::none;
    }

    // -- offsets --

    // Kafka's GroupMetadata.validateOffsetCommit. May create the group (a standalone commit).
    std::int16_t validate_commit(const kafka::OffsetCommitRequest& req, std::int16_t version, group*& out) {
        out = nullptr;
        if (closed) return kerr::coordinator_not_available;
        if (req.group_id.empty()) return kerr::invalid_group_id;
        const std::int32_t gen = version >= 1 ? req.generation_id_or_member_epoch : -1;
        const std::string mid = version >= 1 ? req.member_id : std::string();
        std::optional<std::string> instance;
        if (version >= 7 && req.group_instance_id && !req.group_instance_id->empty()) instance = req.group_instance_id;
        group* g = find_group(req.group_id);
        if (!g) {
            // Not managed by this coordinator: only a commit outside group management may
            // create it; otherwise it is a commit from an older generation.
            if (gen >= 0) return kerr::illegal_generation;
            g = &create_group(req.group_id);
        }
        if (g->st == gstate::dead) return kerr::coordinator_not_available;
        if (gen >= 0 || !mid.empty() || instance) {
            if (g->fenced(mid, instance)) return kerr::fenced_instance_id;
            member* m = g->find(mid);
            if (!m) return kerr::unknown_member_id;
            if (gen != g->generation) return kerr::illegal_generation;
            // A commit is as good as a heartbeat.
            reset_session(*m);
        } else if (g->st != gstate::empty) {
            // generation -1 (admin tools, manual assignment) may only commit for an Empty group.
            return kerr::unknown_member_id;
        }
        if (g->st == gstate::completing_rebalance) return kerr::rebalance_in_progress;
        out = g;
        return kerr::none;
    }

    runtime::task<void> write_loop(std::shared_ptr<group> g) {
        // Each round writes everything accepted so far: commits arriving during a PUT share
        // the next one.
        while (!g->write_waiters.empty() || !g->next_write.empty()) {
            offset_map batch = std::exchange(g->next_write, {});
            auto waiters = std::exchange(g->write_waiters, {});
            offset_map next = g->offsets;
            for (auto& [topic, parts] : batch)
                for (auto& [p, o] : parts) next[topic][p] = std::move(o);
            std::string body = serialize_offsets(g->id, next);
            std::string key = group_offsets_key(cfg.ns, g->id);
            std::span<const char> bytes(body.data(), body.size());
            runtime::deadline_scope scope(now() + cfg.offset_write_timeout);
            auto r = co_await store.put(std::move(key), bytes, false, scope.token());
            std::int16_t code = kerr::none;
            if (r) {
                g->offsets = std::move(next);
                offset_commits += waiters.size();
            } else {
                code = scope.expired() ? kerr::request_timed_out : kerr::coordinator_not_available;
                log::warn("group '{}': storing committed offsets failed ({}): {}; {} commit(s) not acknowledged", g->id,
                          storage::to_string(r.error().code), r.error().message, waiters.size());
            }
            for (auto& w : waiters) w->set(code);
        }
        g->writing = false;
        for (auto& w : std::exchange(g->idle_waiters, {})) w->set(true);
    }

    // Queues a commit for the group's next write; the slot gets the outcome.
    std::shared_ptr<oneshot<std::int16_t>> enqueue_commit(group& g, offset_map entries) {
        auto slot = std::make_shared<oneshot<std::int16_t>>();
        for (auto& [topic, parts] : entries)
            for (auto& [p, o] : parts) g.next_write[topic][p] = std::move(o);
        g.write_waiters.push_back(slot);
        if (!g.writing) {
            auto self = groups.find(g.id);
            if (self == groups.end() || self->second.get() != &g) {
                // Cannot happen (handlers only see groups in the map); fail safe.
                g.next_write.clear();
                for (auto& w : std::exchange(g.write_waiters, {})) w->set(kerr::coordinator_not_available);
                return slot;
            }
            g.writing = true;
            auto spawned = writes.spawn(write_loop(self->second));
            if (!spawned) {
                g.writing = false;
                g.next_write.clear();
                for (auto& w : std::exchange(g.write_waiters, {})) w->set(kerr::coordinator_not_available);
            }
        }
        return slot;
    }

    runtime::task<std::int16_t> delete_one(std::string name) {
        if (closed) co_return kerr::coordinator_not_available;
        if (name.empty()) co_return kerr::invalid_group_id;
        auto it = groups.find(name);
        if (it == groups.end()) co_return kerr::group_id_not_found;
        std::shared_ptr<group> g = it->second;
        if (g->st == gstate::dead) co_return kerr::group_id_not_found;
        if (g->st != gstate::empty || !g->members.empty()) co_return kerr::non_empty_group;
        auto holder = writes.enter();
        if (!holder) co_return kerr::coordinator_not_available;
        g->st = gstate::dead;
        g->pending.clear();
        // Writes already accepted land first; the delete then removes what they stored.
        while (g->writing) {
            auto idle = std::make_shared<oneshot<bool>>();
            g->idle_waiters.push_back(idle);
            auto aw = idle->wait();
            co_await aw;
        }
        std::string key = group_offsets_key(cfg.ns, g->id);
        runtime::deadline_scope scope(now() + cfg.offset_write_timeout);
        auto r = co_await store.remove(std::move(key), scope.token());
        if (!r) {
            log::warn("group '{}': deleting its offsets failed ({}): {}", g->id, storage::to_string(r.error().code),
                      r.error().message);
            g->st = gstate::empty;
            g->empty_since = now();
            co_return scope.expired() ? kerr::request_timed_out : kerr::coordinator_not_available;
        }
        auto again = groups.find(name);
        if (again != groups.end() && again->second == g) groups.erase(again);
        log::info("group '{}' deleted", name);
        co_return kerr::none;
    }

    // One group's offsets for OffsetFetch: (topic, partition) -> committed, in request order.
    struct fetched_partition {
        std::int32_t partition = 0;
        std::int64_t offset = -1;
        std::int32_t leader_epoch = -1;
        std::string metadata;
        std::int16_t error = kerr::none;
    };
    struct fetched_topic {
        std::string name;
        std::vector<fetched_partition> partitions;
    };
    struct fetched_group {
        std::int16_t error = kerr::none;
        std::vector<fetched_topic> topics;
    };

    // `topics` null: everything committed.
    fetched_group fetch_group(const std::string& gid,
                              const std::optional<std::vector<std::pair<std::string, std::vector<std::int32_t>>>>& topics) {
        fetched_group out;
        std::int16_t err = kerr::none;
        if (closed)
            err = kerr::coordinator_not_available;
        else if (gid.empty())
            err = kerr::invalid_group_id;
        group* g = err == kerr::none ? find_group(gid) : nullptr;
        out.error = err;
        if (!topics) {
            if (g) {
                for (const auto& [t, parts] : g->offsets) {
                    fetched_topic ft;
                    ft.name = t;
                    for (const auto& [p, o] : parts)
                        ft.partitions.push_back(fetched_partition{p, o.offset, o.leader_epoch, o.metadata, kerr::none});
                    out.topics.push_back(std::move(ft));
                }
            }
            return out;
        }
        for (const auto& [t, parts] : *topics) {
            fetched_topic ft;
            ft.name = t;
            const std::map<std::int32_t, committed_offset>* have = nullptr;
            if (g) {
                auto it = g->offsets.find(t);
                if (it != g->offsets.end()) have = &it->second;
            }
            for (auto p : parts) {
                fetched_partition fp;
                fp.partition = p;
                fp.error = err;
                if (have) {
                    auto o = have->find(p);
                    if (o != have->end()) {
                        fp.offset = o->second.offset;
                        fp.leader_epoch = o->second.leader_epoch;
                        fp.metadata = o->second.metadata;
                    }
                }
                ft.partitions.push_back(std::move(fp));
            }
            out.topics.push_back(std::move(ft));
        }
        return out;
    }
};

void member::on_session_timer(void* self) {
    auto* m = static_cast<member*>(self);
    m->g->s->on_session_expired(*m->g, m->id);
}
void pending_member::on_expiry(void* self) {
    auto* p = static_cast<pending_member*>(self);
    p->g->s->on_pending_expired(*p->g, p->id);
}
void group::on_join_timer(void* self) {
    auto* g = static_cast<group*>(self);
    g->s->on_join_timer(*g);
}
void group::on_sync_timer(void* self) {
    auto* g = static_cast<group*>(self);
    g->s->on_sync_timer(*g);
}

// ---- public API ------------------------------------------------------------------------------

group_coordinator::group_coordinator(storage::object_store& store, group_config cfg)
    : _s(std::make_unique<state>(store, std::move(cfg))) {}

group_coordinator::~group_coordinator() = default;

runtime::task<result<void, storage::store_error>> group_coordinator::load(std::function<bool(std::string_view)> owns) {
    state& s = *_s;
    const std::string prefix = groups_prefix(s.cfg.ns);
    std::string token;
    std::size_t loaded = 0, skipped = 0;
    do {
        std::string pfx = prefix;
        std::string page_token = token;
        auto page = co_await s.store.list(std::move(pfx), std::string(), std::move(page_token), 1000, {});
        if (!page) co_return failure{page.error()};
        for (const auto& entry : page->objects) {
            std::string_view rest = std::string_view(entry.key).substr(prefix.size());
            constexpr std::string_view suffix = "/offsets.json";
            if (rest.size() <= suffix.size() || rest.substr(rest.size() - suffix.size()) != suffix) continue;
            std::string_view esc = rest.substr(0, rest.size() - suffix.size());
            if (esc.find('/') != std::string_view::npos) continue;
            const bool hashed = esc.find('~') != std::string_view::npos;
            std::optional<std::string> id;
            if (!hashed) {
                id = unescape(esc);
                if (!id || id->empty()) {
                    log::warn("group offsets object {} has a malformed name; skipping it", entry.key);
                    ++skipped;
                    continue;
                }
                if (owns && !owns(*id)) continue;
            }
            std::string key = entry.key;
            auto got = co_await s.store.get(std::move(key), std::nullopt, {});
            if (!got) {
                if (got.error().code == storage::errc::not_found) continue; // deleted meanwhile
                co_return failure{got.error()};
            }
            auto parsed = parse_offsets(got->data);
            if (!parsed) {
                log::warn("group offsets object {} is corrupt ({}); skipping it: its committed offsets are not loaded",
                          entry.key, parsed.error());
                ++skipped;
                continue;
            }
            if (group_offsets_key(s.cfg.ns, parsed->group_id) != entry.key || (id && *id != parsed->group_id)) {
                log::warn("group offsets object {} names group '{}', which is stored elsewhere; skipping it",
                          entry.key, parsed->group_id);
                ++skipped;
                continue;
            }
            if (hashed && owns && !owns(parsed->group_id)) continue;
            if (s.find_group(parsed->group_id)) continue;
            group& g = s.create_group(parsed->group_id);
            g.offsets = std::move(parsed->offsets);
            ++loaded;
        }
        token = page->next_token;
    } while (!token.empty());
    log::info("group coordinator: loaded the committed offsets of {} group(s) from {}{}", loaded, s.store.describe(),
              skipped ? fmt::format(" ({} object(s) skipped)", skipped) : std::string());
    co_return ok();
}

runtime::task<kafka::JoinGroupResponse> group_coordinator::join(kafka::JoinGroupRequest req, std::int16_t version,
                                                                std::string client_id, std::string client_host) {
    auto slot = _s->handle_join(req, version, client_id, client_host);
    auto aw = slot->wait();
    kafka::JoinGroupResponse r = co_await aw;
    if (version < 7) {
        r.protocol_type.reset();
        if (!r.protocol_name) r.protocol_name = std::string();
    }
    if (version < 9) r.skip_assignment = false;
    if (version < 5)
        for (auto& m : r.members) m.group_instance_id.reset();
    co_return r;
}

runtime::task<kafka::SyncGroupResponse> group_coordinator::sync(kafka::SyncGroupRequest req, std::int16_t version) {
    auto slot = _s->handle_sync(req, version);
    auto aw = slot->wait();
    kafka::SyncGroupResponse r = co_await aw;
    if (version < 5) {
        r.protocol_type.reset();
        r.protocol_name.reset();
    }
    co_return r;
}

kafka::HeartbeatResponse group_coordinator::heartbeat(const kafka::HeartbeatRequest& req, std::int16_t version) {
    kafka::HeartbeatResponse r;
    r.error_code = _s->handle_heartbeat(req, version);
    return r;
}

kafka::LeaveGroupResponse group_coordinator::leave(const kafka::LeaveGroupRequest& req, std::int16_t version) {
    state& s = *_s;
    kafka::LeaveGroupResponse r;
    std::vector<std::pair<std::string, std::optional<std::string>>> who;
    if (version < 3) {
        who.emplace_back(req.member_id, std::nullopt);
    } else {
        for (const auto& m : req.members) who.emplace_back(m.member_id, m.group_instance_id);
    }
    std::int16_t top = kerr::none;
    if (s.closed)
        top = kerr::coordinator_not_available;
    else if (req.group_id.empty())
        top = kerr::invalid_group_id;
    if (top != kerr::none) {
        r.error_code = top;
        return r;
    }
    s.sweep();
    group* g = s.find_group(req.group_id);
    if (g && g->st == gstate::dead) {
        r.error_code = kerr::coordinator_not_available;
        return r;
    }
    std::vector<std::int16_t> errors;
    for (const auto& [mid, inst] : who) {
        std::optional<std::string> instance = (inst && !inst->empty()) ? inst : std::nullopt;
        errors.push_back(g ? s.leave_one(*g, mid, instance) : kerr::unknown_member_id);
    }
    if (version < 3) {
        r.error_code = errors.empty() ? kerr::none : errors.front();
    } else {
        for (std::size_t i = 0; i < who.size(); ++i) {
            kafka::LeaveGroupResponse::MemberResponse mr;
            mr.member_id = who[i].first;
            mr.group_instance_id = who[i].second;
            mr.error_code = errors[i];
            r.members.push_back(std::move(mr));
        }
    }
    return r;
}

runtime::task<kafka::OffsetCommitResponse> group_coordinator::commit_offsets(kafka::OffsetCommitRequest req,
                                                                             std::int16_t version) {
    state& s = *_s;
    if (!s.closed) s.sweep();
    kafka::OffsetCommitResponse resp;
    resp.topics.reserve(req.topics.size());
    for (const auto& t : req.topics) {
        kafka::OffsetCommitResponse::OffsetCommitResponseTopic rt;
        rt.name = t.name;
        for (const auto& p : t.partitions) {
            kafka::OffsetCommitResponse::OffsetCommitResponsePartition rp;
            rp.partition_index = p.partition_index;
            rt.partitions.push_back(rp);
        }
        resp.topics.push_back(std::move(rt));
    }
    group* g = nullptr;
    std::int16_t err = s.validate_commit(req, version, g);
    if (err != kerr::none || !g) {
        if (err == kerr::none) err = kerr::coordinator_not_available;
        for (auto& t : resp.topics)
            for (auto& p : t.partitions) p.error_code = err;
        co_return resp;
    }
    // Per-partition checks; the rest goes to the group's next write.
    offset_map entries;
    std::vector<kafka::OffsetCommitResponse::OffsetCommitResponsePartition*> accepted;
    const std::int64_t now_ms = s.wall_ms();
    for (std::size_t ti = 0; ti < req.topics.size(); ++ti) {
        auto& t = req.topics[ti];
        const bool topic_ok = !t.name.empty() && t.name.size() <= 249 && valid_utf8(t.name);
        for (std::size_t pi = 0; pi < t.partitions.size(); ++pi) {
            auto& p = t.partitions[pi];
            auto& rp = resp.topics[ti].partitions[pi];
            if (!topic_ok || p.partition_index < 0) {
                rp.error_code = kerr::unknown_topic_or_partition;
                continue;
            }
            std::string md = p.committed_metadata.value_or(std::string());
            if (md.size() > s.cfg.max_metadata_bytes) {
                rp.error_code = kerr::offset_metadata_too_large;
                continue;
            }
            committed_offset o;
            o.offset = p.committed_offset;
            o.leader_epoch = version >= 6 ? p.committed_leader_epoch : -1;
            o.metadata = std::move(md);
            // v1 carries a client timestamp; Kafka ignores it for retention only.
            o.commit_timestamp_ms = (version == 1 && p.commit_timestamp >= 0) ? p.commit_timestamp : now_ms;
            entries[t.name][p.partition_index] = std::move(o);
            accepted.push_back(&rp);
        }
    }
    if (accepted.empty()) co_return resp;
    auto slot = s.enqueue_commit(*g, std::move(entries));
    auto aw = slot->wait();
    std::int16_t code = co_await aw;
    for (auto* rp : accepted) rp->error_code = code;
    co_return resp;
}

runtime::task<kafka::OffsetFetchResponse> group_coordinator::fetch_offsets(kafka::OffsetFetchRequest req,
                                                                           std::int16_t version) {
    state& s = *_s;
    if (!s.closed) s.sweep();
    using topic_list = std::vector<std::pair<std::string, std::vector<std::int32_t>>>;
    kafka::OffsetFetchResponse resp;
    if (version < 8) {
        std::optional<topic_list> topics;
        if (req.topics) {
            topics.emplace();
            for (const auto& t : *req.topics) topics->emplace_back(t.name, t.partition_indexes);
        } else if (version < 2) {
            topics.emplace(); // null is not valid before v2: nothing requested
        }
        auto fg = s.fetch_group(req.group_id, topics);
        if (version >= 2) resp.error_code = fg.error;
        for (auto& t : fg.topics) {
            kafka::OffsetFetchResponse::OffsetFetchResponseTopic rt;
            rt.name = std::move(t.name);
            for (auto& p : t.partitions) {
                kafka::OffsetFetchResponse::OffsetFetchResponsePartition rp;
                rp.partition_index = p.partition;
                rp.committed_offset = p.offset;
                rp.committed_leader_epoch = version >= 5 ? p.leader_epoch : -1;
                rp.metadata = std::move(p.metadata);
                rp.error_code = p.error;
                rt.partitions.push_back(std::move(rp));
            }
            resp.topics.push_back(std::move(rt));
        }
        co_return resp;
    }
    for (const auto& rg : req.groups) {
        std::optional<topic_list> topics;
        if (rg.topics) {
            topics.emplace();
            for (const auto& t : *rg.topics) topics->emplace_back(t.name, t.partition_indexes);
        }
        auto fg = s.fetch_group(rg.group_id, topics);
        kafka::OffsetFetchResponse::OffsetFetchResponseGroup og;
        og.group_id = rg.group_id;
        og.error_code = fg.error;
        for (auto& t : fg.topics) {
            kafka::OffsetFetchResponse::OffsetFetchResponseTopics rt;
            rt.name = std::move(t.name);
            for (auto& p : t.partitions) {
                kafka::OffsetFetchResponse::OffsetFetchResponsePartitions rp;
                rp.partition_index = p.partition;
                rp.committed_offset = p.offset;
                rp.committed_leader_epoch = p.leader_epoch;
                rp.metadata = std::move(p.metadata);
                // The group-level error is reported once, at group level.
                rp.error_code = fg.error == kerr::none ? p.error : kerr::none;
                rt.partitions.push_back(std::move(rp));
            }
            og.topics.push_back(std::move(rt));
        }
        resp.groups.push_back(std::move(og));
    }
    co_return resp;
}

kafka::ListGroupsResponse group_coordinator::list_groups(const kafka::ListGroupsRequest& req, std::int16_t version) {
    state& s = *_s;
    kafka::ListGroupsResponse r;
    if (s.closed) {
        r.error_code = kerr::coordinator_not_available;
        return r;
    }
    s.sweep();
    for (const auto& [id, g] : s.groups) {
        if (g->st == gstate::dead) continue;
        std::string_view st = state_name(g->st);
        if (version >= 4 && !req.states_filter.empty()) {
            bool match = false;
            for (const auto& f : req.states_filter) match = match || iequals(f, st);
            if (!match) continue;
        }
        if (version >= 5 && !req.types_filter.empty()) {
            bool match = false;
            for (const auto& f : req.types_filter) match = match || iequals(f, "classic");
            if (!match) continue;
        }
        kafka::ListGroupsResponse::ListedGroup lg;
        lg.group_id = id;
        lg.protocol_type = g->protocol_type.value_or("");
        lg.group_state = std::string(st);
        lg.group_type = "classic";
        r.groups.push_back(std::move(lg));
    }
    return r;
}

kafka::DescribeGroupsResponse group_coordinator::describe_groups(const kafka::DescribeGroupsRequest& req,
                                                                 std::int16_t version) {
    (void)version;
    state& s = *_s;
    if (!s.closed) s.sweep();
    kafka::DescribeGroupsResponse r;
    for (const auto& gid : req.groups) {
        kafka::DescribeGroupsResponse::DescribedGroup d;
        d.group_id = gid;
        if (s.closed) {
            d.error_code = kerr::coordinator_not_available;
        } else if (gid.empty()) {
            d.error_code = kerr::invalid_group_id;
        } else if (group* g = s.find_group(gid); !g) {
            d.group_state = "Dead"; // Kafka (v0-5) describes an unknown group as Dead
        } else {
            d.group_state = std::string(state_name(g->st));
            d.protocol_type = g->protocol_type.value_or("");
            const bool stable = g->st == gstate::stable && g->protocol_name;
            if (stable) d.protocol_data = *g->protocol_name;
            for (const auto& [mid, m] : g->members) {
                kafka::DescribeGroupsResponse::DescribedGroupMember dm;
                dm.member_id = mid;
                dm.group_instance_id = m->instance_id;
                dm.client_id = m->client_id;
                dm.client_host = m->client_host;
                if (stable) {
                    if (const auto* md = m->metadata_for(*g->protocol_name)) dm.member_metadata = *md;
                    dm.member_assignment = m->assignment;
                }
                d.members.push_back(std::move(dm));
            }
        }
        r.groups.push_back(std::move(d));
    }
    return r;
}

runtime::task<kafka::DeleteGroupsResponse> group_coordinator::delete_groups(kafka::DeleteGroupsRequest req,
                                                                            std::int16_t version) {
    (void)version;
    kafka::DeleteGroupsResponse r;
    for (const auto& name : req.groups_names) {
        std::string n = name;
        std::int16_t code = co_await _s->delete_one(std::move(n));
        kafka::DeleteGroupsResponse::DeletableGroupResult res;
        res.group_id = name;
        res.error_code = code;
        r.results.push_back(std::move(res));
    }
    co_return r;
}

runtime::task<void> group_coordinator::close() {
    state& s = *_s;
    if (!s.closed) {
        s.closed = true;
        for (auto& [_, g] : s.groups) {
            g->join_timer.cancel();
            g->sync_timer.cancel();
            g->pending.clear();
            for (auto& [mid, m] : g->members) {
                m->session.cancel();
                if (m->join_waiter)
                    std::exchange(m->join_waiter, nullptr)->set(join_error(kerr::coordinator_not_available, mid));
                if (m->sync_waiter)
                    std::exchange(m->sync_waiter, nullptr)->set(sync_error(kerr::coordinator_not_available));
            }
        }
    }
    co_await s.writes.close();
}

group_stats group_coordinator::stats() const noexcept {
    group_stats st;
    st.groups = _s->groups.size();
    for (const auto& [_, g] : _s->groups) st.members += g->members.size();
    st.rebalances = _s->rebalances;
    st.offset_commits = _s->offset_commits;
    return st;
}

} // namespace skiff::broker
