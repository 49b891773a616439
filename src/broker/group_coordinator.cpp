// The group coordinator's façade: routes each Kafka group request to the core's
// group_manager (src/broker/group/) and shapes the answer for the request's version. Version
// rules live here only; the manager's answers are version-independent.
#include "group/group_manager.hpp"

#include <skiff/broker/group_coordinator.hpp>
#include <skiff/broker/kafka_errors.hpp>
#include <skiff/core/ascii.hpp>

#include <utility>
#include <vector>

namespace skiff::broker {

using groups::committed_offset;
using groups::group;
using groups::gstate;
using groups::offset_map;
using groups::state_name;
using groups::valid_utf8;

// The public header names `state`; the manager is it.
struct group_coordinator::state final : groups::group_manager {
    using group_manager::group_manager;
};

group_coordinator::group_coordinator(storage::object_store& store, group_config cfg)
    : _s(std::make_unique<state>(store, std::move(cfg))) {}

group_coordinator::~group_coordinator() = default;

runtime::task<result<void, storage::store_error>> group_coordinator::load(std::function<bool(std::string_view)> owns) {
    return _s->load(std::move(owns));
}

runtime::task<kafka::JoinGroupResponse> group_coordinator::join(kafka::JoinGroupRequest req, std::int16_t version,
                                                                std::string client_id, std::string client_host) {
    auto slot = _s->handle_join(req, version, client_id, client_host);
    auto aw = slot->wait();
    auto waited = co_await aw;
    // The slot lives as long as this wait, so it cannot break; if it ever did, that is no answer.
    kafka::JoinGroupResponse r =
        waited ? std::move(*waited) : groups::join_error(kerr::coordinator_not_available, req.member_id);
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
    auto waited = co_await aw;
    kafka::SyncGroupResponse r = waited ? std::move(*waited) : groups::sync_error(kerr::coordinator_not_available);
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
    kafka::error_code top = kerr::none;
    if (s.closed())
        top = kerr::not_coordinator;
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
    std::vector<kafka::error_code> errors;
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

kafka::OffsetCommitResponse offset_commit_answer(const kafka::OffsetCommitRequest& req, kafka::error_code code) {
    kafka::OffsetCommitResponse resp;
    resp.topics.reserve(req.topics.size());
    for (const auto& t : req.topics) {
        kafka::OffsetCommitResponse::OffsetCommitResponseTopic rt;
        rt.name = t.name;
        for (const auto& p : t.partitions) {
            kafka::OffsetCommitResponse::OffsetCommitResponsePartition rp;
            rp.partition_index = p.partition_index;
            rp.error_code = code;
            rt.partitions.push_back(rp);
        }
        resp.topics.push_back(std::move(rt));
    }
    return resp;
}

runtime::task<kafka::OffsetCommitResponse> group_coordinator::commit_offsets(kafka::OffsetCommitRequest req,
                                                                             std::int16_t version) {
    state& s = *_s;
    if (!s.closed()) s.sweep();
    kafka::OffsetCommitResponse resp = offset_commit_answer(req, kerr::none);
    group* g = nullptr;
    kafka::error_code err = s.validate_commit(req, version, g);
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
            if (md.size() > s.cfg().max_metadata_bytes) {
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
    auto waited = co_await aw;
    const kafka::error_code code = waited ? *waited : kerr::coordinator_not_available;
    for (auto* rp : accepted) rp->error_code = code;
    co_return resp;
}

kafka::error_code group_coordinator::validate_txn_member(std::string_view group_id, std::string_view member_id,
                                                         std::int32_t generation,
                                                         const std::optional<std::string>& group_instance_id) {
    state& s = *_s;
    if (s.closed()) return kerr::coordinator_not_available;
    if (generation < 0 && member_id.empty()) return kerr::none;
    group* g = s.find_group(group_id);
    if (!g) return kerr::unknown_member_id;
    if (g->st == gstate::dead) return kerr::coordinator_not_available;
    std::optional<std::string> instance;
    if (group_instance_id && !group_instance_id->empty()) instance = group_instance_id;
    if (g->fenced(member_id, instance)) return kerr::fenced_instance_id;
    if (!member_id.empty() && !g->find(member_id)) return kerr::unknown_member_id;
    if (generation >= 0 && generation != g->generation) return kerr::illegal_generation;
    return kerr::none;
}

runtime::task<kafka::error_code> group_coordinator::commit_txn_offsets(
    std::string group_id,
    std::map<std::string, std::map<std::int32_t, std::tuple<std::int64_t, std::int32_t, std::string>>> entries) {
    state& s = *_s;
    if (s.closed()) co_return kerr::coordinator_not_available;
    if (group_id.empty()) co_return kerr::invalid_group_id;
    group* g = s.find_group(group_id);
    if (!g) g = &s.create_group(group_id);
    if (g->st == groups::gstate::dead) co_return kerr::coordinator_not_available;
    offset_map om;
    const std::int64_t now_ms = s.wall_ms();
    for (auto& [topic, parts] : entries) {
        for (auto& [p, e] : parts) {
            committed_offset o;
            o.offset = std::get<0>(e);
            o.leader_epoch = std::get<1>(e);
            o.metadata = std::get<2>(e);
            o.commit_timestamp_ms = now_ms;
            om[topic][p] = std::move(o);
        }
    }
    if (om.empty()) co_return kerr::none;
    auto slot = s.enqueue_commit(*g, std::move(om));
    auto aw = slot->wait();
    auto waited = co_await aw;
    co_return waited ? *waited : kerr::coordinator_not_available;
}

runtime::task<kafka::OffsetFetchResponse> group_coordinator::fetch_offsets(kafka::OffsetFetchRequest req,
                                                                           std::int16_t version) {
    state& s = *_s;
    if (!s.closed()) s.sweep();
    using topic_list = groups::topic_partitions;
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
    if (s.closed()) {
        r.error_code = kerr::coordinator_not_available;
        return r;
    }
    s.sweep();
    for (const auto& [id, g] : s.groups()) {
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
    if (!s.closed()) s.sweep();
    kafka::DescribeGroupsResponse r;
    for (const auto& gid : req.groups) {
        kafka::DescribeGroupsResponse::DescribedGroup d;
        d.group_id = gid;
        if (s.closed()) {
            d.error_code = kerr::not_coordinator;
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
        kafka::error_code code = co_await _s->delete_one(std::move(n));
        kafka::DeleteGroupsResponse::DeletableGroupResult res;
        res.group_id = name;
        res.error_code = code;
        r.results.push_back(std::move(res));
    }
    co_return r;
}

runtime::task<kafka::OffsetDeleteResponse> group_coordinator::delete_offsets(kafka::OffsetDeleteRequest req,
                                                                            std::int16_t version) {
    (void)version;
    state& s = *_s;
    if (!s.closed()) s.sweep();
    groups::topic_partitions tps;
    for (const auto& t : req.topics) {
        std::vector<std::int32_t> parts;
        for (const auto& p : t.partitions) parts.push_back(p.partition_index);
        tps.emplace_back(t.name, std::move(parts));
    }
    auto outcome = co_await s.delete_offsets(req.group_id, std::move(tps));
    kafka::OffsetDeleteResponse r;
    r.error_code = outcome.error;
    if (outcome.error != kerr::none) co_return r;
    for (const auto& t : req.topics) {
        kafka::OffsetDeleteResponse::OffsetDeleteResponseTopic rt;
        rt.name = t.name;
        for (const auto& p : t.partitions) {
            kafka::OffsetDeleteResponse::OffsetDeleteResponsePartition rp;
            rp.partition_index = p.partition_index;
            auto it = outcome.partitions.find({t.name, p.partition_index});
            rp.error_code = it == outcome.partitions.end() ? kerr::none : it->second;
            rt.partitions.push_back(rp);
        }
        r.topics.push_back(std::move(rt));
    }
    co_return r;
}

runtime::task<void> group_coordinator::close() { return _s->close(); }

group_stats group_coordinator::stats() const noexcept { return _s->stats(); }

void group_coordinator::forget_topics(const std::set<std::string>& gone) { _s->forget_topics(gone); }

} // namespace skiff::broker
