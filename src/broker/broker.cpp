// Start-up, the accept loops, the observability endpoint, and the drain at shutdown.
//
// Start-up order (driven by core 0): every core opens its store and registers its shard;
// core 0 reads the catalog (the first store access: an unreachable store fails start-up
// with one sentence); every core loads its groups' offsets and restores its partitions; then
// the Kafka port opens on every core. Shutdown reverses it: stop accepting and reading, answer
// what was read, flush every partition, close groups, release the cores.
#include <skiff/broker/broker.hpp>

#include "connection.hpp"
#include "iceberg_sinks.hpp"
#include "ownership.hpp"
#include "peers.hpp"
#include "transactions.hpp"
#include "shard.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/core/log.hpp>
#include <skiff/http/server.hpp>
#include <skiff/metrics/endpoint.hpp>
#include <skiff/metrics/service.hpp>
#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/local_store.hpp>
#include <skiff/storage/s3_store.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <thread>

namespace skiff::broker {

group_config group_config_for(const broker_config& cfg) {
    group_config gc;
    gc.ns = cfg.ns;
    gc.initial_rebalance_delay = cfg.group_initial_rebalance_delay;
    return gc;
}

namespace {

using namespace std::chrono_literals;

struct startup {
    std::atomic<unsigned> registered{0};
    std::string error;          // set by core 0 (or by a core failing its setup, under the lock)
    std::mutex error_lock;
    std::atomic<bool> failed{false};
    void fail(std::string e) {
        std::lock_guard g(error_lock);
        if (error.empty()) error = std::move(e);
        failed = true;
    }
};

result<void, std::string> open_store(shard& sh) {
    const auto& cfg = sh.cfg();
    if (!cfg.s3_bucket.empty()) {
        if (!cfg.s3) return failure{std::string("S3 settings are missing")};
        auto c = s3::client::create(*cfg.s3);
        if (!c) return failure{c.error()};
        sh.s3 = std::move(*c);
        auto s = storage::s3_store::create(*sh.s3, "s3://" + cfg.s3_bucket);
        if (!s) return failure{s.error().message};
        sh.store = std::move(*s);
    } else {
        auto s = storage::local_store::create(cfg.data_dir);
        if (!s) return failure{s.error().message};
        sh.store = std::move(*s);
    }
    sh.budget = std::make_unique<storage::io_budget>(64, &sh.shared->io_cap);
    sh.budget->set_put_rate(sh.shared->put_rate.get());
    {
        const std::size_t share = std::max<std::size_t>(cfg.max_buffered_bytes / std::max(1u, sh.shared->cores), 1);
        sh.produce_memory = std::make_shared<runtime::semaphore>(share, "core-produce-memory");
        // Two lifecycle requests (manifests, retention deletes, checks) at once per core: the
        // rest of the core's 64 stays with flushes and fetches.
        sh.background_io = std::make_shared<runtime::semaphore>(2, "lifecycle-io");
        // One compaction pass at a time per core: its key map is bounded by compaction_map_bytes.
        sh.compaction_slots = std::make_shared<runtime::semaphore>(1, "compaction");
        sh.cache_budget = std::make_shared<storage::cache_budget>(
            std::max<std::size_t>(cfg.max_cache_bytes / std::max(1u, sh.shared->cores), 1));
    }
    if (sh.shared->quotas) sh.quota.emplace(*sh.shared->quotas);
    // Hedging is for S3's latency tail. On the local store a second write of the same file
    // would only double the disk's work: a slow fsync is not faster the second time.
    if (!cfg.s3_bucket.empty()) {
        sh.put_hedge = std::make_unique<storage::hedge_policy>(cfg.hedge);
        sh.get_hedge = std::make_unique<storage::hedge_policy>(cfg.hedge);
        sh.budget->set_hedges(sh.put_hedge.get(), sh.get_hedge.get());
    }
    // SlowDown halves the budget at the request that got it (docs/retries.md).
    sh.budget->listen_to(*sh.store);
    sh.groups = std::make_unique<group_coordinator>(*sh.store, group_config_for(cfg));
    if (!cfg.clustered()) sh.txns = make_txn_coordinator(sh);
    return ok();
}

// Cluster mode: the per-core coordinator answers only for groups this broker does not
// coordinate (ownership.cpp gives each served slot its own), so it starts closed.
runtime::task<void> close_default_groups(shard* sh) { co_await sh->groups->close(); }

void register_metrics(shard& sh) {
    auto& reg = metrics::registry::local();
    const char* acks_names[3] = {"0", "1", "all"};
    for (int i = 0; i < 3; ++i) {
        metrics::labels l{{"acks", acks_names[i]}};
        sh.produce[i].requests = reg.counter("skiff_kafka_produce_requests_total", "Produce requests answered.", l);
        sh.produce[i].errors =
            reg.counter("skiff_kafka_produce_errors_total", "Produce partitions answered with an error.", l);
        sh.produce[i].latency = reg.histogram("skiff_kafka_produce_duration_seconds",
                                              "Produce request latency, read to answer.", metrics::unit::seconds, l);
    }
    sh.fetch.requests = reg.counter("skiff_kafka_fetch_requests_total", "Fetch requests answered.");
    sh.fetch.errors = reg.counter("skiff_kafka_fetch_errors_total", "Fetch partitions answered with an error.");
    sh.fetch.latency = reg.histogram("skiff_kafka_fetch_duration_seconds",
                                     "Fetch request latency including long-poll waits.", metrics::unit::seconds);
    sh.fetch_bytes = reg.counter("skiff_kafka_fetch_bytes_total", "Record bytes returned by Fetch.", {},
                                 metrics::unit::bytes);
    sh.produce_bytes = reg.counter("skiff_kafka_produce_bytes_total", "Record bytes received by Produce.", {},
                                   metrics::unit::bytes);
    const char* kinds[2] = {"produce", "fetch"};
    for (int i = 0; i < 2; ++i) {
        metrics::labels l{{"kind", kinds[i]}};
        sh.throttled[i] = reg.counter("skiff_quota_throttled_total",
                                      "Answers that asked the client to wait because it was over its quota.", l);
        sh.throttle_ms[i] = reg.counter("skiff_quota_throttle_ms_total",
                                        "Milliseconds of throttle time asked of clients over their quota.", l);
    }
    const char* mechanisms[4] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "other"};
    const char* outcomes[2] = {"success", "failure"};
    for (int m = 0; m < 4; ++m) {
        for (int o = 0; o < 2; ++o) {
            sh.sasl_authentications[m][o] =
                reg.counter("skiff_sasl_authentications_total",
                            "SASL authentications (and re-authentications) by mechanism and outcome.",
                            metrics::labels{{"mechanism", mechanisms[m]}, {"outcome", outcomes[o]}});
        }
    }
    const char* acl_types[4] = {"topic", "group", "cluster", "other"};
    for (int i = 0; i < 4; ++i) {
        sh.acl_denied[i] = reg.counter("skiff_acl_denied_total",
                                       "Operations denied by authorization (ACLs), by resource type.",
                                       metrics::labels{{"resource", acl_types[i]}});
    }
    const char* tls_reasons[2] = {"handshake_failed", "not_tls"};
    for (int i = 0; i < 2; ++i) {
        sh.tls_handshake_failures[i] = reg.counter("skiff_tls_handshake_failures_total",
                                                   "TLS handshakes refused on SSL and SASL_SSL listeners (bad or "
                                                   "missing certificates, no common version, plaintext, timeouts).",
                                                   metrics::labels{{"reason", tls_reasons[i]}});
    }
    const char* sasl_reasons[3] = {"unauthenticated_request", "session_expired", "illegal_state"};
    for (int i = 0; i < 3; ++i) {
        sh.sasl_closed[i] = reg.counter("skiff_sasl_closed_connections_total",
                                        "Connections of SASL listeners closed for a SASL reason: a request before "
                                        "authentication, a session past its lifetime, a SASL request out of order.",
                                        metrics::labels{{"reason", sasl_reasons[i]}});
    }
    const char* unserved[2] = {"unknown_api", "unsupported_version"};
    for (int i = 0; i < 2; ++i) {
        sh.unserved_requests[i] = reg.counter("skiff_kafka_unserved_requests_total",
                                              "Requests for an API or a version this broker does not serve; "
                                              "each closed its connection, as Kafka does.",
                                              metrics::labels{{"reason", unserved[i]}});
    }
    sh.admission_throttled = reg.counter("skiff_produce_admission_throttled_total",
                                         "Produce answers that waited for room because the store was behind.");
    shard* p = &sh;
    sh.registrations.push_back(reg.gauge_fn("skiff_cache_budget_bytes",
                                            "Bytes of committed segments cached on this core, against its share of "
                                            "--max-cache-bytes.",
                                            {}, [p] {
                                                return static_cast<std::int64_t>(
                                                    p->cache_budget ? p->cache_budget->used() : 0);
                                            }));
    sh.registrations.push_back(reg.counter_fn("skiff_cache_budget_evictions_total",
                                              "Cached segments dropped because the core's cache budget was full.", {},
                                              [p] { return p->cache_budget ? p->cache_budget->evictions() : 0; }));
    sh.registrations.push_back(reg.gauge_fn("skiff_produce_buffered_bytes",
                                            "Produced bytes held until stored, across this core's partitions.", {},
                                            [p] {
                                                if (!p->produce_memory) return std::int64_t{0};
                                                return static_cast<std::int64_t>(p->produce_memory->capacity()) -
                                                       p->produce_memory->available();
                                            }));
    sh.registrations.push_back(reg.gauge_fn("skiff_kafka_open_connections", "Open Kafka connections.", {},
                                            [p] { return static_cast<std::int64_t>(p->open_connections); }));
    sh.registrations.push_back(reg.counter_fn("skiff_kafka_accepted_connections_total", "Kafka connections accepted.",
                                              {}, [p] { return p->accepted_connections; }));
    sh.registrations.push_back(reg.gauge_fn("skiff_partitions_owned", "Partitions this core owns and has restored.",
                                            {}, [p] { return static_cast<std::int64_t>(p->parts.size()); }));
    sh.registrations.push_back(reg.gauge_fn("skiff_groups", "Consumer groups this core coordinates.", {}, [p] {
        return static_cast<std::int64_t>(p->groups ? p->groups->stats().groups : 0);
    }));
    sh.registrations.push_back(reg.gauge_fn("skiff_group_members", "Members of the groups this core coordinates.", {},
                                            [p] {
                                                return static_cast<std::int64_t>(
                                                    p->groups ? p->groups->stats().members : 0);
                                            }));
    sh.registrations.push_back(reg.counter_fn("skiff_group_rebalances_total", "Group rebalances completed.", {}, [p] {
        return p->groups ? p->groups->stats().rebalances : 0;
    }));
    sh.registrations.push_back(reg.counter_fn("skiff_group_offset_commits_total", "Offset commits stored.", {}, [p] {
        return p->groups ? p->groups->stats().offset_commits : 0;
    }));
    // Transactions (docs/transactions.md): open now, and ended by outcome.
    sh.registrations.push_back(reg.gauge_fn("skiff_transactions_open",
                                            "Transactions ongoing or being completed at this core's coordinator.", {},
                                            [p] { return static_cast<std::int64_t>(txn_stats_of(*p).open); }));
    const std::pair<const char*, std::uint64_t txn::coordinator_stats::*> txn_outcomes[] = {
        {"committed", &txn::coordinator_stats::committed},
        {"aborted", &txn::coordinator_stats::aborted},
        {"timed_out", &txn::coordinator_stats::timed_out},
        {"fenced", &txn::coordinator_stats::fenced},
    };
    for (auto& [outcome, field] : txn_outcomes) {
        auto f = field;
        sh.registrations.push_back(reg.counter_fn("skiff_transactions_total",
                                                  "Transactions ended, by outcome (fenced: aborted because a new "
                                                  "producer instance initialised or the broker restarted).",
                                                  {{"outcome", outcome}},
                                                  [p, f] { return txn_stats_of(*p).*f; }));
    }
    sh.registrations.push_back(reg.counter_fn("skiff_transactional_ids_expired_total",
                                              "Transactional ids forgotten after --transactional-id-expiration-ms idle.",
                                              {}, [p] { return txn_stats_of(*p).expired; }));
    sh.registrations.push_back(reg.counter_fn("skiff_transaction_state_writes_total",
                                              "Transaction coordinator state objects stored.", {},
                                              [p] { return txn_stats_of(*p).state_writes; }));
    sh.registrations.push_back(reg.counter_fn("skiff_transaction_marker_retries_total",
                                              "Marker writes, offset applications and state writes of an ending "
                                              "transaction that failed and were retried.",
                                              {}, [p] { return txn_stats_of(*p).marker_retries; }));
    if (sh.put_hedge && sh.get_hedge) {
        const storage::hedge_policy* hp = sh.put_hedge.get();
        const storage::hedge_policy* hg = sh.get_hedge.get();
        sh.registrations.push_back(reg.counter_fn("skiff_store_hedge_wins_total",
                                                  "Hedged store requests whose second request answered first.",
                                                  {{"op", "put"}}, [hp] { return hp->stats().wins; }));
        sh.registrations.push_back(reg.counter_fn("skiff_store_hedge_wins_total",
                                                  "Hedged store requests whose second request answered first.",
                                                  {{"op", "get"}}, [hg] { return hg->stats().wins; }));
    }
    // The request budget is process-wide: core 0 alone reports it (scrapes add cores up).
    if (sh.core == 0 && sh.shared->put_rate) {
        const storage::put_rate* rate = sh.shared->put_rate.get();
        const double price = sh.shared->cfg.put_price_per_1000;
        sh.registrations.push_back(reg.gauge_fn(
            "skiff_flush_put_cost_per_gb_microusd",
            "Request cost of the segment uploads so far per GB uploaded, in millionths of a USD, at "
            "--put-price-per-1000.",
            {}, [rate, price] {
                const double gb = static_cast<double>(rate->put_bytes()) / 1e9;
                if (gb <= 0) return std::int64_t{0};
                return static_cast<std::int64_t>(static_cast<double>(rate->puts()) / 1000.0 * price / gb * 1e6);
            }));
        sh.registrations.push_back(reg.gauge_fn("skiff_flush_put_budget_per_second",
                                                "The request budget: segment-upload PUTs per second (0: unlimited).",
                                                {}, [rate] { return static_cast<std::int64_t>(rate->per_second()); }));
        sh.registrations.push_back(reg.counter_fn("skiff_flush_put_budget_delayed_total",
                                                  "Segment-upload PUTs that waited for their slot in the request budget.",
                                                  {}, [rate] { return rate->delayed(); }));
    }
}

runtime::task<void> accept_loop(shard* sh, std::size_t index) {
    auto st = sh->stop.get_token();
    const listener_config* listener = &sh->shared->listeners[index];
    for (;;) {
        auto s = co_await sh->listeners[index].accept(st);
        if (!s) {
            if (runtime::is_cancelled(s.error()) || st.stop_requested()) break;
            // EMFILE and friends: back off instead of spinning.
            log::warn("accept on core {}: {}", sh->core, s.error().message());
            auto slept = co_await runtime::sleep(10ms, st);
            (void)slept;
            continue;
        }
        int one = 1;
        ::setsockopt(s->fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ++sh->accepted_connections;
        auto spawned = sh->conns.spawn(serve_connection(*sh, std::move(*s), listener));
        if (!spawned) break;
    }
}

// Every core listens on the same port (SO_REUSEPORT; the kernel spreads connections). A
// plain bind first makes sure no other process holds the port: SO_REUSEPORT alone would
// silently share it with another broker of the same user.
result<runtime::socket_address, std::string> bind_one_core0(shard& sh, const listener_config& lc) {
    const std::string flag = sh.cfg().listeners.empty() ? "--kafka-addr" : "--listeners";
    auto addr = runtime::socket_address::parse(lc.addr);
    if (!addr) return failure{"invalid " + flag + " '" + lc.addr + "': " + addr.error()};
    if (addr->port() != 0) {
        // Bind only, never listen: a listening probe would take (and then reset) the first
        // connections of clients that are already retrying against this port.
        const int fd = ::socket(addr->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return failure{std::string("socket: ") + std::strerror(errno)};
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr->storage), addr->len);
        const int err = errno;
        ::close(fd);
        if (rc != 0) {
            return failure{"cannot listen on " + addr->to_string() + ": " + std::strerror(err)};
        }
    }
    auto l = runtime::tcp_listener::listen(*addr, runtime::listen_options{1024, true});
    if (!l) return failure{l.error()};
    auto bound = l->local_address();
    sh.listeners.push_back(std::move(*l));
    return bound;
}

// Every listener of the broker, in order; the addresses bound (port 0 resolved).
result<std::vector<runtime::socket_address>, std::string> bind_listeners_core0(shard& sh) {
    std::vector<runtime::socket_address> out;
    for (const auto& lc : sh.shared->listeners) {
        auto b = bind_one_core0(sh, lc);
        if (!b) return failure{b.error()};
        out.push_back(*b);
    }
    return out;
}

result<void, std::string> bind_listener(shard& sh, const std::vector<runtime::socket_address>& addrs) {
    for (const auto& addr : addrs) {
        auto l = runtime::tcp_listener::listen(addr, runtime::listen_options{1024, true});
        if (!l) return failure{l.error()};
        sh.listeners.push_back(std::move(*l));
    }
    return ok();
}

runtime::task<metrics::readiness> store_ready(shard* sh, std::stop_token st) {
    auto r = co_await sh->store->list(sh->cfg().ns + "/", "", "", 1, st);
    if (!r) co_return metrics::readiness::no(sh->store->describe() + ": " + r.error().message);
    co_return metrics::readiness::yes(sh->store->describe());
}

// Committed offsets must be there before any consumer asks: a group served without them would
// send its consumers to auto.offset.reset. So a failing load is retried, then fails start-up.
runtime::task<std::string> load_groups(shard* sh) {
    const unsigned core = sh->core, cores = sh->shared->cores;
    std::string last;
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (attempt) (void)co_await runtime::sleep(std::chrono::milliseconds(200 << attempt));
        auto r = co_await sh->groups->load([core, cores](std::string_view g) { return group_owner(g, cores) == core; });
        if (r) co_return std::string();
        last = r.error().message;
        log::warn("loading consumer groups on core {} (attempt {}): {}", core, attempt + 1, last);
    }
    co_return "cannot load the consumer groups' committed offsets: " + last;
}

runtime::task<void> close_partitions(shard* sh) {
    std::vector<runtime::task<void>> closing;
    for (auto& [_, slot] : sh->parts) closing.push_back(slot->log->close());
    if (!closing.empty()) co_await runtime::when_all(std::move(closing));
}

// One core's part of the drain.
runtime::task<void> drain_core(shard* sh) {
    sh->stop.request_stop(); // no new connections, no new requests; long polls answer now
    for (auto& l : sh->listeners) l.close();
    // Transactions first: an EndTxn in flight finishes its markers while partitions are open.
    if (sh->txns) co_await sh->txns->close();
    for (auto& [_, tc] : sh->slot_txns) co_await tc->close(); // cluster mode: left by a leave that failed
    for (auto& tc : sh->retired_txns) co_await tc->close();
    co_await runtime::when_all(close_partitions(sh), sh->conns.close(), sh->groups->close());
    co_await close_peers(*sh); // after the coordinators' markers and the requests that verify there
    co_await sh->background.close();
}

runtime::task<std::size_t> restored_count(shard* sh) { co_return sh->parts.size(); }

// Cluster mode: the partitions this core should have open (claimed, not group slots).
runtime::task<std::size_t> claimed_count(shard* sh) {
    std::size_t n = 0;
    for (auto& [k, _] : sh->claims) n += k.first != cluster::groups_topic;
    co_return n;
}

runtime::task<void> reapply_catalog(shard* sh) { co_await apply_catalog(*sh, sh->cat); }

// /ready's "partitions" flag follows what is actually restored: a partition whose restore
// failed (store trouble at start-up) keeps the broker not ready, and is retried here every few
// seconds (requests for it also retry on their own).
runtime::task<void> readiness_loop(shard* sh0, metrics::service* obs) {
    auto st = sh0->stop.get_token();
    broker_shared& shared = *sh0->shared;
    while (!st.stop_requested()) {
        std::size_t total = 0, restored = 0;
        auto snap = sh0->cat;
        if (!shared.cluster) {
            for (auto& [_, t] : snap->topics) total += static_cast<std::size_t>(t.partitions);
        }
        for (unsigned c = 0; c < shared.cores && !st.stop_requested(); ++c) {
            shard* target = shared.shards[c];
            restored += co_await runtime::submit_to(c, [target] { return restored_count(target); });
            if (shared.cluster) total += co_await runtime::submit_to(c, [target] { return claimed_count(target); });
        }
        if (restored >= total) {
            obs->set_ready_flag("partitions", true, std::to_string(total) + " partitions restored");
        } else {
            obs->set_ready_flag("partitions", false,
                                std::to_string(restored) + " of " + std::to_string(total) +
                                    " partitions restored; retrying the others");
            for (unsigned c = 0; c < shared.cores && !st.stop_requested(); ++c) {
                shard* target = shared.shards[c];
                co_await runtime::submit_to(c, [target] { return reapply_catalog(target); });
            }
        }
        (void)co_await runtime::sleep(std::chrono::seconds(2), st);
    }
}

runtime::task<void> signal_done(shard* sh) {
    sh->done.signal(1);
    co_return;
}

runtime::task<void> release_others(broker_shared* shared) {
    for (unsigned c = 1; c < shared->cores; ++c) {
        shard* other = shared->shards[c];
        if (other) co_await runtime::submit_to(c, [other] { return signal_done(other); });
    }
}

struct stop_signal {
    runtime::semaphore sem{0, "stop"};
};

runtime::task<void> core0_main(shard* sh, startup* su, std::stop_token stop, serve_hooks* hooks) {
    broker_shared& shared = *sh->shared;
    // Wait for every core's shard.
    while (su->registered.load() < shared.cores) (void)co_await runtime::sleep(1ms);
    if (su->failed) {
        co_await release_others(&shared);
        co_return;
    }

    // The observability endpoint first, so /health answers during restore.
    metrics::service obs;
    std::unique_ptr<http::server> http_srv;
    std::stop_source http_stop;
    // Its own gate: the endpoint keeps answering (/health, /metrics) while the cores drain.
    runtime::gate http_gate("http");
    std::string http_bound;
    if (!sh->cfg().http_addr.empty()) {
        http::server_config hc;
        hc.addr = sh->cfg().http_addr;
        if (sh->cfg().http_tls) hc.tls = sh->shared->tls; // HTTPS with the listeners' certificate
        auto srv = http::server::listen(hc);
        if (!srv) {
            su->fail(srv.error() + " (--http-addr)");
            co_await release_others(&shared);
            co_return;
        }
        http_srv = std::move(*srv);
        http_bound = http_srv->local_address().to_string();
        obs.set_ready_flag("partitions", false, "restoring");
        obs.set_readiness_check("store", [sh](std::stop_token st) { return store_ready(sh, st); });
        metrics::add_routes(*http_srv, obs);
        auto spawned = http_gate.spawn(http_srv->serve(http_stop.get_token()));
        (void)spawned;
    }

    // The catalog: the first store access.
    result<catalog, storage::store_error> cat = failure{storage::store_error()};
    {
        runtime::deadline_scope scope(runtime::reactor::local().now() + 60s, stop);
        cat = co_await load_catalog(*sh->store, sh->cfg().ns, scope.token());
    }
    if (!cat) {
        su->fail("cannot read the store " + sh->store->describe() + ": " + cat.error().message);
        http_stop.request_stop();
        co_await http_gate.close();
        co_await release_others(&shared);
        co_return;
    }
    auto snap = std::make_shared<const catalog>(std::move(*cat));
    if (sh->cfg().clustered()) {
        // Cluster mode: register with etcd; partitions and group slots are opened as they are
        // claimed (ownership.cpp), not here.
        auto err = co_await cluster_join(*sh);
        if (!err.empty()) su->fail(err);
        for (unsigned c = 0; c < shared.cores; ++c) {
            shard* target = shared.shards[c];
            co_await runtime::submit_to(c, [target] { return close_default_groups(target); });
        }
    }
    for (unsigned c = 0; c < shared.cores && !su->failed && !sh->cfg().clustered(); ++c) {
        shard* target = shared.shards[c];
        auto err = co_await runtime::submit_to(c, [target] { return load_groups(target); });
        if (!err.empty()) su->fail(err);
        if (err.empty() && target->txns) {
            auto terr = co_await runtime::submit_to(c, [target] { return load_txns(target); });
            if (!terr.empty()) su->fail(terr);
        }
    }
    if (su->failed) {
        http_stop.request_stop();
        co_await http_gate.close();
        co_await release_others(&shared);
        co_return;
    }
    // Partitions restore in the background: the broker listens at once, and a partition
    // answers LEADER_NOT_AVAILABLE (retriable) until it is restored.
    for (unsigned c = 0; c < shared.cores; ++c) {
        shard* target = shared.shards[c];
        // A pointer capture: g++ 12 destroys a closure with a non-trivial capture (the
        // shared_ptr) twice when it is a temporary inside a co_await (routing.hpp).
        const std::shared_ptr<const catalog>* sp = &snap;
        co_await runtime::submit_to(c, [target, sp] { return start_catalog(*target, *sp); });
    }

    // The Kafka port, on every core.
    auto bound = bind_listeners_core0(*sh);
    if (!bound) {
        su->fail(bound.error());
    } else {
        for (unsigned c = 1; c < shared.cores && !su->failed; ++c) {
            shard* target = shared.shards[c];
            const std::vector<runtime::socket_address>* a = &*bound;
            auto r = co_await runtime::submit_to(c, [target, a] { return bind_listener(*target, *a); });
            if (!r) su->fail(r.error());
        }
    }
    if (!su->failed) {
        for (unsigned c = 0; c < shared.cores; ++c) {
            shard* target = shared.shards[c];
            const std::size_t n = bound->size();
            co_await runtime::submit_to(c, [target, n] {
                for (std::size_t i = 0; i < n; ++i) (void)target->background.spawn(accept_loop(target, i));
            });
        }
        if (http_srv) {
            (void)http_gate.spawn(readiness_loop(sh, &obs)); // sets the "partitions" flag
        }
        if (shared.cluster) (void)sh->background.spawn(cluster_loop(sh));
        if (!sh->cfg().iceberg.topics.empty()) (void)sh->background.spawn(run_iceberg_sinks(sh));
        std::string where;
        for (std::size_t i = 0; i < bound->size(); ++i) {
            if (i) where += ", ";
            where += (*bound)[i].to_string();
            if (!sh->cfg().listeners.empty()) where += fmt::format(" ({})", shared.listeners[i].name());
        }
        log::info("skiff serving Kafka on {} ({} cores, store {}, namespace '{}', {} topics){}", where,
                  shared.cores, sh->store->describe(), sh->cfg().ns, snap->topics.size(),
                  http_bound.empty() ? std::string()
                                     : fmt::format(", metrics on {}://{}", sh->cfg().http_tls ? "https" : "http", http_bound));
        if (hooks->on_ready) hooks->on_ready(bound->front().to_string(), http_bound);

        // Wait for the stop request (from any thread: it is posted to this core).
        stop_signal sig;
        runtime::reactor* self = &runtime::reactor::local();
        std::stop_callback on_stop(stop, [self, s = &sig] { self->post([s] { s->sem.signal(1); }); });
        auto got = co_await sig.sem.acquire(1);
        if (got) got->consume();
        log::info("shutting down: draining connections and flushing partitions");
    }
    if (shared.cluster) {
        // Hand every partition over before the drain closes what is left.
        co_await cluster_leave(sh);
    }

    shared.stopping = true;
    {
        std::vector<runtime::task<void>> drains;
        for (unsigned c = 0; c < shared.cores; ++c) {
            shard* target = shared.shards[c];
            drains.push_back(runtime::submit_to(c, [target] { return drain_core(target); }));
        }
        co_await runtime::when_all(std::move(drains));
    }
    http_stop.request_stop();
    co_await http_gate.close();
    co_await release_others(&shared);
    if (!su->failed) log::info("shutdown complete");
}

runtime::task<void> core_main(unsigned core, broker_shared* shared, startup* su, std::stop_token stop,
                              serve_hooks* hooks) {
    shard sh;
    sh.core = core;
    sh.shared = shared;
    if (auto r = open_store(sh); !r) su->fail(r.error());
    register_metrics(sh);
    shared->shards[core] = &sh;
    su->registered.fetch_add(1);
    if (core == 0) {
        co_await core0_main(&sh, su, stop, hooks);
    } else {
        auto d = co_await sh.done.acquire(1);
        if (d) d->consume();
    }
    // Nothing may reach this shard any more: core 0 released the cores after the drain.
}

} // namespace

result<void, std::string> serve(broker_config cfg, std::stop_token stop, serve_hooks hooks) {
    for (const auto& l : cfg.effective_listeners()) {
        if (auto a = runtime::socket_address::parse(l.addr); !a) {
            return failure{std::string(cfg.listeners.empty() ? "invalid --kafka-addr '" : "invalid --listeners '") +
                           l.addr + "': " + a.error()};
        }
    }
    if (!cfg.http_addr.empty()) {
        if (auto a = runtime::socket_address::parse(cfg.http_addr); !a) {
            return failure{"invalid --http-addr '" + cfg.http_addr + "': " + a.error()};
        }
    }
    if (cfg.clustered()) {
        // Other brokers send clients here: the address must be one they can reach.
        for (const auto& l : cfg.effective_listeners()) {
            const std::string& adv = l.advertised.empty() ? l.addr : l.advertised;
            if (adv.starts_with("0.0.0.0:") || adv.starts_with("[::]:") || adv.starts_with(":")) {
                return failure{cfg.listeners.empty()
                                   ? std::string("cluster mode needs --advertised-addr (or a --kafka-addr with a host "
                                                 "other brokers' clients can reach)")
                                   : "cluster mode needs --advertised-listeners for " + std::string(l.name()) +
                                         " (or a listener host other brokers' clients can reach)"};
            }
        }
    }
    unsigned cores = cfg.cores ? cfg.cores : std::max(1u, std::thread::hardware_concurrency());
    auto group = runtime::smp::create(cores);
    if (!group) return failure{group.error()};
    broker_shared shared;
    shared.cfg = std::move(cfg);
    shared.listeners = shared.cfg.effective_listeners();
    if (shared.cfg.uses_tls()) {
        if (!shared.cfg.tls_context) {
            auto holder = tls::context_holder::create(shared.cfg.tls);
            if (!holder) return failure{"TLS: " + holder.error().message};
            shared.cfg.tls_context = std::move(*holder);
        }
        shared.tls = shared.cfg.tls_context;
    }
    shared.put_rate = std::make_unique<storage::put_rate>(shared.cfg.max_puts_per_second);
    // Always: quotas may also arrive later through AlterClientQuotas. Unlimited kinds cost one
    // relaxed load per request.
    shared.quotas = std::make_unique<quota_meter>(shared.cfg.quotas);
    shared.cores = cores;
    shared.shards.assign(cores, nullptr);
    startup su;
    (*group)->run([&shared, &su, stop, &hooks](unsigned core) {
        return core_main(core, &shared, &su, stop, &hooks);
    });
    if (su.failed) return failure{su.error};
    return ok();
}

} // namespace skiff::broker
