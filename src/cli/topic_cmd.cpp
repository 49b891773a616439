// `skiff topic create|list|describe|delete|add-partitions|alter-config`: topic admin over the
// Kafka protocol (CreateTopics, Metadata, DescribeConfigs, DeleteTopics, CreatePartitions,
// IncrementalAlterConfigs), so it works against any Kafka-compatible broker.
#include "commands.hpp"
#include "kafka_cli.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace skiff::cli {

namespace {

using nlohmann::json;

constexpr std::int8_t topic_resource = 2; // ConfigResource.Type.TOPIC

// Kafka's ConfigSource names (DescribeConfigsResponse.ConfigSource).
const char* config_source_name(std::int8_t s) {
    switch (s) {
    case 1: return "DYNAMIC_TOPIC_CONFIG";
    case 2: return "DYNAMIC_BROKER_CONFIG";
    case 3: return "DYNAMIC_DEFAULT_BROKER_CONFIG";
    case 4: return "STATIC_BROKER_CONFIG";
    case 5: return "DEFAULT_CONFIG";
    case 6: return "DYNAMIC_BROKER_LOGGER_CONFIG";
    case 7: return "CLIENT_METRICS_CONFIG";
    default: return "UNKNOWN";
    }
}

std::string join_ids(const std::vector<std::int32_t>& ids) {
    std::string s;
    for (auto id : ids) {
        if (!s.empty()) s += ',';
        s += std::to_string(id);
    }
    return s.empty() ? "-" : s;
}

std::string quoted(const std::string& name) { return "topic '" + name + "'"; }

struct create_args {
    std::string name;
    std::int32_t partitions = -1;
    std::int16_t replication = -1;
    std::vector<std::string> configs;
    bool if_not_exists = false;
    bool dry_run = false;
};

runtime::task<int> create_topic(client::client& c, const kafka_options* ko, const create_args* a) {
    const std::string cmd = "skiff topic create";
    kafka::CreateTopicsRequest req;
    kafka::CreateTopicsRequest::CreatableTopic t;
    t.name = a->name;
    t.num_partitions = a->partitions;
    t.replication_factor = a->replication;
    for (const auto& kv : a->configs) {
        auto split = split_key_value(kv);
        if (!split) co_return report(cmd, "bad --config '" + kv + "': expected key=value", exit_usage);
        kafka::CreateTopicsRequest::CreatableTopicConfig cfg;
        cfg.name = split->first;
        cfg.value = split->second;
        t.configs.push_back(std::move(cfg));
    }
    req.topics.push_back(std::move(t));
    req.timeout_ms = ko->timeout_ms;
    req.validate_only = a->dry_run;
    auto st = c.send(std::move(req), client::target::controller());
    auto r = co_await std::move(st);
    if (!r) co_return report(cmd, r.error());
    if (r->topics.empty()) co_return report(cmd, "the broker's answer names no topic", exit_protocol);
    const auto& res = r->topics.front();
    const bool exists = res.error_code == kafka::error_code::topic_already_exists;
    if (res.error_code != kafka::error_code::none && !(exists && a->if_not_exists)) {
        co_return report(cmd, kafka_error_sentence(quoted(a->name), res.error_code, res.error_message), exit_broker_error);
    }
    if (ko->json) {
        json j = {{"name", a->name}, {"created", !exists && !a->dry_run}, {"dry_run", a->dry_run}};
        if (!exists && res.num_partitions >= 0) j["partitions"] = res.num_partitions;
        if (!exists && res.replication_factor >= 0) j["replication_factor"] = res.replication_factor;
        if (!res.topic_id.is_zero()) j["id"] = res.topic_id.to_string();
        print_json(j);
    } else if (exists) {
        std::printf("topic '%s' already exists\n", a->name.c_str());
    } else {
        std::string detail;
        if (res.num_partitions >= 0) {
            detail = " (" + std::to_string(res.num_partitions) + " partition" + (res.num_partitions == 1 ? "" : "s") + ")";
        }
        std::printf("%s topic '%s'%s\n", a->dry_run ? "would create" : "created", a->name.c_str(), detail.c_str());
    }
    co_return exit_ok;
}

runtime::task<int> list_topics(client::client& c, const kafka_options* ko, bool internal) {
    auto mt = c.metadata(std::nullopt);
    auto md = co_await std::move(mt);
    if (!md) co_return report("skiff topic list", md.error());
    auto topics = md->topics;
    std::sort(topics.begin(), topics.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
    json arr = json::array();
    table tab({"TOPIC", "PARTITIONS", "REPLICAS"});
    for (const auto& t : topics) {
        if (!t.name || (t.is_internal && !internal)) continue;
        std::size_t replicas = 0;
        for (const auto& p : t.partitions) replicas = std::max(replicas, p.replica_nodes.size());
        if (ko->json) {
            json j = {{"name", *t.name}, {"partitions", t.partitions.size()}, {"replicas", replicas},
                      {"internal", t.is_internal}};
            if (!t.topic_id.is_zero()) j["id"] = t.topic_id.to_string();
            arr.push_back(std::move(j));
        } else {
            tab.add({*t.name, std::to_string(t.partitions.size()), std::to_string(replicas)});
        }
    }
    if (ko->json) print_json(arr);
    else tab.print();
    co_return exit_ok;
}

runtime::task<int> describe_topic(client::client& c, const kafka_options* ko, const std::string* name) {
    const std::string cmd = "skiff topic describe";
    auto mt = c.metadata(std::vector<std::string>{*name});
    auto md = co_await std::move(mt);
    if (!md) co_return report(cmd, md.error());
    const kafka::MetadataResponse::MetadataResponseTopic* topic = nullptr;
    for (const auto& t : md->topics)
        if (t.name == *name) topic = &t;
    if (!topic) co_return report(cmd, quoted(*name) + " is not in the broker's answer", exit_protocol);
    if (topic->error_code != kafka::error_code::none) {
        co_return report(cmd, kafka_error_sentence(quoted(*name), topic->error_code), exit_broker_error);
    }

    kafka::DescribeConfigsRequest dreq;
    kafka::DescribeConfigsRequest::DescribeConfigsResource res;
    res.resource_type = topic_resource;
    res.resource_name = *name;
    res.configuration_keys.reset(); // null: every key
    dreq.resources.push_back(std::move(res));
    auto dt = c.send(std::move(dreq), client::target::any());
    auto configs = co_await std::move(dt);
    if (!configs) co_return report(cmd, configs.error());
    const kafka::DescribeConfigsResponse::DescribeConfigsResult* cres = nullptr;
    for (const auto& r : configs->results)
        if (r.resource_name == *name) cres = &r;
    if (cres && cres->error_code != kafka::error_code::none) {
        co_return report(cmd, kafka_error_sentence(quoted(*name), cres->error_code, cres->error_message), exit_broker_error);
    }

    auto parts = topic->partitions;
    std::sort(parts.begin(), parts.end(), [](const auto& x, const auto& y) { return x.partition_index < y.partition_index; });
    std::vector<kafka::DescribeConfigsResponse::DescribeConfigsResourceResult> cfgs;
    if (cres) cfgs = cres->configs;
    std::sort(cfgs.begin(), cfgs.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
    auto value_of = [](const kafka::DescribeConfigsResponse::DescribeConfigsResourceResult& e) -> std::string {
        if (e.value) return *e.value;
        return e.is_sensitive ? "(sensitive)" : "(null)";
    };

    if (ko->json) {
        json jp = json::array();
        for (const auto& p : parts) {
            json e = {{"partition", p.partition_index}, {"leader", p.leader_id}, {"leader_epoch", p.leader_epoch},
                      {"replicas", p.replica_nodes}, {"isr", p.isr_nodes}, {"offline", p.offline_replicas}};
            if (p.error_code != kafka::error_code::none) e["error"] = std::string(kafka::name(p.error_code));
            jp.push_back(std::move(e));
        }
        json jc = json::array();
        for (const auto& e : cfgs) {
            json v = e.value ? json(*e.value) : json(nullptr);
            jc.push_back({{"name", e.name}, {"value", v}, {"source", config_source_name(e.config_source)},
                          {"read_only", e.read_only}, {"sensitive", e.is_sensitive}});
        }
        json j = {{"name", *name}, {"internal", topic->is_internal}, {"partitions", jp}, {"configs", jc}};
        if (!topic->topic_id.is_zero()) j["id"] = topic->topic_id.to_string();
        print_json(j);
        co_return exit_ok;
    }

    table head({"TOPIC", "ID", "PARTITIONS", "INTERNAL"});
    head.add({*name, topic->topic_id.is_zero() ? "-" : topic->topic_id.to_string(), std::to_string(parts.size()),
              topic->is_internal ? "yes" : "no"});
    head.print();
    std::puts("");
    table pt({"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ERROR"});
    for (const auto& p : parts) {
        pt.add({std::to_string(p.partition_index), std::to_string(p.leader_id), std::to_string(p.leader_epoch),
                join_ids(p.replica_nodes), join_ids(p.isr_nodes),
                p.error_code == kafka::error_code::none ? "-" : std::string(kafka::name(p.error_code))});
    }
    pt.print();
    std::puts("");
    table ct({"CONFIG", "VALUE", "SOURCE"});
    for (const auto& e : cfgs) ct.add({e.name, value_of(e), config_source_name(e.config_source)});
    ct.print();
    co_return exit_ok;
}

runtime::task<int> delete_topics(client::client& c, const kafka_options* ko, const std::vector<std::string>* names) {
    const std::string cmd = "skiff topic delete";
    kafka::DeleteTopicsRequest req;
    for (const auto& n : *names) {
        req.topic_names.push_back(n); // v0-5
        kafka::DeleteTopicsRequest::DeleteTopicState s;
        s.name = n; // v6+
        req.topics.push_back(std::move(s));
    }
    req.timeout_ms = ko->timeout_ms;
    auto st = c.send(std::move(req), client::target::controller());
    auto r = co_await std::move(st);
    if (!r) co_return report(cmd, r.error());
    int code = exit_ok;
    json arr = json::array();
    for (const auto& res : r->responses) {
        const std::string name = res.name.value_or("");
        const bool ok = res.error_code == kafka::error_code::none;
        if (!ok) code = exit_broker_error;
        if (ko->json) {
            json j = {{"name", name}, {"deleted", ok}};
            if (!ok) {
                j["error"] = std::string(kafka::name(res.error_code));
                j["message"] = kafka_error_sentence(quoted(name), res.error_code, res.error_message);
            }
            arr.push_back(std::move(j));
        } else if (ok) {
            std::printf("deleted topic '%s'\n", name.c_str());
        } else {
            report(cmd, kafka_error_sentence(quoted(name), res.error_code, res.error_message), exit_broker_error);
        }
    }
    if (ko->json) print_json(arr);
    co_return code;
}

runtime::task<int> add_partitions(client::client& c, const kafka_options* ko, const std::string* name, std::int32_t total) {
    const std::string cmd = "skiff topic add-partitions";
    kafka::CreatePartitionsRequest req;
    kafka::CreatePartitionsRequest::CreatePartitionsTopic t;
    t.name = *name;
    t.count = total;
    t.assignments.reset(); // null: the broker places the new partitions
    req.topics.push_back(std::move(t));
    req.timeout_ms = ko->timeout_ms;
    auto st = c.send(std::move(req), client::target::controller());
    auto r = co_await std::move(st);
    if (!r) co_return report(cmd, r.error());
    if (r->results.empty()) co_return report(cmd, "the broker's answer names no topic", exit_protocol);
    const auto& res = r->results.front();
    if (res.error_code != kafka::error_code::none) {
        co_return report(cmd, kafka_error_sentence(quoted(*name), res.error_code, res.error_message), exit_broker_error);
    }
    if (ko->json) print_json({{"name", *name}, {"partitions", total}});
    else std::printf("topic '%s' now has %d partitions\n", name->c_str(), total);
    co_return exit_ok;
}

struct alter_args {
    std::string name;
    std::vector<std::string> set;
    std::vector<std::string> del;
};

runtime::task<int> alter_config(client::client& c, const kafka_options* ko, const alter_args* a) {
    const std::string cmd = "skiff topic alter-config";
    kafka::IncrementalAlterConfigsRequest req;
    kafka::IncrementalAlterConfigsRequest::AlterConfigsResource res;
    res.resource_type = topic_resource;
    res.resource_name = a->name;
    for (const auto& kv : a->set) {
        auto split = split_key_value(kv);
        if (!split) co_return report(cmd, "bad --set '" + kv + "': expected key=value", exit_usage);
        kafka::IncrementalAlterConfigsRequest::AlterableConfig cfg;
        cfg.name = split->first;
        cfg.config_operation = 0; // SET
        cfg.value = split->second;
        res.configs.push_back(std::move(cfg));
    }
    for (const auto& k : a->del) {
        kafka::IncrementalAlterConfigsRequest::AlterableConfig cfg;
        cfg.name = k;
        cfg.config_operation = 1; // DELETE
        cfg.value.reset();
        res.configs.push_back(std::move(cfg));
    }
    req.resources.push_back(std::move(res));
    auto st = c.send(std::move(req), client::target::controller());
    auto r = co_await std::move(st);
    if (!r) co_return report(cmd, r.error());
    if (r->responses.empty()) co_return report(cmd, "the broker's answer names no topic", exit_protocol);
    const auto& out = r->responses.front();
    if (out.error_code != kafka::error_code::none) {
        co_return report(cmd, kafka_error_sentence(quoted(a->name), out.error_code, out.error_message), exit_broker_error);
    }
    if (ko->json) {
        json set = json::object();
        for (const auto& kv : a->set) {
            auto split = split_key_value(kv);
            set[split->first] = split->second;
        }
        print_json({{"name", a->name}, {"set", set}, {"deleted", a->del}});
    } else {
        for (const auto& kv : a->set) std::printf("set %s on topic '%s'\n", kv.c_str(), a->name.c_str());
        for (const auto& k : a->del) std::printf("deleted %s from topic '%s'\n", k.c_str(), a->name.c_str());
    }
    co_return exit_ok;
}

} // namespace

int topic_command(const std::vector<std::string>& args) {
    CLI::App app("Create, list, describe, delete and change topics on any Kafka-compatible broker.", "skiff topic");
    app.footer(exit_codes_help);
    app.require_subcommand(1);
    kafka_options ko;

    create_args ca;
    auto* create = app.add_subcommand("create", "create a topic");
    create->add_option("name", ca.name, "topic name")->required();
    create->add_option("-p,--partitions", ca.partitions, "partition count (-1: the broker's default)")
        ->capture_default_str();
    create->add_option("-r,--replication-factor", ca.replication, "replicas per partition (-1: the broker's default)")
        ->capture_default_str();
    // One value per occurrence: `-c a=1 -c b=2 NAME` must not take NAME as a config.
    create->add_option("-c,--config", ca.configs, "topic config KEY=VALUE (repeatable)")->allow_extra_args(false);
    create->add_flag("--if-not-exists", ca.if_not_exists, "succeed when the topic already exists");
    create->add_flag("--dry-run", ca.dry_run, "let the broker validate the request without creating anything");
    add_kafka_options(*create, ko);

    bool internal = false;
    auto* list = app.add_subcommand("list", "list topics");
    list->add_flag("--internal", internal, "include internal topics");
    add_kafka_options(*list, ko);

    std::string dname;
    auto* describe = app.add_subcommand("describe", "a topic's partitions (leader, epoch, replicas) and configs with their source");
    describe->add_option("name", dname, "topic name")->required();
    add_kafka_options(*describe, ko);

    std::vector<std::string> dnames;
    auto* del = app.add_subcommand("delete", "delete topics");
    del->add_option("names", dnames, "topic names")->required();
    add_kafka_options(*del, ko);

    std::string pname;
    std::int32_t total = 0;
    auto* addp = app.add_subcommand("add-partitions", "raise a topic's partition count");
    addp->add_option("name", pname, "topic name")->required();
    addp->add_option("--total", total, "the new partition count (total, not added)")->required()->check(CLI::PositiveNumber);
    add_kafka_options(*addp, ko);

    alter_args aa;
    auto* alter = app.add_subcommand("alter-config", "set or delete topic configs (IncrementalAlterConfigs)");
    alter->add_option("name", aa.name, "topic name")->required();
    alter->add_option("--set", aa.set, "KEY=VALUE to set (repeatable)")->allow_extra_args(false);
    alter->add_option("--delete", aa.del, "KEY to reset to its default (repeatable)")->allow_extra_args(false);
    add_kafka_options(*alter, ko);

    if (auto code = parse_args(app, args)) return *code;
    // KEY=VALUE arguments are checked before anything is sent.
    for (const auto* list_of : {&ca.configs, &aa.set}) {
        for (const auto& kv : *list_of) {
            if (!split_key_value(kv)) {
                const char* who = list_of == &ca.configs ? "skiff topic create" : "skiff topic alter-config";
                const char* flag = list_of == &ca.configs ? "--config" : "--set";
                return report(who, std::string("bad ") + flag + " '" + kv + "': expected KEY=VALUE", exit_usage);
            }
        }
    }

    if (*create) {
        return run_with_client(ko, "skiff topic create", [&](client::client& c) { return create_topic(c, &ko, &ca); });
    }
    if (*list) {
        return run_with_client(ko, "skiff topic list", [&](client::client& c) { return list_topics(c, &ko, internal); });
    }
    if (*describe) {
        return run_with_client(ko, "skiff topic describe", [&](client::client& c) { return describe_topic(c, &ko, &dname); });
    }
    if (*del) {
        return run_with_client(ko, "skiff topic delete", [&](client::client& c) { return delete_topics(c, &ko, &dnames); });
    }
    if (*addp) {
        return run_with_client(ko, "skiff topic add-partitions",
                               [&](client::client& c) { return add_partitions(c, &ko, &pname, total); });
    }
    if (*alter) {
        if (aa.set.empty() && aa.del.empty()) {
            return report("skiff topic alter-config", "nothing to change: give --set KEY=VALUE or --delete KEY", exit_usage);
        }
        return run_with_client(ko, "skiff topic alter-config", [&](client::client& c) { return alter_config(c, &ko, &aa); });
    }
    return exit_usage;
}

} // namespace skiff::cli
