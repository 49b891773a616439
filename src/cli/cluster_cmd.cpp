// `skiff cluster info`: the cluster id, the controller, the brokers and the topic count, from
// Metadata (and DescribeCluster where the broker has it: it names the brokers' racks and the
// controller as the cluster sees them, also where Metadata's controller is stale).
#include "commands.hpp"
#include "kafka_cli.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace skiff::cli {

namespace {

using nlohmann::json;

struct broker_row {
    std::int32_t id = -1;
    std::string host;
    std::int32_t port = 0;
    std::optional<std::string> rack;
};

runtime::task<int> cluster_info(client::client& c, const kafka_options* ko) {
    const std::string cmd = "skiff cluster info";
    auto mt = c.metadata(std::nullopt);
    auto md = co_await std::move(mt);
    if (!md) co_return report(cmd, md.error());

    std::optional<std::string> cluster_id = md->cluster_id;
    std::int32_t controller = md->controller_id;
    std::vector<broker_row> brokers;
    for (const auto& b : md->brokers) brokers.push_back({b.node_id, b.host, b.port, b.rack});
    std::size_t topics = 0;
    for (const auto& t : md->topics)
        if (!t.is_internal) ++topics;

    auto ct = c.connection_for(client::target::any());
    auto conn = co_await std::move(ct);
    if (conn && (*conn)->versions().pick(kafka::api_key::describe_cluster)) {
        kafka::DescribeClusterRequest req;
        auto st = c.send(std::move(req), client::target::any());
        auto dc = co_await std::move(st);
        if (!dc) co_return report(cmd, dc.error());
        if (dc->error_code != kafka::error_code::none) {
            co_return report(cmd, kafka_error_sentence("the cluster", dc->error_code, dc->error_message), exit_broker_error);
        }
        cluster_id = dc->cluster_id;
        controller = dc->controller_id;
        brokers.clear();
        for (const auto& b : dc->brokers) brokers.push_back({b.broker_id, b.host, b.port, b.rack});
    }
    std::sort(brokers.begin(), brokers.end(), [](const auto& x, const auto& y) { return x.id < y.id; });

    if (ko->json) {
        json jb = json::array();
        for (const auto& b : brokers) {
            jb.push_back({{"id", b.id}, {"host", b.host}, {"port", b.port},
                          {"rack", b.rack ? json(*b.rack) : json(nullptr)}, {"controller", b.id == controller}});
        }
        print_json({{"cluster_id", cluster_id ? json(*cluster_id) : json(nullptr)},
                    {"controller_id", controller},
                    {"topics", topics},
                    {"brokers", jb}});
        co_return exit_ok;
    }
    table head({"CLUSTER", "CONTROLLER", "BROKERS", "TOPICS"});
    head.add({cluster_id.value_or("-"), controller < 0 ? "-" : std::to_string(controller), std::to_string(brokers.size()),
              std::to_string(topics)});
    head.print();
    std::puts("");
    table bt({"ID", "ADDRESS", "RACK", "CONTROLLER"});
    for (const auto& b : brokers) {
        client::broker_info bi;
        bi.host = b.host;
        bi.port = b.port;
        bt.add({std::to_string(b.id), bi.address(), b.rack.value_or("-"), b.id == controller ? "yes" : "no"});
    }
    bt.print();
    co_return exit_ok;
}

} // namespace

int cluster_command(const std::vector<std::string>& args) {
    CLI::App app("What a Kafka-compatible cluster is made of.", "skiff cluster");
    app.footer(exit_codes_help);
    app.require_subcommand(1);
    kafka_options ko;
    auto* info = app.add_subcommand("info", "cluster id, controller, brokers (id, host:port, rack) and topic count");
    add_kafka_options(*info, ko);
    if (auto code = parse_args(app, args)) return *code;
    if (*info) return run_with_client(ko, "skiff cluster info", [&](client::client& c) { return cluster_info(c, &ko); });
    return exit_usage;
}

} // namespace skiff::cli
