// The topics catalog: names, partition counts, ids and configs.
//
// Kept in the object store, one object per topic, `{ns}/skiff~meta/topics/{topic}.json` ('~'
// cannot occur in a topic name, so these keys never collide with a topic's segments). Core 0
// owns the catalog and is its only writer; every core holds an immutable snapshot, replaced
// as a whole after each change, so request handlers read it without locks.
#pragma once

#include <skiff/acl/authorizer.hpp>
#include <skiff/broker/client_quotas.hpp>
#include <skiff/broker/scram_users.hpp>
#include <skiff/core/result.hpp>
#include <skiff/kafka/protocol.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/object_store.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::broker {

struct topic_info {
    topic_info() = default;
    std::string name;
    kafka::uuid id;
    std::int32_t partitions = 0;
    std::map<std::string, std::string> configs; // only the ones set (CreateTopics, AlterConfigs)
    std::int64_t created_ms = 0;
};

struct catalog {
    std::map<std::string, topic_info, std::less<>> topics;
    // Client quotas set through the Kafka API ({ns}/skiff~meta/quotas.json), shared between
    // snapshots that did not change them.
    std::shared_ptr<const client_quota_table> quotas = std::make_shared<const client_quota_table>();
    // SCRAM users ({ns}/skiff~meta/users.json), likewise shared.
    std::shared_ptr<const scram_user_table> users = std::make_shared<const scram_user_table>();
    // ACLs ({ns}/skiff~meta/acls.json, CreateAcls/DeleteAcls), indexed for decisions. Its own
    // super users and allow-if-no-ACL are unused: the broker's configuration says those.
    std::shared_ptr<const acl::authorizer> acls = std::make_shared<const acl::authorizer>();
    std::uint64_t version = 0; // bumped on every change

    const topic_info* find(std::string_view name) const noexcept {
        auto it = topics.find(name);
        return it == topics.end() ? nullptr : &it->second;
    }
    const topic_info* find(const kafka::uuid& id) const noexcept;
};

// Kafka's rules: 1..249 characters of [A-Za-z0-9._-], not "." or "..". nullopt when valid,
// else the reason.
std::optional<std::string> invalid_topic_name(std::string_view name);

std::string topic_key(std::string_view ns, std::string_view topic);
std::string topics_prefix(std::string_view ns);
std::string acls_key(std::string_view ns); // {ns}/skiff~meta/acls.json

std::string encode_topic(const topic_info& t);
result<topic_info, std::string> decode_topic(std::string_view json);
kafka::uuid random_uuid();

// Lists and reads every topic object. A corrupt object is skipped with a warning naming the
// key (its segments stay in the store untouched); store errors fail the load.
runtime::task<result<catalog, storage::store_error>> load_catalog(storage::object_store& store, std::string ns,
                                                                  std::stop_token st);

} // namespace skiff::broker
