// DescribeConfigs for topics (their effective configs) and for this broker; AlterConfigs and
// IncrementalAlterConfigs for topics (core 0 changes the catalog).
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/broker/topic_configs.hpp>

#include <map>
#include <optional>
#include <set>
#include <utility>

namespace skiff::broker {

namespace {
// The serve flags that stand for a Kafka broker setting, each a synonym of a topic config
// (Kafka's ServerTopicConfigSynonyms): what a topic that does not set the config gets.
struct broker_synonym {
    std::string_view broker_name;
    std::string value;
};
std::optional<broker_synonym> broker_value(std::string_view topic_config, const broker_config& cfg) {
    if (topic_config == "max.message.bytes") return broker_synonym{"message.max.bytes", std::to_string(cfg.message_max_bytes)};
    if (topic_config == "retention.ms") return broker_synonym{"log.retention.ms", std::to_string(cfg.retention_ms)};
    if (topic_config == "retention.bytes") return broker_synonym{"log.retention.bytes", std::to_string(cfg.retention_bytes)};
    if (topic_config == "segment.bytes") return broker_synonym{"log.segment.bytes", std::to_string(cfg.log.segment_bytes)};
    if (topic_config == "file.delete.delay.ms") {
        return broker_synonym{"log.segment.delete.delay.ms", std::to_string(cfg.log.delete_delay.count())};
    }
    return std::nullopt;
}
} // namespace

std::vector<effective_config> effective_configs(const topic_info& t, const broker_config& cfg) {
    std::vector<effective_config> out;
    for (auto& d : topic_config_defs()) {
        effective_config e;
        e.name = d.name;
        e.type = static_cast<std::int8_t>(d.type);
        if (auto it = t.configs.find(std::string(d.name)); it != t.configs.end()) {
            e.value = it->second;
            e.custom = true;
            e.source = dynamic_topic_config;
        } else if (auto b = broker_value(d.name, cfg)) {
            // As Kafka reports a topic default that server.properties overrides: the broker's
            // value, STATIC_BROKER_CONFIG; the flag's default equal to Kafka's stays DEFAULT_CONFIG.
            e.source = b->value == d.default_value ? default_config : static_broker_config;
            e.value = std::move(b->value);
        } else {
            e.value = std::string(d.default_value);
        }
        out.push_back(std::move(e));
    }
    return out;
}
namespace {
constexpr std::int8_t topic_resource = 2, broker_resource = 4;
} // namespace

// ---- DescribeConfigs ---------------------------------------------------------------------

std::string describe_configs(const request_ctx& ctx, const kafka::DescribeConfigsRequest& req) {
    kafka::DescribeConfigsResponse r;
    for (auto& res : req.resources) {
        kafka::DescribeConfigsResponse::DescribeConfigsResult out;
        out.resource_type = res.resource_type;
        out.resource_name = res.resource_name;
        // DESCRIBE_CONFIGS on the topic, or on the cluster for a broker (ConfigAdminManager).
        constexpr std::int8_t topic_resource = 2;
        const bool allowed = res.resource_type == topic_resource
                                 ? authorized(ctx, acl::operation::describe_configs, acl::resource_type::topic,
                                              res.resource_name)
                                 : authorized_cluster(ctx, acl::operation::describe_configs);
        if (!allowed) {
            out.error_code = res.resource_type == topic_resource ? kerr::topic_authorization_failed
                                                                 : kerr::cluster_authorization_failed;
            out.error_message = "Authorization failed.";
            r.results.push_back(std::move(out));
            continue;
        }
        auto wanted = [&](std::string_view name) {
            if (!res.configuration_keys) return true;
            for (auto& k : *res.configuration_keys) {
                if (k == name) return true;
            }
            return false;
        };
        auto add = [&](std::string name, std::string value, bool is_default, std::int8_t source, bool read_only,
                       std::int8_t type = 0) -> kafka::DescribeConfigsResponse::DescribeConfigsResourceResult* {
            if (!wanted(name)) return nullptr;
            kafka::DescribeConfigsResponse::DescribeConfigsResourceResult c;
            c.name = std::move(name);
            c.value = std::move(value);
            c.read_only = read_only;
            if (ctx.version == 0) {
                c.is_default = is_default; // v1+ says it with config_source
            } else {
                c.config_source = source;
            }
            c.config_type = type;
            c.documentation.reset(); // Kafka's null unless include_documentation
            out.configs.push_back(std::move(c));
            return &out.configs.back();
        };
        if (res.resource_type == topic_resource) {
            const topic_info* t = ctx.sh.cat->find(res.resource_name);
            if (!t) {
                out.error_code = kerr::unknown_topic_or_partition;
                out.error_message = "topic '" + res.resource_name + "' does not exist";
            } else {
                for (auto& e : effective_configs(*t, ctx.sh.cfg())) {
                    auto* c = add(std::string(e.name), e.value, e.source == default_config, e.source, false, e.type);
                    if (!c) continue;
                    const topic_config_def* d = find_topic_config(e.name);
                    if (req.include_documentation && d) {
                        c->documentation = d->honoured ? std::string(d->skiff_note)
                                                       : "No effect in skiff: " + std::string(d->skiff_note) + ".";
                    }
                    if (req.include_synonyms) {
                        // Kafka's order: the most specific first, ending with what applies by default.
                        if (e.custom) {
                            kafka::DescribeConfigsResponse::DescribeConfigsSynonym syn;
                            syn.name = std::string(e.name);
                            syn.value = e.value;
                            syn.source = dynamic_topic_config;
                            c->synonyms.push_back(std::move(syn));
                        }
                        if (auto b = broker_value(e.name, ctx.sh.cfg()); b && d && b->value != d->default_value) {
                            kafka::DescribeConfigsResponse::DescribeConfigsSynonym syn;
                            syn.name = std::string(b->broker_name);
                            syn.value = std::move(b->value);
                            syn.source = static_broker_config;
                            c->synonyms.push_back(std::move(syn));
                        }
                    }
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

// ---- AlterConfigs, IncrementalAlterConfigs ---------------------------------------------

namespace {

// Refusals of a resource's request before any config is looked at (Kafka's
// ConfigAdminManager.preprocess and its resource checks); else runs the change on core 0.
runtime::task<admin_outcome> alter_resource(shard& sh, std::int8_t type, std::string name,
                                            std::vector<config_change> changes, bool replace, bool validate_only) {
    if (type == broker_resource) {
        // Kafka answers INVALID_REQUEST for a broker config that cannot change at runtime
        // ("Cannot update these configs dynamically"); in skiff none can.
        co_return admin_outcome{kerr::invalid_request,
                                "dynamic broker configs are not supported: broker settings are skiff serve flags"};
    }
    if (type != topic_resource) {
        co_return admin_outcome{kerr::invalid_request, "unsupported resource type " + std::to_string(type)};
    }
    const std::string* n = &name;
    std::vector<config_change>* c = &changes;
    co_return co_await on_core(sh, 0, [n, c, replace, validate_only](shard& sh0) {
        return alter_topic_configs(sh0, *n, std::move(*c), replace, validate_only);
    });
}

// Kafka: a resource named twice in one request is refused (every time it appears).
template <typename Resources>
std::set<std::pair<std::int8_t, std::string>> repeated_resources(const Resources& resources) {
    std::map<std::pair<std::int8_t, std::string>, int> seen;
    for (auto& res : resources) ++seen[{res.resource_type, res.resource_name}];
    std::set<std::pair<std::int8_t, std::string>> out;
    for (auto& [key, n] : seen) {
        if (n > 1) out.insert(key);
    }
    return out;
}

template <typename Result>
Result resource_result(std::int8_t type, std::string name, admin_outcome out) {
    Result res;
    res.resource_type = type;
    res.resource_name = std::move(name);
    res.error_code = out.error;
    if (out.error == kerr::none) {
        res.error_message = std::nullopt;
    } else {
        res.error_message = std::move(out.message);
    }
    return res;
}

} // namespace

runtime::task<kafka::AlterConfigsResponse> alter_configs(shard& sh, kafka::AlterConfigsRequest req) {
    kafka::AlterConfigsResponse r;
    const auto repeated = repeated_resources(req.resources);
    for (auto& res : req.resources) {
        admin_outcome out;
        if (repeated.count({res.resource_type, res.resource_name})) {
            out = admin_outcome{kerr::invalid_request, "the resource is named twice in the request"};
        } else {
            // The configs replace the topic's: what is left out returns to its default. A null
            // value is left out too (Kafka drops null entries before it validates).
            std::vector<config_change> changes;
            for (auto& c : res.configs) {
                if (!c.value) continue;
                config_change ch;
                ch.name = c.name;
                ch.value = *c.value;
                changes.push_back(std::move(ch));
            }
            std::string name = res.resource_name;
            out = co_await alter_resource(sh, res.resource_type, std::move(name), std::move(changes), true,
                                          req.validate_only);
        }
        r.responses.push_back(resource_result<kafka::AlterConfigsResponse::AlterConfigsResourceResponse>(
            res.resource_type, res.resource_name, std::move(out)));
    }
    co_return r;
}

runtime::task<kafka::IncrementalAlterConfigsResponse> incremental_alter_configs(
    shard& sh, kafka::IncrementalAlterConfigsRequest req) {
    kafka::IncrementalAlterConfigsResponse r;
    const auto repeated = repeated_resources(req.resources);
    for (auto& res : req.resources) {
        admin_outcome out;
        std::vector<config_change> changes;
        std::set<std::string> names;
        if (repeated.count({res.resource_type, res.resource_name})) {
            out = admin_outcome{kerr::invalid_request, "the resource is named twice in the request"};
        }
        // Malformed operations are INVALID_REQUEST, as Kafka's preprocess answers them;
        // INVALID_CONFIG is left for what the configs themselves say.
        for (auto& c : res.configs) {
            if (out.error != kerr::none) break;
            if (c.config_operation < 0 || c.config_operation > 3) {
                out = admin_outcome{kerr::invalid_request, "unknown operation " + std::to_string(c.config_operation) +
                                                               " for config '" + c.name + "'"};
                break;
            }
            config_change ch;
            ch.operation = static_cast<config_change::op>(c.config_operation);
            ch.name = c.name;
            if (ch.operation != config_change::op::remove) {
                if (!c.value) {
                    out = admin_outcome{kerr::invalid_request, "config '" + c.name + "': a null value is allowed with DELETE only"};
                    break;
                }
                ch.value = *c.value;
            }
            if (!names.insert(c.name).second) {
                out = admin_outcome{kerr::invalid_request, "config '" + c.name + "' is named twice"};
                break;
            }
            changes.push_back(std::move(ch));
        }
        if (out.error == kerr::none) {
            std::string name = res.resource_name;
            out = co_await alter_resource(sh, res.resource_type, std::move(name), std::move(changes), false,
                                          req.validate_only);
        }
        r.responses.push_back(resource_result<kafka::IncrementalAlterConfigsResponse::AlterConfigsResourceResponse>(
            res.resource_type, res.resource_name, std::move(out)));
    }
    co_return r;
}

} // namespace skiff::broker
