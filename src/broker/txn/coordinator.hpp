// The transaction coordinator of the transactional ids one core owns (Kafka's
// TransactionCoordinator + TransactionStateManager, KIP-98).
//
// Every change of an id's state is stored (txn_state.hpp) before the request that made it is
// answered, and one request per id runs at a time (a per-id lock), so the stored state is
// always the newest promise. Ending a transaction stores prepare_commit/prepare_abort, then
// writes a marker into every partition of the transaction (and, on commit, applies its
// TxnOffsetCommit offsets to their groups), then stores complete_*. EndTxn is answered after
// the markers are durable, not after the prepare as Kafka does: a producer's next transaction
// then never waits on CONCURRENT_TRANSACTIONS, at the cost of the markers' round trip.
//
// After a restart (load + start): a prepare_* state is finished, an ongoing one aborted with
// the producer's epoch bumped (kept instead when the config says keep_ongoing: a takeover) (the old instance is fenced; its TxnOffsetCommit offsets were
// stored, but its later produces could not be told apart from a new instance's). Ongoing
// transactions older than their timeout are aborted the same way, by a timer.
//
// Single-threaded: every call on the core that owns it. The broker reaches the partitions and
// groups through `coordinator_env` (cross-core hops), which unit tests replace with fakes.
#pragma once

#include "txn_state.hpp"

#include <skiff/core/result.hpp>
#include <skiff/kafka/errors.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/object_store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::broker::txn {

struct coordinator_config {
    coordinator_config() = default;
    std::string ns; // the bucket namespace of the state objects (the broker's)
    // Kafka's transaction.max.timeout.ms: a longer transaction.timeout.ms is refused.
    std::chrono::milliseconds max_timeout{900000};
    // How often ongoing transactions are checked against their timeouts (Kafka's
    // transaction.abort.timed.out.transaction.cleanup.interval.ms, 10 s there).
    std::chrono::milliseconds check_interval{1000};
    // Kafka's transactional.id.expiration.ms: an id with no transaction open and no request for
    // this long is forgotten (its state object deleted); its next InitProducerId starts afresh.
    std::chrono::milliseconds id_expiration{604800000};
    // What start() does with a transaction loaded Ongoing. A broker restart aborts it, with the
    // epoch bumped: a partition rebuilds its open transactions from a window of its log only,
    // so a long one may not be seen open (docs/transactions.md). A coordinator taking over a
    // group slot in cluster mode keeps it, as Kafka's does when its partition moves: the
    // producer goes on (it finds the new coordinator), and the timeout still applies.
    bool keep_ongoing = false;
    // One state write's bound; a request whose write exceeds it is answered retriably.
    std::chrono::milliseconds write_timeout{30000};
    // Wall-clock milliseconds (null: the system clock). Tests inject one.
    std::function<std::int64_t()> wall_ms;
};

using topic_partition = std::pair<std::string, std::int32_t>;

// What the coordinator needs from the broker.
struct coordinator_env {
    // A fresh producer id (the broker's persisted block allocation).
    std::function<runtime::task<result<std::int64_t, std::string>>()> allocate_producer_id;
    // Writes the marker into one partition; ok once it is durable. Failures are retried.
    std::function<runtime::task<result<void, std::string>>(topic_partition tp, std::int64_t producer_id,
                                                          std::int16_t epoch, bool commit)>
        write_marker;
    // Commits offsets to a group (ok once stored). Failures are retried.
    std::function<runtime::task<result<void, std::string>>(
        std::string group, std::map<std::string, std::map<std::int32_t, pending_offset>> offsets)>
        commit_offsets;
};

struct coordinator_stats {
    std::size_t ids = 0;     // transactional ids known
    std::size_t open = 0;    // transactions ongoing or being completed
    std::uint64_t committed = 0;
    std::uint64_t aborted = 0;   // by the producer
    std::uint64_t timed_out = 0; // aborted by the timeout
    std::uint64_t fenced = 0;    // aborted because a new instance initialised, or at recovery
    std::uint64_t expired = 0;   // ids forgotten after id_expiration
    std::uint64_t state_writes = 0;
    std::uint64_t state_write_failures = 0;
    std::uint64_t marker_retries = 0;

    // Sums (a broker's coordinators, one per served slot in cluster mode).
    coordinator_stats& operator+=(const coordinator_stats& o) noexcept {
        ids += o.ids;
        open += o.open;
        committed += o.committed;
        aborted += o.aborted;
        timed_out += o.timed_out;
        fenced += o.fenced;
        expired += o.expired;
        state_writes += o.state_writes;
        state_write_failures += o.state_write_failures;
        marker_retries += o.marker_retries;
        return *this;
    }
};

class coordinator {
public:
    coordinator(storage::object_store& store, coordinator_config cfg, coordinator_env env);
    ~coordinator();
    coordinator(const coordinator&) = delete;
    coordinator& operator=(const coordinator&) = delete;

    // Loads the stored states of the ids `owns` accepts (empty: all). Called once before any
    // request. A corrupt object is logged and skipped (its id starts over).
    runtime::task<result<void, storage::store_error>> load(std::function<bool(std::string_view)> owns);
    // Starts the timeout timer and finishes or aborts what load() found in flight, in the
    // background (requests for those ids wait for it).
    void start();

    // Errors are Kafka error codes. `version` picks PRODUCER_FENCED (new versions, KIP-588) or
    // INVALID_PRODUCER_EPOCH for a stale epoch: `fenced_since` is the first version that knows it.
    struct init_result {
        kafka::error_code error = kafka::error_code::none;
        std::int64_t producer_id = -1;
        std::int16_t producer_epoch = -1;
    };
    runtime::task<init_result> init_producer_id(std::string id, std::int32_t timeout_ms, std::int64_t producer_id,
                                                std::int16_t producer_epoch, bool fenced_known);
    runtime::task<kafka::error_code> add_partitions(std::string id, std::int64_t producer_id, std::int16_t epoch,
                                                    std::vector<topic_partition> partitions, bool fenced_known);
    runtime::task<kafka::error_code> add_offsets(std::string id, std::int64_t producer_id, std::int16_t epoch,
                                                 std::string group, bool fenced_known);
    runtime::task<kafka::error_code> txn_offset_commit(
        std::string id, std::int64_t producer_id, std::int16_t epoch, std::string group,
        std::map<std::string, std::map<std::int32_t, pending_offset>> offsets, bool fenced_known);
    runtime::task<kafka::error_code> end_txn(std::string id, std::int64_t producer_id, std::int16_t epoch, bool commit,
                                             bool fenced_known);

    // A transactional Produce: the partition must be in the id's ongoing transaction at this
    // producer id and epoch (KIP-890's verification), else the batch would open a transaction
    // no coordinator will ever end. No suspension.
    kafka::error_code verify_produce(std::string_view id, std::int64_t producer_id, std::int16_t epoch,
                                     const topic_partition& tp, bool fenced_known) const;

    // ListTransactions / DescribeTransactions (empty filters match all).
    std::vector<txn_metadata> list(const std::set<std::string>& states, const std::set<std::int64_t>& producer_ids) const;
    std::optional<txn_metadata> describe(std::string_view id) const;

    // Waits for requests and background work in flight, stops the timer.
    runtime::task<void> close();

    coordinator_stats stats() const noexcept;

    struct impl;

private:
    std::unique_ptr<impl> _i;
};

} // namespace skiff::broker::txn
