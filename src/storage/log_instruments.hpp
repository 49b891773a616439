// The partition log's metrics: handles into this core's registry, registered once per
// partition at open() (setup time) and shared by every partition of the core (same names and
// labels give the same cells). Updates are a pointer test and an add. Names and meanings are
// listed in docs/observability.md ("Storage engine").
//
// Private to src/storage.
#pragma once

#include <skiff/metrics/registry.hpp>
#include <skiff/storage/object_store.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace skiff::storage::detail {

// The `op` and `kind` labels of skiff_store_*: what the log asks of its object store.
enum class store_op : std::uint8_t { put, get, get_range, list, del, count_ };
enum class key_kind : std::uint8_t { kfs, index, manifest, none, kfst, count_ };

inline constexpr std::size_t n_store_ops = static_cast<std::size_t>(store_op::count_);
inline constexpr std::size_t n_key_kinds = static_cast<std::size_t>(key_kind::count_);
inline constexpr std::size_t n_store_classes = 9; // storage::errc values 1..8

// A contribution of one owner (a partition, a flush) to a gauge shared by the core: what was
// added is taken back when the owner goes, whatever path it leaves by.
class gauge_share {
public:
    gauge_share() = default;
    explicit gauge_share(metrics::gauge g) noexcept : _g(g) {}
    gauge_share(const gauge_share&) = delete;
    gauge_share& operator=(const gauge_share&) = delete;
    ~gauge_share() { clear(); }
    void bind(metrics::gauge g) noexcept {
        clear();
        _g = g;
    }
    void add(std::int64_t d) noexcept {
        _v += d;
        _g.add(d);
    }
    void clear() noexcept {
        _g.sub(_v);
        _v = 0;
    }
    std::int64_t value() const noexcept { return _v; }

private:
    metrics::gauge _g;
    std::int64_t _v = 0;
};

struct log_instruments {
    bool enabled = false;

    // Flushes (segments handed to the store and committed).
    metrics::counter flushes, flush_records, flush_failures;
    std::array<metrics::counter, 2> flush_bytes;    // kfs, index
    std::array<metrics::counter, 2> upload_retries; // kfs, index
    metrics::counter upload_already_landed, fences;
    metrics::histogram flush_duration, flush_size;
    metrics::gauge flushes_in_flight;
    // The flush scheduler's cost and latency (docs/flush-scheduling.md): every PUT attempt of a
    // segment or index, the bytes each carried, records per committed segment, and how long a
    // segment's first record waited before its upload started.
    metrics::counter flush_puts;
    metrics::counter hedges; // store requests sent a second time (hedge.hpp), PUTs and GETs
    metrics::histogram put_size, segment_records, flush_wait;
    // Time-index sidecars (.kfst): optional, so they are counted apart from the pair. Stored;
    // given up on after their bounded attempts (readers fall back to the segment); and not
    // sent because a request budget is in force (each would cost a third PUT per flush).
    metrics::counter time_index_writes, time_index_failures, time_index_skipped;

    // Requests to the object store.
    struct store_slot {
        metrics::counter requests, sent, received;
        metrics::histogram latency;
    };
    std::array<store_slot, n_store_ops * n_key_kinds> store;
    std::array<metrics::counter, n_store_ops * n_store_classes> store_errors;

    // Appends and memory.
    metrics::counter appends, appended_records, appended_bytes, append_timeouts;
    // Admission: appends that waited for room, and those that found none in time.
    metrics::counter room_waits, room_timeouts;
    metrics::histogram room_wait;
    metrics::gauge buffered_bytes, in_flight_bytes;

    // Segment cache.
    metrics::counter cache_hits, cache_misses, cache_evictions, prefetches;
    metrics::gauge cache_bytes;

    // Restore.
    metrics::counter restores, restore_failures, restored_segments, corrupt_segments, repairs, repair_failures;
    std::array<metrics::counter, 2> orphans; // kfs, index
    metrics::histogram restore_duration;
    metrics::counter restores_from_manifest, manifests_unusable;
    // The background check of a manifest against a full LIST: segments it listed that are
    // gone, and segments in the bucket it did not list.
    std::array<metrics::counter, 3> verify_mismatches; // missing, unlisted, merge (an interrupted one finished)

    // Lifecycle: manifests written, segments and bytes retention (or DeleteRecords) removed,
    // objects deleted, and deletes that failed (retried on the next tick).
    metrics::counter manifest_writes, manifest_write_failures;
    metrics::counter retention_segments, retention_bytes, deleted_objects, delete_failures;
    // Merging: merges stored, source segments they replaced, bytes written, and merges that
    // failed (tried again later).
    metrics::counter merges, merge_sources, merge_bytes, merge_failures;
    // Compaction: passes done, segments rewritten, bytes read, records removed, passes that
    // failed (tried again after the interval).
    metrics::counter compactions, compacted_segments, compaction_bytes_in, compaction_records_removed,
        compaction_failures;
    // Background requests not sent because the owner check said this broker may no longer
    // change the bucket (cluster mode: the lease does not cover them).
    metrics::counter background_skipped;

    // Registers on this core's registry when metrics::metrics_enabled(); inert otherwise.
    static log_instruments make();

    store_slot& slot(store_op op, key_kind k) noexcept {
        return store[static_cast<std::size_t>(op) * n_key_kinds + static_cast<std::size_t>(k)];
    }
    // The clock, only when something will record the reading.
    std::chrono::steady_clock::time_point now() const noexcept {
        return enabled ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    }
    // One store request finished: count it, its latency, its bytes, and its error class.
    void store_done(store_op op, key_kind k, std::chrono::steady_clock::time_point start, std::uint64_t sent,
                    std::uint64_t received, const store_error* err) noexcept {
        if (!enabled) return;
        auto& s = slot(op, k);
        s.requests.inc();
        s.latency.record(std::chrono::steady_clock::now() - start);
        s.sent.inc(sent);
        s.received.inc(received);
        if (err) {
            const auto c = static_cast<std::size_t>(err->code);
            if (c < n_store_classes) store_errors[static_cast<std::size_t>(op) * n_store_classes + c].inc();
        }
    }
};

} // namespace skiff::storage::detail
