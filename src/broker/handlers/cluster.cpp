// DescribeCluster and FindCoordinator: where the (one) broker and the group coordinators are.
#include "../handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/cluster/records.hpp>

namespace skiff::broker {

// Java's AdminClient asks this for describeCluster(); one broker, which is also the controller.
std::string describe_cluster(const request_ctx& ctx, const kafka::DescribeClusterRequest& req) {
    kafka::DescribeClusterResponse r;
    constexpr std::int8_t brokers_endpoint = 1;
    if (req.endpoint_type != brokers_endpoint) {
        r.error_code = kerr::unsupported_endpoint_type;
        r.error_message = "only broker endpoints are served";
        return respond(r, ctx);
    }
    r.cluster_id = ctx.sh.cfg().cluster_id;
    if (!authorized_cluster(ctx, acl::operation::describe)) {
        r.error_code = kerr::cluster_authorization_failed;
        r.error_message = "Cluster authorization failed.";
        return respond(r, ctx);
    }
    if (ctx.sh.cfg().clustered() && ctx.sh.cview) {
        for (auto& [id, m] : ctx.sh.cview->members) {
            kafka::DescribeClusterResponse::DescribeClusterBroker b;
            b.broker_id = id;
            auto [mhost, mport] = member_endpoint(m, ctx);
            b.host = std::move(mhost);
            b.port = mport;
            if (!m.rack.empty()) b.rack = m.rack;
            r.brokers.push_back(std::move(b));
        }
        r.controller_id = r.brokers.empty() ? -1 : r.brokers.front().broker_id;
        return respond(r, ctx);
    }
    auto [host, port] = advertised(ctx);
    r.controller_id = ctx.sh.cfg().node_id;
    kafka::DescribeClusterResponse::DescribeClusterBroker b;
    b.broker_id = ctx.sh.cfg().node_id;
    b.host = host;
    b.port = port;
    r.brokers.push_back(std::move(b));
    return respond(r, ctx);
}

namespace {
// Where group (or transactional id) `key` is coordinated: this broker when it is alone; in a
// cluster the broker that owns the key's group slot (claimed like a partition; ids hash like
// groups), or none while the slot moves (clients retry COORDINATOR_NOT_AVAILABLE).
kafka::FindCoordinatorResponse::Coordinator coordinator_of(const request_ctx& ctx, std::int8_t key_type,
                                                           const std::string& key) {
    kafka::FindCoordinatorResponse::Coordinator answer;
    answer.key = key;
    constexpr std::int8_t group_key = 0;
    answer.node_id = -1;
    answer.port = -1;
    constexpr std::int8_t transaction_key = 1;
    if (key_type != group_key && key_type != transaction_key) {
        answer.error_code = kerr::invalid_request;
        answer.error_message = "unknown coordinator key type";
        return answer;
    }
    if (key_type == transaction_key) {
        if (!authorized(ctx, acl::operation::describe, acl::resource_type::transactional_id, key)) {
            answer.error_code = kerr::transactional_id_authorization_failed;
            answer.error_message = "Transactional Id authorization failed.";
            return answer;
        }
    } else if (!authorized(ctx, acl::operation::describe, acl::resource_type::group, key)) {
        answer.error_code = kerr::group_authorization_failed;
        answer.error_message = "Group authorization failed.";
        return answer;
    }
    if (!ctx.sh.cfg().clustered()) {
        auto [host, port] = advertised(ctx);
        answer.node_id = ctx.sh.cfg().node_id;
        answer.host = host;
        answer.port = port;
        return answer;
    }
    const cluster::view* v = ctx.sh.cview.get();
    const cluster::owner* o = v ? v->owner_of(cluster::groups_topic, cluster::group_slot(key)) : nullptr;
    const cluster::member* m = o ? v->find_member(o->broker) : nullptr;
    if (!m) {
        answer.error_code = kerr::coordinator_not_available;
        answer.error_message = "the group's coordinator is moving";
        return answer;
    }
    answer.node_id = m->id;
    auto [mhost, mport] = member_endpoint(*m, ctx);
    answer.host = std::move(mhost);
    answer.port = mport;
    return answer;
}
} // namespace

std::string find_coordinator(const request_ctx& ctx, const kafka::FindCoordinatorRequest& req) {
    // v0-3 answer one key in the top-level fields, v4+ a list.
    kafka::FindCoordinatorResponse r;
    if (ctx.version < 4) {
        auto answer = coordinator_of(ctx, req.key_type, req.key);
        r.error_code = answer.error_code;
        r.error_message = answer.error_message;
        r.node_id = answer.node_id;
        r.host = answer.host;
        r.port = answer.port;
    } else {
        for (auto& k : req.coordinator_keys) r.coordinators.push_back(coordinator_of(ctx, req.key_type, k));
    }
    return respond(r, ctx);
}

} // namespace skiff::broker
