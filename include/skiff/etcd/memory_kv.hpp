// memory_kv: etcd's key-value semantics in process, for tests of the code written against
// etcd::kv (and as the reference the real client is checked against, test/unit/etcd).
//
// One memory_store is the keyspace; every memory_kv made on it is one client of it, so a test
// can run two "brokers" against one "etcd". Kept like etcd: one revision per write
// transaction (starting at 1), create/mod revisions and versions per key, leases whose TTL
// runs on the reactor's clock (a manual clock in tests) and whose expiry deletes their keys,
// compare-and-swap transactions, and watches that replay history from a start revision.
//
// Not kept: multi-key ranges other than prefixes, range limits, revisions in reads, and
// etcd's rule against overlapping deletes and puts in one transaction (duplicate puts are
// refused, as etcd does).
//
// Reactor thread only: create the store, its clients and their watchers on one reactor and
// destroy them there.
#pragma once

#include <skiff/etcd/kv.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace skiff::etcd {

class memory_store {
public:
    // min_ttl: grants below it are raised to it, as etcd does (its minimum is 1.5 election
    // timeouts rounded up: 2 s with the default 1 s election timeout).
    static std::shared_ptr<memory_store> create(std::chrono::seconds min_ttl = std::chrono::seconds(2));
    ~memory_store();
    memory_store(const memory_store&) = delete;
    memory_store& operator=(const memory_store&) = delete;

    // The revision of the last write (1 for an empty store, as in etcd).
    std::int64_t revision() const noexcept;
    // Forgets the history before `rev`: a watch starting below it fails with errc::compacted.
    void compact(std::int64_t rev);
    // Ends a lease now, as if its TTL ran out: its keys are deleted (one revision) and watchers
    // see the deletes. False when no such lease exists.
    bool expire_lease(std::int64_t id);
    // Leases alive now (expired ones are reaped first).
    std::size_t lease_count();

    class impl;
    impl& internals() noexcept { return *_impl; }

private:
    explicit memory_store(std::chrono::seconds min_ttl);
    std::unique_ptr<impl> _impl;
};

class memory_kv final : public kv {
public:
    explicit memory_kv(std::shared_ptr<memory_store> store);
    ~memory_kv() override;

    // Failure injection: while set, every call of this client fails with errc::unavailable
    // and its watchers' streams break (next() gives errc::unavailable after the events they
    // already had), as when etcd cannot be reached from this client.
    void set_unavailable(bool down);

    runtime::task<result<range_result, error>> get(std::string key, std::stop_token st = {}) override;
    runtime::task<result<range_result, error>> get_prefix(std::string prefix, std::stop_token st = {}) override;
    runtime::task<result<std::int64_t, error>> put(std::string key, std::string value, std::int64_t lease = 0,
                                                   std::stop_token st = {}) override;
    runtime::task<result<std::int64_t, error>> del(std::string key, std::stop_token st = {}) override;
    runtime::task<result<txn_result, error>> txn(txn_request req, std::stop_token st = {}) override;
    runtime::task<result<lease_grant, error>> grant(std::chrono::seconds ttl, std::stop_token st = {}) override;
    runtime::task<result<std::chrono::seconds, error>> keepalive(std::int64_t lease,
                                                                 std::stop_token st = {}) override;
    runtime::task<result<void, error>> revoke(std::int64_t lease, std::stop_token st = {}) override;
    std::unique_ptr<watcher> watch(std::string key, bool prefix, std::int64_t start_revision) override;

    struct client_state;

private:
    std::shared_ptr<memory_store> _store;
    std::shared_ptr<client_state> _state;
};

} // namespace skiff::etcd
