// DescribeClientQuotas (API 48) and AlterClientQuotas (API 49), answered as Kafka's KRaft
// controller answers them (ClientQuotasImage.describe, ClientQuotaControlManager): the same
// entity types, filters, validation and messages. skiff enforces producer_byte_rate and
// consumer_byte_rate; Kafka's other keys (request_percentage, controller_mutation_rate, and
// connection_creation_rate of ip entities) are refused with INVALID_REQUEST rather than stored
// and silently not applied.
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/client_quotas.hpp>
#include <skiff/broker/kafka_errors.hpp>

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <set>

namespace skiff::broker {

namespace {

constexpr std::string_view user_type = "user";
constexpr std::string_view client_id_type = "client-id";
constexpr std::string_view ip_type = "ip";

struct filter {
    // type -> exact name (nullopt: the default entity)
    std::map<std::string, std::optional<std::string>, std::less<>> exact;
    std::set<std::string, std::less<>> specified;
};

const quota_entity_part* part_of(const quota_entity& e, std::string_view type) {
    if (type == user_type) return &e.user;
    if (type == client_id_type) return &e.client_id;
    return nullptr;
}

bool matches(const quota_entity& e, const filter& f, bool strict) {
    const std::size_t types = (e.user.present ? 1 : 0) + (e.client_id.present ? 1 : 0);
    if (strict && types != f.exact.size() + f.specified.size()) return false;
    for (const auto& [type, name] : f.exact) {
        const quota_entity_part* p = part_of(e, type);
        if (!p || !p->present) return false;
        if (name ? (p->is_default || p->name != *name) : !p->is_default) return false;
    }
    for (const auto& type : f.specified) {
        const quota_entity_part* p = part_of(e, type);
        if (!p || !p->present) return false;
    }
    return true;
}

template <typename EntityData>
void add_entity_parts(std::vector<EntityData>& out, const quota_entity& e) {
    auto add = [&](std::string_view type, const quota_entity_part& p) {
        if (!p.present) return;
        EntityData d;
        d.entity_type = std::string(type);
        if (p.is_default) {
            d.entity_name.reset(); // the default entity: Kafka's null name
        } else {
            d.entity_name.emplace(p.name);
        }
        out.push_back(std::move(d));
    };
    add(user_type, e.user);
    add(client_id_type, e.client_id);
}

} // namespace

kafka::DescribeClientQuotasResponse describe_client_quotas(const shard& sh, const kafka::DescribeClientQuotasRequest& req) {
    kafka::DescribeClientQuotasResponse r;
    r.error_message = std::nullopt; // Kafka sends null on success
    auto refuse = [&](kafka::error_code code, std::string message) {
        r.error_code = code;
        r.error_message = std::move(message);
        r.entries = std::nullopt;
        return r;
    };
    filter f;
    for (const auto& c : req.components) {
        if (c.entity_type.empty()) return refuse(kerr::invalid_request, "Invalid empty entity type.");
        if (f.exact.count(c.entity_type) || f.specified.count(c.entity_type)) {
            return refuse(kerr::invalid_request,
                          "Entity type " + c.entity_type + " cannot appear more than once in the filter.");
        }
        if (c.entity_type != user_type && c.entity_type != client_id_type && c.entity_type != ip_type) {
            return refuse(kerr::unsupported_version, "Unsupported entity type " + c.entity_type);
        }
        switch (c.match_type) {
        case 0:
            if (!c.match) return refuse(kerr::invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null.");
            f.exact[c.entity_type] = *c.match;
            break;
        case 1:
            if (c.match) {
                return refuse(kerr::invalid_request, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.");
            }
            f.exact[c.entity_type] = std::nullopt;
            break;
        case 2:
            if (c.match) {
                return refuse(kerr::invalid_request,
                              "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.");
            }
            f.specified.insert(c.entity_type);
            break;
        default: return refuse(kerr::invalid_request, fmt::format("Unknown match type {}", c.match_type));
        }
    }
    const bool ip = f.exact.count(ip_type) || f.specified.count(ip_type);
    const bool other = f.exact.count(user_type) || f.specified.count(user_type) || f.exact.count(client_id_type) ||
                       f.specified.count(client_id_type);
    if (ip && other) {
        return refuse(kerr::invalid_request, "Invalid entity filter component combination. IP filter component should "
                                             "not be used with user or clientId filter component.");
    }
    r.entries.emplace();
    for (const auto& [entity, values] : sh.cat->quotas->entries) {
        if (!matches(entity, f, req.strict)) continue;
        kafka::DescribeClientQuotasResponse::EntryData e;
        add_entity_parts(e.entity, entity);
        for (const auto& [k, v] : values) {
            kafka::DescribeClientQuotasResponse::ValueData vd;
            vd.key = k;
            vd.value = v;
            e.values.push_back(std::move(vd));
        }
        r.entries->push_back(std::move(e));
    }
    return r;
}

namespace {

// Kafka's checks of one entry (validateEntity, configKeysForEntityType, validateQuotaKeyValue),
// then skiff's: only the enforced keys. The changes it asks for, or the error.
struct entry_check {
    kafka::error_code error = kerr::none;
    std::string message;
    std::vector<quota_change> changes;
};

entry_check check_entry(const kafka::AlterClientQuotasRequest::EntryData& entry) {
    entry_check out;
    auto fail = [&](std::string message) {
        out.error = kerr::invalid_request;
        out.message = std::move(message);
        out.changes.clear();
        return out;
    };
    if (entry.entity.empty()) return fail("Invalid empty client quota entity");
    quota_entity e;
    bool has_ip = false;
    std::set<std::string> seen;
    for (const auto& part : entry.entity) {
        if (!seen.insert(part.entity_type).second) {
            return fail("Invalid client quota entity, duplicate entity entry " + part.entity_type);
        }
        quota_entity_part p = part.entity_name ? quota_entity_part::named(*part.entity_name)
                                               : quota_entity_part::default_entity();
        if (part.entity_type == user_type) {
            e.user = p;
        } else if (part.entity_type == client_id_type) {
            e.client_id = p;
        } else if (part.entity_type == ip_type) {
            has_ip = true;
        } else {
            return fail("Unhandled client quota entity type: " + part.entity_type);
        }
        if (part.entity_name && part.entity_name->empty()) return fail("Empty " + part.entity_type + " not supported");
    }
    if (has_ip && (e.user.present || e.client_id.present)) {
        return fail("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId");
    }
    for (const auto& op : entry.ops) {
        if (op.remove) {
            // An ip entity can hold nothing here (its key is refused below): nothing to remove.
            if (!has_ip) out.changes.push_back({e, op.key, std::nullopt});
            continue;
        }
        const bool long_key = op.key == producer_byte_rate || op.key == consumer_byte_rate;
        const bool double_key = op.key == "request_percentage" || op.key == "controller_mutation_rate";
        const bool ip_key = op.key == "connection_creation_rate";
        if (has_ip ? !ip_key : !(long_key || double_key)) return fail("Invalid configuration key " + op.key);
        if (!(op.value > 0.0)) return fail("Quota " + op.key + " must be greater than 0");
        if (long_key || ip_key) {
            const double limit = ip_key ? static_cast<double>(std::numeric_limits<std::int32_t>::max())
                                        : static_cast<double>(std::numeric_limits<std::int64_t>::max());
            if (op.value > limit) {
                return fail("Proposed value for " + op.key + (ip_key ? " is too large for an INT." : " is too large for a LONG."));
            }
            if (std::abs(std::fmod(op.value, 1.0)) > 1e-6) return fail(op.key + " cannot be a fractional value.");
        }
        if (!long_key) {
            return fail(op.key + " is not enforced by skiff; only producer_byte_rate and consumer_byte_rate are");
        }
        out.changes.push_back({e, op.key, op.value});
    }
    return out;
}

} // namespace

runtime::task<kafka::AlterClientQuotasResponse> alter_client_quotas(shard& sh, kafka::AlterClientQuotasRequest req) {
    kafka::AlterClientQuotasResponse r;
    std::vector<quota_change> changes;
    std::vector<std::size_t> applied; // response entries that depend on the store write
    for (const auto& entry : req.entries) {
        auto check = check_entry(entry);
        kafka::AlterClientQuotasResponse::EntryData out;
        for (const auto& part : entry.entity) {
            kafka::AlterClientQuotasResponse::EntityData d;
            d.entity_type = part.entity_type;
            d.entity_name = part.entity_name;
            out.entity.push_back(std::move(d));
        }
        out.error_code = check.error;
        out.error_message = std::nullopt;
        if (check.error != kerr::none) {
            out.error_message = check.message;
        } else {
            applied.push_back(r.entries.size());
            for (auto& c : check.changes) changes.push_back(std::move(c));
        }
        r.entries.push_back(std::move(out));
    }
    if (changes.empty()) co_return r;
    const bool validate_only = req.validate_only;
    std::vector<quota_change>* cs = &changes;
    auto outcome = co_await on_core(sh, 0, [cs, validate_only](shard& sh0) {
        return change_client_quotas(sh0, std::move(*cs), validate_only);
    });
    if (outcome.error != kerr::none) {
        for (std::size_t i : applied) {
            r.entries[i].error_code = outcome.error;
            r.entries[i].error_message = outcome.message;
        }
    }
    co_return r;
}

} // namespace skiff::broker
