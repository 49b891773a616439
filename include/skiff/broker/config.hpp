// What `skiff serve` is told: listeners, the store, and the storage-engine knobs a broker
// operator tunes. Filled by the CLI from flags and SKIFF_* variables (src/cli/serve_cmd.cpp).
#pragma once

#include <skiff/s3/client.hpp>
#include <skiff/broker/listener.hpp>
#include <skiff/broker/quota.hpp>
#include <skiff/iceberg/schema.hpp>
#include <skiff/storage/hedge.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/tls/context.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace skiff::broker {

// Iceberg tables the broker writes from its topics (docs/iceberg.md): one sink per topic on
// core 0, over the partitions this broker owns.
struct iceberg_settings {
    iceberg_settings() = default;
    std::vector<std::string> topics;            // empty: no sink
    std::string warehouse;                      // key prefix of the tables; empty: "iceberg/<namespace>"
    std::string location_base;                  // the URI engines read the store's root at; empty: the store's
    iceberg::partitioning partition_by = iceberg::partitioning::day;
    std::vector<iceberg::scoped_projection> projections; // every topic's, or one topic's
    std::chrono::milliseconds commit_interval{10000};
};

struct broker_config {
    broker_config() = default;
    std::string kafka_addr = "0.0.0.0:9092";
    // host:port put in Metadata. Empty: the address the client connected to, so a broker on
    // 0.0.0.0 is reachable under whatever address each client used.
    std::string advertised_addr;
    // Several listeners, each with its security protocol (listener.hpp). Empty: one PLAINTEXT
    // listener on kafka_addr, advertised as advertised_addr. effective_listeners() says which.
    std::vector<listener_config> listeners;
    std::vector<listener_config> effective_listeners() const {
        if (!listeners.empty()) return listeners;
        listener_config l;
        l.addr = kafka_addr;
        l.advertised = advertised_addr;
        return {l};
    }
    // SASL (docs/sasl.md): the mechanisms SASL listeners offer, in the order SaslHandshake lists
    // them; Kafka's connections.max.reauth.ms (0: sessions never expire; else SaslAuthenticate
    // tells the client, KIP-368, and a connection that has not re-authenticated by then is
    // closed at its next request); connections.failed.authentication.delay.ms (a failed
    // authentication is answered this late, which slows password guessing).
    std::vector<std::string> sasl_mechanisms{"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"};
    std::chrono::milliseconds max_reauth{0};
    std::chrono::milliseconds failed_auth_delay{100};
    // TLS for SSL and SASL_SSL listeners (docs/tls.md): the certificate, key and client-CA files
    // and whether clients must show a certificate (mTLS; its subject is then the principal).
    // tls_context: the loaded certificate, shared with whoever reloads it (the CLI on SIGHUP);
    // serve() loads one from `tls` when it is not given.
    tls::server_config tls;
    std::shared_ptr<tls::context_holder> tls_context;
    std::chrono::milliseconds tls_handshake_timeout{10000};
    // HTTPS on the observability endpoint, with the same certificate (and client-certificate
    // setting) as the TLS listeners.
    bool http_tls = false;
    bool uses_tls() const {
        if (http_tls) return true;
        for (const auto& l : effective_listeners()) {
            if (broker::uses_tls(l.protocol)) return true;
        }
        return false;
    }
    // Authorization (docs/acl.md): off, every principal may do everything (and the ACL APIs
    // answer SECURITY_DISABLED, as Kafka without an authorizer); on, every request is checked
    // against the stored ACLs. Super users ("User:admin") are always allowed; a resource with no
    // ACL at all is open only with allow_everyone_if_no_acl_found (Kafka's settings).
    bool authorization = false;
    std::set<std::string, std::less<>> super_users;
    bool allow_everyone_if_no_acl_found = false;
    std::string http_addr = "127.0.0.1:9644"; // empty: no observability endpoint
    unsigned cores = 0;                         // 0: every core of the machine

    // Store: a local directory (the embedded default) unless s3_bucket is set.
    std::string data_dir = "./skiff-data";
    std::string s3_bucket;                      // "bucket" or "bucket/prefix"
    std::optional<s3::client_config> s3;        // set together with s3_bucket
    // The bucket namespace: every key skiff writes starts with "{ns}/". The only copy;
    // partition logs, the catalog and the group coordinator are given it.
    std::string ns = "default";

    storage::log_config log = default_log_config(); // upload mode, linger, segment size, ...
    // The storage defaults a broker changes: merging on (docs/lifecycle.md, "Merging").
    static storage::log_config default_log_config() {
        storage::log_config c;
        c.merge_target_bytes = 32u << 20;
        return c;
    }
    // The request budget (docs/flush-scheduling.md): segment-upload PUTs per second for the
    // whole broker, shared by every partition and core; 0 = unlimited. And the price the
    // skiff_flush_put_cost_per_gb gauge reports the request cost at (USD per 1,000 PUTs;
    // S3 Standard's).
    double max_puts_per_second = 0;
    double put_price_per_1000 = 0.005;
    // Hedged segment PUTs and GETs (docs/retries.md, "Hedging"): after the recent p99 by
    // default, a fixed delay, or off.
    storage::hedge_config hedge;
    // Admission (docs/quotas.md): bytes appended and not yet stored, across every partition of
    // the broker (each core takes an equal share). A produce that finds no room waits, up to
    // its timeout, and is told how long it waited in throttle_time_ms. Per partition, the
    // bound is log.max_pending_bytes.
    std::size_t max_buffered_bytes = std::size_t{1} << 30;
    // Committed segments kept in memory for readers, across every partition of the broker (each
    // core takes an equal share; oldest evicted first). Per partition: log.cache_bytes.
    std::size_t max_cache_bytes = std::size_t{512} << 20;
    // Client quotas (docs/quotas.md): produce and fetch bytes per second per client id.
    quota_config quotas;
    bool auto_create_topics = true;
    std::int32_t default_partitions = 1;
    std::size_t max_frame_bytes = 64u << 20;    // larger request frames close the connection
    std::size_t max_inflight_requests = 64;     // per connection: read ahead, answer in order
    // Per connection: bytes of requests read ahead and not yet answered. A request larger than
    // this is read once nothing else of the connection is pending. Together with admission
    // (max_buffered_bytes) it bounds what a producer held back by a slow store makes the
    // broker keep (docs/quotas.md).
    std::size_t max_inflight_request_bytes = std::size_t{16} << 20;
    // Kafka's message.max.bytes: the largest batch (12 + batchLength, as stored) a topic takes
    // unless its own max.message.bytes says otherwise.
    std::int64_t message_max_bytes = 1048588;
    // Kafka's log.retention.ms / log.retention.bytes: what a topic without its own retention.ms
    // / retention.bytes keeps (-1: everything). Kafka's defaults: seven days, no size bound.
    std::int64_t retention_ms = 604800000;
    std::int64_t retention_bytes = -1;
    std::chrono::milliseconds group_initial_rebalance_delay{3000};
    // Kafka's transaction.max.timeout.ms: a producer asking for a longer transaction.timeout.ms
    // is refused (INVALID_TRANSACTION_TIMEOUT).
    std::chrono::milliseconds transaction_max_timeout{900000};
    // Kafka's transactional.id.expiration.ms: an id idle this long is forgotten (seven days).
    std::chrono::milliseconds transactional_id_expiration{604800000};
    iceberg_settings iceberg;
    // How many of a partition's last offsets are replayed to rebuild its idempotent producers
    // and open transactions when it is first needed after opening (not a flag: tests shrink it
    // to reach the abort index, which covers what lies before).
    std::int64_t producer_state_window = 50000;
    std::int32_t node_id = 0;                   // --broker-id
    std::string cluster_id = "skiff";

    // Cluster mode (docs/cluster.md): etcd's client URLs. Empty: one broker on its own, as
    // always; every setting below is then unused.
    std::vector<std::string> etcd_endpoints;
    std::chrono::seconds lease_ttl{10};         // a dead broker's partitions move after this
    std::string rack;
    // Offsets a new owner skips after an unclean takeover, so a deposed owner's late upload can
    // only land where nobody reads another record (docs/cluster.md, "Fencing"). Larger than
    // what one partition may hold unacknowledged (log.max_pending_records).
    std::int64_t takeover_gap = std::int64_t{1} << 22;
    bool clustered() const noexcept { return !etcd_endpoints.empty(); }
};

} // namespace skiff::broker
