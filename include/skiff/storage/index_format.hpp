// The sparse offset index (`.index`) and the time-index sidecar (`.kfst`) of a segment.
//
// Byte layouts: ../shared/design/kafscale-format.md, "Index .index" and "Time-index sidecar
// .kfst". Pure functions over caller-owned bytes; callable from any core or thread. Decoders
// never trust their input: every failure is a format_error.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/storage/record_batch.hpp> // format_error

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::storage {

// ---- .index -----------------------------------------------------------------------------

inline constexpr std::string_view index_magic{"IDX\0", 4};
inline constexpr std::uint16_t index_format_version = 1;
inline constexpr std::size_t index_header_size = 16;
inline constexpr std::size_t index_entry_size = 12;
inline constexpr std::int32_t default_index_interval = 100; // what KafScale writes

struct index_entry {
    std::int64_t offset = 0;   // base offset of the indexed batch
    std::int32_t position = 0; // absolute byte position of that batch in the .kfs (header included)
    friend bool operator==(const index_entry&, const index_entry&) = default;
};

struct index_view {
    std::int32_t interval = 0; // informational: records between entries as written
    std::vector<index_entry> entries;
};

// Builds the entry list as batches are laid out, with KafScale's rule (index.go MaybeAdd):
// an entry for the first batch, then for the next batch once at least `interval` records were
// added since the last entry. Used by segment_builder and rebuild_index.
class index_builder {
public:
    // interval <= 0 becomes 1, as in KafScale.
    explicit index_builder(std::int32_t interval = default_index_interval) noexcept;
    void add_batch(std::int64_t base_offset, std::int32_t position, std::int32_t record_count);
    std::span<const index_entry> entries() const noexcept { return _entries; }
    std::int32_t interval() const noexcept { return _interval; }
    std::string encode() const;

private:
    std::int32_t _interval;
    std::int64_t _since_last = 0; // int64: a compressed batch may claim up to 2^31-1 records
    std::vector<index_entry> _entries;
};

// The whole .index object: header (IDX\0, version 1, count, interval, reserved 0) + entries.
std::string encode_index(std::span<const index_entry> entries, std::int32_t interval);

// Validates and decodes a whole .index object: magic, version 1, 16 + 12 * count == size
// exactly, offsets >= 0 and strictly increasing, positions >= 32 (past the segment header) and
// strictly increasing. The interval and reserved fields are informational and not checked.
// Zero entries is structurally valid (lookup then answers the first batch, position 32).
result<index_view, format_error> decode_index(std::span<const char> bytes);

// The entry to start reading at for `offset`: the greatest entry with entry.offset <= offset,
// or the first entry when offset is below all of them; nullopt for an empty index. O(log n).
std::optional<index_entry> lookup_entry(const index_view& index, std::int64_t offset) noexcept;
// Its position; 32 (the first batch) for an empty index.
std::int32_t lookup(const index_view& index, std::int64_t offset) noexcept;

// Checks that a decoded index can belong to the segment with that base offset and object size:
// the first entry is (base_offset, 32) and every position leaves room for a batch header
// before the 16-byte footer. Catches a stale .index paired with a rewritten .kfs (the "reusing
// a base offset" hazard in kafscale-format.md) before a range GET goes astray.
result<void, format_error> check_index_fits(const index_view& index, std::int64_t segment_base_offset,
                                            std::uint64_t segment_size);

// ---- .kfst ------------------------------------------------------------------------------

inline constexpr std::string_view time_index_magic{"KFTF", 4};
inline constexpr std::uint32_t time_index_format_version = 1;
inline constexpr std::size_t time_index_size = 40;

struct time_index {
    std::int64_t min_timestamp = -1; // Unix ms; -1 when the batches carry no timestamps
    std::int64_t max_timestamp = -1;
    std::int64_t min_offset = 0;
    std::int64_t max_offset = 0;
    friend bool operator==(const time_index&, const time_index&) = default;
};

// 40 bytes: KFTF, version u32 = 1, min ts, max ts, min offset, max offset (all big-endian).
std::string encode_time_index(const time_index& t);

// Decodes the LAST 40 bytes of `bytes` (readers fetch the object's tail): magic, version, and
// 0 <= min_offset <= max_offset. Timestamps are not range-checked (-1 means "none").
result<time_index, format_error> decode_time_index(std::span<const char> bytes);

} // namespace skiff::storage
