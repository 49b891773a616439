// etcd's v3 key-value model as skiff uses it: ranges, transactions, leases and watches.
//
// `kv` is the interface the cluster code is written against. Two implementations: the real one
// (etcd/gateway_kv.hpp) speaks etcd's v3 JSON gateway over this core's libcurl-multi client, and
// a fake (etcd/memory_kv.hpp) keeps the same semantics in process for unit tests — revisions,
// create-if-absent transactions, leases that expire on the reactor's clock and watches.
//
// Keys and values are arbitrary bytes (std::string). Every call belongs to the reactor thread
// the kv was created on, and honours its stop_token (cancellation is errc::cancelled, never
// success).
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/etcd/errc.hpp>
#include <skiff/runtime/task.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <variant>
#include <vector>

namespace skiff::etcd {

struct key_value {
    std::string key;
    std::string value;
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    std::int64_t version = 0;
    std::int64_t lease = 0; // 0: not bound to a lease
};

struct range_result {
    std::vector<key_value> kvs; // sorted by key
    std::int64_t revision = 0;  // the store's revision when the range was served
};

// The smallest key greater than every key that starts with `prefix` ("" for a prefix of
// 0xff bytes only, meaning "to the end of the keyspace"), as etcd's range_end wants it.
std::string prefix_end(std::string_view prefix);

// One comparison of a transaction: `target(key) op operand`. A key that does not exist has
// version, create_revision and mod_revision 0 and never equals any value.
struct compare {
    enum class target : std::uint8_t { version, create_revision, mod_revision, value, lease };
    enum class op : std::uint8_t { equal, not_equal, greater, less };
    std::string key;
    target what = target::version;
    op how = op::equal;
    std::int64_t number = 0; // for version, create_revision, mod_revision and lease
    std::string value;       // for value

    static compare absent(std::string key) { return {std::move(key), target::create_revision, op::equal, 0, {}}; }
    static compare mod_revision_is(std::string key, std::int64_t rev) {
        return {std::move(key), target::mod_revision, op::equal, rev, {}};
    }
    static compare value_is(std::string key, std::string v) {
        return {std::move(key), target::value, op::equal, 0, std::move(v)};
    }
};

struct put_op {
    std::string key;
    std::string value;
    std::int64_t lease = 0;
};
struct delete_op {
    std::string key;
    bool prefix = false; // delete every key that starts with `key`
};
struct range_op {
    std::string key;
    bool prefix = false;
};
using txn_op = std::variant<put_op, delete_op, range_op>;

struct txn_request {
    std::vector<compare> compares; // all must hold for `success` to run
    std::vector<txn_op> success;
    std::vector<txn_op> failure;
};

struct txn_result {
    bool succeeded = false;
    std::int64_t revision = 0;
    // One entry per range_op of the branch that ran, in order.
    std::vector<range_result> ranges;
};

struct lease_grant {
    std::int64_t id = 0;
    std::chrono::seconds ttl{0};
};

struct event {
    enum class kind : std::uint8_t { put, del };
    kind type = kind::put;
    key_value kv; // for del: key and mod_revision only
};

// A stream of changes to a key or prefix, from a start revision on. Destroying it (or the
// stop_token passed to next) cancels the stream.
class watcher {
public:
    virtual ~watcher() = default;
    // The next batch of events (never empty on success). errc::compacted when the start revision
    // is older than what etcd kept: the caller reads a fresh range and watches again from there.
    virtual runtime::task<result<std::vector<event>, error>> next(std::stop_token st = {}) = 0;
};

class kv {
public:
    virtual ~kv() = default;

    virtual runtime::task<result<range_result, error>> get(std::string key, std::stop_token st = {}) = 0;
    virtual runtime::task<result<range_result, error>> get_prefix(std::string prefix, std::stop_token st = {}) = 0;
    // Returns the revision of the write.
    virtual runtime::task<result<std::int64_t, error>> put(std::string key, std::string value, std::int64_t lease = 0,
                                                           std::stop_token st = {}) = 0;
    virtual runtime::task<result<std::int64_t, error>> del(std::string key, std::stop_token st = {}) = 0;
    virtual runtime::task<result<txn_result, error>> txn(txn_request req, std::stop_token st = {}) = 0;

    virtual runtime::task<result<lease_grant, error>> grant(std::chrono::seconds ttl, std::stop_token st = {}) = 0;
    // One keep-alive: the lease's remaining TTL as etcd granted it. errc::lease_not_found when
    // the lease expired or was revoked (its keys are gone).
    virtual runtime::task<result<std::chrono::seconds, error>> keepalive(std::int64_t lease,
                                                                         std::stop_token st = {}) = 0;
    virtual runtime::task<result<void, error>> revoke(std::int64_t lease, std::stop_token st = {}) = 0;

    // Changes to `key` (or every key under it when `prefix`) with mod_revision >= start_revision.
    virtual std::unique_ptr<watcher> watch(std::string key, bool prefix, std::int64_t start_revision) = 0;

    // Ends the work this kv runs in the background (watch streams) and waits for it. Await it
    // before destroying a kv that ever had a watch; calls after it are not allowed.
    // Idempotent. The default has nothing to wait for.
    virtual runtime::task<void> close() { co_return; }
};

} // namespace skiff::etcd
