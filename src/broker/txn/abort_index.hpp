// A partition's aborted-transaction index in the bucket: one small object per aborted
// transaction, beside the partition's segments,
//
//   {ns}/{topic}/{partition}/txn-aborted-{marker offset:020}-{first offset:020}-{producer id:020}
//
// with the three numbers in the name (one LIST of the `txn-aborted-` prefix rebuilds the
// index, no GET) and as JSON in the body for people. Readers of the reference format never
// open it: it is not a segment name (storage/layout.hpp leaves such keys alone), and deleting
// a topic removes it with the topic's prefix. Written after the abort marker is durable; a
// read_committed consumer needs it for aborted transactions older than the window of the log
// the broker replays when it opens a partition (idempotence.cpp).
#pragma once

#include "partition_txns.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace skiff::broker::txn {

// "{partition prefix}txn-aborted-": what a LIST for the index asks for.
std::string abort_index_prefix(std::string_view partition_prefix);
std::string abort_index_key(std::string_view partition_prefix, const aborted_txn& t);
std::string abort_index_body(const aborted_txn& t);
// The entry a listed key names; nullopt for anything else (including a malformed name).
std::optional<aborted_txn> parse_abort_index_key(std::string_view partition_prefix, std::string_view key);

} // namespace skiff::broker::txn
