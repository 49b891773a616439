// Topic admin: CreateTopics, DeleteTopics, CreatePartitions. Catalog changes run on core 0,
// which broadcasts the new catalog to every core before it answers.
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>

#include <set>

namespace skiff::broker {

// ---- topic admin ------------------------------------------------------------------------

runtime::task<std::string> handle_create_topics(request_ctx ctx, kafka::CreateTopicsRequest req) {
    kafka::CreateTopicsResponse r;
    std::set<std::string> seen;
    for (auto& t : req.topics) {
        kafka::CreateTopicsResponse::CreatableTopicResult res;
        res.name = t.name;
        std::int32_t parts = t.num_partitions;
        const std::int32_t node = ctx.sh.cfg().node_id;
        // Kafka's checks and words (ReplicationControlManager.createTopic): a manual assignment
        // leaves both counts at -1; otherwise each is -1 (the default) or positive.
        if (!t.assignments.empty() && t.replication_factor != -1) {
            res.error_code = kerr::invalid_request;
            res.error_message = "A manual partition assignment was specified, but replication factor was not set to -1.";
        } else if (!t.assignments.empty() && t.num_partitions != -1) {
            res.error_code = kerr::invalid_request;
            res.error_message = "A manual partition assignment was specified, but numPartitions was not set to -1.";
        } else if (t.assignments.empty() && (t.replication_factor < -1 || t.replication_factor == 0)) {
            res.error_code = kerr::invalid_replication_factor;
            res.error_message = "Replication factor must be larger than 0, or -1 to use the default value.";
        } else if (t.assignments.empty() && (t.num_partitions < -1 || t.num_partitions == 0)) {
            res.error_code = kerr::invalid_partitions;
            res.error_message = "Number of partitions was set to an invalid non-positive value.";
        }
        if (res.error_code == kerr::none && !t.assignments.empty()) {
            parts = static_cast<std::int32_t>(t.assignments.size());
            for (auto& a : t.assignments) {
                for (auto id : a.broker_ids) {
                    if (id != node) {
                        res.error_code = kerr::invalid_replica_assignment;
                        res.error_message = "broker " + std::to_string(id) + " does not exist";
                    }
                }
            }
        }
        if (parts == -1) parts = ctx.sh.cfg().default_partitions;
        if (!seen.insert(t.name).second) {
            res.error_code = kerr::invalid_request;
            res.error_message = "the topic is named twice in the request";
        }
        // Replication is the object store's job: any replication factor is accepted and the
        // topic reports one replica (this broker).
        // Kafka refuses null config values (ControllerConfigurationValidator).
        std::string null_configs;
        for (auto& c : t.configs) {
            if (!c.value) null_configs += (null_configs.empty() ? "" : ",") + c.name;
        }
        if (res.error_code == kerr::none && !null_configs.empty()) {
            res.error_code = kerr::invalid_config;
            res.error_message = "Null value not supported for topic configs: " + null_configs;
        }
        // ControllerApis.createTopics: CREATE on the cluster, else on the topic.
        if (res.error_code == kerr::none && !authorized_cluster(ctx, acl::operation::create) &&
            !authorized(ctx, acl::operation::create, acl::resource_type::topic, t.name)) {
            res.error_code = kerr::topic_authorization_failed;
            res.error_message = "Authorization failed.";
        }
        if (res.error_code == kerr::none) {
            std::map<std::string, std::string> configs;
            for (auto& c : t.configs) configs[c.name] = *c.value;
            auto out = co_await on_core(ctx.sh, 0, [&](shard& sh0) {
                return create_topic(sh0, t.name, parts, configs, req.validate_only);
            });
            res.error_code = out.error;
            if (!out.message.empty()) res.error_message = out.message;
        }
        if (res.error_code == kerr::none) {
            res.num_partitions = parts;
            res.replication_factor = 1;
            if (const topic_info* info = ctx.sh.cat->find(t.name)) { // absent for validate_only
                res.topic_id = info->id;
                std::vector<kafka::CreateTopicsResponse::CreatableTopicConfigs> cfgs;
                for (auto& e : effective_configs(*info, ctx.sh.cfg())) {
                    kafka::CreateTopicsResponse::CreatableTopicConfigs c;
                    c.name = std::string(e.name);
                    c.value = std::move(e.value);
                    c.config_source = e.source;
                    cfgs.push_back(std::move(c));
                }
                res.configs = std::move(cfgs);
            }
        } else {
            res.num_partitions = -1;
            res.replication_factor = -1;
        }
        r.topics.push_back(std::move(res));
    }
    co_return respond(r, ctx);
}

runtime::task<std::string> handle_delete_topics(request_ctx ctx, kafka::DeleteTopicsRequest req) {
    kafka::DeleteTopicsResponse r;
    std::vector<kafka::DeleteTopicsRequest::DeleteTopicState> wanted = req.topics;
    for (auto& n : req.topic_names) {
        kafka::DeleteTopicsRequest::DeleteTopicState s;
        s.name = n;
        wanted.push_back(std::move(s));
    }
    for (auto& w : wanted) {
        kafka::DeleteTopicsResponse::DeletableTopicResult res;
        res.name = w.name;
        res.topic_id = w.topic_id;
        std::string name;
        if (w.name) {
            name = *w.name;
        } else if (auto* t = ctx.sh.cat->find(w.topic_id)) {
            name = t->name;
            res.name = name;
        } else {
            res.error_code = kerr::unknown_topic_id;
            r.responses.push_back(std::move(res));
            continue;
        }
        if (auto* t = ctx.sh.cat->find(name)) res.topic_id = t->id;
        if (!authorized(ctx, acl::operation::del, acl::resource_type::topic, name)) {
            res.error_code = kerr::topic_authorization_failed;
            res.error_message = "Authorization failed.";
            if (!w.name) res.name.reset(); // by id: the name is not revealed
            r.responses.push_back(std::move(res));
            continue;
        }
        auto out = co_await on_core(ctx.sh, 0, [&](shard& sh0) { return delete_topic(sh0, name); });
        res.error_code = out.error;
        if (!out.message.empty() && out.error != kerr::none) res.error_message = out.message;
        r.responses.push_back(std::move(res));
    }
    co_return respond(r, ctx);
}

runtime::task<std::string> handle_create_partitions(request_ctx ctx, kafka::CreatePartitionsRequest req) {
    kafka::CreatePartitionsResponse r;
    for (auto& t : req.topics) {
        kafka::CreatePartitionsResponse::CreatePartitionsTopicResult res;
        res.name = t.name;
        if (!authorized(ctx, acl::operation::alter, acl::resource_type::topic, t.name)) {
            res.error_code = kerr::topic_authorization_failed;
            res.error_message = "Authorization failed.";
            r.results.push_back(std::move(res));
            continue;
        }
        auto out = co_await on_core(ctx.sh, 0, [&](shard& sh0) {
            return create_partitions(sh0, t.name, t.count, req.validate_only);
        });
        res.error_code = out.error;
        if (out.error != kerr::none) res.error_message = out.message;
        r.results.push_back(std::move(res));
    }
    co_return respond(r, ctx);
}

} // namespace skiff::broker
