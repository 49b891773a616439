// Consumer-group requests, routed to the core that owns each group (group_owner). Requests
// naming several groups are split by owner and the answers merged in request order.
#include "../handlers.hpp"
#include "../ownership.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>

#include <set>
#include <skiff/cluster/records.hpp>

namespace skiff::broker {

namespace {
// Requests naming several groups are split by coordinator: by core, and in cluster mode by
// group slot (each slot a broker serves has a coordinator of its own, ownership.cpp).
unsigned splits(const shard& sh) { return sh.cfg().clustered() ? cluster::group_slots : sh.shared->cores; }
unsigned split_of(const shard& sh, std::string_view group) {
    return sh.cfg().clustered() ? static_cast<unsigned>(cluster::group_slot(group))
                                : group_owner(group, sh.shared->cores);
}
unsigned core_of_split(const shard& sh, unsigned split) {
    return sh.cfg().clustered() ? split % sh.shared->cores : split;
}

// Cluster mode: this core claimed the group's slot and is still loading its committed offsets
// (ownership.cpp, install_claim). Kafka's answer for a coordinator loading its partition is
// COORDINATOR_LOAD_IN_PROGRESS (GroupCoordinator.validateGroupStatus), which clients retry on
// the same coordinator, rather than NOT_COORDINATOR, which sends them looking again.
bool slot_loading(const shard& o, std::string_view group) {
    if (!o.cfg().clustered()) return false;
    const std::int32_t slot = cluster::group_slot(group);
    return claim_of(o, cluster::groups_topic, slot) != nullptr && !o.slot_groups.count(slot);
}

// Asks the group's core (a hop only in cluster mode, where loading can happen).
runtime::task<bool> group_loading(shard& sh, const std::string* group) {
    if (!sh.cfg().clustered()) co_return false;
    co_return co_await on_group_owner(sh, *group, [group](shard& o) { return slot_loading(o, *group); });
}

kafka::ListGroupsResponse list_on_core(shard& o, const kafka::ListGroupsRequest& req, std::int16_t v) {
    kafka::ListGroupsResponse merged;
    for (auto* g : coordinators_of(o)) {
        auto resp = g->list_groups(req, v);
        if (resp.error_code != kerr::none) merged.error_code = resp.error_code;
        for (auto& grp : resp.groups) merged.groups.push_back(std::move(grp));
    }
    return merged;
}
} // namespace

runtime::task<std::string> handle_join_group(request_ctx ctx, kafka::JoinGroupRequest req) {
    const std::int16_t v = ctx.version;
    // KafkaApis: READ on the group for every membership request.
    const bool denied = !authorized(ctx, acl::operation::read, acl::resource_type::group, req.group_id);
    const bool loading = !denied && co_await group_loading(ctx.sh, &req.group_id);
    if (denied || loading) {
        kafka::JoinGroupResponse r;
        r.error_code = denied ? kerr::group_authorization_failed : kerr::coordinator_load_in_progress;
        r.member_id = req.member_id;
        if (v >= 7) r.protocol_name.reset(); // null where the version allows it, as Kafka's error answer
        co_return respond(r, ctx);
    }
    auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) {
        return coordinator_for(o, req.group_id).join(std::move(req), v, ctx.client_id, ctx.ci.client_host);
    });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_sync_group(request_ctx ctx, kafka::SyncGroupRequest req) {
    const std::int16_t v = ctx.version;
    const bool denied = !authorized(ctx, acl::operation::read, acl::resource_type::group, req.group_id);
    const bool loading = !denied && co_await group_loading(ctx.sh, &req.group_id);
    if (denied || loading) {
        kafka::SyncGroupResponse r;
        r.error_code = denied ? kerr::group_authorization_failed : kerr::coordinator_load_in_progress;
        r.protocol_type.reset();
        r.protocol_name.reset();
        co_return respond(r, ctx);
    }
    auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) { return coordinator_for(o, req.group_id).sync(std::move(req), v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_heartbeat(request_ctx ctx, kafka::HeartbeatRequest req) {
    const std::int16_t v = ctx.version;
    const bool denied = !authorized(ctx, acl::operation::read, acl::resource_type::group, req.group_id);
    const bool loading = !denied && co_await group_loading(ctx.sh, &req.group_id);
    if (denied || loading) {
        kafka::HeartbeatResponse r;
        r.error_code = denied ? kerr::group_authorization_failed : kerr::coordinator_load_in_progress;
        co_return respond(r, ctx);
    }
    auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) { return coordinator_for(o, req.group_id).heartbeat(req, v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_leave_group(request_ctx ctx, kafka::LeaveGroupRequest req) {
    const std::int16_t v = ctx.version;
    const bool denied = !authorized(ctx, acl::operation::read, acl::resource_type::group, req.group_id);
    const bool loading = !denied && co_await group_loading(ctx.sh, &req.group_id);
    if (denied || loading) {
        kafka::LeaveGroupResponse r;
        r.error_code = denied ? kerr::group_authorization_failed : kerr::coordinator_load_in_progress;
        co_return respond(r, ctx);
    }
    auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) { return coordinator_for(o, req.group_id).leave(req, v); });
    co_return respond(resp, ctx);
}

namespace {
bool known_partition(const shard& sh, std::string_view topic, std::int32_t partition) {
    const topic_info* t = sh.cat->find(topic);
    return t && partition >= 0 && partition < t->partitions;
}

// What OffsetFetch answers for a partition the catalog does not have. v1+ reads the group
// coordinator, which has nothing for it (Kafka's coordinator drops a deleted topic's offsets):
// no offset and no error. v0 read ZooKeeper, and KafkaApis answered UNKNOWN_TOPIC_OR_PARTITION
// (handleOffsetFetchRequestFromZookeeper).
template <typename Partition>
void unknown_fetched(Partition& p, std::int16_t version) {
    if (p.error_code != kerr::none) return; // a group-level error says more
    p.committed_offset = -1;
    p.committed_leader_epoch = -1;
    p.metadata = std::string();
    if (version == 0) p.error_code = kerr::unknown_topic_or_partition;
}

template <typename Topics>
void answer_unknown(const shard& sh, Topics& topics, bool all, std::int16_t version) {
    // Asked for all of a group's offsets: those of topics that no longer exist are left out.
    if (all) {
        std::erase_if(topics, [&](auto& t) {
            std::erase_if(t.partitions, [&](auto& p) { return !known_partition(sh, t.name, p.partition_index); });
            return t.partitions.empty();
        });
    }
    for (auto& t : topics) {
        for (auto& p : t.partitions) {
            if (!known_partition(sh, t.name, p.partition_index)) unknown_fetched(p, version);
        }
    }
}
} // namespace

// KafkaApis.handleOffsetCommitRequest: partitions of topics the catalog does not have, or past
// a topic's partition count, are UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator;
// when none is left the group is not even looked at.
namespace {
// OffsetFetch's topics the principal may not DESCRIBE: left out of an "all topics" answer,
// TOPIC_AUTHORIZATION_FAILED with no offset when the request named them.
template <typename Topics>
void filter_fetched_topics(const request_ctx& ctx, Topics& topics, bool all) {
    if (!ctx.sh.cfg().authorization) return;
    if (all) {
        std::erase_if(topics, [&](const auto& t) {
            return !authorized(ctx, acl::operation::describe, acl::resource_type::topic, t.name);
        });
        return;
    }
    for (auto& t : topics) {
        if (authorized(ctx, acl::operation::describe, acl::resource_type::topic, t.name)) continue;
        for (auto& p : t.partitions) {
            p.committed_offset = -1;
            p.committed_leader_epoch = -1;
            p.error_code = kerr::topic_authorization_failed;
        }
    }
}
} // namespace

runtime::task<std::string> handle_offset_commit(request_ctx ctx, kafka::OffsetCommitRequest req) {
    const std::int16_t v = ctx.version;
    // Every field of the request but its topics, which are those the catalog has.
    kafka::OffsetCommitRequest known = req;
    known.topics.clear();
    // KafkaApis.handleOffsetCommitRequest: READ on the group (else every partition is
    // GROUP_AUTHORIZATION_FAILED) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED).
    const bool group_denied = !authorized(ctx, acl::operation::read, acl::resource_type::group, req.group_id);
    std::set<std::string> topics_denied;
    for (const auto& t : req.topics) {
        if (group_denied) break;
        if (!authorized(ctx, acl::operation::read, acl::resource_type::topic, t.name)) {
            topics_denied.insert(t.name);
            continue;
        }
        kafka::OffsetCommitRequest::OffsetCommitRequestTopic kt;
        kt.name = t.name;
        for (const auto& p : t.partitions) {
            if (known_partition(ctx.sh, t.name, p.partition_index)) kt.partitions.push_back(p);
        }
        if (!kt.partitions.empty()) known.topics.push_back(std::move(kt));
    }
    kafka::OffsetCommitResponse answer;
    bool loading = false;
    if (!known.topics.empty()) loading = co_await group_loading(ctx.sh, &req.group_id);
    if (loading) {
        answer = offset_commit_answer(known, kerr::coordinator_load_in_progress);
    } else if (!known.topics.empty()) {
        kafka::OffsetCommitRequest* rq = &known;
        answer = co_await on_group_owner(ctx.sh, req.group_id, [rq, v](shard& o) {
            return coordinator_for(o, rq->group_id).commit_offsets(std::move(*rq), v);
        });
    }
    kafka::OffsetCommitResponse r;
    for (const auto& t : req.topics) {
        kafka::OffsetCommitResponse::OffsetCommitResponseTopic rt;
        rt.name = t.name;
        const kafka::OffsetCommitResponse::OffsetCommitResponseTopic* at = nullptr;
        for (const auto& a : answer.topics) {
            if (a.name == t.name) at = &a;
        }
        for (const auto& p : t.partitions) {
            kafka::OffsetCommitResponse::OffsetCommitResponsePartition rp;
            rp.partition_index = p.partition_index;
            // Not in the coordinator's answer: it was left out above, unknown or denied.
            rp.error_code = group_denied                  ? kerr::group_authorization_failed
                            : topics_denied.count(t.name) ? kerr::topic_authorization_failed
                                                          : kerr::unknown_topic_or_partition;
            if (at) {
                for (const auto& ap : at->partitions) {
                    if (ap.partition_index == p.partition_index) rp.error_code = ap.error_code;
                }
            }
            rt.partitions.push_back(rp);
        }
        r.topics.push_back(std::move(rt));
    }
    co_return respond(r, ctx);
}

namespace {
// OffsetFetchRequest.getErrorResponse (v0-7): v2+ the error at the top, v0-1 per partition.
kafka::OffsetFetchResponse offset_fetch_error(const kafka::OffsetFetchRequest& req, std::int16_t v,
                                              kafka::error_code code) {
    kafka::OffsetFetchResponse err;
    if (v >= 2) {
        err.error_code = code;
    } else if (req.topics) {
        for (const auto& t : *req.topics) {
            kafka::OffsetFetchResponse::OffsetFetchResponseTopic rt;
            rt.name = t.name;
            for (auto p : t.partition_indexes) {
                kafka::OffsetFetchResponse::OffsetFetchResponsePartition rp;
                rp.partition_index = p;
                rp.committed_offset = -1;
                rp.error_code = code;
                rt.partitions.push_back(std::move(rp));
            }
            err.topics.push_back(std::move(rt));
        }
    }
    return err;
}
} // namespace

runtime::task<std::string> handle_offset_fetch(request_ctx ctx, kafka::OffsetFetchRequest req) {
    const std::int16_t v = ctx.version;
    if (v < 8) {
        const bool all = !req.topics;
        // KafkaApis.handleOffsetFetchRequest: DESCRIBE on the group; topics the principal may not
        // DESCRIBE are TOPIC_AUTHORIZATION_FAILED when named, left out of "all".
        if (!authorized(ctx, acl::operation::describe, acl::resource_type::group, req.group_id)) {
            auto err = offset_fetch_error(req, v, kerr::group_authorization_failed);
            co_return respond(err, ctx);
        }
        const bool loading = co_await group_loading(ctx.sh, &req.group_id);
        if (loading) {
            auto err = offset_fetch_error(req, v, kerr::coordinator_load_in_progress);
            co_return respond(err, ctx);
        }
        auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) {
            return coordinator_for(o, req.group_id).fetch_offsets(std::move(req), v);
        });
        answer_unknown(ctx.sh, resp.topics, all, v);
        filter_fetched_topics(ctx, resp.topics, all);
        co_return respond(resp, ctx);
    }
    // v8+: several groups, possibly on several cores.
    const unsigned n = splits(ctx.sh);
    std::vector<kafka::OffsetFetchRequest> per_split(n);
    for (auto& p : per_split) p.require_stable = req.require_stable;
    std::vector<kafka::OffsetFetchResponse::OffsetFetchResponseGroup> answers;
    for (auto& grp : req.groups) {
        if (!authorized(ctx, acl::operation::describe, acl::resource_type::group, grp.group_id)) {
            kafka::OffsetFetchResponse::OffsetFetchResponseGroup og;
            og.group_id = grp.group_id;
            og.error_code = kerr::group_authorization_failed;
            answers.push_back(std::move(og));
            continue;
        }
        per_split[split_of(ctx.sh, grp.group_id)].groups.push_back(grp);
    }
    kafka::OffsetFetchResponse merged;
    for (unsigned c = 0; c < n; ++c) {
        if (per_split[c].groups.empty()) continue;
        kafka::OffsetFetchRequest* rq = &per_split[c];
        // One split is one slot in cluster mode: its groups load together.
        const bool loading = co_await group_loading(ctx.sh, &rq->groups.front().group_id);
        if (loading) {
            for (const auto& g : rq->groups) {
                kafka::OffsetFetchResponse::OffsetFetchResponseGroup og;
                og.group_id = g.group_id;
                og.error_code = kerr::coordinator_load_in_progress;
                answers.push_back(std::move(og));
            }
            continue;
        }
        auto resp = co_await on_core(ctx.sh, core_of_split(ctx.sh, c), [rq, v](shard& o) {
            return coordinator_for(o, rq->groups.front().group_id).fetch_offsets(std::move(*rq), v);
        });
        for (auto& a : resp.groups) answers.push_back(std::move(a));
    }
    for (auto& grp : req.groups) {
        for (auto& a : answers) {
            if (a.group_id == grp.group_id) {
                merged.groups.push_back(a);
                answer_unknown(ctx.sh, merged.groups.back().topics, !grp.topics, v);
                filter_fetched_topics(ctx, merged.groups.back().topics, !grp.topics);
                break;
            }
        }
    }
    co_return respond(merged, ctx);
}

runtime::task<std::string> handle_list_groups(request_ctx ctx, kafka::ListGroupsRequest req) {
    kafka::ListGroupsResponse merged;
    const std::int16_t v = ctx.version;
    for (unsigned c = 0; c < ctx.sh.shared->cores; ++c) {
        auto resp = co_await on_core(ctx.sh, c, [&](shard& o) { return list_on_core(o, req, v); });
        if (resp.error_code != kerr::none) merged.error_code = resp.error_code;
        for (auto& grp : resp.groups) merged.groups.push_back(std::move(grp));
    }
    // KafkaApis.handleListGroupsRequest: all with DESCRIBE on the cluster, else the groups the
    // principal may DESCRIBE.
    if (!authorized_cluster(ctx, acl::operation::describe)) {
        std::erase_if(merged.groups, [&](const kafka::ListGroupsResponse::ListedGroup& g) {
            return !authorized(ctx, acl::operation::describe, acl::resource_type::group, g.group_id);
        });
    }
    co_return respond(merged, ctx);
}

runtime::task<std::string> handle_describe_groups(request_ctx ctx, kafka::DescribeGroupsRequest req) {
    const std::int16_t v = ctx.version;
    const unsigned n = splits(ctx.sh);
    std::vector<kafka::DescribeGroupsRequest> per_split(n);
    for (auto& p : per_split) p.include_authorized_operations = req.include_authorized_operations;
    std::vector<kafka::DescribeGroupsResponse::DescribedGroup> answers;
    for (auto& id : req.groups) {
        if (!authorized(ctx, acl::operation::describe, acl::resource_type::group, id)) {
            kafka::DescribeGroupsResponse::DescribedGroup d;
            d.group_id = id;
            d.error_code = kerr::group_authorization_failed;
            answers.push_back(std::move(d));
            continue;
        }
        per_split[split_of(ctx.sh, id)].groups.push_back(id);
    }
    for (unsigned c = 0; c < n; ++c) {
        if (per_split[c].groups.empty()) continue;
        const kafka::DescribeGroupsRequest* rq = &per_split[c];
        const bool loading = co_await group_loading(ctx.sh, &rq->groups.front());
        if (loading) {
            for (const auto& id : rq->groups) {
                kafka::DescribeGroupsResponse::DescribedGroup d;
                d.group_id = id;
                d.error_code = kerr::coordinator_load_in_progress;
                answers.push_back(std::move(d));
            }
            continue;
        }
        auto resp = co_await on_core(ctx.sh, core_of_split(ctx.sh, c), [rq, v](shard& o) {
            return coordinator_for(o, rq->groups.front()).describe_groups(*rq, v);
        });
        for (auto& a : resp.groups) answers.push_back(std::move(a));
    }
    kafka::DescribeGroupsResponse merged;
    for (auto& id : req.groups) {
        for (auto& a : answers) {
            if (a.group_id == id) {
                merged.groups.push_back(a);
                break;
            }
        }
    }
    co_return respond(merged, ctx);
}

runtime::task<std::string> handle_delete_groups(request_ctx ctx, kafka::DeleteGroupsRequest req) {
    const std::int16_t v = ctx.version;
    const unsigned n = splits(ctx.sh);
    std::vector<kafka::DeleteGroupsRequest> per_split(n);
    std::vector<kafka::DeleteGroupsResponse::DeletableGroupResult> answers;
    for (auto& id : req.groups_names) {
        if (!authorized(ctx, acl::operation::del, acl::resource_type::group, id)) {
            kafka::DeleteGroupsResponse::DeletableGroupResult d;
            d.group_id = id;
            d.error_code = kerr::group_authorization_failed;
            answers.push_back(std::move(d));
            continue;
        }
        per_split[split_of(ctx.sh, id)].groups_names.push_back(id);
    }
    for (unsigned c = 0; c < n; ++c) {
        if (per_split[c].groups_names.empty()) continue;
        kafka::DeleteGroupsRequest* rq = &per_split[c];
        const bool loading = co_await group_loading(ctx.sh, &rq->groups_names.front());
        if (loading) {
            for (const auto& id : rq->groups_names) {
                kafka::DeleteGroupsResponse::DeletableGroupResult d;
                d.group_id = id;
                d.error_code = kerr::coordinator_load_in_progress;
                answers.push_back(std::move(d));
            }
            continue;
        }
        auto resp = co_await on_core(ctx.sh, core_of_split(ctx.sh, c), [rq, v](shard& o) {
            return coordinator_for(o, rq->groups_names.front()).delete_groups(std::move(*rq), v);
        });
        for (auto& a : resp.results) answers.push_back(std::move(a));
    }
    kafka::DeleteGroupsResponse merged;
    for (auto& id : req.groups_names) {
        for (auto& a : answers) {
            if (a.group_id == id) {
                merged.results.push_back(a);
                break;
            }
        }
    }
    co_return respond(merged, ctx);
}

// OffsetDelete (API 47): partitions of topics the catalog does not know are
// UNKNOWN_TOPIC_OR_PARTITION here (as KafkaApis answers them); the rest go to the group's
// coordinator. A group error answers the whole request with no topics, as Kafka does.
runtime::task<std::string> handle_offset_delete(request_ctx ctx, kafka::OffsetDeleteRequest req) {
    const std::int16_t v = ctx.version;
    kafka::OffsetDeleteRequest known;
    known.group_id = req.group_id;
    // KafkaApis.handleOffsetDeleteRequest: DELETE on the group, READ on each topic.
    if (!authorized(ctx, acl::operation::del, acl::resource_type::group, req.group_id)) {
        kafka::OffsetDeleteResponse r;
        r.error_code = kerr::group_authorization_failed;
        co_return respond(r, ctx);
    }
    std::set<std::string> topics_denied;
    for (const auto& t : req.topics) {
        const topic_info* info = ctx.sh.cat->find(t.name);
        if (!info) continue;
        if (!authorized(ctx, acl::operation::read, acl::resource_type::topic, t.name)) {
            topics_denied.insert(t.name);
            continue;
        }
        kafka::OffsetDeleteRequest::OffsetDeleteRequestTopic kt;
        kt.name = t.name;
        for (const auto& p : t.partitions) {
            if (p.partition_index >= 0 && p.partition_index < info->partitions) kt.partitions.push_back(p);
        }
        if (!kt.partitions.empty()) known.topics.push_back(std::move(kt));
    }
    kafka::OffsetDeleteRequest* rq = &known;
    const bool loading = co_await group_loading(ctx.sh, &req.group_id);
    if (loading) {
        kafka::OffsetDeleteResponse r;
        r.error_code = kerr::coordinator_load_in_progress;
        co_return respond(r, ctx);
    }
    auto answer = co_await on_group_owner(ctx.sh, req.group_id, [rq, v](shard& o) {
        return coordinator_for(o, rq->group_id).delete_offsets(std::move(*rq), v);
    });
    kafka::OffsetDeleteResponse r;
    r.error_code = answer.error_code;
    if (answer.error_code != kerr::none) co_return respond(r, ctx);
    for (const auto& t : req.topics) {
        kafka::OffsetDeleteResponse::OffsetDeleteResponseTopic rt;
        rt.name = t.name;
        for (const auto& p : t.partitions) {
            kafka::OffsetDeleteResponse::OffsetDeleteResponsePartition rp;
            rp.partition_index = p.partition_index;
            rp.error_code = topics_denied.count(t.name) ? kerr::topic_authorization_failed
                                                        : kerr::unknown_topic_or_partition;
            for (const auto& at : answer.topics) {
                if (at.name != t.name) continue;
                for (const auto& ap : at.partitions) {
                    if (ap.partition_index == p.partition_index) rp.error_code = ap.error_code;
                }
            }
            rt.partitions.push_back(rp);
        }
        r.topics.push_back(std::move(rt));
    }
    co_return respond(r, ctx);
}

} // namespace skiff::broker
