// Consumer-group requests, routed to the core that owns each group (group_owner). Requests
// naming several groups are split by owner and the answers merged in request order.
#include "handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/when_all.hpp>

namespace skiff::broker {

namespace {
unsigned owner_of(const request_ctx& ctx, std::string_view group) {
    return group_owner(group, ctx.sh.shared->cores);
}
group_coordinator& coordinator(const request_ctx& ctx, unsigned core) { return *ctx.sh.shared->shards[core]->groups; }
} // namespace

runtime::task<std::string> handle_join_group(request_ctx ctx, kafka::JoinGroupRequest req) {
    const unsigned owner = owner_of(ctx, req.group_id);
    group_coordinator* g = &coordinator(ctx, owner);
    kafka::JoinGroupRequest* rq = &req;
    const std::int16_t v = ctx.version;
    const std::string* client_id = &ctx.client_id;
    const std::string* host = &ctx.ci.client_host;
    auto resp = co_await runtime::submit_to(owner, [g, rq, v, client_id, host] {
        return g->join(std::move(*rq), v, *client_id, *host);
    });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_sync_group(request_ctx ctx, kafka::SyncGroupRequest req) {
    const unsigned owner = owner_of(ctx, req.group_id);
    group_coordinator* g = &coordinator(ctx, owner);
    kafka::SyncGroupRequest* rq = &req;
    const std::int16_t v = ctx.version;
    auto resp = co_await runtime::submit_to(owner, [g, rq, v] { return g->sync(std::move(*rq), v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_heartbeat(request_ctx ctx, kafka::HeartbeatRequest req) {
    const unsigned owner = owner_of(ctx, req.group_id);
    group_coordinator* g = &coordinator(ctx, owner);
    const kafka::HeartbeatRequest* rq = &req;
    const std::int16_t v = ctx.version;
    auto resp = co_await runtime::submit_to(owner, [g, rq, v] { return g->heartbeat(*rq, v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_leave_group(request_ctx ctx, kafka::LeaveGroupRequest req) {
    const unsigned owner = owner_of(ctx, req.group_id);
    group_coordinator* g = &coordinator(ctx, owner);
    const kafka::LeaveGroupRequest* rq = &req;
    const std::int16_t v = ctx.version;
    auto resp = co_await runtime::submit_to(owner, [g, rq, v] { return g->leave(*rq, v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_offset_commit(request_ctx ctx, kafka::OffsetCommitRequest req) {
    const unsigned owner = owner_of(ctx, req.group_id);
    group_coordinator* g = &coordinator(ctx, owner);
    kafka::OffsetCommitRequest* rq = &req;
    const std::int16_t v = ctx.version;
    auto resp = co_await runtime::submit_to(owner, [g, rq, v] { return g->commit_offsets(std::move(*rq), v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_offset_fetch(request_ctx ctx, kafka::OffsetFetchRequest req) {
    const std::int16_t v = ctx.version;
    if (v < 8) {
        const unsigned owner = owner_of(ctx, req.group_id);
        group_coordinator* g = &coordinator(ctx, owner);
        kafka::OffsetFetchRequest* rq = &req;
        auto resp = co_await runtime::submit_to(owner, [g, rq, v] { return g->fetch_offsets(std::move(*rq), v); });
        co_return respond(resp, ctx);
    }
    // v8+: several groups, possibly on several cores.
    const unsigned cores = ctx.sh.shared->cores;
    std::vector<kafka::OffsetFetchRequest> per_core(cores);
    for (auto& p : per_core) p.require_stable = req.require_stable;
    for (auto& grp : req.groups) per_core[owner_of(ctx, grp.group_id)].groups.push_back(grp);
    kafka::OffsetFetchResponse merged;
    std::vector<kafka::OffsetFetchResponse::OffsetFetchResponseGroup> answers;
    for (unsigned c = 0; c < cores; ++c) {
        if (per_core[c].groups.empty()) continue;
        group_coordinator* g = &coordinator(ctx, c);
        kafka::OffsetFetchRequest* rq = &per_core[c];
        auto resp = co_await runtime::submit_to(c, [g, rq, v] { return g->fetch_offsets(std::move(*rq), v); });
        for (auto& a : resp.groups) answers.push_back(std::move(a));
    }
    for (auto& grp : req.groups) {
        for (auto& a : answers) {
            if (a.group_id == grp.group_id) {
                merged.groups.push_back(a);
                break;
            }
        }
    }
    co_return respond(merged, ctx);
}

runtime::task<std::string> handle_list_groups(request_ctx ctx, kafka::ListGroupsRequest req) {
    kafka::ListGroupsResponse merged;
    const std::int16_t v = ctx.version;
    const kafka::ListGroupsRequest* rq = &req;
    for (unsigned c = 0; c < ctx.sh.shared->cores; ++c) {
        group_coordinator* g = &coordinator(ctx, c);
        auto resp = co_await runtime::submit_to(c, [g, rq, v] { return g->list_groups(*rq, v); });
        if (resp.error_code != kerr::none) merged.error_code = resp.error_code;
        for (auto& grp : resp.groups) merged.groups.push_back(std::move(grp));
    }
    co_return respond(merged, ctx);
}

runtime::task<std::string> handle_describe_groups(request_ctx ctx, kafka::DescribeGroupsRequest req) {
    const std::int16_t v = ctx.version;
    const unsigned cores = ctx.sh.shared->cores;
    std::vector<kafka::DescribeGroupsRequest> per_core(cores);
    for (auto& p : per_core) p.include_authorized_operations = req.include_authorized_operations;
    for (auto& id : req.groups) per_core[owner_of(ctx, id)].groups.push_back(id);
    std::vector<kafka::DescribeGroupsResponse::DescribedGroup> answers;
    for (unsigned c = 0; c < cores; ++c) {
        if (per_core[c].groups.empty()) continue;
        group_coordinator* g = &coordinator(ctx, c);
        const kafka::DescribeGroupsRequest* rq = &per_core[c];
        auto resp = co_await runtime::submit_to(c, [g, rq, v] { return g->describe_groups(*rq, v); });
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
    const unsigned cores = ctx.sh.shared->cores;
    std::vector<kafka::DeleteGroupsRequest> per_core(cores);
    for (auto& id : req.groups_names) per_core[owner_of(ctx, id)].groups_names.push_back(id);
    std::vector<kafka::DeleteGroupsResponse::DeletableGroupResult> answers;
    for (unsigned c = 0; c < cores; ++c) {
        if (per_core[c].groups_names.empty()) continue;
        group_coordinator* g = &coordinator(ctx, c);
        kafka::DeleteGroupsRequest* rq = &per_core[c];
        auto resp = co_await runtime::submit_to(c, [g, rq, v] { return g->delete_groups(std::move(*rq), v); });
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

} // namespace skiff::broker
