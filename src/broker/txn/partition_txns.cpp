#include "partition_txns.hpp"

#include "control_batch.hpp"

#include <algorithm>

namespace skiff::broker::txn {

void partition_txns::on_batch(const storage::batch_view& b) {
    // Kafka keeps producer state only for batches with a producer id (RecordBatch.hasProducerId).
    if (b.producer_id < 0) return;
    if (b.is_control()) {
        auto marker = read_control_batch(b);
        if (!marker) {
            ++_unreadable_markers;
            return;
        }
        // The marker's offset is its batch's base offset (ProducerAppendInfo.appendEndTxnMarker).
        close(b.producer_id, b.base_offset, marker->type == marker_type::abort);
        return;
    }
    // Idempotent and plain batches are outside any transaction; a transactional batch of a
    // producer whose transaction is already open only extends it.
    if (!b.is_transactional() || _open.contains(b.producer_id)) return;
    _open.emplace(b.producer_id, b.base_offset);
    _open_by_first.emplace(b.base_offset, b.producer_id);
}

void partition_txns::close(std::int64_t producer_id, std::int64_t marker_offset, bool aborted) {
    auto it = _open.find(producer_id);
    if (it == _open.end()) return;
    const auto first = it->second;
    _open.erase(it);
    auto [lo, hi] = _open_by_first.equal_range(first);
    for (auto j = lo; j != hi; ++j) {
        if (j->second == producer_id) {
            _open_by_first.erase(j);
            break;
        }
    }
    if (!aborted) return;

    aborted_txn t;
    t.producer_id = producer_id;
    t.first_offset = first;
    t.last_offset = marker_offset;
    _max_aborted_span = std::max(_max_aborted_span, marker_offset - first);
    // Fed in log order this is a push_back; the search keeps aborted_between's binary search
    // right should a caller ever feed a marker out of order.
    auto pos = std::upper_bound(_aborted.begin(), _aborted.end(), marker_offset,
                                [](std::int64_t v, const aborted_txn& a) { return v < a.last_offset; });
    _aborted.insert(pos, t);
}

void partition_txns::restore_aborted(const aborted_txn& t) {
    if (t.producer_id < 0 || t.first_offset < 0 || t.last_offset < t.first_offset) return;
    auto pos = std::lower_bound(_aborted.begin(), _aborted.end(), t.last_offset,
                                [](const aborted_txn& a, std::int64_t v) { return a.last_offset < v; });
    if (pos != _aborted.end() && pos->last_offset == t.last_offset) return;
    _max_aborted_span = std::max(_max_aborted_span, t.last_offset - t.first_offset);
    _aborted.insert(pos, t);
}

std::int64_t partition_txns::first_unstable_offset() const noexcept {
    if (_open_by_first.empty()) return std::numeric_limits<std::int64_t>::max();
    return std::max(_open_by_first.begin()->first, _log_start);
}

std::int64_t partition_txns::last_stable_offset(std::int64_t high_watermark) const noexcept {
    return std::min(first_unstable_offset(), high_watermark);
}

bool partition_txns::is_open(std::int64_t producer_id) const { return _open.contains(producer_id); }

std::vector<aborted_txn> partition_txns::aborted_between(std::int64_t from, std::int64_t to) const {
    std::vector<aborted_txn> out;
    auto it = std::lower_bound(_aborted.begin(), _aborted.end(), from,
                               [](const aborted_txn& a, std::int64_t v) { return a.last_offset < v; });
    for (; it != _aborted.end(); ++it) {
        // Every later entry has a marker at least this far out, so a first offset of at least
        // last_offset - _max_aborted_span: once that reaches `to`, none can qualify.
        if (it->last_offset - _max_aborted_span >= to) break;
        if (it->first_offset < to) out.push_back(*it);
    }
    std::sort(out.begin(), out.end(), [](const aborted_txn& a, const aborted_txn& b) {
        return a.first_offset != b.first_offset ? a.first_offset < b.first_offset : a.last_offset < b.last_offset;
    });
    return out;
}

void partition_txns::forget_before(std::int64_t log_start) {
    if (log_start <= _log_start) return;
    _log_start = log_start;
    auto end = std::lower_bound(_aborted.begin(), _aborted.end(), log_start,
                                [](const aborted_txn& a, std::int64_t v) { return a.last_offset < v; });
    if (end == _aborted.begin()) return;
    _aborted.erase(_aborted.begin(), end);
    // The scan bound may shrink with the long transactions that went.
    _max_aborted_span = 0;
    for (const auto& a : _aborted) _max_aborted_span = std::max(_max_aborted_span, a.last_offset - a.first_offset);
}

std::size_t cut_records_before(std::string& records, std::int64_t end) {
    std::size_t pos = 0;
    while (pos < records.size()) {
        const std::span<const char> rest(records.data() + pos, records.size() - pos);
        auto b = storage::parse_batch(rest, /*verify_crc=*/false);
        if (!b || b->last_offset() >= end) break;
        pos += b->size();
    }
    records.resize(pos);
    return pos;
}

} // namespace skiff::broker::txn
