// Partition ownership, restore-on-demand, and catalog changes (core 0) broadcast to every core.
#include "shard.hpp"
#include "ownership.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/broker/topic_configs.hpp>
#include <skiff/core/hash.hpp>
#include <skiff/core/log.hpp>
#include <skiff/storage/manifest_format.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/when_all.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <charconv>
#include <set>

namespace skiff::broker {

namespace {
std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}
} // namespace

// Consecutive partitions of a topic land on consecutive cores, so one topic's load spreads
// over all of them; the topic hash staggers where each topic starts.
unsigned partition_owner(std::string_view topic, std::int32_t partition, unsigned cores) noexcept {
    if (cores <= 1) return 0;
    return static_cast<unsigned>((fnv1a64(topic) + static_cast<std::uint64_t>(partition)) % cores);
}

// By the group's cluster slot, so that in cluster mode one core holds a whole slot (and its
// coordinator); with a core count that divides the slot count this is fnv1a64(group) % cores.
unsigned group_owner(std::string_view group, unsigned cores) noexcept {
    if (cores <= 1) return 0;
    return static_cast<unsigned>(cluster::group_slot(group)) % cores;
}

namespace {
storage::log_config log_config_for(const shard& sh, std::string_view topic, const cluster::claim* claim) {
    storage::log_config c = sh.cfg().log;
    const auto& policy = policy_of(sh, topic);
    // cleanup.policy=compact alone: nothing leaves by age or size, only older versions of keys.
    c.retention_ms = policy.deletes ? policy.retention_ms : -1;
    c.retention_bytes = policy.deletes ? policy.retention_bytes : -1;
    c.compact = policy.compact;
    c.delete_retention_ms = policy.delete_retention_ms;
    c.min_compaction_lag_ms = policy.min_compaction_lag_ms;
    c.shared_memory = sh.produce_memory;
    c.background_io = sh.background_io;
    c.compaction_slots = sh.compaction_slots;
    c.shared_cache = sh.cache_budget;
    if (claim) {
        // docs/cluster.md, "Fencing": batches carry the owner's epoch; after an unclean
        // takeover the offsets continue past a gap the deposed owner's late uploads cannot cross.
        c.leader_epoch = claim->epoch;
        if (!claim->previous.clean) c.takeover_gap = sh.cfg().takeover_gap;
        else c.min_next_offset = std::max<std::int64_t>(claim->previous.next_offset, 0);
        // What this owner may have in flight if it is deposed stays inside the next one's gap.
        c.max_pending_records =
            std::min<std::size_t>(c.max_pending_records, static_cast<std::size_t>(sh.cfg().takeover_gap / 2));
    }
    return c;
}

storage::store_error not_owned(std::string_view topic, std::int32_t partition) {
    return storage::store_error(storage::errc::precondition_failed,
                                fmt::format("this broker does not own {}/{}", topic, partition));
}

// Deletes every object under `prefix` (a partition's or a topic's). Pages are re-listed from
// the start because deleting changes what follows.
runtime::task<result<void, storage::store_error>> remove_prefix(storage::object_store& store, std::string prefix,
                                                                std::stop_token st) {
    for (;;) {
        auto page = co_await store.list(prefix, "", "", 1000, st);
        if (!page) co_return failure{page.error()};
        if (page->objects.empty()) co_return ok();
        // One request per page on S3 (DeleteObjects), not one per key.
        std::vector<std::string> keys;
        keys.reserve(page->objects.size());
        for (auto& o : page->objects) keys.push_back(std::move(o.key));
        auto r = co_await store.remove_many(std::move(keys), st);
        if (!r) co_return failure{r.error()};
    }
}
} // namespace

runtime::task<result<partition_slot*, storage::store_error>> local_partition(shard& sh, std::string topic,
                                                                             std::int32_t partition) {
    auto key = std::pair{topic, partition};
    for (;;) {
        if (auto it = sh.parts.find(key); it != sh.parts.end()) co_return it->second.get();
        const topic_info* t = sh.cat->find(topic);
        if (!t || partition < 0 || partition >= t->partitions) co_return nullptr;
        if (sh.shared->stopping.load(std::memory_order_relaxed)) {
            co_return failure{storage::store_error(storage::errc::cancelled, "the broker is shutting down")};
        }
        // Single flight: the first caller restores, the others wait for it and look again.
        if (auto op = sh.opening.find(key); op != sh.opening.end()) {
            auto sem = op->second;
            auto u = co_await sem->acquire(1);
            continue;
        }
        // Cluster mode: only a partition this broker claimed, at the claim's epoch.
        const cluster::claim* claim = nullptr;
        if (sh.cfg().clustered()) {
            claim = claim_of(sh, topic, partition);
            if (!claim) co_return failure{not_owned(topic, partition)};
        }
        const std::int32_t epoch = claim ? claim->epoch : 0;
        auto sem = std::make_shared<runtime::semaphore>(0, "partition-open");
        sh.opening.emplace(key, sem);
        storage::partition_id id(topic, partition);
        auto opened = co_await storage::partition_log::open(*sh.store, *sh.budget, sh.cfg().ns, id, log_config_for(sh, topic, claim));
        sh.opening.erase(key);
        sem->broken(); // wakes every waiter; they look again
        if (!opened) {
            log::warn("partition {}/{}: restore failed: {}", topic, partition, opened.error().message);
            co_return failure{opened.error()};
        }
        if (claim) {
            // Released (or lost and claimed again) while restoring: this log is not ours to serve.
            const cluster::claim* now = claim_of(sh, topic, partition);
            if (!now || now->epoch != epoch) {
                co_await (*opened)->close();
                co_return failure{not_owned(topic, partition)};
            }
        }
        auto slot = std::make_unique<partition_slot>();
        slot->log = std::move(*opened);
        slot->epoch = epoch;
        slot->epoch_start = slot->log->next_offset();
        auto* raw = slot.get();
        // Another owner wrote where this log was about to: drop it, so the next request
        // restores the partition again (and sees what the other owner wrote), or finds it is
        // no longer ours.
        raw->log->on_fenced([shp = &sh, key, raw] { (void)shp->background.spawn(drop_fenced(shp, key, raw)); });
        raw->log->set_owner_check([shp = &sh, raw] { return may_change_bucket(*shp, *raw); });
        sh.parts.emplace(key, std::move(slot));
        co_return raw;
    }
}

runtime::task<void> drop_fenced(shard* sh, std::pair<std::string, std::int32_t> key, partition_slot* slot) {
    auto it = sh->parts.find(key);
    if (it == sh->parts.end() || it->second.get() != slot) co_return;
    log::warn("partition {}/{}: fenced by another writer; reopening it", key.first, key.second);
    auto owned = std::move(it->second);
    sh->parts.erase(it);
    owned->released = true;
    co_await owned->log->close();
    sh->retired.push_back(std::move(owned));
}

kafka::error_code leader_epoch_error(const partition_slot& slot, std::int32_t current) noexcept {
    if (current < 0) return kerr::none;
    if (current < slot.epoch) return kerr::fenced_leader_epoch;
    if (current > slot.epoch) return kerr::unknown_leader_epoch;
    return kerr::none;
}

runtime::task<owned_partition> find_owned(shard& sh, std::string topic, std::int32_t partition) {
    owned_partition out;
    if (auto key = std::pair{topic, partition}; sh.opening.count(key) || sh.pending_restore.count(key)) {
        out.error = kerr::leader_not_available;
        out.message = fmt::format("partition {}/{} is being restored", topic, partition);
        co_return out;
    }
    auto r = co_await local_partition(sh, std::move(topic), partition);
    if (!r) {
        // Shutting down or not (or no longer) the owner: the client refreshes its metadata.
        const bool elsewhere =
            r.error().code == storage::errc::cancelled || r.error().code == storage::errc::precondition_failed;
        out.error = elsewhere ? kerr::not_leader_or_follower : kerr::leader_not_available;
        out.message = r.error().message;
    } else if (!*r) {
        out.error = kerr::unknown_topic_or_partition;
    } else {
        out.slot = *r;
    }
    co_return out;
}

namespace {
runtime::task<void> open_quietly(shard* sh, std::string topic, std::int32_t p) {
    auto r = co_await local_partition(*sh, topic, p);
    (void)r; // logged inside; requests retry the restore
    sh->pending_restore.erase(std::pair{topic, p});
}

runtime::task<void> close_and_delete(shard* sh, std::unique_ptr<partition_slot> slot, std::string topic,
                                     std::int32_t p) {
    co_await slot->log->close();
    sh->retired.push_back(std::move(slot));
    auto prefix = storage::partition_prefix(sh->cfg().ns, storage::partition_id(topic, p));
    auto r = co_await remove_prefix(*sh->store, prefix, {});
    if (!r) log::warn("deleting {}: {}", prefix, r.error().message);
    // Its manifests too (written by the close above): a topic created again under this name
    // must not restore from them.
    auto meta = storage::manifest_prefix(sh->cfg().ns, storage::partition_id(topic, p));
    auto rm = co_await remove_prefix(*sh->store, meta, {});
    if (!rm) log::warn("deleting {}: {}", meta, rm.error().message);
}
} // namespace

topic_policy broker_policy(const broker_config& cfg) {
    topic_policy p;
    p.max_message_bytes = cfg.message_max_bytes;
    p.retention_ms = cfg.retention_ms;
    p.retention_bytes = cfg.retention_bytes;
    return p;
}

const topic_policy& policy_of(const shard& sh, std::string_view topic) {
    auto it = sh.policies.find(topic);
    if (it != sh.policies.end()) return it->second;
    static thread_local topic_policy fallback;
    fallback = broker_policy(sh.cfg());
    return fallback;
}

namespace {
// Once per snapshot (apply_catalog also re-runs for restore retries with the same one).
void compute_policies(shard& sh, const catalog& snap) {
    if (sh.policies_for == &snap) return;
    const topic_policy defaults = broker_policy(sh.cfg());
    sh.policies.clear();
    for (auto& [name, t] : snap.topics) {
        auto p = make_topic_policy(t.configs, defaults);
        if (!p) {
            // Stored before CreateTopics checked these values: produce as if unset.
            if (sh.core == 0) log::warn("topic {}: {}; using the broker's defaults", name, p.error());
            sh.policies.emplace(name, defaults);
        } else {
            sh.policies.emplace(name, std::move(*p));
        }
    }
    sh.policies_for = &snap;
}
} // namespace

runtime::task<void> apply_catalog(shard& sh, std::shared_ptr<const catalog> snap) {
    // Deleted topics take their groups' committed offsets with them, as in Kafka.
    std::set<std::string> gone;
    if (sh.cat) {
        for (auto& [name, t] : sh.cat->topics) {
            if (!snap->find(name)) gone.insert(name);
        }
    }
    sh.cat = snap;
    compute_policies(sh, *snap);
    if (!gone.empty()) {
        for (auto* gc : coordinators_of(sh)) {
            if (gc) gc->forget_topics(gone);
        }
    }
    // Client quotas: one meter for the broker, so one core installs them.
    if (sh.core == 0 && sh.shared->quotas) sh.shared->quotas->set_table(snap->quotas);
    // AlterConfigs: retention and compaction changes reach the open logs at once.
    for (auto& [key, slot] : sh.parts) {
        const auto& policy = policy_of(sh, key.first);
        slot->log->set_retention(policy.deletes ? policy.retention_ms : -1, policy.deletes ? policy.retention_bytes : -1);
        slot->log->set_compaction(policy.compact, policy.delete_retention_ms, policy.min_compaction_lag_ms);
    }
    // Partitions whose topic is gone (or shrank, which Kafka never does): close, delete data.
    std::vector<runtime::task<void>> work;
    for (auto it = sh.parts.begin(); it != sh.parts.end();) {
        const topic_info* t = snap->find(it->first.first);
        if (!t || it->first.second >= t->partitions) {
            work.push_back(close_and_delete(&sh, std::move(it->second), it->first.first, it->first.second));
            it = sh.parts.erase(it);
        } else {
            ++it;
        }
    }
    // Newly owned partitions: restore now, so the first request does not pay for it.
    for (auto& [name, t] : snap->topics) {
        for (std::int32_t p = 0; p < t.partitions; ++p) {
            if (partition_owner(name, p, sh.shared->cores) != sh.core) continue;
            if (sh.parts.count(std::pair{name, p})) continue;
            if (sh.cfg().clustered() && !claim_of(sh, name, p)) continue; // another broker's
            work.push_back(open_quietly(&sh, name, p));
            if (work.size() >= 64) {
                co_await runtime::when_all(std::move(work));
                work.clear();
            }
        }
    }
    if (!work.empty()) co_await runtime::when_all(std::move(work));
}

runtime::task<void> start_catalog(shard& sh, std::shared_ptr<const catalog> snap) {
    sh.cat = snap;
    compute_policies(sh, *snap);
    for (auto& [name, t] : snap->topics) {
        for (std::int32_t p = 0; p < t.partitions; ++p) {
            if (partition_owner(name, p, sh.shared->cores) != sh.core) continue;
            if (sh.cfg().clustered() && !claim_of(sh, name, p)) continue;
            sh.pending_restore.emplace(name, p);
        }
    }
    if (!sh.background.spawn(apply_catalog(sh, std::move(snap)))) sh.pending_restore.clear();
    co_return;
}

runtime::task<void> install_catalog(shard& sh0, std::shared_ptr<const catalog> snap) {
    for (unsigned c = 0; c < sh0.shared->cores; ++c) {
        shard* target = sh0.shared->shards[c];
        const std::shared_ptr<const catalog>* sp = &snap; // pointer capture: routing.hpp
        co_await runtime::submit_to(c, [target, sp] { return apply_catalog(*target, *sp); });
    }
}

namespace {
// Stores the topic's object, then installs the catalog with it on every core: a topic is
// visible only once it is durable.
runtime::task<admin_outcome> store_topic(shard& sh0, topic_info t) {
    const std::string body = encode_topic(t);
    auto put = co_await sh0.store->put(topic_key(sh0.cfg().ns, t.name), body, false, {});
    if (!put) co_return admin_outcome{kerr::kafka_storage_error, put.error().message};
    auto next = std::make_shared<catalog>(*sh0.cat);
    std::string name = t.name;
    next->topics[name] = std::move(t);
    ++next->version;
    co_await install_catalog(sh0, next);
    co_return admin_outcome{};
}
} // namespace

// Cluster mode: a catalog change holds etcd's catalog lock and starts from the stored catalog
// (another broker may have changed it); when it is done the catalog key is bumped so every
// broker reloads within a watch round trip.
runtime::task<admin_outcome> cluster_catalog_begin(shard& sh0) {
    auto& node = *sh0.shared->cluster->node;
    auto locked = co_await node.lock(node.key_names().catalog_lock(), std::chrono::seconds(10), {});
    if (!locked) {
        co_return admin_outcome{kerr::request_timed_out, "cannot take the cluster's catalog lock: " + locked.error().message};
    }
    auto cat = co_await load_catalog(*sh0.store, sh0.cfg().ns, {});
    if (!cat) {
        co_await node.unlock(node.key_names().catalog_lock());
        co_return admin_outcome{kerr::kafka_storage_error, cat.error().message};
    }
    auto snap = std::make_shared<catalog>(std::move(*cat));
    snap->version = sh0.cat->version + 1;
    co_await install_catalog(sh0, std::move(snap));
    co_return admin_outcome{};
}

runtime::task<void> cluster_catalog_end(shard& sh0, bool changed) {
    auto& node = *sh0.shared->cluster->node;
    if (changed) {
        auto r = co_await node.bump_catalog({});
        if (!r) log::warn("announcing a catalog change: {} (other brokers see it at their next reload)", r.error().message);
    }
    co_await node.unlock(node.key_names().catalog_lock());
}

namespace {
// What CreateTopics and AlterConfigs accept: what Kafka's LogConfig.validate accepts
// (topic_configs.hpp), and every value the broker reads must also make a policy.
admin_outcome check_topic_configs(const broker_config& cfg, const std::map<std::string, std::string>& configs) {
    if (auto why = invalid_topic_configs(configs)) return admin_outcome{kerr::invalid_config, *why};
    if (auto p = make_topic_policy(configs, broker_policy(cfg)); !p) return admin_outcome{kerr::invalid_config, p.error()};
    return admin_outcome{};
}

runtime::task<admin_outcome> create_topic_locked(shard& sh0, std::string name, std::int32_t partitions, std::map<std::string, std::string> configs, bool validate_only) {
    if (sh0.cat->find(name)) co_return admin_outcome{kerr::topic_already_exists, "topic '" + name + "' already exists"};
    if (validate_only) co_return admin_outcome{};

    // Leftovers of an earlier topic of this name (a delete interrupted by a crash) must not
    // reappear in the new one.
    auto cleaned = co_await remove_prefix(*sh0.store, sh0.cfg().ns + "/" + name + "/", {});
    if (!cleaned) co_return admin_outcome{kerr::kafka_storage_error, cleaned.error().message};
    // ... and so must its partition manifests (their offsets would restore the new log).
    auto meta_cleaned = co_await remove_prefix(*sh0.store, storage::manifest_topic_prefix(sh0.cfg().ns, name), {});
    if (!meta_cleaned) co_return admin_outcome{kerr::kafka_storage_error, meta_cleaned.error().message};

    topic_info t;
    t.name = name;
    t.id = random_uuid();
    t.partitions = partitions;
    t.configs = std::move(configs);
    t.created_ms = wall_ms();
    auto stored = co_await store_topic(sh0, std::move(t));
    if (stored.error == kerr::none) log::info("created topic {} with {} partitions", name, partitions);
    co_return stored;
}
} // namespace

runtime::task<admin_outcome> create_topic(shard& sh0, std::string name, std::int32_t partitions,
                                          std::map<std::string, std::string> configs, bool validate_only) {
    if (auto why = invalid_topic_name(name)) co_return admin_outcome{kerr::invalid_topic_exception, *why};
    if (partitions <= 0 || partitions > 10000) {
        co_return admin_outcome{kerr::invalid_partitions, "the partition count must be between 1 and 10000"};
    }
    if (auto bad = check_topic_configs(sh0.cfg(), configs); bad.error != kerr::none) co_return bad;
    auto lock = co_await sh0.catalog_lock.acquire(1);
    if (!lock) co_return admin_outcome{kerr::unknown_server_error, "the broker is shutting down"};
    if (!sh0.cfg().clustered()) co_return co_await create_topic_locked(sh0, std::move(name), partitions, std::move(configs), validate_only);
    auto begun = co_await cluster_catalog_begin(sh0);
    if (begun.error != kerr::none) co_return begun;
    auto out = co_await create_topic_locked(sh0, std::move(name), partitions, std::move(configs), validate_only);
    co_await cluster_catalog_end(sh0, out.error == kerr::none);
    co_return out;
}

namespace {
runtime::task<admin_outcome> delete_topic_locked(shard& sh0, std::string name) {
    if (!sh0.cat->find(name)) {
        co_return admin_outcome{kerr::unknown_topic_or_partition, "topic '" + name + "' does not exist"};
    }
    // The catalog object goes first: a crash after it leaves data that create_topic cleans,
    // never a topic that comes back.
    auto rm = co_await sh0.store->remove(topic_key(sh0.cfg().ns, name), {});
    if (!rm) co_return admin_outcome{kerr::kafka_storage_error, rm.error().message};
    auto next = std::make_shared<catalog>(*sh0.cat);
    next->topics.erase(name);
    ++next->version;
    co_await install_catalog(sh0, next);
    log::info("deleted topic {}", name);
    co_return admin_outcome{};
}
} // namespace

runtime::task<admin_outcome> delete_topic(shard& sh0, std::string name) {
    auto lock = co_await sh0.catalog_lock.acquire(1);
    if (!lock) co_return admin_outcome{kerr::unknown_server_error, "the broker is shutting down"};
    if (!sh0.cfg().clustered()) co_return co_await delete_topic_locked(sh0, std::move(name));
    auto begun = co_await cluster_catalog_begin(sh0);
    if (begun.error != kerr::none) co_return begun;
    auto out = co_await delete_topic_locked(sh0, std::move(name));
    co_await cluster_catalog_end(sh0, out.error == kerr::none);
    co_return out;
}

namespace {
runtime::task<admin_outcome> create_partitions_locked(shard& sh0, std::string name, std::int32_t count, bool validate_only) {
    const topic_info* cur = sh0.cat->find(name);
    if (!cur) co_return admin_outcome{kerr::unknown_topic_or_partition, "topic '" + name + "' does not exist"};
    if (count <= cur->partitions) {
        co_return admin_outcome{kerr::invalid_partitions,
                                "topic '" + name + "' already has " + std::to_string(cur->partitions) +
                                    " partitions; the new count must be larger"};
    }
    if (count > 10000) co_return admin_outcome{kerr::invalid_partitions, "at most 10000 partitions"};
    if (validate_only) co_return admin_outcome{};
    topic_info t = *cur;
    // New partitions start empty even if a crashed earlier topic left data under their keys.
    for (std::int32_t p = t.partitions; p < count; ++p) {
        auto prefix = storage::partition_prefix(sh0.cfg().ns, storage::partition_id(name, p));
        auto cleaned = co_await remove_prefix(*sh0.store, prefix, {});
        if (!cleaned) co_return admin_outcome{kerr::kafka_storage_error, cleaned.error().message};
        auto meta = storage::manifest_prefix(sh0.cfg().ns, storage::partition_id(name, p));
        auto meta_cleaned = co_await remove_prefix(*sh0.store, meta, {});
        if (!meta_cleaned) co_return admin_outcome{kerr::kafka_storage_error, meta_cleaned.error().message};
    }
    t.partitions = count;
    auto stored = co_await store_topic(sh0, std::move(t));
    if (stored.error == kerr::none) log::info("topic {} now has {} partitions", name, count);
    co_return stored;
}
} // namespace

runtime::task<admin_outcome> create_partitions(shard& sh0, std::string name, std::int32_t count, bool validate_only) {
    auto lock = co_await sh0.catalog_lock.acquire(1);
    if (!lock) co_return admin_outcome{kerr::unknown_server_error, "the broker is shutting down"};
    if (!sh0.cfg().clustered()) co_return co_await create_partitions_locked(sh0, std::move(name), count, validate_only);
    auto begun = co_await cluster_catalog_begin(sh0);
    if (begun.error != kerr::none) co_return begun;
    auto out = co_await create_partitions_locked(sh0, std::move(name), count, validate_only);
    co_await cluster_catalog_end(sh0, out.error == kerr::none);
    co_return out;
}

namespace {
std::vector<std::string> list_items(std::string_view value) {
    std::vector<std::string> out;
    while (!value.empty()) {
        const auto comma = value.find(',');
        std::string_view item = value.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        if (!item.empty()) out.emplace_back(item);
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return out;
}

// The topic's configs after `changes`, or the INVALID_CONFIG that stops them. APPEND and
// SUBTRACT start from the default when the topic does not set the config, as Kafka does
// (appending "compact" to an unset cleanup.policy gives "delete,compact").
result<std::map<std::string, std::string>, admin_outcome> apply_config_changes(
    const std::map<std::string, std::string>& current, const std::vector<config_change>& changes, bool replace) {
    std::map<std::string, std::string> next;
    if (!replace) next = current;
    for (auto& c : changes) {
        const topic_config_def* def = find_topic_config(c.name);
        if (!def) return failure{admin_outcome{kerr::invalid_config, "Unknown topic config name: " + c.name}};
        switch (c.operation) {
        case config_change::op::set: next[c.name] = c.value; break;
        case config_change::op::remove: next.erase(c.name); break;
        case config_change::op::append:
        case config_change::op::subtract: {
            if (def->type != topic_config_type::list) {
                // ConfigAdminManager.prepareIncrementalConfigs' words.
                return failure{admin_outcome{kerr::invalid_config,
                                             std::string("Config value ") +
                                                 (c.operation == config_change::op::append ? "append" : "subtract") +
                                                 " is not allowed for config key: " + c.name}};
            }
            std::string base;
            if (auto it = next.find(c.name); it != next.end()) {
                base = it->second;
            } else {
                base = std::string(def->default_value);
            }
            auto items = list_items(base);
            for (auto& v : list_items(c.value)) {
                auto at = std::find(items.begin(), items.end(), v);
                if (c.operation == config_change::op::append && at == items.end()) items.push_back(v);
                if (c.operation == config_change::op::subtract && at != items.end()) items.erase(at);
            }
            std::string joined;
            for (auto& v : items) joined += (joined.empty() ? "" : ",") + v;
            next[c.name] = std::move(joined);
            break;
        }
        }
    }
    return next;
}

runtime::task<admin_outcome> alter_topic_configs_locked(shard& sh0, std::string name, std::vector<config_change> changes,
                                                        bool replace, bool validate_only) {
    const topic_info* cur = sh0.cat->find(name);
    if (!cur) co_return admin_outcome{kerr::unknown_topic_or_partition, "topic '" + name + "' does not exist"};
    auto next = apply_config_changes(cur->configs, changes, replace);
    if (!next) co_return next.error();
    if (auto bad = check_topic_configs(sh0.cfg(), *next); bad.error != kerr::none) co_return bad;
    // Nothing to store: no PUT, and no catalog version for the other brokers to reload.
    if (validate_only || *next == cur->configs) co_return admin_outcome{};
    topic_info t = *cur;
    t.configs = std::move(*next);
    std::string described;
    for (auto& [k, v] : t.configs) described += (described.empty() ? "" : ", ") + k + "=" + v;
    auto stored = co_await store_topic(sh0, std::move(t));
    if (stored.error == kerr::none) {
        log::info("topic {}: configs now {}", name, described.empty() ? std::string("the defaults") : described);
    }
    co_return stored;
}
} // namespace

runtime::task<admin_outcome> alter_topic_configs(shard& sh0, std::string name, std::vector<config_change> changes,
                                                 bool replace, bool validate_only) {
    auto lock = co_await sh0.catalog_lock.acquire(1);
    if (!lock) co_return admin_outcome{kerr::unknown_server_error, "the broker is shutting down"};
    if (!sh0.cfg().clustered()) {
        co_return co_await alter_topic_configs_locked(sh0, std::move(name), std::move(changes), replace, validate_only);
    }
    // Under the cluster's lock and from the stored catalog: another broker's change of the same
    // topic is not lost, and IncrementalAlterConfigs applies to what is really stored.
    auto begun = co_await cluster_catalog_begin(sh0);
    if (begun.error != kerr::none) co_return begun;
    auto out = co_await alter_topic_configs_locked(sh0, std::move(name), std::move(changes), replace, validate_only);
    co_await cluster_catalog_end(sh0, out.error == kerr::none && !validate_only);
    co_return out;
}

namespace {
runtime::task<admin_outcome> change_client_quotas_locked(shard& sh0, std::vector<quota_change> changes,
                                                         bool validate_only) {
    auto next = std::make_shared<client_quota_table>(*sh0.cat->quotas);
    for (auto& c : changes) {
        auto& values = next->entries[c.entity];
        if (c.value) {
            values[c.key] = *c.value;
        } else {
            values.erase(c.key);
        }
        if (values.empty()) next->entries.erase(c.entity);
    }
    if (validate_only || *next == *sh0.cat->quotas) co_return admin_outcome{};
    auto put = co_await sh0.store->put(client_quotas_key(sh0.cfg().ns), encode_client_quotas(*next), false, {});
    if (!put) co_return admin_outcome{kerr::kafka_storage_error, put.error().message};
    auto snap = std::make_shared<catalog>(*sh0.cat);
    snap->quotas = std::move(next);
    ++snap->version;
    log::info("client quotas changed: {} entit{} with quotas", snap->quotas->entries.size(),
              snap->quotas->entries.size() == 1 ? "y" : "ies");
    co_await install_catalog(sh0, std::move(snap));
    co_return admin_outcome{};
}
} // namespace

runtime::task<admin_outcome> change_client_quotas(shard& sh0, std::vector<quota_change> changes, bool validate_only) {
    auto lock = co_await sh0.catalog_lock.acquire(1);
    if (!lock) co_return admin_outcome{kerr::unknown_server_error, "the broker is shutting down"};
    if (!sh0.cfg().clustered()) co_return co_await change_client_quotas_locked(sh0, std::move(changes), validate_only);
    // From the stored catalog under the cluster's lock: another broker's change is not lost.
    auto begun = co_await cluster_catalog_begin(sh0);
    if (begun.error != kerr::none) co_return begun;
    auto out = co_await change_client_quotas_locked(sh0, std::move(changes), validate_only);
    co_await cluster_catalog_end(sh0, out.error == kerr::none && !validate_only);
    co_return out;
}

// Producer ids are handed out from blocks; the end of the current block is stored before any
// id of it is used, so a restarted broker never reissues one. Format:
//   {"version":1,"next_block_start":12000}
namespace {
// Reads the stored end of the last block handed out and stores the end of a new one; returns
// the new block's start.
runtime::task<result<std::int64_t, storage::store_error>> store_producer_block(shard& sh0, std::int64_t block) {
    const std::string key = sh0.cfg().ns + "/skiff~meta/producer-ids.json";
    std::int64_t start = 0;
    auto got = co_await sh0.store->get(key, std::nullopt, {});
    if (got) {
        auto j = nlohmann::json::parse(got->data, nullptr, false);
        if (j.is_object() && j.contains("next_block_start") && j["next_block_start"].is_number_integer()) {
            start = j["next_block_start"].get<std::int64_t>();
        } else {
            co_return failure{storage::store_error(storage::errc::corrupt, key + " is not a producer-id block")};
        }
    } else if (got.error().code != storage::errc::not_found) {
        co_return failure{got.error()};
    }
    start = std::max(start, sh0.producer_id_limit);
    nlohmann::json next = {{"version", 1}, {"next_block_start", start + block}};
    const std::string body = next.dump();
    auto put = co_await sh0.store->put(key, body, false, {});
    if (!put) co_return failure{put.error()};
    co_return start;
}
} // namespace

runtime::task<result<std::int64_t, storage::store_error>> allocate_producer_id(shard& sh0) {
    constexpr std::int64_t block = 1000;
    auto lock = co_await sh0.catalog_lock.acquire(1);
    if (!lock) co_return failure{storage::store_error(storage::errc::cancelled, "the broker is shutting down")};
    if (sh0.next_producer_id >= sh0.producer_id_limit) {
        result<std::int64_t, storage::store_error> start = 0;
        if (sh0.cfg().clustered()) {
            // Brokers share the stored block end: the read-modify-write holds the cluster's lock.
            auto& node = *sh0.shared->cluster->node;
            auto held = co_await node.lock(node.key_names().catalog_lock(), std::chrono::seconds(10), {});
            if (!held) co_return failure{storage::store_error(storage::errc::transient, held.error().message)};
            start = co_await store_producer_block(sh0, block);
            co_await node.unlock(node.key_names().catalog_lock());
        } else {
            start = co_await store_producer_block(sh0, block);
        }
        if (!start) co_return failure{start.error()};
        sh0.next_producer_id = *start;
        sh0.producer_id_limit = *start + block;
    }
    co_return sh0.next_producer_id++;
}

} // namespace skiff::broker
