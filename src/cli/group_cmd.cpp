// skiff group list|describe|delete|reset-offsets: consumer groups over the Kafka protocol.
//
//   list            ListGroups on every broker of the cluster (each lists the groups it
//                   coordinates)
//   describe G...   DescribeGroups (state, protocol, members and their assignments) + the
//                   committed offsets (OffsetFetch) + each partition's log end (ListOffsets):
//                   lag per partition, as kafka-consumer-groups.sh --describe shows it
//   delete G...     DeleteGroups (Kafka refuses a group with members: NON_EMPTY_GROUP)
//   reset-offsets G a plan (group_reset.hpp) printed as a table; with --execute committed with
//                   an OffsetCommit from no member (generation -1), which Kafka accepts only
//                   while the group is Empty: its answer is reported as it comes
#include "commands.hpp"
#include "group_reset.hpp"
#include "kafka_cli.hpp"
#include "records_offsets.hpp"
#include "records_time.hpp"

#include <skiff/kafka/protocol.hpp>

#include <charconv>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace skiff::cli {
namespace {

using tp_key = std::pair<std::string, std::int32_t>;

struct group_options {
    group_options() = default;
    kafka_options kafka;
    std::vector<std::string> groups;
    // reset-offsets
    std::vector<std::string> topics;
    bool all_topics = false;
    bool to_earliest = false;
    bool to_latest = false;
    std::optional<std::int64_t> to_offset;
    std::optional<std::string> to_datetime;
    std::optional<std::int64_t> shift_by;
    bool execute = false;
    reset_spec spec;
};

std::string tp_name(const tp_key& k) { return k.first + "-" + std::to_string(k.second); }

// The committed offsets of a group, every topic (OffsetFetch with topics = null).
runtime::task<result<std::map<tp_key, std::int64_t>, client::error>> committed_offsets(client::client& c,
                                                                                       std::string group) {
    kafka::OffsetFetchRequest req;
    req.group_id = group;
    req.topics.reset();
    kafka::OffsetFetchRequest::OffsetFetchRequestGroup rg;
    rg.group_id = group;
    rg.member_id.reset();
    rg.member_epoch = -1;
    rg.topics.reset();
    req.groups.push_back(std::move(rg));
    req.require_stable = false;
    auto t = c.send(std::move(req), client::target::group_coordinator(group));
    auto r = co_await std::move(t);
    if (!r) co_return failure{r.error()};
    std::map<tp_key, std::int64_t> out;
    auto take = [&](const std::string& topic, std::int32_t p, std::int64_t off) {
        if (off >= 0) out[{topic, p}] = off;
    };
    if (!r->groups.empty()) { // v8+
        for (const auto& g : r->groups) {
            if (g.error_code != kafka::error_code::none)
                co_return failure{client::broker_error(g.error_code, "group '" + group + "'")};
            for (const auto& t : g.topics)
                for (const auto& p : t.partitions) take(t.name, p.partition_index, p.committed_offset);
        }
    } else {
        if (r->error_code != kafka::error_code::none)
            co_return failure{client::broker_error(r->error_code, "group '" + group + "'")};
        for (const auto& t : r->topics)
            for (const auto& p : t.partitions) take(t.name, p.partition_index, p.committed_offset);
    }
    co_return out;
}

runtime::task<result<kafka::DescribeGroupsResponse::DescribedGroup, client::error>> describe_one(client::client& c,
                                                                                                 std::string group) {
    kafka::DescribeGroupsRequest req;
    req.groups.push_back(group);
    req.include_authorized_operations = false;
    auto t = c.send(std::move(req), client::target::group_coordinator(group));
    auto r = co_await std::move(t);
    if (!r) co_return failure{r.error()};
    for (auto& g : r->groups) {
        if (g.group_id != group) continue;
        if (g.error_code != kafka::error_code::none)
            co_return failure{client::broker_error(g.error_code, "group '" + group + "'")};
        co_return std::move(g);
    }
    co_return failure{client::error(client::errc::protocol_error, "the DescribeGroups answer lacks group '" + group + "'")};
}

// A consumer-protocol member's assignment: int16 version, then the versioned body.
std::vector<tp_key> decode_assignment(const std::string& bytes) {
    std::vector<tp_key> out;
    if (bytes.size() < 2) return out;
    kafka::reader rd(std::span<const char>(bytes.data(), bytes.size()));
    std::int16_t v = 0;
    if (!rd.read_int16(v) || v < 0) return out;
    // Newer versions only add fields: read them as the newest this codec knows (Kafka does too).
    v = std::min<std::int16_t>(v, kafka::ConsumerProtocolAssignment::max_version);
    auto a = kafka::ConsumerProtocolAssignment::decode(rd, v);
    if (!a) return out;
    for (const auto& t : a->assigned_partitions)
        for (auto p : t.partitions) out.emplace_back(t.topic, p);
    return out;
}

// Log end offsets of every partition in `parts`, grouped by topic.
runtime::task<result<std::map<tp_key, std::int64_t>, client::error>>
offsets_of(client::client& c, std::set<tp_key> parts, std::int64_t timestamp) {
    std::map<std::string, std::vector<std::int32_t>> by_topic;
    for (const auto& k : parts) by_topic[k.first].push_back(k.second);
    std::map<tp_key, std::int64_t> out;
    for (auto& [topic, ps] : by_topic) {
        auto lt = describe_topic(c, topic, false);
        auto layout = co_await std::move(lt);
        if (!layout) co_return failure{layout.error()};
        std::vector<std::int32_t> known;
        for (auto p : ps)
            if (layout->leaders.count(p)) known.push_back(p);
        auto ot = list_offsets(c, &*layout, known, timestamp);
        auto offs = co_await std::move(ot);
        if (!offs) co_return failure{offs.error()};
        for (const auto& [p, o] : *offs) out[{topic, p}] = o;
    }
    co_return out;
}

std::string opt_num(std::optional<std::int64_t> v) { return v ? std::to_string(*v) : "-"; }

nlohmann::json opt_json(std::optional<std::int64_t> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// ---- list -----------------------------------------------------------------------------------

runtime::task<int> list_groups(client::client& c, const group_options* o) {
    // Each broker lists only the groups it coordinates: ask them all.
    std::vector<std::int32_t> nodes;
    for (const auto& [id, b] : c.brokers()) nodes.push_back(id);
    std::map<std::string, kafka::ListGroupsResponse::ListedGroup> groups;
    for (auto id : nodes) {
        kafka::ListGroupsRequest req;
        auto t = c.send(std::move(req), client::target::node(id));
        auto r = co_await std::move(t);
        if (!r) co_return report("skiff group list", r.error());
        if (r->error_code != kafka::error_code::none)
            co_return report("skiff group list", kafka_error_sentence("broker " + std::to_string(id), r->error_code),
                             exit_broker_error);
        for (auto& g : r->groups) groups[g.group_id] = std::move(g);
    }
    if (o->kafka.json) {
        auto arr = nlohmann::json::array();
        for (const auto& [name, g] : groups)
            arr.push_back({{"group", name}, {"state", g.group_state}, {"protocol_type", g.protocol_type}});
        print_json(arr);
        co_return exit_ok;
    }
    table tb({"GROUP", "STATE", "PROTOCOL-TYPE"});
    for (const auto& [name, g] : groups)
        tb.add({name, g.group_state.empty() ? "-" : g.group_state, g.protocol_type.empty() ? "-" : g.protocol_type});
    tb.print();
    co_return exit_ok;
}

// ---- describe -------------------------------------------------------------------------------

runtime::task<int> describe_groups(client::client& c, const group_options* o) {
    const std::string cmd = "skiff group describe";
    auto out = nlohmann::json::array();
    int rc = exit_ok;
    bool first = true;
    for (const auto& name : o->groups) {
        auto dt = describe_one(c, name);
        auto g = co_await std::move(dt);
        if (!g) {
            rc = report(cmd, g.error());
            continue;
        }
        auto ct = committed_offsets(c, name);
        auto committed = co_await std::move(ct);
        if (!committed) {
            rc = report(cmd, committed.error());
            continue;
        }
        if ((g->group_state == "Dead" || g->group_state.empty()) && committed->empty()) {
            rc = report(cmd, "group '" + name + "' does not exist", exit_broker_error);
            continue;
        }
        // Partitions: those with a committed offset and those assigned to a member.
        std::map<tp_key, std::string> owner; // -> member id
        std::map<std::string, std::vector<tp_key>> assigned;
        const bool consumer = g->protocol_type == "consumer";
        for (const auto& m : g->members) {
            auto a = consumer ? decode_assignment(m.member_assignment) : std::vector<tp_key>{};
            for (const auto& k : a) owner[k] = m.member_id;
            assigned[m.member_id] = std::move(a);
        }
        std::set<tp_key> parts;
        for (const auto& [k, off] : *committed) parts.insert(k);
        for (const auto& [k, m] : owner) parts.insert(k);
        auto et = offsets_of(c, parts, latest_timestamp);
        auto ends = co_await std::move(et);
        if (!ends) {
            rc = report(cmd, ends.error());
            continue;
        }
        auto find_end = [&](const tp_key& k) -> std::optional<std::int64_t> {
            auto it = ends->find(k);
            return it == ends->end() ? std::nullopt : std::optional<std::int64_t>(it->second);
        };
        auto find_committed = [&](const tp_key& k) -> std::optional<std::int64_t> {
            auto it = committed->find(k);
            return it == committed->end() ? std::nullopt : std::optional<std::int64_t>(it->second);
        };
        if (o->kafka.json) {
            nlohmann::json j;
            j["group"] = name;
            j["state"] = g->group_state;
            j["protocol_type"] = g->protocol_type;
            j["protocol"] = g->protocol_data;
            auto members = nlohmann::json::array();
            for (const auto& m : g->members) {
                auto as = nlohmann::json::array();
                for (const auto& k : assigned[m.member_id]) as.push_back({{"topic", k.first}, {"partition", k.second}});
                members.push_back({{"member_id", m.member_id},
                                   {"group_instance_id", m.group_instance_id ? nlohmann::json(*m.group_instance_id)
                                                                             : nlohmann::json(nullptr)},
                                   {"client_id", m.client_id},
                                   {"client_host", m.client_host},
                                   {"assignment", std::move(as)}});
            }
            j["members"] = std::move(members);
            auto offs = nlohmann::json::array();
            for (const auto& k : parts) {
                auto cm = find_committed(k);
                auto end = find_end(k);
                auto it = owner.find(k);
                offs.push_back({{"topic", k.first},
                                {"partition", k.second},
                                {"committed_offset", opt_json(cm)},
                                {"log_end_offset", opt_json(end)},
                                {"lag", end ? opt_json(lag(cm, *end)) : nlohmann::json(nullptr)},
                                {"member_id", it == owner.end() ? nlohmann::json(nullptr) : nlohmann::json(it->second)}});
            }
            j["offsets"] = std::move(offs);
            out.push_back(std::move(j));
            continue;
        }
        if (!first) std::puts("");
        first = false;
        std::printf("GROUP %s  STATE %s  PROTOCOL %s/%s  MEMBERS %zu\n", name.c_str(), g->group_state.c_str(),
                    g->protocol_type.empty() ? "-" : g->protocol_type.c_str(),
                    g->protocol_data.empty() ? "-" : g->protocol_data.c_str(), g->members.size());
        std::map<std::string, const kafka::DescribeGroupsResponse::DescribedGroupMember*> by_id;
        for (const auto& m : g->members) by_id[m.member_id] = &m;
        if (!parts.empty()) {
            std::puts("");
            table tb({"TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"});
            for (const auto& k : parts) {
                auto cm = find_committed(k);
                auto end = find_end(k);
                auto it = owner.find(k);
                const auto* m = it == owner.end() ? nullptr : by_id[it->second];
                tb.add({k.first, std::to_string(k.second), opt_num(cm), opt_num(end),
                        end ? opt_num(lag(cm, *end)) : "-", m ? m->member_id : "-", m ? m->client_host : "-",
                        m ? m->client_id : "-"});
            }
            tb.print();
        }
        if (!g->members.empty()) {
            std::puts("");
            table tm({"MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"});
            for (const auto& m : g->members) {
                std::string as;
                std::map<std::string, std::string> per_topic;
                for (const auto& k : assigned[m.member_id]) {
                    auto& s = per_topic[k.first];
                    s += (s.empty() ? "" : ",") + std::to_string(k.second);
                }
                for (const auto& [t, ps] : per_topic) as += (as.empty() ? "" : " ") + t + ":" + ps;
                tm.add({m.member_id, m.client_id, m.client_host, as.empty() ? "-" : as});
            }
            tm.print();
        }
    }
    if (o->kafka.json) print_json(out);
    co_return rc;
}

// ---- delete ---------------------------------------------------------------------------------

runtime::task<int> delete_groups(client::client& c, const group_options* o) {
    const std::string cmd = "skiff group delete";
    int rc = exit_ok;
    auto out = nlohmann::json::array();
    for (const auto& name : o->groups) {
        kafka::DeleteGroupsRequest req;
        req.groups_names.push_back(name);
        auto t = c.send(std::move(req), client::target::group_coordinator(name));
        auto r = co_await std::move(t);
        if (!r) {
            rc = report(cmd, r.error());
            out.push_back({{"group", name}, {"error", r.error().message}});
            continue;
        }
        kafka::error_code code = kafka::error_code::unknown_server_error;
        for (const auto& res : r->results)
            if (res.group_id == name) code = res.error_code;
        if (code != kafka::error_code::none) {
            rc = report(cmd, kafka_error_sentence("group '" + name + "'", code), exit_broker_error);
            out.push_back({{"group", name}, {"error", std::string(kafka::name(code))}});
            continue;
        }
        out.push_back({{"group", name}, {"error", nullptr}});
        if (!o->kafka.json) std::printf("deleted group %s\n", name.c_str());
    }
    if (o->kafka.json) print_json(out);
    co_return rc;
}

// ---- reset-offsets --------------------------------------------------------------------------

// "topic" or "topic:0,2,5".
result<std::pair<std::string, std::vector<std::int32_t>>, std::string> parse_topic_arg(const std::string& s) {
    auto colon = s.rfind(':');
    if (colon == std::string::npos) return std::make_pair(s, std::vector<std::int32_t>{});
    std::pair<std::string, std::vector<std::int32_t>> out(s.substr(0, colon), {});
    std::string_view rest(s);
    rest.remove_prefix(colon + 1);
    while (!rest.empty()) {
        auto comma = rest.find(',');
        std::string_view num = rest.substr(0, comma);
        std::int32_t p = -1;
        auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), p);
        if (num.empty() || ec != std::errc() || ptr != num.data() + num.size() || p < 0)
            return failure{"--topic " + s + ": expected TOPIC or TOPIC:PARTITION[,PARTITION...]"};
        out.second.push_back(p);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    if (out.first.empty() || out.second.empty())
        return failure{"--topic " + s + ": expected TOPIC or TOPIC:PARTITION[,PARTITION...]"};
    return out;
}

runtime::task<int> reset_offsets(client::client& c, const group_options* o) {
    const std::string cmd = "skiff group reset-offsets";
    const std::string& name = o->groups.front();
    auto dt = describe_one(c, name);
    auto g = co_await std::move(dt);
    if (!g) co_return report(cmd, g.error());
    auto ct = committed_offsets(c, name);
    auto committed = co_await std::move(ct);
    if (!committed) co_return report(cmd, committed.error());

    // The partitions to reset.
    std::set<tp_key> parts;
    if (o->all_topics) {
        for (const auto& [k, off] : *committed) parts.insert(k);
        if (parts.empty())
            co_return report(cmd, "group '" + name + "' has no committed offsets: name the topics with --topic",
                             exit_usage);
    }
    for (const auto& arg : o->topics) {
        auto parsed = parse_topic_arg(arg);
        if (!parsed) co_return report(cmd, parsed.error(), exit_usage);
        auto lt = describe_topic(c, parsed->first, false);
        auto layout = co_await std::move(lt);
        if (!layout) co_return report(cmd, layout.error());
        if (parsed->second.empty()) {
            for (const auto& [p, leader] : layout->leaders) parts.insert({parsed->first, p});
        } else {
            for (auto p : parsed->second) {
                if (!layout->leaders.count(p))
                    co_return report(cmd, "topic '" + parsed->first + "' has no partition " + std::to_string(p),
                                     exit_broker_error);
                parts.insert({parsed->first, p});
            }
        }
    }
    auto et = offsets_of(c, parts, earliest_timestamp);
    auto earliest = co_await std::move(et);
    if (!earliest) co_return report(cmd, earliest.error());
    auto lt = offsets_of(c, parts, latest_timestamp);
    auto latest = co_await std::move(lt);
    if (!latest) co_return report(cmd, latest.error());
    std::map<tp_key, std::int64_t> by_time;
    if (o->spec.mode == reset_mode::to_datetime) {
        auto tt = offsets_of(c, parts, o->spec.value);
        auto r = co_await std::move(tt);
        if (!r) co_return report(cmd, r.error());
        by_time = std::move(*r);
    }
    std::vector<partition_state> states;
    for (const auto& k : parts) {
        if (!earliest->count(k) || !latest->count(k))
            co_return report(cmd, "no offsets for " + tp_name(k) + " (unknown partition?)", exit_broker_error);
        partition_state s(k.first, k.second, earliest->at(k), latest->at(k));
        if (auto it = committed->find(k); it != committed->end()) s.committed = it->second;
        if (auto it = by_time.find(k); it != by_time.end() && it->second >= 0) s.offset_for_time = it->second;
        states.push_back(std::move(s));
    }
    auto plan = plan_reset(states, o->spec);
    if (!plan) co_return report(cmd, plan.error(), exit_usage);

    // --execute: one OffsetCommit from no member; Kafka takes it only from an Empty group.
    std::map<tp_key, kafka::error_code> commit_errors;
    if (o->execute) {
        kafka::OffsetCommitRequest req;
        req.group_id = name;
        req.generation_id_or_member_epoch = -1;
        req.member_id = "";
        req.group_instance_id.reset();
        req.retention_time_ms = -1;
        std::map<std::string, std::vector<const planned_reset*>> by_topic;
        for (const auto& r : *plan) by_topic[r.topic].push_back(&r);
        for (const auto& [topic, rs] : by_topic) {
            kafka::OffsetCommitRequest::OffsetCommitRequestTopic t;
            t.name = topic;
            for (const auto* r : rs) {
                kafka::OffsetCommitRequest::OffsetCommitRequestPartition p;
                p.partition_index = r->partition;
                p.committed_offset = r->target;
                p.committed_leader_epoch = -1;
                p.commit_timestamp = -1;
                p.committed_metadata = "";
                t.partitions.push_back(std::move(p));
            }
            req.topics.push_back(std::move(t));
        }
        auto t = c.send(std::move(req), client::target::group_coordinator(name));
        auto r = co_await std::move(t);
        if (!r) co_return report(cmd, r.error());
        for (const auto& rt : r->topics)
            for (const auto& rp : rt.partitions)
                if (rp.error_code != kafka::error_code::none) commit_errors[{rt.name, rp.partition_index}] = rp.error_code;
    }

    if (o->kafka.json) {
        nlohmann::json j;
        j["group"] = name;
        j["state"] = g->group_state;
        j["executed"] = o->execute && commit_errors.empty();
        auto arr = nlohmann::json::array();
        for (const auto& r : *plan) {
            nlohmann::json e = {{"topic", r.topic},
                                {"partition", r.partition},
                                {"current_offset", opt_json(r.current)},
                                {"new_offset", r.target}};
            if (auto it = commit_errors.find({r.topic, r.partition}); it != commit_errors.end())
                e["error"] = std::string(kafka::name(it->second));
            arr.push_back(std::move(e));
        }
        j["partitions"] = std::move(arr);
        print_json(j);
    } else {
        table tb({"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"});
        for (const auto& r : *plan)
            tb.add({name, r.topic, std::to_string(r.partition), opt_num(r.current), std::to_string(r.target)});
        tb.print();
    }
    if (!commit_errors.empty()) {
        kafka::error_code code = commit_errors.begin()->second;
        std::string why = kafka_error_sentence("the commit", code);
        if (code == kafka::error_code::unknown_member_id || code == kafka::error_code::rebalance_in_progress ||
            code == kafka::error_code::illegal_generation)
            why = "the group is not empty (state " + g->group_state +
                  "): stop its consumers first; the broker answered " + std::string(kafka::name(code));
        co_return report(cmd, "group '" + name + "': nothing committed: " + why, exit_broker_error);
    }
    if (!o->execute) {
        std::fprintf(stderr, "skiff group reset-offsets: dry run, nothing committed (add --execute to commit)%s\n",
                     g->group_state == "Empty" || g->group_state == "Dead"
                         ? ""
                         : ("; the group is " + g->group_state + ", and Kafka accepts a reset only while it is Empty")
                               .c_str());
    }
    co_return exit_ok;
}

} // namespace

int group_command(const std::vector<std::string>& args) {
    CLI::App app("Consumer groups: list, describe (members, assignments, lag), delete, reset offsets.", "skiff group");
    app.require_subcommand(1);
    app.footer(exit_codes_help);
    group_options o;

    auto* list = app.add_subcommand("list", "list the cluster's groups");
    add_kafka_options(*list, o.kafka);
    list->footer(exit_codes_help);

    auto* describe = app.add_subcommand("describe", "state, members, assignments, committed offsets and lag");
    add_kafka_options(*describe, o.kafka);
    describe->add_option("group", o.groups, "group id(s)")->required();
    describe->footer(exit_codes_help);

    auto* del = app.add_subcommand("delete", "delete groups without members, with their offsets");
    add_kafka_options(*del, o.kafka);
    del->add_option("group", o.groups, "group id(s)")->required();
    del->footer(exit_codes_help);

    auto* reset = app.add_subcommand("reset-offsets", "plan (and with --execute commit) new offsets for a group");
    add_kafka_options(*reset, o.kafka);
    reset->add_option("group", o.groups, "group id")->required()->expected(1);
    auto* topic_opt = reset->add_option("--topic", o.topics, "TOPIC or TOPIC:PARTITION[,PARTITION...] (repeatable)")
                          ->envname("SKIFF_RESET_TOPICS");
    auto* all_opt = reset->add_flag("--all-topics", o.all_topics, "every topic the group has offsets for")
                        ->envname("SKIFF_RESET_ALL_TOPICS");
    topic_opt->excludes(all_opt);
    auto* g_earliest =
        reset->add_flag("--to-earliest", o.to_earliest, "the log start offset")->envname("SKIFF_RESET_TO_EARLIEST");
    auto* g_latest =
        reset->add_flag("--to-latest", o.to_latest, "the log end offset")->envname("SKIFF_RESET_TO_LATEST");
    auto* g_offset = reset->add_option("--to-offset", o.to_offset, "this offset (clamped to the log's bounds)")
                         ->envname("SKIFF_RESET_TO_OFFSET");
    auto* g_time = reset->add_option("--to-datetime", o.to_datetime,
                                     "the first offset at or after a time: YYYY-MM-DDTHH:MM:SS[.sss][Z|+HH:MM] or Unix ms")
                       ->envname("SKIFF_RESET_TO_DATETIME");
    auto* g_shift = reset->add_option("--shift-by", o.shift_by, "the committed offset plus N (N may be negative)")
                        ->envname("SKIFF_RESET_SHIFT_BY");
    for (auto* a : {g_earliest, g_latest, g_offset, g_time, g_shift})
        for (auto* b : {g_earliest, g_latest, g_offset, g_time, g_shift})
            if (a != b) a->excludes(b);
    reset->add_flag("--execute", o.execute, "commit the plan (default: a dry run that only prints it)")
        ->envname("SKIFF_RESET_EXECUTE");
    reset->footer(exit_codes_help);

    if (auto code = parse_args(app, args)) return *code;

    std::function<runtime::task<int>(client::client&)> fn;
    std::string cmd;
    const group_options* op = &o;
    if (list->parsed()) {
        cmd = "skiff group list";
        fn = [op](client::client& c) { return list_groups(c, op); };
    } else if (describe->parsed()) {
        cmd = "skiff group describe";
        fn = [op](client::client& c) { return describe_groups(c, op); };
    } else if (del->parsed()) {
        cmd = "skiff group delete";
        fn = [op](client::client& c) { return delete_groups(c, op); };
    } else {
        cmd = "skiff group reset-offsets";
        if (o.topics.empty() && !o.all_topics) {
            std::fputs("skiff group reset-offsets: name the partitions with --topic or --all-topics\n", stderr);
            return exit_usage;
        }
        if (o.to_earliest) {
            o.spec = reset_spec(reset_mode::to_earliest, 0);
        } else if (o.to_latest) {
            o.spec = reset_spec(reset_mode::to_latest, 0);
        } else if (o.to_offset) {
            o.spec = reset_spec(reset_mode::to_offset, *o.to_offset);
        } else if (o.shift_by) {
            o.spec = reset_spec(reset_mode::shift_by, *o.shift_by);
        } else if (o.to_datetime) {
            std::string why;
            auto t = parse_time_ms(*o.to_datetime, &why);
            if (!t) {
                std::fprintf(stderr, "skiff group reset-offsets: --to-datetime %s: %s\n", o.to_datetime->c_str(),
                             why.c_str());
                return exit_usage;
            }
            o.spec = reset_spec(reset_mode::to_datetime, *t);
        } else {
            std::fputs("skiff group reset-offsets: choose one of --to-earliest, --to-latest, --to-offset, "
                       "--to-datetime, --shift-by\n",
                       stderr);
            return exit_usage;
        }
        fn = [op](client::client& c) { return reset_offsets(c, op); };
    }
    return run_with_client(o.kafka, cmd, fn);
}

} // namespace skiff::cli
