#include <algorithm>
#include <skiff/broker/producer_state.hpp>

#include <limits>

namespace skiff::broker {

namespace {
constexpr std::size_t kept_batches = 5; // Kafka's ProducerStateEntry.NumBatchesToRetain
}

std::int32_t producer_table::next_seq(std::int32_t seq, std::int32_t n) noexcept {
    const std::int64_t v = std::int64_t{seq} + n;
    constexpr std::int64_t span = std::int64_t{std::numeric_limits<std::int32_t>::max()} + 1;
    return static_cast<std::int32_t>(v % span);
}

producer_table::check_result producer_table::check_and_reserve(std::int64_t pid, std::int16_t epoch,
                                                               std::int32_t base_seq, std::int32_t last_seq,
                                                               std::uint64_t now_ms) {
    auto it = _producers.find(pid);
    if (it == _producers.end()) {
        if (_producers.size() >= _max) evict_one();
        producer p;
        p.epoch = epoch;
        p.last_used_ms = now_ms;
        p.batches.push_back(batch{base_seq, last_seq, -1, -1, -1, true});
        _producers.emplace(pid, std::move(p));
        return {};
    }
    producer& p = it->second;
    p.last_used_ms = now_ms;
    if (epoch < p.epoch) return {verdict::stale_epoch};
    if (epoch > p.epoch) {
        // A bumped epoch restarts the sequence at 0 (KIP-360). Anything else means batches
        // of the new epoch were lost.
        if (base_seq != 0) return {verdict::out_of_order};
        p.epoch = epoch;
        p.batches.clear();
        p.batches.push_back(batch{base_seq, last_seq, -1, -1, -1, true});
        return {};
    }
    for (auto& b : p.batches) {
        if (b.first_seq == base_seq && b.last_seq == last_seq) {
            if (b.pending) return {verdict::duplicate_pending};
            return {verdict::duplicate, b.base_offset, b.last_offset};
        }
    }
    if (!p.batches.empty() && base_seq != next_seq(p.batches.back().last_seq, 1)) return {verdict::out_of_order};
    p.batches.push_back(batch{base_seq, last_seq, -1, -1, -1, true});
    while (p.batches.size() > kept_batches) p.batches.pop_front();
    return {};
}

void producer_table::complete(std::int64_t pid, std::int16_t epoch, std::int32_t base_seq, std::int64_t base_offset,
                              std::int64_t last_offset, std::int64_t max_timestamp) {
    auto it = _producers.find(pid);
    if (it == _producers.end() || it->second.epoch != epoch) return;
    for (auto& b : it->second.batches) {
        if (b.first_seq == base_seq && b.pending) {
            b.pending = false;
            b.base_offset = base_offset;
            b.last_offset = last_offset;
            b.max_timestamp = max_timestamp;
            return;
        }
    }
}

void producer_table::fence(std::int64_t pid, std::int16_t epoch) {
    auto it = _producers.find(pid);
    if (it == _producers.end()) {
        if (_producers.size() >= _max) evict_one();
        producer p;
        p.epoch = epoch;
        _producers.emplace(pid, std::move(p));
        return;
    }
    if (epoch <= it->second.epoch) return;
    it->second.epoch = epoch;
    it->second.batches.clear();
}

void producer_table::abort(std::int64_t pid, std::int16_t epoch, std::int32_t base_seq) {
    auto it = _producers.find(pid);
    if (it == _producers.end() || it->second.epoch != epoch) return;
    auto& bs = it->second.batches;
    for (auto b = bs.begin(); b != bs.end(); ++b) {
        if (b->first_seq == base_seq && b->pending) {
            bs.erase(b);
            break;
        }
    }
    if (bs.empty()) _producers.erase(it); // unknown again: its retry is accepted as new
}

void producer_table::replay(std::int64_t pid, std::int16_t epoch, std::int32_t base_seq, std::int32_t last_seq,
                            std::int64_t base_offset, std::int64_t last_offset, std::uint64_t now_ms,
                            std::int64_t max_timestamp) {
    auto it = _producers.find(pid);
    if (it == _producers.end()) {
        if (_producers.size() >= _max) evict_one();
        it = _producers.emplace(pid, producer{}).first;
        it->second.epoch = epoch;
    }
    producer& p = it->second;
    if (epoch < p.epoch) return;
    if (epoch > p.epoch) {
        p.epoch = epoch;
        p.batches.clear();
    }
    p.last_used_ms = now_ms;
    p.batches.push_back(batch{base_seq, last_seq, base_offset, last_offset, max_timestamp, false});
    while (p.batches.size() > kept_batches) p.batches.pop_front();
}

std::vector<producer_table::producer_info> producer_table::describe() const {
    std::vector<producer_info> out;
    out.reserve(_producers.size());
    for (const auto& [pid, p] : _producers) {
        producer_info info;
        info.producer_id = pid;
        info.epoch = p.epoch;
        // The newest written batch (a pending one is not written yet).
        for (auto b = p.batches.rbegin(); b != p.batches.rend(); ++b) {
            if (b->pending) continue;
            info.last_sequence = b->last_seq;
            info.last_timestamp = b->max_timestamp;
            break;
        }
        out.push_back(info);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.producer_id < b.producer_id; });
    return out;
}

void producer_table::evict_one() {
    auto oldest = _producers.end();
    for (auto it = _producers.begin(); it != _producers.end(); ++it) {
        const bool busy = !it->second.batches.empty() && it->second.batches.back().pending;
        if (busy) continue;
        if (oldest == _producers.end() || it->second.last_used_ms < oldest->second.last_used_ms) oldest = it;
    }
    if (oldest != _producers.end()) _producers.erase(oldest);
}

} // namespace skiff::broker
