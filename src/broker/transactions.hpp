// The broker's side of transactions (KIP-98): the per-core transaction coordinator wired to
// the partitions and groups it must reach (txn/coordinator.hpp), markers written on a
// partition's core, and a partition's transaction state kept beside its producer table
// (txn/partition_txns.hpp). Private to the broker module; docs/transactions.md.
#pragma once

#include "shard.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace skiff::broker {

// The core that coordinates a transactional id (the group hash: ids and groups spread alike).
unsigned txn_owner(std::string_view transactional_id, unsigned cores) noexcept;

// This core's coordinator, its env bound to `sh` (markers and offsets routed to their cores).
// `takeover`: a cluster-mode slot coordinator, which keeps ongoing transactions it loads.
std::unique_ptr<txn::coordinator> make_txn_coordinator(shard& sh, bool takeover = false);

// Loads this core's transactional ids (retried like load_groups) and starts the coordinator:
// transactions in flight at the last stop are finished or aborted in the background.
// "" on success, else why start-up must fail.
runtime::task<std::string> load_txns(shard* sh);

// Cluster mode, on the slot's core after claiming group slot `slot`: a coordinator for the ids
// of the slot, their states loaded (retried while still_ours() and the broker runs; null
// then). The caller start()s it once it is sure it still owns the slot.
runtime::task<std::unique_ptr<txn::coordinator>> load_slot_txns(shard* sh, std::int32_t slot,
                                                                 std::function<bool()> still_ours);

// On the partition's core: appends a commit or abort marker for the producer, durably; the
// partition's transaction state and producer table learn of it (the producer's older epochs
// are fenced from then on).
// Cluster mode, at the transaction's coordinator: asks broker `broker`, which coordinates
// `group`, to apply the offsets of a committed transaction (TxnOffsetCommit's apply form,
// handlers/transactions.cpp). Ok once stored there.
runtime::task<result<void, std::string>> apply_txn_offsets_at_peer(
    shard& sh, std::int32_t broker, std::string id, std::string group,
    std::map<std::string, std::map<std::int32_t, txn::pending_offset>> offsets);

struct marker_error {
    kafka::error_code code = kerr::unknown_server_error; // what WriteTxnMarkers answers for it
    std::string message;
};
runtime::task<result<void, marker_error>> write_marker(shard& sh, std::string topic, std::int32_t partition,
                                                       std::int64_t producer_id, std::int16_t epoch, bool commit);

} // namespace skiff::broker
