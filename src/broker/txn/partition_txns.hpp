// The transactions of one partition as its log shows them: which producers have a transaction
// open (and from which offset), which transactions were aborted (between which offsets), and
// so the last stable offset (LSO) and the aborted-transaction list a read_committed Fetch
// needs (KIP-98).
//
// Fed every batch of the log in offset order, with its assigned offsets: a transactional data
// batch of a producer with no open transaction opens one at its base offset; a control batch
// (control_batch.hpp) closes the producer's open transaction, and an abort marker records
// {producer, first offset, marker offset}. A marker for a producer with no open transaction
// closes nothing (a coordinator re-writing a marker after a restart, or a transaction that
// wrote nothing to this partition) and records nothing. Batches without a producer id, and
// non-transactional ones (plain or idempotent), change nothing. A control batch whose marker
// does not read (read_control_batch gives nullopt) changes nothing either: guessing commit
// could show aborted records to read_committed consumers, guessing abort could hide committed
// ones; it is counted in unreadable_markers() instead.
//
// Pure and single-threaded: lives in the partition's slot, on its core.
#pragma once

#include <skiff/storage/record_batch.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace skiff::broker::txn {

struct aborted_txn {
    std::int64_t producer_id = -1;
    std::int64_t first_offset = -1; // the transaction's first batch in this partition
    std::int64_t last_offset = -1;  // its abort marker
    friend bool operator==(const aborted_txn&, const aborted_txn&) = default;
};

class partition_txns {
public:
    // One batch of the log, in offset order (base_offset and last_offset() are the log's).
    void on_batch(const storage::batch_view& b);

    // The first offset of the earliest open transaction, raised to the log start if that moved
    // past it (Kafka's UnifiedLog.updateFirstUnstableOffset); max() when none is open. O(1).
    std::int64_t first_unstable_offset() const noexcept;
    // min(first_unstable_offset(), high_watermark): below it every transaction is decided.
    std::int64_t last_stable_offset(std::int64_t high_watermark) const noexcept;

    // The aborted transactions a read_committed fetch of [from, to) must be told about: those
    // whose markers lie at or after `from` and whose first offsets lie before `to`, ordered by
    // first offset (Kafka's FetchResponse.AbortedTransactions). Unlike Kafka's
    // TransactionIndex.collectAbortedTxns it does not stop at the first marker at or after
    // `to`: a transaction that began before `to` is listed even when another transaction's
    // marker lies between `to` and its own. O(log n + the markers scanned), where the scan ends
    // once no remaining marker can belong to a transaction that began before `to`.
    std::vector<aborted_txn> aborted_between(std::int64_t from, std::int64_t to) const;

    // The log start moved: aborted transactions whose markers lie below it are forgotten, and
    // first_unstable_offset() never reports an offset below it. A log start below an earlier
    // one changes nothing.
    void forget_before(std::int64_t log_start);

    // An aborted transaction known from the partition's abort index (abort_index.hpp) rather
    // than from its marker in the log: remembered as if its marker had been fed, unless an
    // entry with the same marker offset is already known.
    void restore_aborted(const aborted_txn& t);

    bool is_open(std::int64_t producer_id) const;
    std::size_t open_count() const noexcept { return _open.size(); }
    std::size_t aborted_count() const noexcept { return _aborted.size(); }
    // Every open transaction: producer id -> first offset.
    const std::map<std::int64_t, std::int64_t>& open() const noexcept { return _open; }
    // Every remembered aborted transaction, ordered by marker offset.
    const std::vector<aborted_txn>& aborted() const noexcept { return _aborted; }
    // Control batches of a producer whose marker did not read (see above).
    std::size_t unreadable_markers() const noexcept { return _unreadable_markers; }

private:
    void close(std::int64_t producer_id, std::int64_t marker_offset, bool aborted);

    std::map<std::int64_t, std::int64_t> _open;  // producer id -> first offset
    std::multimap<std::int64_t, std::int64_t> _open_by_first; // first offset -> producer id
    std::vector<aborted_txn> _aborted; // by last_offset (appended in log order)
    // An upper bound of last_offset - first_offset over _aborted: bounds aborted_between's scan.
    std::int64_t _max_aborted_span = 0;
    std::int64_t _log_start = 0;
    std::size_t _unreadable_markers = 0;
};

// Cuts a Fetch's record set (whole magic-2 batches, as partition_log::read returns them) to
// the batches that end before `end` (a read_committed fetch stops at the LSO): the cut is at
// the first batch whose last offset is `end` or more, so a batch `end` falls inside is dropped
// whole. Returns the new size; a batch that does not parse (its CRC is not checked: the log
// did that on the way in) ends the cut there. Pure; any core.
std::size_t cut_records_before(std::string& records, std::int64_t end);

} // namespace skiff::broker::txn
