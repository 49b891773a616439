// Consumer-group requests, routed to the core that owns each group (group_owner). Requests
// naming several groups are split by owner and the answers merged in request order.
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>

namespace skiff::broker {

runtime::task<std::string> handle_join_group(request_ctx ctx, kafka::JoinGroupRequest req) {
    const std::int16_t v = ctx.version;
    auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) {
        return o.groups->join(std::move(req), v, ctx.client_id, ctx.ci.client_host);
    });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_sync_group(request_ctx ctx, kafka::SyncGroupRequest req) {
    const std::int16_t v = ctx.version;
    auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) { return o.groups->sync(std::move(req), v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_heartbeat(request_ctx ctx, kafka::HeartbeatRequest req) {
    const std::int16_t v = ctx.version;
    auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) { return o.groups->heartbeat(req, v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_leave_group(request_ctx ctx, kafka::LeaveGroupRequest req) {
    const std::int16_t v = ctx.version;
    auto resp = co_await on_group_owner(ctx.sh, req.group_id, [&](shard& o) { return o.groups->leave(req, v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_offset_commit(request_ctx ctx, kafka::OffsetCommitRequest req) {
    const std::int16_t v = ctx.version;
    auto resp = co_await on_group_owner(ctx.sh, req.group_id,
                                        [&](shard& o) { return o.groups->commit_offsets(std::move(req), v); });
    co_return respond(resp, ctx);
}

runtime::task<std::string> handle_offset_fetch(request_ctx ctx, kafka::OffsetFetchRequest req) {
    const std::int16_t v = ctx.version;
    if (v < 8) {
        auto resp = co_await on_group_owner(ctx.sh, req.group_id,
                                            [&](shard& o) { return o.groups->fetch_offsets(std::move(req), v); });
        co_return respond(resp, ctx);
    }
    // v8+: several groups, possibly on several cores.
    const unsigned cores = ctx.sh.shared->cores;
    std::vector<kafka::OffsetFetchRequest> per_core(cores);
    for (auto& p : per_core) p.require_stable = req.require_stable;
    for (auto& grp : req.groups) per_core[group_owner(grp.group_id, cores)].groups.push_back(grp);
    kafka::OffsetFetchResponse merged;
    std::vector<kafka::OffsetFetchResponse::OffsetFetchResponseGroup> answers;
    for (unsigned c = 0; c < cores; ++c) {
        if (per_core[c].groups.empty()) continue;
        kafka::OffsetFetchRequest* rq = &per_core[c];
        auto resp = co_await on_core(ctx.sh, c, [rq, v](shard& o) { return o.groups->fetch_offsets(std::move(*rq), v); });
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
    for (unsigned c = 0; c < ctx.sh.shared->cores; ++c) {
        auto resp = co_await on_core(ctx.sh, c, [&](shard& o) { return o.groups->list_groups(req, v); });
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
    for (auto& id : req.groups) per_core[group_owner(id, cores)].groups.push_back(id);
    std::vector<kafka::DescribeGroupsResponse::DescribedGroup> answers;
    for (unsigned c = 0; c < cores; ++c) {
        if (per_core[c].groups.empty()) continue;
        const kafka::DescribeGroupsRequest* rq = &per_core[c];
        auto resp = co_await on_core(ctx.sh, c, [rq, v](shard& o) { return o.groups->describe_groups(*rq, v); });
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
    for (auto& id : req.groups_names) per_core[group_owner(id, cores)].groups_names.push_back(id);
    std::vector<kafka::DeleteGroupsResponse::DeletableGroupResult> answers;
    for (unsigned c = 0; c < cores; ++c) {
        if (per_core[c].groups_names.empty()) continue;
        kafka::DeleteGroupsRequest* rq = &per_core[c];
        auto resp = co_await on_core(ctx.sh, c, [rq, v](shard& o) { return o.groups->delete_groups(std::move(*rq), v); });
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
