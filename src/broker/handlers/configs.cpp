// DescribeConfigs for topics (their effective configs) and for this broker.
#include "../handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>

namespace skiff::broker {

std::vector<effective_config> effective_configs(const topic_info& t, const broker_config& cfg) {
    std::vector<effective_config> out;
    for (auto& d : topic_config_defaults()) {
        auto it = t.configs.find(std::string(d.name));
        const bool custom = it != t.configs.end();
        // A topic's max.message.bytes defaults to the broker's message.max.bytes, as in Kafka.
        // retention.ms / retention.bytes likewise default to log.retention.ms / .bytes.
        std::string fallback = d.name == "max.message.bytes" ? std::to_string(cfg.message_max_bytes)
                               : d.name == "retention.ms"    ? std::to_string(cfg.retention_ms)
                               : d.name == "retention.bytes" ? std::to_string(cfg.retention_bytes)
                                                             : std::string(d.value);
        out.push_back(effective_config{d.name, custom ? it->second : std::move(fallback), custom});
    }
    return out;
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
                add("log.retention.ms", std::to_string(cfg.retention_ms), false, static_broker, true);
                add("log.retention.bytes", std::to_string(cfg.retention_bytes), false, static_broker, true);
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

} // namespace skiff::broker
