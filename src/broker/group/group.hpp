// One consumer group's state: members, their protocols and assignments, the generation, the
// group's timers and its committed offsets. Plain data with the queries Kafka's GroupMetadata
// answers; the transitions that change it live in group_manager (membership.cpp,
// offset_store.cpp). Owning core only.
#pragma once

#include "offsets_format.hpp"

#include <skiff/kafka/frame.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// The folder is group/, the namespace `groups`: a namespace named like its `group` struct would
// make `group` ambiguous wherever both are in scope (using-directives in the façade and tests).
namespace skiff::broker::groups {

using ms = std::chrono::milliseconds;
using kafka::JoinGroupResponse;
using kafka::SyncGroupResponse;
using runtime::oneshot;

class group_manager;

enum class gstate { empty, preparing_rebalance, completing_rebalance, stable, dead };

// Kafka's state names (GroupState.toString), as DescribeGroups / ListGroups report them.
std::string_view state_name(gstate s) noexcept;

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
    runtime::fn_timer session{&on_session_timer, this};

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
    runtime::fn_timer expiry{&on_expiry, this};
    static void on_expiry(void* self);
};

struct group {
    group(group_manager* mgr_, std::string id_) : mgr(mgr_), id(std::move(id_)) {}
    group_manager* mgr; // whose transitions the timers call
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
    runtime::fn_timer join_timer{&on_join_timer, this};
    runtime::fn_timer sync_timer{&on_sync_timer, this};
    runtime::time_point empty_since{};

    // Committed offsets: `offsets` is what the store holds (the only view OffsetFetch shows);
    // `next_write` are accepted commits waiting for the next PUT, whose requests wait in
    // `write_waiters`. One PUT in flight per group (`writing`).
    offset_map offsets;
    offset_map next_write;
    // OffsetDelete: partitions whose offsets the next PUT leaves out (disjoint from next_write:
    // the later of a commit and a delete of one partition wins).
    std::map<std::string, std::set<std::int32_t>> next_delete;
    std::vector<std::shared_ptr<oneshot<kafka::error_code>>> write_waiters;
    bool writing = false;
    std::vector<std::shared_ptr<oneshot<void>>> idle_waiters; // woken when `writing` ends

    static void on_join_timer(void* self);
    static void on_sync_timer(void* self);

    member* find(std::string_view mid) {
        auto it = members.find(std::string(mid));
        return it == members.end() ? nullptr : it->second.get();
    }
    bool is_leader(std::string_view mid) const { return leader && *leader == mid; }
    std::int32_t rebalance_timeout_ms() const;
    bool all_joined() const;
    // A static member registered under `instance` with another member id (Kafka's
    // isStaticMemberFenced).
    bool fenced(std::string_view mid, const std::optional<std::string>& instance) const {
        if (!instance) return false;
        auto it = static_members.find(*instance);
        return it != static_members.end() && it->second != mid;
    }
    bool prunable() const {
        return st == gstate::empty && members.empty() && pending.empty() && offsets.empty() &&
               next_write.empty() && next_delete.empty() && write_waiters.empty() && !writing && idle_waiters.empty();
    }

    // Whether a member of protocol type `type` offering `ps` may join (Kafka's
    // supportsProtocols): any non-empty offer for an empty group, else the group's type and
    // one protocol every member supports.
    bool supports_protocols(std::string_view type, const std::vector<protocol>& ps) const;
    // The protocol every member supports with the most first-choice votes (Kafka's
    // selectProtocol); ties go to the leader's choice, then to the smaller name.
    std::string select_protocol() const;
    // The JoinGroup answer of the current generation for `mid`; the leader's lists members.
    JoinGroupResponse current_generation(const std::string& mid, bool with_members) const;
};

JoinGroupResponse join_error(kafka::error_code code, std::string member_id);
SyncGroupResponse sync_error(kafka::error_code code);

} // namespace skiff::broker::groups
