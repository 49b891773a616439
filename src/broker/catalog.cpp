#include <skiff/broker/catalog.hpp>
#include <skiff/acl/json.hpp>

#include <skiff/core/hex.hpp>
#include <skiff/core/log.hpp>
#include <skiff/core/uuid.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

namespace skiff::broker {

const topic_info* catalog::find(const kafka::uuid& id) const noexcept {
    if (id.is_zero()) return nullptr;
    for (auto& [_, t] : topics) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

std::optional<std::string> invalid_topic_name(std::string_view name) {
    if (name.empty()) return "the topic name is empty";
    if (name.size() > 249) return "the topic name is longer than 249 characters";
    if (name == "." || name == "..") return "the topic name cannot be '.' or '..'";
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '_' || c == '-';
        if (!ok) return "the topic name may only contain ASCII letters, digits, '.', '_' and '-'";
    }
    return std::nullopt;
}

std::string acls_key(std::string_view ns) { return std::string(ns) + "/skiff~meta/acls.json"; }

std::string topics_prefix(std::string_view ns) { return std::string(ns) + "/skiff~meta/topics/"; }
std::string topic_key(std::string_view ns, std::string_view topic) {
    return topics_prefix(ns) + std::string(topic) + ".json";
}

namespace {
std::string hex(const kafka::uuid& u) { return hex_encode(u.bytes); }
std::optional<kafka::uuid> unhex(std::string_view s) {
    if (s.size() != 32) return std::nullopt;
    kafka::uuid u;
    for (std::size_t i = 0; i < 16; ++i) {
        // Lower case only, as hex() writes it: a catalog object edited by hand is refused.
        const int a = hex_digit_value(s[2 * i], hex_case::lower);
        const int b = hex_digit_value(s[2 * i + 1], hex_case::lower);
        if (a < 0 || b < 0) return std::nullopt;
        u.bytes[i] = static_cast<std::uint8_t>(a << 4 | b);
    }
    return u;
}
} // namespace

kafka::uuid random_uuid() {
    // Topic ids only need to be unique, not secret; a per-thread engine seeded from the
    // kernel is enough. Version-4 bits as Kafka sets them.
    thread_local std::mt19937_64 rng{std::random_device{}()};
    kafka::uuid u;
    u.bytes = random_uuid_v4(rng); // never zero: the version bits are set
    return u;
}

// Format (version 1):
//   {"version":1,"name":"orders","id":"<32 hex>","partitions":4,"configs":{"retention.ms":"..."},
//    "created_ms":1700000000000}
std::string encode_topic(const topic_info& t) {
    nlohmann::json j;
    j["version"] = 1;
    j["name"] = t.name;
    j["id"] = hex(t.id);
    j["partitions"] = t.partitions;
    j["configs"] = t.configs;
    j["created_ms"] = t.created_ms;
    return j.dump();
}

result<topic_info, std::string> decode_topic(std::string_view text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return failure{std::string("not a JSON object")};
    try {
        if (j.value("version", 0) != 1) return failure{std::string("unsupported version")};
        topic_info t;
        t.name = j.at("name").get<std::string>();
        if (auto why = invalid_topic_name(t.name)) return failure{*why};
        auto id = unhex(j.at("id").get<std::string>());
        if (!id) return failure{std::string("bad topic id")};
        t.id = *id;
        t.partitions = j.at("partitions").get<std::int32_t>();
        if (t.partitions <= 0 || t.partitions > 1000000) return failure{std::string("bad partition count")};
        if (j.contains("configs")) t.configs = j.at("configs").get<std::map<std::string, std::string>>();
        t.created_ms = j.value("created_ms", std::int64_t{0});
        return t;
    } catch (const std::exception& e) {
        return failure{std::string("malformed topic object: ") + e.what()};
    }
}

runtime::task<result<catalog, storage::store_error>> load_catalog(storage::object_store& store, std::string ns,
                                                                  std::stop_token st) {
    catalog out;
    const std::string prefix = topics_prefix(ns);
    std::string token;
    std::vector<std::string> keys;
    do {
        auto page = co_await store.list(prefix, "", token, 1000, st);
        if (!page) co_return failure{page.error()};
        for (auto& o : page->objects) {
            if (o.key.size() > prefix.size() + 5 && o.key.ends_with(".json")) keys.push_back(o.key);
        }
        token = page->next_token;
    } while (!token.empty());
    for (auto& key : keys) {
        auto got = co_await store.get(key, std::nullopt, st);
        if (!got) {
            if (got.error().code == storage::errc::not_found) continue; // deleted meanwhile
            co_return failure{got.error()};
        }
        auto t = decode_topic(got->data);
        if (!t) {
            log::warn("catalog: skipping {}: {}", key, t.error());
            continue;
        }
        if (topic_key(ns, t->name) != key) {
            log::warn("catalog: skipping {}: it names topic '{}'", key, t->name);
            continue;
        }
        out.topics.emplace(t->name, std::move(*t));
    }
    const std::string quotas_key = client_quotas_key(ns);
    auto quotas = co_await store.get(quotas_key, std::nullopt, st);
    if (quotas) {
        auto table = decode_client_quotas(quotas->data);
        if (table) {
            out.quotas = std::make_shared<const client_quota_table>(std::move(*table));
        } else {
            // The command-line quotas still apply; the next AlterClientQuotas rewrites the object.
            log::warn("catalog: ignoring the client quotas in {}: {}", quotas_key, table.error());
        }
    } else if (quotas.error().code != storage::errc::not_found) {
        co_return failure{quotas.error()};
    }
    const std::string users_key = scram_users_key(ns);
    auto users = co_await store.get(users_key, std::nullopt, st);
    if (users) {
        auto table = decode_scram_users(users->data);
        if (table) {
            out.users = std::make_shared<const scram_user_table>(std::move(*table));
        } else {
            // Nobody authenticates with SCRAM until an AlterUserScramCredentials rewrites it: the
            // safe failure for an authentication store (PLAINTEXT listeners keep working).
            log::error("catalog: ignoring the SCRAM users in {}: {}", users_key, table.error());
        }
    } else if (users.error().code != storage::errc::not_found) {
        co_return failure{users.error()};
    }
    const std::string acl_key = acls_key(ns);
    auto acls = co_await store.get(acl_key, std::nullopt, st);
    if (acls) {
        auto list = acl::acls_from_json_text(acls->data);
        auto az = std::make_shared<acl::authorizer>();
        if (!list) {
            // Fail closed: with authorization on, a store whose ACLs cannot be read denies
            // everything but super users until CreateAcls/DeleteAcls rewrite the object.
            log::error("catalog: ignoring the ACLs in {}: {}", acl_key, list.error());
        } else if (auto r = az->replace_all(*list); !r) {
            log::error("catalog: ignoring the ACLs in {}: {}", acl_key, r.error().message);
        } else {
            out.acls = std::move(az);
        }
    } else if (acls.error().code != storage::errc::not_found) {
        co_return failure{acls.error()};
    }
    out.version = 1;
    co_return out;
}

} // namespace skiff::broker
