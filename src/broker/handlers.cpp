// Dispatch, and the control-plane APIs: ApiVersions, Metadata, topic admin, DescribeConfigs,
// FindCoordinator, InitProducerId.
#include "handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/smp.hpp>

#include <array>
#include <set>

namespace skiff::broker {

namespace {
using kafka::api_key;
// Versions are capped where a newer one needs something skiff does not have (Fetch v13+
// addresses topics by id only; Produce v10+ is KIP-890 era; ListOffsets v7 adds the
// max-timestamp query, which needs a time index; Metadata v12 is the newest with names). Produce and Fetch start at the first versions
// that carry magic-2 record batches.
constexpr std::array<served_api, 22> apis{{
    {api_key::produce, 3, 9},
    {api_key::fetch, 4, 12},
    {api_key::list_offsets, 1, 6},
    {api_key::metadata, 0, 12},
    {api_key::offset_commit, 0, 8},
    {api_key::offset_fetch, 0, 8},
    {api_key::find_coordinator, 0, 4},
    {api_key::join_group, 0, 9},
    {api_key::heartbeat, 0, 4},
    {api_key::leave_group, 0, 5},
    {api_key::sync_group, 0, 5},
    {api_key::describe_groups, 0, 5},
    {api_key::list_groups, 0, 4},
    {api_key::api_versions, 0, 3},
    {api_key::create_topics, 0, 7},
    {api_key::delete_topics, 0, 6},
    {api_key::init_producer_id, 0, 4},
    {api_key::offset_for_leader_epoch, 0, 4},
    {api_key::describe_configs, 0, 4},
    {api_key::create_partitions, 0, 3},
    {api_key::delete_groups, 0, 2},
    {api_key::describe_cluster, 0, 1},
}};

const served_api* find_served(std::int16_t key) {
    for (auto& a : apis) {
        if (static_cast<std::int16_t>(a.key) == key) return &a;
    }
    return nullptr;
}

std::string api_versions(const request_ctx& ctx, bool unsupported) {
    kafka::ApiVersionsResponse r;
    r.error_code = unsupported ? kerr::unsupported_version : kerr::none;
    for (auto& a : apis) {
        kafka::ApiVersionsResponse::ApiVersion v;
        v.api_key = static_cast<std::int16_t>(a.key);
        v.min_version = a.min_version;
        v.max_version = a.max_version;
        r.api_keys.push_back(v);
    }
    if (unsupported) {
        // KIP-511: an unknown ApiVersions version is answered in v0, which every client reads.
        request_ctx v0{ctx.sh, ctx.ci, 0, ctx.correlation_id, ctx.client_id};
        return respond(r, v0);
    }
    return respond(r, ctx);
}

// A topic's configs as reported (CreateTopics v5+, DescribeConfigs): every known config, the
// value set at creation or else Kafka's default.
struct effective_config {
    std::string_view name;
    std::string value;
    bool custom = false; // set at creation (DYNAMIC_TOPIC_CONFIG) rather than DEFAULT_CONFIG
};
std::vector<effective_config> effective_configs(const topic_info& t, const broker_config& cfg) {
    std::vector<effective_config> out;
    for (auto& d : topic_config_defaults()) {
        auto it = t.configs.find(std::string(d.name));
        const bool custom = it != t.configs.end();
        // A topic's max.message.bytes defaults to the broker's message.max.bytes, as in Kafka.
        std::string fallback = d.name == "max.message.bytes" ? std::to_string(cfg.message_max_bytes) : std::string(d.value);
        out.push_back(effective_config{d.name, custom ? it->second : std::move(fallback), custom});
    }
    return out;
}
constexpr std::int8_t dynamic_topic_config = 1, static_broker_config = 4, default_config = 5;

// ---- Metadata -------------------------------------------------------------------------

kafka::MetadataResponse::MetadataResponseTopic describe_topic(const topic_info& t, const request_ctx& ctx) {
    kafka::MetadataResponse::MetadataResponseTopic mt;
    mt.name = t.name;
    mt.topic_id = t.id;
    mt.error_code = kerr::none;
    const std::int32_t node = ctx.sh.cfg().node_id;
    for (std::int32_t p = 0; p < t.partitions; ++p) {
        kafka::MetadataResponse::MetadataResponsePartition mp;
        mp.partition_index = p;
        mp.error_code = kerr::none;
        mp.leader_id = node;
        mp.leader_epoch = 0;
        mp.replica_nodes = {node};
        mp.isr_nodes = {node};
        mt.partitions.push_back(std::move(mp));
    }
    return mt;
}

runtime::task<std::string> handle_metadata(request_ctx ctx, kafka::MetadataRequest req) {
    kafka::MetadataResponse r;
    auto [host, port] = advertised(ctx);
    kafka::MetadataResponse::MetadataResponseBroker b;
    b.node_id = ctx.sh.cfg().node_id;
    b.host = host;
    b.port = port;
    r.brokers.push_back(b);
    r.cluster_id = ctx.sh.cfg().cluster_id;
    r.controller_id = ctx.sh.cfg().node_id;

    // v0: an empty list means every topic; v1+: null means every topic.
    const bool all = !req.topics || (ctx.version == 0 && req.topics->empty());
    if (all) {
        for (auto& [_, t] : ctx.sh.cat->topics) r.topics.push_back(describe_topic(t, ctx));
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
        if (!t && may_create && !invalid_topic_name(name)) {
            shard* sh0 = ctx.sh.shared->shards[0];
            const std::int32_t parts = ctx.sh.cfg().default_partitions;
            // Captures are pointers to this frame (suspended meanwhile): g++ 12 destroys a
            // lambda with non-trivial captures twice when it is a temporary in a co_await.
            const std::string* np = &name;
            auto out = co_await runtime::submit_to(0, [sh0, np, parts] {
                return create_topic(*sh0, *np, parts, {}, false);
            });
            if (out.error != kerr::none && out.error != kerr::topic_already_exists) {
                log::warn("auto-creating topic {}: {}", name, out.message);
            }
            t = ctx.sh.cat->find(name); // the broadcast reached this core before the answer
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

// ---- topic admin ------------------------------------------------------------------------

runtime::task<std::string> handle_create_topics(request_ctx ctx, kafka::CreateTopicsRequest req) {
    kafka::CreateTopicsResponse r;
    std::set<std::string> seen;
    for (auto& t : req.topics) {
        kafka::CreateTopicsResponse::CreatableTopicResult res;
        res.name = t.name;
        std::int32_t parts = t.num_partitions;
        const std::int32_t node = ctx.sh.cfg().node_id;
        if (!t.assignments.empty()) {
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
        if (res.error_code == kerr::none) {
            std::map<std::string, std::string> configs;
            for (auto& c : t.configs) {
                if (c.value) configs[c.name] = *c.value;
            }
            shard* sh0 = ctx.sh.shared->shards[0];
            std::string name = t.name;
            const bool validate = req.validate_only;
            const std::string* np = &name;
            const std::map<std::string, std::string>* cp = &configs;
            auto out = co_await runtime::submit_to(0, [sh0, np, parts, cp, validate] {
                return create_topic(*sh0, *np, parts, *cp, validate);
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
                    c.config_source = e.custom ? dynamic_topic_config : default_config;
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
        shard* sh0 = ctx.sh.shared->shards[0];
        const std::string* np = &name;
        auto out = co_await runtime::submit_to(0, [sh0, np] { return delete_topic(*sh0, *np); });
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
        shard* sh0 = ctx.sh.shared->shards[0];
        std::string name = t.name;
        const std::int32_t count = t.count;
        const bool validate = req.validate_only;
        const std::string* np = &name;
        auto out = co_await runtime::submit_to(0, [sh0, np, count, validate] {
            return create_partitions(*sh0, *np, count, validate);
        });
        res.error_code = out.error;
        if (out.error != kerr::none) res.error_message = out.message;
        r.results.push_back(std::move(res));
    }
    co_return respond(r, ctx);
}

// ---- DescribeConfigs ---------------------------------------------------------------------

std::string describe_configs(const request_ctx& ctx, const kafka::DescribeConfigsRequest& req) {
    kafka::DescribeConfigsResponse r;
    constexpr std::int8_t topic_resource = 2, broker_resource = 4;
    for (auto& res : req.resources) {
        kafka::DescribeConfigsResponse::DescribeConfigsResult out;
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        auto wanted = [&](std::string_view name) {
            if (!res.configuration_keys) return true;
            for (auto& k : *res.configuration_keys) {
                if (k == name) return true;
            }
            return false;
        };
        auto add = [&](std::string name, std::string value, bool is_default, std::int8_t source, bool read_only) {
            if (!wanted(name)) return;
            kafka::DescribeConfigsResponse::DescribeConfigsResourceResult c;
            c.name = std::move(name);
            c.value = std::move(value);
            c.read_only = read_only;
            if (ctx.version == 0) {
                c.is_default = is_default; // v1+ says it with config_source
            } else {
                c.config_source = source;
            }
            out.configs.push_back(std::move(c));
        };
        if (res.resource_type == topic_resource) {
            const topic_info* t = ctx.sh.cat->find(res.resource_name);
            if (!t) {
                out.error_code = kerr::unknown_topic_or_partition;
                out.error_message = "topic '" + res.resource_name + "' does not exist";
            } else {
                for (auto& e : effective_configs(*t, ctx.sh.cfg())) {
                    add(std::string(e.name), std::move(e.value), !e.custom,
                        e.custom ? dynamic_topic_config : default_config, false);
                }
            }
        } else if (res.resource_type == broker_resource) {
            const auto& cfg = ctx.sh.cfg();
            if (!res.resource_name.empty() && res.resource_name != std::to_string(cfg.node_id)) {
                out.error_code = kerr::invalid_request;
                out.error_message = "broker " + res.resource_name + " is not this broker";
            } else {
                constexpr std::int8_t static_broker = static_broker_config;
                add("broker.id", std::to_string(cfg.node_id), false, static_broker, true);
                add("auto.create.topics.enable", cfg.auto_create_topics ? "true" : "false", false, static_broker, true);
                add("num.partitions", std::to_string(cfg.default_partitions), false, static_broker, true);
                add("socket.request.max.bytes", std::to_string(cfg.max_frame_bytes), false, static_broker, true);
                add("message.max.bytes", std::to_string(cfg.message_max_bytes), false, static_broker, true);
                add("segment.bytes", std::to_string(cfg.log.segment_bytes), false, static_broker, true);
                add("default.replication.factor", "1", true, default_config, true);
                add("offsets.topic.replication.factor", "1", true, default_config, true);
            }
        } else {
            out.error_code = kerr::invalid_request;
            out.error_message = "unsupported resource type " + std::to_string(res.resource_type);
        }
        r.results.push_back(std::move(out));
    }
    return respond(r, ctx);
}

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

// ---- coordinators and producer ids ------------------------------------------------------

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

runtime::task<std::string> handle_init_producer_id(request_ctx ctx, kafka::InitProducerIdRequest req) {
    kafka::InitProducerIdResponse r;
    r.producer_id = -1;
    r.producer_epoch = -1;
    if (req.transactional_id) {
        r.error_code = kerr::transactional_id_authorization_failed;
        co_return respond(r, ctx);
    }
    // KIP-360: a producer that lost track of its sequences asks for its id with a bumped epoch.
    if (req.producer_id >= 0 && req.producer_epoch >= 0 && req.producer_epoch < 32766) {
        r.producer_id = req.producer_id;
        r.producer_epoch = static_cast<std::int16_t>(req.producer_epoch + 1);
        co_return respond(r, ctx);
    }
    shard* sh0 = ctx.sh.shared->shards[0];
    auto id = co_await runtime::submit_to(0, [sh0] { return allocate_producer_id(*sh0); });
    if (!id) {
        log::warn("allocating a producer id: {}", id.error().message);
        r.error_code = kerr::coordinator_not_available;
        co_return respond(r, ctx);
    }
    r.producer_id = *id;
    r.producer_epoch = 0;
    co_return respond(r, ctx);
}

// Leader epochs never change here (one broker, leader epoch 0), so the end offset of epoch 0
// is the log end; a consumer validating its position after a metadata change finds it valid.
runtime::task<std::int64_t> log_end(shard* sh, std::string topic, std::int32_t partition) {
    auto slot = co_await local_partition(*sh, std::move(topic), partition);
    if (!slot || !*slot) co_return -1;
    co_return(*slot)->log->high_watermark();
}

runtime::task<std::string> handle_offset_for_leader_epoch(request_ctx ctx, kafka::OffsetForLeaderEpochRequest req) {
    kafka::OffsetForLeaderEpochResponse r;
    for (auto& t : req.topics) {
        kafka::OffsetForLeaderEpochResponse::OffsetForLeaderTopicResult tr;
        tr.topic = t.topic;
        for (auto& p : t.partitions) {
            kafka::OffsetForLeaderEpochResponse::EpochEndOffset e;
            e.partition = p.partition;
            const topic_info* info = ctx.sh.cat->find(t.topic);
            if (!info || p.partition < 0 || p.partition >= info->partitions) {
                e.error_code = kerr::unknown_topic_or_partition;
                e.leader_epoch = -1;
                e.end_offset = -1;
                tr.partitions.push_back(std::move(e));
                continue;
            }
            const unsigned owner = partition_owner(t.topic, p.partition, ctx.sh.shared->cores);
            shard* target = ctx.sh.shared->shards[owner];
            std::string topic = t.topic;
            const std::int32_t part = p.partition;
            const std::string* tp = &topic;
            auto end = co_await runtime::submit_to(owner, [target, tp, part] { return log_end(target, *tp, part); });
            if (end < 0) {
                e.error_code = kerr::leader_not_available;
                e.leader_epoch = -1;
                e.end_offset = -1;
            } else {
                e.leader_epoch = 0;
                e.end_offset = end;
            }
            tr.partitions.push_back(std::move(e));
        }
        r.topics.push_back(std::move(tr));
    }
    co_return respond(r, ctx);
}

} // namespace

std::span<const served_api> served_apis() noexcept { return apis; }

std::pair<std::string, std::int32_t> advertised(const request_ctx& ctx) {
    const auto& adv = ctx.sh.cfg().advertised_addr;
    if (!adv.empty()) {
        auto colon = adv.rfind(':');
        std::string host = adv.substr(0, colon);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
        return {host, static_cast<std::int32_t>(std::stoi(adv.substr(colon + 1)))};
    }
    return {ctx.ci.local_host.empty() ? std::string("127.0.0.1") : ctx.ci.local_host, ctx.ci.local_port};
}

runtime::task<std::optional<std::string>> handle_request(shard& sh, const conn_info& ci, std::string frame) {
    auto hdr = kafka::parse_request_header(frame);
    if (!hdr) throw connection_error("malformed request header: " + hdr.error().message);
    const std::int16_t key = hdr->header.request_api_key;
    const std::int16_t version = hdr->header.request_api_version;
    request_ctx ctx{sh, ci, version, hdr->header.correlation_id, hdr->header.client_id.value_or("")};
    const served_api* api = find_served(key);
    if (key == static_cast<std::int16_t>(api_key::api_versions)) {
        if (!api || version < api->min_version || version > api->max_version) co_return api_versions(ctx, true);
        (void)decode_body<kafka::ApiVersionsRequest>(hdr->body, version);
        co_return api_versions(ctx, false);
    }
    if (!api) throw connection_error("unsupported API key " + std::to_string(key));
    if (version < api->min_version || version > api->max_version) {
        throw connection_error("unsupported version " + std::to_string(version) + " of API key " +
                               std::to_string(key) + " (served: " + std::to_string(api->min_version) + "-" +
                               std::to_string(api->max_version) + ")");
    }
    auto body = hdr->body;
    switch (static_cast<api_key>(key)) {
    case api_key::produce: {
        bool no_response = false;
        auto req = decode_body<kafka::ProduceRequest>(body, version);
        auto out = co_await handle_produce(ctx, std::move(req), no_response);
        if (no_response) co_return std::nullopt;
        co_return out;
    }
    case api_key::fetch: {
        auto req = decode_body<kafka::FetchRequest>(body, version);
        co_return co_await handle_fetch(ctx, std::move(req));
    }
    case api_key::list_offsets: {
        auto req = decode_body<kafka::ListOffsetsRequest>(body, version);
        co_return co_await handle_list_offsets(ctx, std::move(req));
    }
    case api_key::metadata: {
        auto req = decode_body<kafka::MetadataRequest>(body, version);
        co_return co_await handle_metadata(ctx, std::move(req));
    }
    case api_key::create_topics: {
        auto req = decode_body<kafka::CreateTopicsRequest>(body, version);
        co_return co_await handle_create_topics(ctx, std::move(req));
    }
    case api_key::delete_topics: {
        auto req = decode_body<kafka::DeleteTopicsRequest>(body, version);
        co_return co_await handle_delete_topics(ctx, std::move(req));
    }
    case api_key::create_partitions: {
        auto req = decode_body<kafka::CreatePartitionsRequest>(body, version);
        co_return co_await handle_create_partitions(ctx, std::move(req));
    }
    case api_key::describe_configs:
        co_return describe_configs(ctx, decode_body<kafka::DescribeConfigsRequest>(body, version));
    case api_key::describe_cluster:
        co_return describe_cluster(ctx, decode_body<kafka::DescribeClusterRequest>(body, version));
    case api_key::find_coordinator:
        co_return find_coordinator(ctx, decode_body<kafka::FindCoordinatorRequest>(body, version));
    case api_key::init_producer_id: {
        auto req = decode_body<kafka::InitProducerIdRequest>(body, version);
        co_return co_await handle_init_producer_id(ctx, std::move(req));
    }
    case api_key::offset_for_leader_epoch: {
        auto req = decode_body<kafka::OffsetForLeaderEpochRequest>(body, version);
        co_return co_await handle_offset_for_leader_epoch(ctx, std::move(req));
    }
    case api_key::join_group: {
        auto req = decode_body<kafka::JoinGroupRequest>(body, version);
        co_return co_await handle_join_group(ctx, std::move(req));
    }
    case api_key::sync_group: {
        auto req = decode_body<kafka::SyncGroupRequest>(body, version);
        co_return co_await handle_sync_group(ctx, std::move(req));
    }
    case api_key::heartbeat: {
        auto req = decode_body<kafka::HeartbeatRequest>(body, version);
        co_return co_await handle_heartbeat(ctx, std::move(req));
    }
    case api_key::leave_group: {
        auto req = decode_body<kafka::LeaveGroupRequest>(body, version);
        co_return co_await handle_leave_group(ctx, std::move(req));
    }
    case api_key::offset_commit: {
        auto req = decode_body<kafka::OffsetCommitRequest>(body, version);
        co_return co_await handle_offset_commit(ctx, std::move(req));
    }
    case api_key::offset_fetch: {
        auto req = decode_body<kafka::OffsetFetchRequest>(body, version);
        co_return co_await handle_offset_fetch(ctx, std::move(req));
    }
    case api_key::list_groups: {
        auto req = decode_body<kafka::ListGroupsRequest>(body, version);
        co_return co_await handle_list_groups(ctx, std::move(req));
    }
    case api_key::describe_groups: {
        auto req = decode_body<kafka::DescribeGroupsRequest>(body, version);
        co_return co_await handle_describe_groups(ctx, std::move(req));
    }
    case api_key::delete_groups: {
        auto req = decode_body<kafka::DeleteGroupsRequest>(body, version);
        co_return co_await handle_delete_groups(ctx, std::move(req));
    }
    default:
        break;
    }
    throw connection_error("API key " + std::to_string(key) + " has no handler");
}

} // namespace skiff::broker
