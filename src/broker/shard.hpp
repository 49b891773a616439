// The per-core state of a running broker, and the routing rules between cores. Private to the
// broker module.
#pragma once

#include "produce_validation.hpp"
#include "txn/coordinator.hpp"
#include "txn/partition_txns.hpp"

#include <skiff/broker/catalog.hpp>
#include <skiff/broker/config.hpp>
#include <skiff/broker/group_coordinator.hpp>
#include <skiff/broker/kafka_errors.hpp>
#include <skiff/broker/producer_state.hpp>
#include <skiff/client/connection.hpp>
#include <skiff/cluster/node.hpp>
#include <skiff/cluster/view.hpp>
#include <skiff/kafka/frame.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/sasl/credential.hpp>
#include <skiff/tls/context.hpp>
#include <skiff/storage/cache_budget.hpp>
#include <skiff/storage/hedge.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/object_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/put_rate.hpp>
#include <skiff/storage/record_batch.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace skiff::broker {

// Which core owns a partition / a group. Stable for the life of the process (a restart may
// use another core count: ownership is not persisted).
unsigned partition_owner(std::string_view topic, std::int32_t partition, unsigned cores) noexcept;
unsigned group_owner(std::string_view group, unsigned cores) noexcept;

struct partition_slot {
    std::unique_ptr<storage::partition_log> log;
    producer_table producers;
    // The producer table is rebuilt from the log's tail before the first idempotent append
    // after the partition was opened; appends of idempotent producers wait for it (in order).
    bool producers_loaded = false;
    std::shared_ptr<runtime::oneshot<void>> producers_loading; // set when the rebuild is done
    // The partition's transactions (open ones, aborted ones: the LSO and read_committed
    // fetches), rebuilt with the producer table and kept by produce and marker appends.
    txn::partition_txns txns;
    // Cluster mode: the leader epoch this broker owns the partition at; `released` once it
    // began handing the partition over (nothing more is acknowledged from this slot).
    std::int32_t epoch = 0;
    bool released = false;
    // The first offset this epoch assigns (the log's next offset when it was opened, past any
    // takeover gap): where every earlier epoch ended, for OffsetForLeaderEpoch.
    std::int64_t epoch_start = 0;
};

// Kafka's check of a request's current_leader_epoch (-1: the client does not know one):
// older than ours is FENCED_LEADER_EPOCH (the client's metadata is stale), newer is
// UNKNOWN_LEADER_EPOCH (ours is: we are about to learn we were deposed).
kafka::error_code leader_epoch_error(const partition_slot& slot, std::int32_t current) noexcept;

struct shard;
struct cluster_runtime;

// Shared by all cores; immutable after start-up except where noted.
struct broker_shared {
    broker_config cfg;
    // cfg.effective_listeners(), fixed for the life of the broker (connections point at them).
    std::vector<listener_config> listeners;
    unsigned cores = 1;
    std::vector<shard*> shards;      // shard i is only touched on core i
    storage::global_io_cap io_cap{256};
    std::unique_ptr<storage::put_rate> put_rate; // the request budget, every core's flushes
    std::unique_ptr<quota_meter> quotas;         // client quotas (flags and AlterClientQuotas)
    // SSL / SASL_SSL listeners: the server certificate (reloaded on SIGHUP; each connection keeps
    // the context it started with). Null without TLS listeners.
    std::shared_ptr<tls::context_holder> tls;
    std::atomic<bool> stopping{false};
    // Cluster mode: core 0's cluster state, and the end of the lease's proven lifetime on the
    // steady clock (ns since its epoch), which every core checks before acknowledging a write.
    std::unique_ptr<cluster_runtime> cluster;
    std::atomic<std::int64_t> lease_valid_until_ns{0};
    broker_shared();
    ~broker_shared();
};

struct shard {
    unsigned core = 0;
    broker_shared* shared = nullptr;
    const broker_config& cfg() const noexcept { return shared->cfg; }

    std::unique_ptr<s3::client> s3;
    std::unique_ptr<storage::object_store> store;
    std::unique_ptr<storage::io_budget> budget;
    // This core's hedging of segment PUTs and GETs (set on `budget`).
    std::unique_ptr<storage::hedge_policy> put_hedge, get_hedge;
    // This core's share of broker_config::max_buffered_bytes, held by every log of the core
    // (log_config::shared_memory) until the bytes are stored.
    std::shared_ptr<runtime::semaphore> produce_memory;
    // Lifecycle work's store requests in flight on this core (log_config::background_io).
    std::shared_ptr<runtime::semaphore> background_io;
    // Compaction passes at once on this core (log_config::compaction_slots).
    std::shared_ptr<runtime::semaphore> compaction_slots;
    // This core's share of broker_config::max_cache_bytes (log_config::shared_cache).
    std::shared_ptr<storage::cache_budget> cache_budget;
    // Client quotas: this core's view of the broker's meter (set when quotas are configured).
    std::optional<quota_cache> quota;
    std::shared_ptr<const catalog> cat = std::make_shared<catalog>();
    // The produce policy of every topic of `cat` (configs over the broker's defaults),
    // computed once per snapshot when apply_catalog installs it. policy_of() reads it.
    std::map<std::string, topic_policy, std::less<>> policies;
    const catalog* policies_for = nullptr;

    // Owned partitions, by (topic, partition).
    std::map<std::pair<std::string, std::int32_t>, std::unique_ptr<partition_slot>, std::less<>> parts;
    // Cluster mode: the partitions this core may serve, by the claim this broker won (set by
    // core 0's cluster loop before it opens them), and the view Metadata answers from.
    std::map<std::pair<std::string, std::int32_t>, cluster::claim, std::less<>> claims;
    std::shared_ptr<const cluster::view> cview;
    // Opens in progress, so concurrent requests restore a partition once.
    std::map<std::pair<std::string, std::int32_t>, std::shared_ptr<runtime::semaphore>> opening;
    // Partitions the start-up restore has yet to open (start_catalog): requests for them are
    // answered LEADER_NOT_AVAILABLE instead of restoring them in line.
    std::set<std::pair<std::string, std::int32_t>> pending_restore;
    std::unique_ptr<group_coordinator> groups;
    // The transaction coordinator of the transactional ids this core owns (txn_owner); null in
    // cluster mode, where each served group slot has one (slot_txns).
    std::unique_ptr<txn::coordinator> txns;
    // Cluster mode: transactional ids hash to group slots like groups, so the broker that owns a
    // slot coordinates both (FindCoordinator answers the same broker for key types 0 and 1).
    std::map<std::int32_t, std::unique_ptr<txn::coordinator>> slot_txns;
    std::vector<std::unique_ptr<txn::coordinator>> retired_txns;
    // Cluster mode: connections to other brokers, by address and client id (peers.hpp).
    std::map<std::string, std::unique_ptr<client::connection>> peers;
    std::vector<std::unique_ptr<client::connection>> retired_peers; // broken, closed at shutdown
    txn::coordinator_stats retired_txn_stats; // counters of retired ones, so metrics never go back
    // Cluster mode: one coordinator per group slot this core serves (claimed like partitions);
    // `groups` is then a closed coordinator that answers COORDINATOR_NOT_AVAILABLE for groups
    // this broker does not coordinate, so clients look the coordinator up again.
    std::map<std::int32_t, std::unique_ptr<group_coordinator>> slot_groups;
    std::vector<std::unique_ptr<group_coordinator>> retired_groups;
    // Partitions of deleted topics, closed. Kept until shutdown: a request that was inside one
    // (an append waiting for its flush) still holds a pointer to it when it resumes.
    std::vector<std::unique_ptr<partition_slot>> retired;

    runtime::gate conns{"connections"};
    runtime::gate background{"background"};
    std::stop_source stop; // shutdown began on this core: stop accepting and reading

    // Core 0 only: catalog changes are serialized; producer ids come in persisted blocks.
    runtime::semaphore catalog_lock{1, "catalog"};
    std::int64_t next_producer_id = 0;
    std::int64_t producer_id_limit = 0;

    std::vector<runtime::tcp_listener> listeners; // one per broker_shared::listeners, same order
    runtime::semaphore done{0, "core-done"}; // core 0 releases the other cores at exit

    // Counters for the metrics endpoint (registered at start).
    std::uint64_t open_connections = 0;
    std::uint64_t accepted_connections = 0;
    struct request_metrics {
        metrics::counter requests;
        metrics::counter errors;
        metrics::histogram latency;
    };
    request_metrics produce[3];  // by acks: 0, 1, -1
    request_metrics fetch;
    metrics::counter fetch_bytes;
    metrics::counter produce_bytes;
    metrics::counter throttled[2];         // answers with a quota throttle: produce, fetch
    metrics::counter throttle_ms[2];       // the throttle time they asked for
    metrics::counter admission_throttled;  // produce answers that waited for room
    metrics::counter unserved_requests[2]; // requests of an API / a version not served (closed)
    // SASL (handlers/sasl.cpp): authentications by mechanism (PLAIN, SCRAM-SHA-256,
    // SCRAM-SHA-512, other) and outcome (success, failure); connections closed for a SASL reason
    // (a request before authentication, an expired session, an illegal state).
    metrics::counter sasl_authentications[4][2]; // [3]: a mechanism not offered
    metrics::counter sasl_closed[3];
    // TLS handshakes refused on SSL / SASL_SSL listeners: [0] failed, [1] plaintext (not TLS).
    metrics::counter tls_handshake_failures[2];
    // Requests (or parts of them) denied by authorization, by resource type: topic, group,
    // cluster, other.
    metrics::counter acl_denied[4];
    std::vector<metrics::registration> registrations;
};

// The transaction coordinator of `id` on this core (which must be txn_owner's core); null in
// cluster mode when this broker does not coordinate the id's slot (or is still loading it).
txn::coordinator* txn_coordinator_for(shard& sh, std::string_view id);
// Cluster mode: why there is none: COORDINATOR_LOAD_IN_PROGRESS while the claimed slot loads,
// else NOT_COORDINATOR (clients look the coordinator up again).
kafka::error_code txn_coordinator_missing(const shard& sh, std::string_view id);
// Every transaction coordinator of this core, and the summed stats including retired ones.
std::vector<txn::coordinator*> txn_coordinators_of(shard& sh);
txn::coordinator_stats txn_stats_of(shard& sh);

// The coordinator for `group` on this core (which must be group_owner's core).
group_coordinator& coordinator_for(shard& sh, std::string_view group);
// Every coordinator of this core (one, or one per served slot in cluster mode).
std::vector<group_coordinator*> coordinators_of(shard& sh);
group_config group_config_for(const broker_config& cfg);

// The partition on this core (which must own it), restoring it first if needed. Null when the
// catalog does not have it; store_error when restoring failed.
runtime::task<result<partition_slot*, storage::store_error>> local_partition(shard& sh, std::string topic,
                                                                             std::int32_t partition);

// Installs a catalog snapshot on this core: opens newly owned partitions, closes and deletes
// the data of partitions whose topic is gone.
runtime::task<void> apply_catalog(shard& sh, std::shared_ptr<const catalog> snap);
// The same at start-up, without waiting for the restores: the catalog is installed at once
// and the partitions restore in the background while the broker already listens (a request
// for one still restoring gets LEADER_NOT_AVAILABLE; /ready says when all are done).
runtime::task<void> start_catalog(shard& sh, std::shared_ptr<const catalog> snap);

// Installs a catalog snapshot on every core (apply_catalog on each), from core 0.
runtime::task<void> install_catalog(shard& sh0, std::shared_ptr<const catalog> snap);

// What every topic gets unless its configs say otherwise: the broker's message.max.bytes.
topic_policy broker_policy(const broker_config& cfg);
// The produce policy of a topic of the installed catalog; the broker's defaults for a name
// the catalog does not hold. Any core, no suspension.
const topic_policy& policy_of(const shard& sh, std::string_view topic);

// Core 0: catalog changes. Each returns a Kafka error code and message.
struct admin_outcome {
    kafka::error_code error = kerr::none;
    std::string message;
};
runtime::task<admin_outcome> create_topic(shard& sh0, std::string name, std::int32_t partitions,
                                          std::map<std::string, std::string> configs, bool validate_only);
runtime::task<admin_outcome> delete_topic(shard& sh0, std::string name);
runtime::task<admin_outcome> create_partitions(shard& sh0, std::string name, std::int32_t count, bool validate_only);
// One change of a topic config; the ops and their codes are IncrementalAlterConfigs'.
struct config_change {
    enum class op : std::int8_t { set = 0, remove = 1, append = 2, subtract = 3 };
    op operation = op::set;
    std::string name;
    std::string value; // unused by remove
};
// AlterConfigs (`replace`: the topic keeps only `changes`, all sets) and IncrementalAlterConfigs
// (`changes` applied to the stored configs). The result is checked as CreateTopics checks
// configs, then stored and installed on every core, so retention applies to open partitions
// at once. INVALID_CONFIG (unknown name, bad value, APPEND/SUBTRACT of a config that is not a
// list), UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR; validate_only stores nothing.
runtime::task<admin_outcome> alter_topic_configs(shard& sh0, std::string name, std::vector<config_change> changes,
                                                 bool replace, bool validate_only);
// One change of a client quota (AlterClientQuotas, already validated): set `key` of `entity`
// to `value`, or remove it (nullopt).
struct quota_change {
    quota_entity entity;
    std::string key;
    std::optional<double> value;
};
// Applies `changes` to the stored client quotas (quotas.json, one PUT when anything changed)
// and installs them on every core; in cluster mode under the catalog lock, announced like a
// catalog change. KAFKA_STORAGE_ERROR when the PUT fails; validate_only stores nothing.
runtime::task<admin_outcome> change_client_quotas(shard& sh0, std::vector<quota_change> changes, bool validate_only);
// Cluster mode, core 0, under catalog_lock: a catalog change takes etcd's catalog lock and
// installs the stored catalog (another broker may have changed it) ...
runtime::task<admin_outcome> cluster_catalog_begin(shard& sh0);
// ... and ends by announcing the change (when `changed`) and releasing the lock.
runtime::task<void> cluster_catalog_end(shard& sh0, bool changed);
// One change of a user's SCRAM credentials (AlterUserScramCredentials, already validated):
// set the credential of (user, mechanism), or remove it (nullopt).
struct scram_change {
    std::string user;
    sasl::scram_mechanism mechanism = sasl::scram_mechanism::sha_512;
    std::optional<sasl::scram_credential> credential;
};
// Applies `changes` to the stored users (users.json, one PUT) and installs them on every core,
// like change_client_quotas. KAFKA_STORAGE_ERROR when the PUT fails.
runtime::task<admin_outcome> change_scram_users(shard& sh0, std::vector<scram_change> changes);
// Adds `added` and removes `removed` from the stored ACLs (acls.json, one PUT when anything
// changed) and installs them on every core, like change_scram_users.
runtime::task<admin_outcome> change_acls(shard& sh0, std::vector<acl::acl_binding> added,
                                         std::vector<acl::acl_binding> removed);
// Core 0: a fresh producer id (persisted in blocks, so ids are never reused across restarts).
runtime::task<result<std::int64_t, storage::store_error>> allocate_producer_id(shard& sh0);

// Retires `slot` (still under `key` on this core) after its log was fenced.
runtime::task<void> drop_fenced(shard* sh, std::pair<std::string, std::int32_t> key, partition_slot* slot);

// The owning core's partition, or the Kafka error a request for it gets: unknown partition,
// or a restore that failed or is still running (LEADER_NOT_AVAILABLE, retriable: a request
// never waits behind a long restore; NOT_LEADER while shutting down). Completes without
// suspending when the partition is open, which the produce ordering relies on (routing.hpp).
struct owned_partition {
    partition_slot* slot = nullptr;
    kafka::error_code error = kerr::none;
    std::string message;
};
runtime::task<owned_partition> find_owned(shard& sh, std::string topic, std::int32_t partition);

} // namespace skiff::broker
