// One transactional id's state at its coordinator (Kafka's TransactionMetadata), and its
// persisted form: one JSON object per id at `{ns}/skiff~meta/txns/{escaped id}/state.json`.
//
// The coordinator writes the object before it answers any request that changed the state, so
// after a crash the object says what was promised: the partitions that may hold the
// transaction's data (each needs a marker), the offsets a commit must apply, and whether the
// outcome was already decided (prepare_*: finish it) or not (ongoing: abort it).
#pragma once

#include <skiff/core/result.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace skiff::broker::txn {

// Kafka's TransactionState; names as ListTransactions and DescribeTransactions show them.
enum class state : std::uint8_t { empty, ongoing, prepare_commit, prepare_abort, complete_commit, complete_abort };
std::string_view state_name(state s) noexcept; // "Empty", "Ongoing", "PrepareCommit", ...

// An offset committed inside a transaction (TxnOffsetCommit), applied to its group on commit.
struct pending_offset {
    std::int64_t offset = -1;
    std::int32_t leader_epoch = -1;
    std::string metadata;
    friend bool operator==(const pending_offset&, const pending_offset&) = default;
};
// group -> topic -> partition -> offset
using pending_offsets = std::map<std::string, std::map<std::string, std::map<std::int32_t, pending_offset>>>;

struct txn_metadata {
    std::string id;
    std::int64_t producer_id = -1;
    std::int16_t producer_epoch = -1;
    std::int32_t timeout_ms = 60000;
    state st = state::empty;
    std::set<std::pair<std::string, std::int32_t>> partitions; // the transaction's, until complete
    std::set<std::string> groups;                                // AddOffsetsToTxn
    pending_offsets offsets;                                     // TxnOffsetCommit
    std::int64_t start_ms = -1;  // when the transaction began (first AddPartitions/AddOffsets)
    std::int64_t update_ms = -1; // last change
    friend bool operator==(const txn_metadata&, const txn_metadata&) = default;
};

std::string serialize_txn(const txn_metadata& m);
// The state, or one sentence saying why the bytes are unusable.
result<txn_metadata, std::string> parse_txn(std::string_view body);

// `{ns}/skiff~meta/txns/`, and the key of one id's object under it (the id escaped as group ids
// are: everything outside [A-Za-z0-9._-] as %XX, long ids shortened with a hash).
std::string txns_prefix(std::string_view ns);
std::string txn_state_key(std::string_view ns, std::string_view transactional_id);

} // namespace skiff::broker::txn
