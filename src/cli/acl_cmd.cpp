// `skiff acl add|rm|list`: ACLs through the Kafka API (CreateAcls, DeleteAcls, DescribeAcls),
// with kafka-acls.sh's vocabulary, so an operator can manage them without a Java install.
//
//   skiff acl add --allow User:alice --operation read --operation describe --topic orders
//   skiff acl add --deny User:bob --operation all --topic secrets- --prefixed
//   skiff acl list [--principal User:alice] [--topic orders]
//   skiff acl rm --allow User:alice --operation read --topic orders
//
// Names are parsed as Kafka parses them (case-insensitive, "Read", "READ" and "read" alike);
// the broker validates each binding and answers with Kafka's messages.
#include "commands.hpp"
#include "kafka_cli.hpp"

#include <skiff/acl/model.hpp>

#include <fmt/format.h>

#include <string>
#include <vector>

namespace skiff::cli {

namespace {

using nlohmann::json;

struct acl_options {
    std::vector<std::string> allow, deny; // principals
    std::vector<std::string> operations;
    std::string host = "*";
    std::string topic, group, transactional_id;
    bool cluster = false;
    bool prefixed = false;
    std::string principal; // list / rm filter
};

struct resource_sel {
    acl::resource_type type = acl::resource_type::any;
    std::optional<std::string> name;
};

// Exactly one resource for add/rm; at most one for list.
result<resource_sel, std::string> resource_of(const acl_options& o, bool required) {
    std::vector<resource_sel> picked;
    if (!o.topic.empty()) picked.push_back({acl::resource_type::topic, o.topic});
    if (!o.group.empty()) picked.push_back({acl::resource_type::group, o.group});
    if (!o.transactional_id.empty()) picked.push_back({acl::resource_type::transactional_id, o.transactional_id});
    if (o.cluster) picked.push_back({acl::resource_type::cluster, std::string(acl::cluster_name)});
    if (picked.size() > 1) return failure{std::string("give one of --topic, --group, --transactional-id, --cluster")};
    if (picked.empty()) {
        if (required) return failure{std::string("name the resource: --topic, --group, --transactional-id or --cluster")};
        return resource_sel{};
    }
    return picked.front();
}

result<std::vector<acl::operation>, std::string> operations_of(const acl_options& o, bool required) {
    std::vector<acl::operation> out;
    for (const auto& name : o.operations) {
        auto op = acl::parse_operation(name);
        if (op == acl::operation::unknown || op == acl::operation::any) {
            return failure{"unknown operation '" + name +
                           "' (All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                           "AlterConfigs, IdempotentWrite)"};
        }
        out.push_back(op);
    }
    if (out.empty() && required) return failure{std::string("give at least one --operation")};
    return out;
}

struct entry_sel {
    std::string principal;
    acl::permission perm;
};

std::vector<entry_sel> entries_of(const acl_options& o) {
    std::vector<entry_sel> out;
    for (const auto& p : o.allow) out.push_back({p, acl::permission::allow});
    for (const auto& p : o.deny) out.push_back({p, acl::permission::deny});
    return out;
}

// What add and rm name: one resource, operations, principals with their permission.
struct binding_set {
    resource_sel res;
    std::vector<acl::operation> ops;
    std::vector<entry_sel> entries;
};

result<binding_set, std::string> bindings_of(const acl_options& o) {
    auto res = resource_of(o, true);
    if (!res) return failure{res.error()};
    auto ops = operations_of(o, true);
    if (!ops) return failure{ops.error()};
    auto entries = entries_of(o);
    if (entries.empty()) return failure{std::string("give --allow PRINCIPAL or --deny PRINCIPAL")};
    return binding_set{*res, std::move(*ops), std::move(entries)};
}

runtime::task<int> add_acls(client::client& c, const kafka_options* ko, const acl_options* o) {
    const std::string cmd = "skiff acl add";
    auto want = bindings_of(*o);
    if (!want) co_return report(cmd, want.error(), exit_usage);
    const resource_sel* res = &want->res;
    kafka::CreateAclsRequest req;
    for (const auto& e : want->entries) {
        for (auto op : want->ops) {
            kafka::CreateAclsRequest::AclCreation cr;
            cr.resource_type = acl::code(res->type);
            cr.resource_name = *res->name;
            cr.resource_pattern_type = acl::code(o->prefixed ? acl::pattern_type::prefixed : acl::pattern_type::literal);
            cr.principal = e.principal;
            cr.host = o->host;
            cr.operation = acl::code(op);
            cr.permission_type = acl::code(e.perm);
            req.creations.push_back(std::move(cr));
        }
    }
    const auto sent = req.creations;
    auto st = c.send(std::move(req), client::target::controller());
    auto r = co_await std::move(st);
    if (!r) co_return report(cmd, r.error());
    int code = exit_ok;
    json out = json::array();
    for (std::size_t i = 0; i < r->results.size() && i < sent.size(); ++i) {
        const auto& res_i = r->results[i];
        const auto& b = sent[i];
        const std::string what = fmt::format("{} {} {} on {} '{}'", acl::name(acl::permission_from_code(b.permission_type)),
                                             b.principal, acl::name(acl::operation_from_code(b.operation)),
                                             acl::name(acl::resource_type_from_code(b.resource_type)), b.resource_name);
        const bool ok = res_i.error_code == kafka::error_code::none;
        if (!ok) {
            code = exit_broker_error;
            report(cmd, kafka_error_sentence(what, res_i.error_code, res_i.error_message), exit_broker_error);
        } else if (!ko->json) {
            std::printf("added: %s\n", what.c_str());
        }
        out.push_back({{"acl", what}, {"ok", ok}});
    }
    if (ko->json) print_json(out);
    co_return code;
}

// A DescribeAcls / DeleteAcls filter from the flags: unset parts match anything.
template <typename F>
result<void, std::string> fill_filter(F& f, const acl_options& o, const resource_sel& res,
                                      std::optional<acl::operation> op, std::optional<entry_sel> entry) {
    f.resource_type_filter = acl::code(res.type);
    f.resource_name_filter = res.name;
    f.pattern_type_filter =
        acl::code(res.name ? (o.prefixed ? acl::pattern_type::prefixed : acl::pattern_type::literal) : acl::pattern_type::any);
    if (entry) {
        f.principal_filter = entry->principal;
        f.permission_type = acl::code(entry->perm);
    } else {
        if (o.principal.empty()) {
            f.principal_filter.reset();
        } else {
            f.principal_filter = o.principal;
        }
        f.permission_type = acl::code(acl::permission::any);
    }
    if (o.host == "*" && !entry) {
        f.host_filter.reset();
    } else {
        f.host_filter = o.host;
    }
    f.operation = acl::code(op.value_or(acl::operation::any));
    return ok();
}

void print_binding(table& t, json& out, std::int8_t rtype, const std::string& rname, std::int8_t ptype,
                   const std::string& principal, const std::string& host, std::int8_t op, std::int8_t perm) {
    const std::string type = std::string(acl::name(acl::resource_type_from_code(rtype)));
    const std::string pattern = std::string(acl::name(acl::pattern_type_from_code(ptype)));
    const std::string oper = std::string(acl::name(acl::operation_from_code(op)));
    const std::string permission = std::string(acl::name(acl::permission_from_code(perm)));
    t.add({principal, permission, oper, type, rname, pattern, host});
    out.push_back({{"principal", principal}, {"permission", permission}, {"operation", oper}, {"resource_type", type},
                   {"resource_name", rname}, {"pattern_type", pattern}, {"host", host}});
}

runtime::task<int> list_acls(client::client& c, const kafka_options* ko, const acl_options* o) {
    const std::string cmd = "skiff acl list";
    auto res = resource_of(*o, false);
    if (!res) co_return report(cmd, res.error(), exit_usage);
    auto ops = operations_of(*o, false);
    if (!ops) co_return report(cmd, ops.error(), exit_usage);
    kafka::DescribeAclsRequest req;
    std::optional<acl::operation> op;
    if (!ops->empty()) op = ops->front();
    (void)fill_filter(req, *o, *res, op, std::nullopt);
    auto st = c.send(std::move(req), client::target::controller());
    auto r = co_await std::move(st);
    if (!r) co_return report(cmd, r.error());
    if (r->error_code != kafka::error_code::none) {
        co_return report(cmd, kafka_error_sentence("the ACLs", r->error_code, r->error_message), exit_broker_error);
    }
    table t({"PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "NAME", "PATTERN", "HOST"});
    json out = json::array();
    for (const auto& resource : r->resources) {
        for (const auto& a : resource.acls) {
            print_binding(t, out, resource.resource_type, resource.resource_name, resource.pattern_type, a.principal, a.host,
                          a.operation, a.permission_type);
        }
    }
    if (ko->json) {
        print_json(out);
    } else if (!t.empty()) {
        t.print();
    }
    co_return exit_ok;
}

runtime::task<int> remove_acls(client::client& c, const kafka_options* ko, const acl_options* o) {
    const std::string cmd = "skiff acl rm";
    auto want = bindings_of(*o);
    if (!want) co_return report(cmd, want.error(), exit_usage);
    kafka::DeleteAclsRequest req;
    for (const auto& e : want->entries) {
        for (auto op : want->ops) {
            kafka::DeleteAclsRequest::DeleteAclsFilter f;
            (void)fill_filter(f, *o, want->res, op, e);
            req.filters.push_back(std::move(f));
        }
    }
    auto st = c.send(std::move(req), client::target::controller());
    auto r = co_await std::move(st);
    if (!r) co_return report(cmd, r.error());
    int code = exit_ok;
    std::size_t removed = 0;
    table t({"PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "NAME", "PATTERN", "HOST"});
    json out = json::array();
    for (const auto& fr : r->filter_results) {
        if (fr.error_code != kafka::error_code::none) {
            code = exit_broker_error;
            report(cmd, kafka_error_sentence("the ACLs", fr.error_code, fr.error_message), exit_broker_error);
            continue;
        }
        for (const auto& m : fr.matching_acls) {
            ++removed;
            print_binding(t, out, m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                          m.permission_type);
        }
    }
    if (ko->json) {
        print_json(out);
    } else {
        if (!t.empty()) t.print();
        std::printf("removed %zu ACL%s\n", removed, removed == 1 ? "" : "s");
    }
    if (code == exit_ok && removed == 0) co_return report(cmd, "no ACL matched", exit_broker_error);
    co_return code;
}

void add_resource_options(CLI::App& app, acl_options& o) {
    app.add_option("--topic", o.topic, "a topic (with --prefixed: every topic starting with it; * for all)");
    app.add_option("--group", o.group, "a consumer group (with --prefixed: a prefix; * for all)");
    app.add_option("--transactional-id", o.transactional_id, "a transactional id");
    app.add_flag("--cluster", o.cluster, "the cluster (kafka-cluster)");
    app.add_flag("--prefixed", o.prefixed, "the name is a prefix (Kafka's PREFIXED pattern)");
}

} // namespace

int acl_command(const std::vector<std::string>& args) {
    CLI::App app("ACLs of the brokers (needs skiff serve --authorizer acl).", "skiff acl");
    app.footer(exit_codes_help);
    app.require_subcommand(1);
    kafka_options ko;
    acl_options o;
    auto* add = app.add_subcommand("add", "allow or deny principals operations on a resource");
    add->add_option("--allow", o.allow, "principal to allow, e.g. User:alice or User:* (repeatable)");
    add->add_option("--deny", o.deny, "principal to deny (repeatable)");
    add->add_option("--operation", o.operations, "Read, Write, Create, Delete, Alter, Describe, All, ... (repeatable)");
    add->add_option("--host", o.host, "client address the ACL applies to")->capture_default_str();
    add_resource_options(*add, o);
    add_kafka_options(*add, ko);
    auto* rm = app.add_subcommand("rm", "remove ACLs exactly as they were added");
    rm->add_option("--allow", o.allow, "principal of ALLOW ACLs to remove (repeatable)");
    rm->add_option("--deny", o.deny, "principal of DENY ACLs to remove (repeatable)");
    rm->add_option("--operation", o.operations, "their operation (repeatable)");
    rm->add_option("--host", o.host, "their host")->capture_default_str();
    add_resource_options(*rm, o);
    add_kafka_options(*rm, ko);
    auto* list = app.add_subcommand("list", "ACLs, all or those matching the filters");
    list->add_option("--principal", o.principal, "only this principal's");
    list->add_option("--operation", o.operations, "only this operation's")->expected(0, 1);
    add_resource_options(*list, o);
    add_kafka_options(*list, ko);
    if (auto code = parse_args(app, args)) return *code;
    if (*add) return run_with_client(ko, "skiff acl add", [&](client::client& c) { return add_acls(c, &ko, &o); });
    if (*rm) return run_with_client(ko, "skiff acl rm", [&](client::client& c) { return remove_acls(c, &ko, &o); });
    if (*list) return run_with_client(ko, "skiff acl list", [&](client::client& c) { return list_acls(c, &ko, &o); });
    return exit_usage;
}

} // namespace skiff::cli
