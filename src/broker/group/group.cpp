// Queries on one group's state (Kafka's GroupMetadata).
#include "group.hpp"

#include <skiff/runtime/reactor.hpp>

#include <algorithm>
#include <map>

namespace skiff::broker::groups {

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

std::int32_t group::rebalance_timeout_ms() const {
    std::int32_t t = 0;
    for (const auto& [_, m] : members) t = std::max(t, m->rebalance_timeout_ms);
    return t;
}
bool group::all_joined() const {
    if (!pending.empty()) return false;
    for (const auto& [_, m] : members)
        if (!m->join_waiter) return false;
    return true;
}

bool group::supports_protocols(std::string_view type, const std::vector<protocol>& ps) const {
    if (st == gstate::empty || members.empty()) return !type.empty() && !ps.empty();
    if (!protocol_type || *protocol_type != type) return false;
    for (const auto& p : ps) {
        bool all = true;
        for (const auto& [_, m] : members)
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
std::string group::select_protocol() const {
    std::vector<std::string> candidates;
    if (members.empty()) return {};
    for (const auto& p : members.begin()->second->protocols) {
        bool all = true;
        for (const auto& [_, m] : members)
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
    for (const auto& [id, m] : members) {
        for (const auto& p : m->protocols) {
            if (std::find(candidates.begin(), candidates.end(), p.name) != candidates.end()) {
                ++votes[p.name];
                if (is_leader(id)) leader_vote = p.name;
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

namespace {

std::vector<JoinGroupResponse::JoinGroupResponseMember> member_list(const group& g) {
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

} // namespace

JoinGroupResponse group::current_generation(const std::string& mid, bool with_members) const {
    JoinGroupResponse r;
    r.generation_id = generation;
    r.protocol_type = protocol_type;
    r.protocol_name = protocol_name;
    r.leader = leader.value_or("");
    r.member_id = mid;
    if (with_members) r.members = member_list(*this);
    return r;
}

JoinGroupResponse join_error(kafka::error_code code, std::string member_id) {
    JoinGroupResponse r;
    r.error_code = code;
    r.generation_id = -1;
    r.protocol_name = std::nullopt;
    r.member_id = std::move(member_id);
    return r;
}

SyncGroupResponse sync_error(kafka::error_code code) {
    SyncGroupResponse r;
    r.error_code = code;
    return r;
}

} // namespace skiff::broker::groups
