#include "segment_cache.hpp"
#include "hedged.hpp"

#include <skiff/core/endian.hpp>
#include <skiff/core/log.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace skiff::storage::detail {

segment_cache::segment_cache(object_store& store, io_budget& budget, const std::string& ns, const partition_id& id,
                             const log_config& cfg,
                             runtime::gate& gate, log_instruments& m, log_stats& stats)
    : _store(store), _budget(budget), _ns(ns), _id(id), _cfg(cfg), _gate(gate), _m(m), _stats(stats) {
    _cache_g.bind(m.cache_bytes);
}

void segment_cache::add_committed(std::int64_t base, std::int64_t last, std::shared_ptr<const std::string> kfs,
                                  std::shared_ptr<const std::string> index, std::int64_t max_timestamp,
                                  std::int64_t created_ms) {
    segment_entry e;
    e.base = base;
    e.last = last;
    e.kfs_size = kfs->size();
    e.index_size = static_cast<std::uint32_t>(index->size());
    e.max_timestamp = max_timestamp;
    e.created_ms = created_ms;
    e.has_index = true;
    e.bytes = std::move(kfs);
    e.index = std::move(index);
    const auto size = e.kfs_size;
    _segments[base] = std::move(e);
    cache_insert(base, size);
}

segment_entry* segment_cache::covering(std::int64_t offset) {
    auto it = _segments.upper_bound(offset);
    if (it != _segments.begin()) {
        auto prev = std::prev(it);
        if (prev->second.last < 0 || prev->second.last >= offset) it = prev;
    }
    return it == _segments.end() ? nullptr : &it->second;
}

void segment_cache::apply_merge(segment_entry merged) {
    const auto base = merged.base;
    const auto last = merged.last;
    std::vector<std::int64_t> gone;
    for (auto it = _segments.lower_bound(base); it != _segments.end() && it->first <= last; ++it) {
        gone.push_back(it->first);
    }
    for (auto b : gone) erase(b);
    merged.bytes.reset();
    _segments.emplace(base, std::move(merged));
}

std::optional<std::int64_t> segment_cache::next_base(std::int64_t base) const {
    auto after = _segments.upper_bound(base);
    if (after == _segments.end()) return std::nullopt;
    return after->first;
}

void segment_cache::insert(segment_entry e) {
    const auto base = e.base;
    if (_segments.count(base)) return;
    _segments.emplace(base, std::move(e));
}

void segment_cache::erase(std::int64_t base) {
    auto it = _segments.find(base);
    if (it == _segments.end()) return;
    if (auto h = _shared.find(base); h != _shared.end()) {
        _cfg.shared_cache->erase(h->second);
        _shared.erase(h);
    }
    drop_bytes(base);
    _segments.erase(base);
}

void segment_cache::remember(std::int64_t base, std::int64_t offset, std::uint64_t position) {
    constexpr std::size_t keep = 256;
    auto [it, added] = _cursors.insert_or_assign({base, offset}, position);
    (void)it;
    if (!added) return;
    _cursor_order.emplace_back(base, offset);
    while (_cursor_order.size() > keep) {
        _cursors.erase(_cursor_order.front());
        _cursor_order.pop_front();
    }
}

void segment_cache::mark_corrupt(std::int64_t base) {
    auto seg = _segments.find(base);
    if (seg != _segments.end()) seg->second.corrupt = true;
}

void segment_cache::set_index(std::int64_t base, std::shared_ptr<const std::string> index) {
    auto it = _segments.find(base);
    if (it == _segments.end()) return;
    it->second.has_index = true;
    it->second.index_size = static_cast<std::uint32_t>(index->size());
    it->second.index = std::move(index);
}

segment_cache::~segment_cache() {
    if (_cfg.shared_cache) {
        for (auto& [base, h] : _shared) _cfg.shared_cache->erase(h);
    }
}

void segment_cache::drop_bytes(std::int64_t base) {
    if (auto pos = std::find(_lru.begin(), _lru.end(), base); pos != _lru.end()) _lru.erase(pos);
    auto it = _segments.find(base);
    if (it != _segments.end() && it->second.bytes) {
        _used -= it->second.bytes->size();
        _cache_g.add(-static_cast<std::int64_t>(it->second.bytes->size()));
        _m.cache_evictions.inc();
        it->second.bytes.reset();
    }
}

void segment_cache::on_shared_evict(void* self, std::int64_t base) {
    auto* c = static_cast<segment_cache*>(self);
    c->_shared.erase(base); // the budget already forgot it
    c->drop_bytes(base);
}

void segment_cache::cache_insert(std::int64_t base, std::size_t size) {
    _lru.push_back(base);
    _used += size;
    _cache_g.add(static_cast<std::int64_t>(size));
    // This log's own limit first ...
    while (_used > _cfg.cache_bytes && _lru.size() > 1) {
        const auto victim = _lru.front();
        if (auto h = _shared.find(victim); h != _shared.end()) {
            _cfg.shared_cache->erase(h->second);
            _shared.erase(h);
        }
        drop_bytes(victim);
    }
    // ... then the core's: which may drop the oldest segment of any log, this one's included.
    if (_cfg.shared_cache) {
        if (auto old = _shared.find(base); old != _shared.end()) {
            _cfg.shared_cache->erase(old->second);
            _shared.erase(old);
        }
        // Inserting may evict this log's own older entries (on_shared_evict edits _shared).
        auto h = _cfg.shared_cache->insert(this, &segment_cache::on_shared_evict, base, size);
        _shared.emplace(base, h);
    }
}

// By base, not by entry: retention may erase the entry while the GET is out.
runtime::task<result<std::shared_ptr<const std::string>, store_error>> segment_cache::load_index(std::int64_t base,
                                                                                                std::stop_token st) {
    if (auto it = _segments.find(base); it != _segments.end() && it->second.index) co_return it->second.index;
    auto permit = co_await _budget.acquire(io_budget::priority::normal, st);
    if (!permit) co_return failure{store_error(errc::cancelled, "cancelled")};
    const auto t0 = _m.now();
    auto r = co_await _store.get(index_key(_ns, _id, base), std::nullopt, st);
    _m.store_done(store_op::get, key_kind::index, t0, 0, r ? r->data.size() : 0, r ? nullptr : &r.error());
    if (!r) co_return failure{std::move(r).error()};
    auto idx = decode_index(r->data);
    if (!idx) co_return failure{store_error(errc::corrupt, idx.error().message)};
    auto index = std::make_shared<const std::string>(std::move(r->data));
    if (auto it = _segments.find(base); it != _segments.end()) it->second.index = index;
    co_return index;
}

bool segment_cache::reaches_end(std::int64_t base, std::uint64_t pos, std::size_t got) const noexcept {
    auto it = _segments.find(base);
    if (it == _segments.end() || it->second.kfs_size == 0) return true;
    const std::uint64_t size = it->second.kfs_size;
    return pos + got + segment_footer_size >= size;
}

bool segment_cache::fetch_whole(const segment_entry& e, std::uint64_t pos) const noexcept {
    if (pos != segment_header_size) return false;
    // Unknown size or no index: only the whole object can be walked.
    if (e.kfs_size == 0 || !e.has_index) return true;
    return e.kfs_size <= std::max<std::uint64_t>(_cfg.cache_bytes / 2, 1);
}

std::uint64_t segment_cache::range_end(const segment_entry& e, std::uint64_t pos, std::size_t window) noexcept {
    if (window == 0 || e.kfs_size == 0) return 0;
    const std::uint64_t body_end = e.kfs_size > segment_footer_size ? e.kfs_size - segment_footer_size : e.kfs_size;
    const std::uint64_t end = pos + window;
    return end >= body_end ? 0 : end;
}

runtime::task<result<segment_slice, store_error>> segment_cache::slice_for(std::int64_t base, std::int64_t offset,
                                                                           std::stop_token st, std::size_t window) {
    auto found = _segments.find(base);
    if (found == _segments.end()) co_return failure{store_error(errc::not_found, fmt::format("no segment {}", base))};
    auto& e = found->second;
    if (e.bytes) {
        ++_stats.cache_hits;
        _m.cache_hits.inc();
        const auto& b = *e.bytes;
        co_return segment_slice{e.bytes,
                                std::span<const char>(b.data() + segment_header_size,
                                                      b.size() - segment_header_size - segment_footer_size),
                                true, segment_header_size};
    }
    ++_stats.cache_misses;
    _m.cache_misses.inc();
    std::uint64_t pos = segment_header_size;
    std::optional<std::int64_t> entry_offset;
    if (auto c = _cursors.find({base, offset}); c != _cursors.end()) {
        pos = c->second;
        entry_offset = offset;
    } else if (e.has_index) {
        // `e` is not used after this wait: the entry may be gone when it ends.
        auto idx = co_await load_index(base, st);
        if (idx) {
            auto view = decode_index(**idx);
            if (view) {
                if (auto entry = lookup_entry(*view, offset); entry && entry->position > 0) {
                    pos = std::max<std::uint64_t>(static_cast<std::uint64_t>(entry->position), segment_header_size);
                    entry_offset = entry->offset;
                }
            }
        } else if (idx.error().code == errc::cancelled) {
            co_return failure{std::move(idx).error()};
        } else {
            // A missing or unreadable index falls back to walking the whole segment.
            log::warn("{}: index of segment {} unusable ({}); walking the segment", _store.describe(), base,
                      idx.error().message);
            if (auto it = _segments.find(base); it != _segments.end()) it->second.has_index = false;
        }
    }
    auto slice = co_await slice_for_position(base, pos, window);
    if (!slice || !entry_offset || pos == segment_header_size) co_return slice;
    if (auto it = _segments.find(base); it != _segments.end() && it->second.bytes && slice->owner == it->second.bytes) {
        co_return slice; // cached whole meanwhile: the whole body, not the range
    }
    // The range must start with the batch the index names. An index that belongs to another
    // segment under the same base (two owners' halves of a pair, docs/cluster.md) points
    // elsewhere: walk the whole segment instead, and never trust that index again.
    const auto& part = slice->body_part;
    if (part.size() >= batch_header_size && part[batch_field::magic] == 2 &&
        be::read_i64(part.data() + batch_field::base_offset) == *entry_offset) {
        co_return slice;
    }
    log::warn("{}: index of segment {} of {}/{} does not match the segment; walking the segment", _store.describe(),
              base, _id.topic, _id.partition);
    if (auto it = _segments.find(base); it != _segments.end()) {
        it->second.has_index = false;
        it->second.index.reset();
    }
    co_return co_await slice_for_position(base, segment_header_size, window);
}

// The bytes from `pos` to the end of segment `base`: from the cache, from a GET already in
// flight for the same range, or from a new GET. The GET runs under the log's gate, not the
// caller's stop token, since other readers may be waiting on it; it is bounded by the
// store's own deadline.
runtime::task<result<segment_slice, store_error>> segment_cache::slice_for_position(std::int64_t base,
                                                                                    std::uint64_t pos,
                                                                                    std::size_t window) {
    auto it_seg = _segments.find(base);
    if (it_seg == _segments.end()) co_return failure{store_error(errc::not_found, fmt::format("no segment {}", base))};
    if (it_seg->second.bytes) {
        auto slice = make_slice(it_seg->second.bytes, 0, true);
        slice.position = segment_header_size;
        co_return slice;
    }
    const bool whole = fetch_whole(it_seg->second, pos);
    const std::uint64_t end = whole ? 0 : range_end(it_seg->second, pos, window);
    const auto key = std::make_pair(base, pos);
    if (auto it = _fetches.find(key); it != _fetches.end()) {
        auto slot = it->second;
        auto waited = co_await slot->wait();
        // The slot is shared, so it cannot break; it has no stop or timeout of its own.
        if (!waited) co_return failure{store_error(errc::cancelled, "cancelled")};
        if (!waited->has_value()) co_return failure{waited->error()};
        auto [owner, start] = waited->value();
        auto slice = make_slice(owner, start, whole);
        // The fetch this one joined may have asked for another window: a range that stops
        // before the segment's body ends is partial (the reader continues after it).
        if (!whole) slice.to_end = reaches_end(base, pos, owner->size());
        slice.position = whole ? segment_header_size : pos;
        co_return slice;
    }
    auto slot = std::make_shared<runtime::oneshot<fetched>>();
    _fetches[key] = slot;
    auto got = co_await fetch(base, pos, whole, end, _gate.stop_token());
    slot->set(got);
    _fetches.erase(key);
    if (!got) co_return failure{std::move(got).error()};
    auto slice = make_slice(got->first, got->second, whole);
    if (!whole) slice.to_end = reaches_end(base, pos, got->first->size());
    slice.position = whole ? segment_header_size : pos;
    co_return slice;
}

segment_slice segment_cache::make_slice(const std::shared_ptr<const std::string>& owner, std::size_t start,
                                        bool whole) {
    if (whole) {
        return segment_slice{owner, std::span<const char>(owner->data() + segment_header_size,
                                                          owner->size() - segment_header_size - segment_footer_size)};
    }
    return segment_slice{owner, std::span<const char>(owner->data() + start, owner->size() - start)};
}

// One GET: the whole segment (validated, then cached) or a range from an index position.
runtime::task<segment_cache::fetched> segment_cache::fetch(std::int64_t base, std::uint64_t pos, bool whole,
                                                           std::uint64_t end, std::stop_token st) {
    std::optional<byte_range> range;
    if (!whole) range = end != 0 ? byte_range::between(pos, end - 1) : byte_range::from(pos);
    // One GET under a permit; hedged like a flush PUT (hedge.hpp): a GET slower than the core's
    // recent p99 is sent again and the first answer wins. The losing twin may outlive this frame.
    hedge_attempt<get_result> get_one = [this, key = segment_key(_ns, _id, base), range,
                                         whole](std::stop_token ast) -> runtime::task<result<get_result, store_error>> {
        auto permit = co_await _budget.acquire(io_budget::priority::normal, ast);
        if (!permit) co_return failure{store_error(errc::cancelled, "cancelled")};
        const auto t0 = _m.now();
        auto got = co_await _store.get(key, range, ast);
        _m.store_done(whole ? store_op::get : store_op::get_range, key_kind::kfs, t0, 0, got ? got->data.size() : 0,
                      got ? nullptr : &got.error());
        co_return got;
    };
    bool hedged = false;
    auto r = co_await run_hedged<get_result>(_budget.get_hedge(), _gate, std::move(get_one), st, &hedged);
    if (hedged) _m.hedges.inc();
    if (!r) co_return failure{std::move(r).error()};
    auto data = std::make_shared<std::string>(std::move(r->data));
    auto it = _segments.find(base);
    if (whole) {
        // Validate what we cache: a segment with a wrong footer is never served.
        auto seg = decode_segment(*data);
        if (!seg) {
            if (it != _segments.end()) it->second.corrupt = true;
            co_return failure{store_error(errc::corrupt, fmt::format("segment {} of {}/{} is corrupt: {}", base,
                                                                     _id.topic, _id.partition, seg.error().message))};
        }
        std::shared_ptr<const std::string> shared = data;
        // A size other than the entry's is the object before or after a merge replaced it
        // (the GET crossed the PUT): served to this reader, never cached under the entry.
        if (it != _segments.end() && !it->second.bytes &&
            (it->second.kfs_size == 0 || it->second.kfs_size == data->size())) {
            it->second.last = seg->last_offset();
            it->second.kfs_size = data->size();
            it->second.bytes = shared;
            cache_insert(base, data->size());
        }
        co_return std::make_pair(shared, std::size_t{0});
    }
    std::shared_ptr<const std::string> shared = data;
    co_return std::make_pair(shared, std::size_t{0});
}

void segment_cache::prefetch_after(std::int64_t base, std::int64_t hwm) {
    auto next = _segments.upper_bound(base);
    if (next == _segments.end() || next->second.bytes || next->second.corrupt) return;
    // Too large to cache: it is read in windows when its turn comes.
    if (!fetch_whole(next->second, segment_header_size)) return;
    if (next->first >= hwm) return;
    if (_fetches.count({next->first, segment_header_size})) return;
    _m.prefetches.inc();
    (void)_gate.spawn(prefetch(next->first));
}

runtime::task<void> segment_cache::prefetch(std::int64_t base) {
    auto r = co_await slice_for_position(base, segment_header_size);
    (void)r;
}

} // namespace skiff::storage::detail
