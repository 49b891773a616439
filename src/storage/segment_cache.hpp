// The read side of a partition log: which segments exist, which of their bytes are in
// memory, and the GETs that bring the rest.
//
// Committed segments arrive whole from the flush pipeline (add_committed) and restored ones
// as names and sizes (adopt). A read asks for the bytes from the batch holding an offset to
// the end of a segment (slice_for): from memory, from a GET already in flight for the same
// range (single flight: one request per range however many readers wait), or from a new
// GET — of the whole segment (validated, then cached, LRU up to cache_bytes) or of a range
// from the segment's index position. Sequential readers prefetch the next segment.
//
// Private to src/storage. One core, like the log that owns it.
#pragma once

#include <skiff/storage/cache_budget.hpp>

#include "log_instruments.hpp"

#include <skiff/core/result.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/log_config.hpp>
#include <skiff/storage/object_store.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <utility>

namespace skiff::storage::detail {

// A committed or restored segment as readers know it.
struct segment_entry {
    std::int64_t base = 0;
    std::int64_t last = -1; // -1: not known (restored, not the newest)
    std::uint64_t kfs_size = 0;
    bool has_index = false;
    bool corrupt = false;
    std::uint32_t index_size = 0;     // 0: not known
    std::int64_t max_timestamp = -1;  // largest batch max timestamp; -1: not known
    std::int64_t created_ms = -1;     // the header's flush time; -1: not known
    std::shared_ptr<const std::string> bytes; // whole .kfs when cached
    std::shared_ptr<const std::string> index; // whole .index when loaded
};

using segment_map = std::map<std::int64_t, segment_entry>;

// Bytes of a segment from the batch that holds an offset to the end of the body.
struct segment_slice {
    std::shared_ptr<const std::string> owner;
    std::span<const char> body_part;
    // False when body_part stops before the segment's end (a window of a large segment): the
    // reader continues in this segment after the last whole batch.
    bool to_end = true;
    // Where body_part starts in the .kfs object.
    std::uint64_t position = 0;
};

class segment_cache {
public:
    // GETs run under `gate` (they may serve several readers); `stats` gets hits and misses.
    segment_cache(object_store& store, io_budget& budget, const std::string& ns, const partition_id& id,
                  const log_config& cfg,
                  runtime::gate& gate, log_instruments& m, log_stats& stats);
    segment_cache(const segment_cache&) = delete;
    segment_cache& operator=(const segment_cache&) = delete;
    ~segment_cache();

    // The segments restore found (none of their bytes are in memory).
    void adopt(segment_map restored) { _segments = std::move(restored); }
    // A flush committed: the newest segment, with its bytes cached.
    void add_committed(std::int64_t base, std::int64_t last, std::shared_ptr<const std::string> kfs,
                       std::shared_ptr<const std::string> index, std::int64_t max_timestamp, std::int64_t created_ms);
    // A segment found after restore (the background check's LIST); ignored when known.
    void insert(segment_entry e);
    // Forgets a segment (retention deleted it, or it turned out not to exist). Readers that
    // already hold its bytes keep them; a GET in flight for it finds no entry to fill.
    void erase(std::int64_t base);
    const segment_map& segments() const noexcept { return _segments; }
    segment_entry* find(std::int64_t base) {
        auto it = _segments.find(base);
        return it == _segments.end() ? nullptr : &it->second;
    }
    // The segment holding `offset`, else the first one after it (offsets in a gap belong to
    // no segment); nullptr when none follows.
    segment_entry* covering(std::int64_t offset);
    // The base of the segment after `base`.
    std::optional<std::int64_t> next_base(std::int64_t base) const;
    // A merge stored `merged` under its first source's key: it replaces that entry (cached
    // bytes dropped; the new index kept) and the later sources it covers leave the map, so
    // their offsets are read from the merged object. Readers already holding a source's
    // bytes keep them.
    void apply_merge(segment_entry merged);
    // A reader stopped inside segment `base` before the batch at `offset`, which starts at
    // `position`: the next read from there starts at that batch instead of at the index entry
    // below it (with an entry every 100 records, that can be far back in a large segment).
    void remember(std::int64_t base, std::int64_t offset, std::uint64_t position);
    // A segment whose bytes turned out wrong is never served again.
    void mark_corrupt(std::int64_t base);
    // A repaired index (restore found the .kfs without one).
    void set_index(std::int64_t base, std::shared_ptr<const std::string> index);

    // The bytes of segment `base` from the batch holding `offset`. A missing or unusable
    // index falls back to the whole segment. Errors: the store's (cancelled when `st` fires
    // while loading the index), errc::corrupt for a segment that does not decode.
    //
    // A segment larger than half the cache (a merged one) is never fetched whole: a range of
    // at least `window` bytes from the index position is, so a reader pays for what it reads,
    // not for the rest of the object on every fetch.
    runtime::task<result<segment_slice, store_error>> slice_for(std::int64_t base, std::int64_t offset,
                                                                std::stop_token st, std::size_t window = 1 << 20);
    // Read-ahead for sequential readers: fetch the segment after `base` (below `hwm`).
    void prefetch_after(std::int64_t base, std::int64_t hwm);

private:
    using fetched = result<std::pair<std::shared_ptr<const std::string>, std::size_t>, store_error>;

    runtime::task<result<std::shared_ptr<const std::string>, store_error>> load_index(std::int64_t base,
                                                                                      std::stop_token st);
    runtime::task<result<segment_slice, store_error>> slice_for_position(std::int64_t base, std::uint64_t pos,
                                                                         std::size_t window = 0);
    static segment_slice make_slice(const std::shared_ptr<const std::string>& owner, std::size_t start, bool whole);
    // Whether a read of `e` from `pos` fetches the whole object (then cached) or a range.
    bool fetch_whole(const segment_entry& e, std::uint64_t pos) const noexcept;
    // Whether `got` bytes from `pos` reach the end of segment `base`'s body.
    bool reaches_end(std::int64_t base, std::uint64_t pos, std::size_t got) const noexcept;
    // The end (exclusive) of a ranged GET from `pos` of at least `window` bytes; 0: to the end.
    static std::uint64_t range_end(const segment_entry& e, std::uint64_t pos, std::size_t window) noexcept;
    runtime::task<fetched> fetch(std::int64_t base, std::uint64_t pos, bool whole, std::uint64_t end,
                                 std::stop_token st);
    runtime::task<void> prefetch(std::int64_t base);
    void cache_insert(std::int64_t base, std::size_t size);
    // Drops the cached bytes of `base` (the entry stays: it is fetched again when read).
    void drop_bytes(std::int64_t base);
    static void on_shared_evict(void* self, std::int64_t base);

    object_store& _store;
    io_budget& _budget;
    const std::string& _ns;
    const partition_id& _id;
    const log_config& _cfg;
    runtime::gate& _gate;
    log_instruments& _m;
    log_stats& _stats;

    segment_map _segments;
    std::deque<std::int64_t> _lru; // bases whose bytes are cached, oldest first
    std::size_t _used = 0;
    // Entries counted in the core's shared budget (log_config::shared_cache), by base.
    std::map<std::int64_t, cache_budget::handle> _shared;
    // One request in flight per object range (segment, position); the others wait on it.
    std::map<std::pair<std::int64_t, std::uint64_t>, std::shared_ptr<runtime::oneshot<fetched>>> _fetches;
    gauge_share _cache_g;
    // remember(): (base, offset) -> position, the most recent few.
    std::map<std::pair<std::int64_t, std::int64_t>, std::uint64_t> _cursors;
    std::deque<std::pair<std::int64_t, std::int64_t>> _cursor_order;
};

} // namespace skiff::storage::detail
