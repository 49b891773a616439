// Authorization: the decision every handler asks for, and DescribeAcls / CreateAcls /
// DeleteAcls (APIs 29-31) over the catalog's ACLs (acls.json), with the checks of Kafka's
// AclControlManager and the answers of KafkaApis (SECURITY_DISABLED without an authorizer).
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/acl/authorizer.hpp>
#include <skiff/acl/filter.hpp>
#include <skiff/acl/json.hpp>
#include <skiff/acl/validate.hpp>
#include <skiff/broker/kafka_errors.hpp>

#include <fmt/format.h>

#include <map>

namespace skiff::broker {

namespace {
std::string_view host_of(const conn_info& ci) {
    std::string_view h = ci.client_host;
    if (h.starts_with('/')) h.remove_prefix(1);
    return h;
}

int denied_index(acl::resource_type t) {
    switch (t) {
    case acl::resource_type::topic: return 0;
    case acl::resource_type::group: return 1;
    case acl::resource_type::cluster: return 2;
    default: return 3;
    }
}
} // namespace

bool authorized(const request_ctx& ctx, acl::operation op, acl::resource_type type, std::string_view name) {
    const auto& cfg = ctx.sh.cfg();
    if (!cfg.authorization) return true;
    const std::string& principal = ctx.ci.principal;
    if (cfg.super_users.contains(principal)) return true;
    const auto v = ctx.sh.cat->acls->explain(principal, host_of(ctx.ci), op, type, name);
    bool ok = v.result == acl::decision::allow;
    if (v.why == acl::rule::no_acl_found) ok = cfg.allow_everyone_if_no_acl_found;
    if (!ok) {
        ctx.sh.acl_denied[denied_index(type)].inc();
        log::debug("authorization: {} from {} denied {} on {} '{}' ({})", principal, host_of(ctx.ci), acl::name(op),
                   acl::name(type), name, acl::to_string(v.why));
    }
    return ok;
}

bool authorized_cluster(const request_ctx& ctx, acl::operation op) {
    return authorized(ctx, op, acl::resource_type::cluster, acl::cluster_name);
}

bool authorized_any(const request_ctx& ctx, acl::operation op, acl::resource_type type) {
    const auto& cfg = ctx.sh.cfg();
    if (!cfg.authorization || cfg.super_users.contains(ctx.ci.principal)) return true;
    if (cfg.allow_everyone_if_no_acl_found && ctx.sh.cat->acls->size() == 0) return true;
    return ctx.sh.cat->acls->any_allowed(ctx.ci.principal, host_of(ctx.ci), op, type) == acl::decision::allow;
}

namespace {
runtime::task<admin_outcome> change_acls_locked(shard& sh0, std::vector<acl::acl_binding> added,
                                                std::vector<acl::acl_binding> removed) {
    auto next = std::make_shared<acl::authorizer>(*sh0.cat->acls);
    bool changed = false;
    for (const auto& b : removed) changed = next->remove(b) || changed;
    for (const auto& b : added) {
        auto r = next->add(b);
        if (!r) co_return admin_outcome{static_cast<kafka::error_code>(r.error().kafka_code()), r.error().message};
        changed = *r || changed;
    }
    if (!changed) co_return admin_outcome{};
    auto put = co_await sh0.store->put(acls_key(sh0.cfg().ns), acl::acls_to_json_text(next->bindings()), false, {});
    if (!put) co_return admin_outcome{kerr::kafka_storage_error, put.error().message};
    auto snap = std::make_shared<catalog>(*sh0.cat);
    snap->acls = std::move(next);
    ++snap->version;
    log::info("ACLs changed: {} added, {} removed, {} in all", added.size(), removed.size(), snap->acls->size());
    co_await install_catalog(sh0, std::move(snap));
    co_return admin_outcome{};
}

acl::acl_binding_filter filter_of(std::int8_t type, const std::optional<std::string>& name, std::int8_t pattern,
                                  const std::optional<std::string>& principal, const std::optional<std::string>& host,
                                  std::int8_t op, std::int8_t perm) {
    acl::acl_binding_filter f;
    f.pattern.type = acl::resource_type_from_code(type);
    f.pattern.name = name;
    f.pattern.pattern = acl::pattern_type_from_code(pattern);
    f.entry.principal = principal;
    f.entry.host = host;
    f.entry.op = acl::operation_from_code(op);
    f.entry.perm = acl::permission_from_code(perm);
    return f;
}

constexpr const char* security_disabled_message = "No Authorizer is configured on the broker";
} // namespace

runtime::task<admin_outcome> change_acls(shard& sh0, std::vector<acl::acl_binding> added,
                                         std::vector<acl::acl_binding> removed) {
    auto lock = co_await sh0.catalog_lock.acquire(1);
    if (!lock) co_return admin_outcome{kerr::unknown_server_error, "the broker is shutting down"};
    if (!sh0.cfg().clustered()) co_return co_await change_acls_locked(sh0, std::move(added), std::move(removed));
    auto begun = co_await cluster_catalog_begin(sh0);
    if (begun.error != kerr::none) co_return begun;
    auto out = co_await change_acls_locked(sh0, std::move(added), std::move(removed));
    co_await cluster_catalog_end(sh0, out.error == kerr::none);
    co_return out;
}

kafka::DescribeAclsResponse describe_acls(const request_ctx& ctx, const kafka::DescribeAclsRequest& req) {
    kafka::DescribeAclsResponse r;
    r.error_message.reset();
    if (!ctx.sh.cfg().authorization) {
        r.error_code = kerr::security_disabled;
        r.error_message = security_disabled_message;
        return r;
    }
    if (!authorized_cluster(ctx, acl::operation::describe)) {
        r.error_code = kerr::cluster_authorization_failed;
        r.error_message = "Cluster authorization failed.";
        return r;
    }
    auto f = filter_of(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                       req.principal_filter, req.host_filter, req.operation, req.permission_type);
    if (auto v = acl::validate_filter(f); !v) {
        r.error_code = static_cast<kafka::error_code>(v.error().kafka_code());
        r.error_message = v.error().message;
        return r;
    }
    std::map<acl::resource_pattern, std::vector<acl::access_control_entry>> grouped;
    for (const auto& b : ctx.sh.cat->acls->acls(f)) grouped[b.pattern].push_back(b.entry);
    for (const auto& [pattern, entries] : grouped) {
        kafka::DescribeAclsResponse::DescribeAclsResource res;
        res.resource_type = acl::code(pattern.type);
        res.resource_name = pattern.name;
        res.pattern_type = acl::code(pattern.pattern);
        for (const auto& e : entries) {
            kafka::DescribeAclsResponse::AclDescription d;
            d.principal = e.principal;
            d.host = e.host;
            d.operation = acl::code(e.op);
            d.permission_type = acl::code(e.perm);
            res.acls.push_back(std::move(d));
        }
        r.resources.push_back(std::move(res));
    }
    return r;
}

runtime::task<kafka::CreateAclsResponse> create_acls(request_ctx ctx, kafka::CreateAclsRequest req) {
    kafka::CreateAclsResponse r;
    auto answer_all = [&](kafka::error_code code, const char* message) {
        for (std::size_t i = 0; i < req.creations.size(); ++i) {
            kafka::CreateAclsResponse::AclCreationResult res;
            res.error_code = code;
            res.error_message = message;
            r.results.push_back(std::move(res));
        }
    };
    if (!ctx.sh.cfg().authorization) {
        answer_all(kerr::security_disabled, security_disabled_message);
        co_return r;
    }
    if (!authorized_cluster(ctx, acl::operation::alter)) {
        answer_all(kerr::cluster_authorization_failed, "Cluster authorization failed.");
        co_return r;
    }
    std::vector<acl::acl_binding> valid;
    std::vector<std::size_t> valid_at;
    for (const auto& c : req.creations) {
        acl::acl_binding b;
        b.pattern.type = acl::resource_type_from_code(c.resource_type);
        b.pattern.name = c.resource_name;
        b.pattern.pattern = acl::pattern_type_from_code(c.resource_pattern_type);
        b.entry.principal = c.principal;
        b.entry.host = c.host;
        b.entry.op = acl::operation_from_code(c.operation);
        b.entry.perm = acl::permission_from_code(c.permission_type);
        kafka::CreateAclsResponse::AclCreationResult res;
        res.error_message.reset();
        if (auto v = acl::validate_new_binding(b); !v) {
            res.error_code = static_cast<kafka::error_code>(v.error().kafka_code());
            res.error_message = v.error().message;
        } else {
            valid_at.push_back(r.results.size());
            valid.push_back(std::move(b));
        }
        r.results.push_back(std::move(res));
    }
    if (valid.empty()) co_return r;
    std::vector<acl::acl_binding>* added = &valid;
    auto outcome = co_await on_core(ctx.sh, 0, [added](shard& sh0) {
        return change_acls(sh0, std::move(*added), {});
    });
    if (outcome.error != kerr::none) {
        for (auto i : valid_at) {
            r.results[i].error_code = outcome.error;
            r.results[i].error_message = outcome.message;
        }
    }
    co_return r;
}

runtime::task<kafka::DeleteAclsResponse> delete_acls(request_ctx ctx, kafka::DeleteAclsRequest req) {
    kafka::DeleteAclsResponse r;
    auto answer_all = [&](kafka::error_code code, const char* message) {
        for (std::size_t i = 0; i < req.filters.size(); ++i) {
            kafka::DeleteAclsResponse::DeleteAclsFilterResult res;
            res.error_code = code;
            res.error_message = message;
            r.filter_results.push_back(std::move(res));
        }
    };
    if (!ctx.sh.cfg().authorization) {
        answer_all(kerr::security_disabled, security_disabled_message);
        co_return r;
    }
    if (!authorized_cluster(ctx, acl::operation::alter)) {
        answer_all(kerr::cluster_authorization_failed, "Cluster authorization failed.");
        co_return r;
    }
    // Matched against the snapshot this core holds; the removal of exactly those bindings is
    // then stored by core 0 (a binding another request removed meanwhile is simply gone).
    std::vector<acl::acl_binding> removed;
    const auto& az = *ctx.sh.cat->acls;
    for (const auto& f : req.filters) {
        kafka::DeleteAclsResponse::DeleteAclsFilterResult res;
        res.error_message.reset();
        auto filter = filter_of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                                f.host_filter, f.operation, f.permission_type);
        if (auto v = acl::validate_filter(filter); !v) {
            res.error_code = static_cast<kafka::error_code>(v.error().kafka_code());
            res.error_message = v.error().message;
            r.filter_results.push_back(std::move(res));
            continue;
        }
        for (const auto& b : az.acls(filter)) {
            kafka::DeleteAclsResponse::DeleteAclsMatchingAcl m;
            m.error_message.reset();
            m.resource_type = acl::code(b.pattern.type);
            m.resource_name = b.pattern.name;
            m.pattern_type = acl::code(b.pattern.pattern);
            m.principal = b.entry.principal;
            m.host = b.entry.host;
            m.operation = acl::code(b.entry.op);
            m.permission_type = acl::code(b.entry.perm);
            res.matching_acls.push_back(std::move(m));
            removed.push_back(b);
        }
        r.filter_results.push_back(std::move(res));
    }
    if (removed.empty()) co_return r;
    std::vector<acl::acl_binding>* gone = &removed;
    auto outcome = co_await on_core(ctx.sh, 0, [gone](shard& sh0) { return change_acls(sh0, {}, std::move(*gone)); });
    if (outcome.error != kerr::none) {
        for (auto& fr : r.filter_results) {
            if (fr.error_code != kerr::none) continue;
            fr.error_code = outcome.error;
            fr.error_message = outcome.message;
            fr.matching_acls.clear();
        }
    }
    co_return r;
}

} // namespace skiff::broker
