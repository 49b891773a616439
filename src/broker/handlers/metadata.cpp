// Metadata: the one broker, and the topics asked for (auto-created on core 0 when allowed).
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>

namespace skiff::broker {

namespace {
kafka::MetadataResponse::MetadataResponseTopic describe_topic(const topic_info& t, const request_ctx& ctx) {
    kafka::MetadataResponse::MetadataResponseTopic mt;
    mt.name = t.name;
    mt.topic_id = t.id;
    mt.error_code = kerr::none;
    const std::int32_t node = ctx.sh.cfg().node_id;
    const cluster::view* v = ctx.sh.cfg().clustered() ? ctx.sh.cview.get() : nullptr;
    for (std::int32_t p = 0; p < t.partitions; ++p) {
        kafka::MetadataResponse::MetadataResponsePartition mp;
        mp.partition_index = p;
        mp.error_code = kerr::none;
        mp.leader_id = node;
        mp.leader_epoch = 0;
        if (ctx.sh.cfg().clustered()) {
            // The owner etcd names, while it is a live member; else no leader for now (a
            // takeover is under way) and the client asks again.
            const cluster::owner* o = v ? v->owner_of(t.name, p) : nullptr;
            if (o && v->find_member(o->broker)) {
                mp.leader_id = o->broker;
                mp.leader_epoch = o->epoch;
            } else {
                mp.error_code = kerr::leader_not_available;
                mp.leader_id = -1;
                mp.leader_epoch = -1;
                mt.partitions.push_back(std::move(mp));
                continue;
            }
        }
        mp.replica_nodes = {mp.leader_id};
        mp.isr_nodes = {mp.leader_id};
        mt.partitions.push_back(std::move(mp));
    }
    return mt;
}

} // namespace

runtime::task<std::string> handle_metadata(request_ctx ctx, kafka::MetadataRequest req) {
    kafka::MetadataResponse r;
    if (ctx.sh.cfg().clustered() && ctx.sh.cview) {
        // Every live broker; the lowest id stands in as "controller" (clients only display it).
        for (auto& [id, m] : ctx.sh.cview->members) {
            kafka::MetadataResponse::MetadataResponseBroker b;
            b.node_id = id;
            auto [mhost, mport] = member_endpoint(m, ctx);
            b.host = std::move(mhost);
            b.port = mport;
            if (!m.rack.empty()) b.rack = m.rack;
            r.brokers.push_back(std::move(b));
        }
        r.controller_id = r.brokers.empty() ? -1 : r.brokers.front().node_id;
    } else {
        auto [host, port] = advertised(ctx);
        kafka::MetadataResponse::MetadataResponseBroker b;
        b.node_id = ctx.sh.cfg().node_id;
        b.host = host;
        b.port = port;
        r.brokers.push_back(b);
        r.controller_id = ctx.sh.cfg().node_id;
    }
    r.cluster_id = ctx.sh.cfg().cluster_id;

    // v0: an empty list means every topic; v1+: null means every topic.
    const bool all = !req.topics || (ctx.version == 0 && req.topics->empty());
    if (all) {
        // KafkaApis.handleTopicMetadataRequest: only the topics the principal may describe.
        for (auto& [_, t] : ctx.sh.cat->topics) {
            if (!authorized(ctx, acl::operation::describe, acl::resource_type::topic, t.name)) continue;
            r.topics.push_back(describe_topic(t, ctx));
        }
        co_return respond(r, ctx);
    }
    const bool may_create = ctx.sh.cfg().auto_create_topics && (ctx.version < 4 || req.allow_auto_topic_creation);
    for (auto& rt : *req.topics) {
        const topic_info* t = nullptr;
        std::string name = rt.name.value_or("");
        if (!rt.name && !rt.topic_id.is_zero()) {
            t = ctx.sh.cat->find(rt.topic_id);
            if (!t) {
                kafka::MetadataResponse::MetadataResponseTopic mt;
                mt.error_code = kerr::unknown_topic_id;
                mt.topic_id = rt.topic_id;
                r.topics.push_back(std::move(mt));
                continue;
            }
        } else {
            t = ctx.sh.cat->find(name);
        }
        if (t && !authorized(ctx, acl::operation::describe, acl::resource_type::topic, t->name)) {
            // Named (or found by id) but not describable: TOPIC_AUTHORIZATION_FAILED, never its
            // partitions; by id the name is not revealed.
            kafka::MetadataResponse::MetadataResponseTopic mt;
            if (rt.name) mt.name = name;
            mt.topic_id = rt.name ? kafka::uuid{} : rt.topic_id;
            mt.error_code = kerr::topic_authorization_failed;
            r.topics.push_back(std::move(mt));
            continue;
        }
        // Auto-creation needs CREATE on the cluster or the topic (AutoTopicCreationManager);
        // without it, an unknown topic the principal may describe is just unknown, one it may
        // not is TOPIC_AUTHORIZATION_FAILED.
        // (KafkaApis.handleTopicMetadataRequest: unauthorizedForCreateTopics when it would be
        // created, unauthorizedForDescribeTopics otherwise.)
        const bool would_create = !t && may_create && !invalid_topic_name(name);
        const bool may_create_this =
            would_create && (authorized_cluster(ctx, acl::operation::create) ||
                             authorized(ctx, acl::operation::create, acl::resource_type::topic, name));
        if (!t && (would_create ? !may_create_this
                                : !authorized(ctx, acl::operation::describe, acl::resource_type::topic, name))) {
            kafka::MetadataResponse::MetadataResponseTopic mt;
            mt.name = name;
            mt.error_code = kerr::topic_authorization_failed;
            r.topics.push_back(std::move(mt));
            continue;
        }
        if (!t && may_create_this) {
            const std::int32_t parts = ctx.sh.cfg().default_partitions;
            auto out = co_await on_core(ctx.sh, 0, [&](shard& sh0) {
                return create_topic(sh0, name, parts, std::map<std::string, std::string>(), false);
            });
            kafka::MetadataResponse::MetadataResponseTopic mt;
            mt.name = name;
            if (out.error == kerr::none || out.error == kerr::topic_already_exists) {
                // As Kafka answers the request that creates a topic (AutoTopicCreationManager):
                // LEADER_NOT_AVAILABLE and no partitions; the client asks again and gets them.
                // Also when another request created it a moment ago. A client that lists a topic
                // it has just deleted thereby sees it come back as new, not as if never deleted.
                mt.error_code = kerr::leader_not_available;
            } else {
                log::warn("auto-creating topic {}: {}", name, out.message);
                mt.error_code = out.error;
            }
            r.topics.push_back(std::move(mt));
            continue;
        }
        if (!t) {
            kafka::MetadataResponse::MetadataResponseTopic mt;
            mt.name = name;
            mt.error_code = invalid_topic_name(name) ? kerr::invalid_topic_exception : kerr::unknown_topic_or_partition;
            r.topics.push_back(std::move(mt));
            continue;
        }
        r.topics.push_back(describe_topic(*t, ctx));
    }
    co_return respond(r, ctx);
}

} // namespace skiff::broker
