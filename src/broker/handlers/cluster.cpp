// DescribeCluster and FindCoordinator: where the (one) broker and the group coordinators are.
#include "../handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>

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
    auto [host, port] = advertised(ctx);
    r.cluster_id = ctx.sh.cfg().cluster_id;
    r.controller_id = ctx.sh.cfg().node_id;
    kafka::DescribeClusterResponse::DescribeClusterBroker b;
    b.broker_id = ctx.sh.cfg().node_id;
    b.host = host;
    b.port = port;
    r.brokers.push_back(std::move(b));
    return respond(r, ctx);
}

std::string find_coordinator(const request_ctx& ctx, const kafka::FindCoordinatorRequest& req) {
    // This broker coordinates every group; transactions have no coordinator. v0-3 answer one
    // key in the top-level fields, v4+ a list.
    kafka::FindCoordinatorResponse::Coordinator answer;
    constexpr std::int8_t group_key = 0;
    if (req.key_type != group_key) {
        answer.error_code = kerr::coordinator_not_available;
        answer.error_message = "transactions are not supported";
        answer.node_id = -1;
        answer.port = -1;
    } else {
        auto [host, port] = advertised(ctx);
        answer.node_id = ctx.sh.cfg().node_id;
        answer.host = host;
        answer.port = port;
    }
    kafka::FindCoordinatorResponse r;
    if (ctx.version < 4) {
        r.error_code = answer.error_code;
        r.error_message = answer.error_message;
        r.node_id = answer.node_id;
        r.host = answer.host;
        r.port = answer.port;
    } else {
        for (auto& k : req.coordinator_keys) {
            r.coordinators.push_back(answer);
            r.coordinators.back().key = k;
        }
    }
    return respond(r, ctx);
}

} // namespace skiff::broker
