// This broker's seat in the cluster: its lease, its member key, the view of the others, and
// the claims and releases of partitions. Runs on one core (core 0 of the broker); other cores
// read the published view and `valid_until()` through the broker.
//
// The lease is the broker's right to act as an owner. valid_until() is a conservative bound
// on the local steady clock: the send time of the last keep-alive etcd confirmed plus the TTL
// it granted, minus a margin. etcd cannot expire the lease before that moment, so no other
// broker can have claimed this broker's partitions yet; an owner acknowledges a write only
// when its upload completed before valid_until() (docs/cluster.md, "Fencing"). The steady
// clock ignores wall-clock jumps.
#pragma once

#include <skiff/cluster/errc.hpp>
#include <skiff/cluster/records.hpp>
#include <skiff/cluster/view.hpp>
#include <skiff/core/result.hpp>
#include <skiff/etcd/kv.hpp>
#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/task.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

namespace skiff::cluster {

struct node_config {
    node_config() = default;
    std::string ns = "default";
    member self;
    std::chrono::seconds lease_ttl{10};
    // Subtracted from the lease's confirmed lifetime for clock-rate differences between this
    // machine and etcd's.
    std::chrono::milliseconds safety_margin{500};
    // How long join() keeps trying when the broker id is still registered by a lease that may
    // be a previous run of this broker (it expires within one TTL).
    std::chrono::seconds join_wait{0};
};

// A successful claim: this broker owns the partition at `epoch`; `previous` says how the last
// owner left it.
struct claim {
    std::int32_t epoch = 0;
    takeover previous;
    std::uint64_t lease_generation = 0; // the lease the claim is bound to
};

class node {
public:
    node(etcd::kv& kv, node_config cfg);
    ~node();
    node(const node&) = delete;
    node& operator=(const node&) = delete;

    // Grants a lease and registers this broker (create-if-absent): errc::already_live when the
    // id is registered by another lease, errc::unavailable when etcd cannot be reached. Then
    // reads the cluster once, so current() is complete when join() returns.
    runtime::task<result<void, error>> join(std::stop_token st = {});

    // Keeps the lease alive and the view current until `st` fires; rejoins after the lease was
    // lost (etcd unreachable for longer than the TTL). Call once, after join().
    runtime::task<void> run(std::stop_token st);

    // Revokes the lease: the member key and every owner key of this broker go at once.
    runtime::task<void> leave();

    // Ownership claims. The owner key is created only if absent, and the partition's state key
    // must not have changed since it was read, so two brokers can never both win, and the epoch
    // grows by one with every change of owner.
    runtime::task<result<claim, error>> claim_partition(std::string topic, std::int32_t partition,
                                                        std::stop_token st = {});
    // Gives up a partition this broker owns at `epoch`. `clean`: the log was flushed and
    // closed, and `next_offset` is where the next owner continues without a gap.
    runtime::task<result<void, error>> release_partition(std::string topic, std::int32_t partition,
                                                         std::int32_t epoch, bool clean, std::int64_t next_offset,
                                                         std::stop_token st = {});

    // A cluster-wide mutex bound to this broker's lease (so a holder that dies frees it):
    // waits up to `wait` for it. unlock() releases it if still held by this broker.
    runtime::task<result<void, error>> lock(std::string key, std::chrono::milliseconds wait, std::stop_token st = {});
    runtime::task<void> unlock(std::string key);
    // Bumps the catalog key so every broker reloads its catalog.
    runtime::task<result<void, error>> bump_catalog(std::stop_token st = {});

    std::shared_ptr<const view> current() const noexcept { return _view; }
    runtime::time_point valid_until() const noexcept { return _valid_until; }
    bool lease_valid(runtime::time_point now) const noexcept { return now < _valid_until; }
    // Grows each time a new lease is granted (claims of an older generation are void).
    std::uint64_t lease_generation() const noexcept { return _generation; }
    std::int64_t lease_id() const noexcept { return _lease; }
    const node_config& config() const noexcept { return _cfg; }
    const keys& key_names() const noexcept { return _keys; }

    // Called on this node's core after every change of the view or of the lease.
    void on_change(std::function<void()> fn) { _on_change = std::move(fn); }

    struct stats {
        std::uint64_t keepalives = 0;
        std::uint64_t keepalive_failures = 0;
        std::uint64_t leases_lost = 0;
        std::uint64_t claims = 0;
        std::uint64_t claims_lost = 0;
        std::uint64_t releases = 0;
        std::uint64_t watch_restarts = 0;
    };
    const stats& counters() const noexcept { return _stats; }

private:
    runtime::task<result<void, error>> register_self(std::stop_token st);
    runtime::task<result<void, error>> resync(std::stop_token st);
    runtime::task<void> keepalive_loop(std::stop_token st);
    runtime::task<void> watch_loop(std::stop_token st);
    void apply(const etcd::key_value& kv, bool deleted, view& v) const;
    void publish(std::shared_ptr<const view> v);
    void notify();

    etcd::kv& _kv;
    node_config _cfg;
    keys _keys;
    std::int64_t _lease = 0;
    std::uint64_t _generation = 0;
    runtime::time_point _valid_until{};
    std::shared_ptr<const view> _view = std::make_shared<view>();
    std::function<void()> _on_change;
    stats _stats;
};

} // namespace skiff::cluster
