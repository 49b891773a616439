// The bytes of committed segments that all the partition logs of one core may keep in memory
// for readers, together (log_config::shared_cache). Each log's segment cache also has its own
// limit (log_config::cache_bytes); this one is what bounds a core with many partitions.
//
// Entries are evicted oldest-first across every log that shares the budget: a log that inserts
// past the limit may make another log drop its oldest cached segment (which it fetches again
// from the store if a reader wants it). Single-core, like the logs that share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>

namespace skiff::storage {

class cache_budget {
public:
    // Called when the budget evicts `base` of `owner`: the owner drops those bytes. It must
    // not call back into the budget for that entry (it is already gone).
    using evict_fn = void (*)(void* owner, std::int64_t base);
    struct entry {
        void* owner;
        evict_fn evict;
        std::int64_t base;
        std::size_t size;
    };
    using handle = std::list<entry>::iterator;

    explicit cache_budget(std::size_t limit) : _limit(limit) {}
    cache_budget(const cache_budget&) = delete;
    cache_budget& operator=(const cache_budget&) = delete;

    // Counts a newly cached segment, then evicts the oldest entries (any owner's, never this
    // new one) while over the limit.
    handle insert(void* owner, evict_fn evict, std::int64_t base, std::size_t size) {
        _lru.push_back(entry{owner, evict, base, size});
        auto h = std::prev(_lru.end());
        _used += size;
        while (_used > _limit && _lru.begin() != h) {
            entry victim = _lru.front();
            _lru.pop_front();
            _used -= victim.size;
            ++_evictions;
            victim.evict(victim.owner, victim.base);
        }
        return h;
    }
    // The owner dropped the entry itself (its own limit, or it closes): no callback.
    void erase(handle h) noexcept {
        _used -= h->size;
        _lru.erase(h);
    }

    std::size_t used() const noexcept { return _used; }
    std::size_t limit() const noexcept { return _limit; }
    std::size_t entries() const noexcept { return _lru.size(); }
    std::uint64_t evictions() const noexcept { return _evictions; }

private:
    std::list<entry> _lru;
    std::size_t _used = 0;
    std::size_t _limit;
    std::uint64_t _evictions = 0;
};

} // namespace skiff::storage
