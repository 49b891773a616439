// The `.kfs` segment object: a 32-byte header, the record batches, a 16-byte footer.
//
// Byte layout: ../shared/design/kafscale-format.md, "Segment .kfs" (what KafScale's
// segment.go writes). Everything here is pure (no I/O) and callable from any core or thread.
// Decoders never trust their input: every failure is a format_error, never a crash.
//
//   segment_builder   one pass: copies each batch once into the final object, assigns
//                     offsets, and builds the .index entries and the metadata as it goes.
//   decode_segment    full validation of a whole object (restore, fsck, cache fill).
//   parse_segment_*   the pieces of partial reads: the header, the 16-byte tail (footer).
//   walk_batches      batches inside a byte range that starts at an index position and may
//                     end mid-batch (a range GET for a fetch).
//   rebuild_index     the .index of a .kfs whose .index is missing (orphan repair).
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/record_batch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::storage {

inline constexpr std::string_view segment_magic{"KAFS", 4};
inline constexpr std::string_view segment_footer_magic{"END!", 4};
inline constexpr std::uint16_t segment_format_version = 1;
inline constexpr std::size_t segment_header_size = 32;
inline constexpr std::size_t segment_footer_size = 16;
// KafScale stores positions in the .index as int32, so a segment stays below 2 GiB.
inline constexpr std::size_t max_segment_size = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());

struct segment_header {
    std::int64_t base_offset = 0;
    std::int32_t message_count = 0; // sum of the batches' record counts (int32 in KafScale)
    std::int64_t created_ms = 0;    // Unix ms at flush time
    friend bool operator==(const segment_header&, const segment_header&) = default;
};

struct segment_footer {
    std::uint32_t body_crc = 0;   // CRC-32C of the body only
    std::int64_t last_offset = 0; // base offset + lastOffsetDelta of the last batch
    friend bool operator==(const segment_footer&, const segment_footer&) = default;
};

// 32 / 16 bytes exactly as KafScale writes them (version 1, flags 0, reserved 0).
std::string encode_segment_header(const segment_header& h);
std::string encode_segment_footer(const segment_footer& f);

// Reads the header from the FIRST 32 bytes of `first_bytes` (longer input is fine): magic
// KAFS, version 1, flags 0 (no segment-level compression exists), base offset >= 0, message
// count >= 0. Reserved bytes are ignored.
result<segment_header, format_error> parse_segment_header(std::span<const char> first_bytes);

// Reads the footer from the LAST 16 bytes of `tail` (the 16-byte tail range GET of restore):
// magic END!, last offset >= 0.
result<segment_footer, format_error> parse_segment_footer(std::span<const char> tail);

// True when `tail` ends with END! (the "segment is complete" test done with a bytes=-4 GET).
bool has_segment_end_marker(std::span<const char> tail) noexcept;

// ---- whole-object decode ----------------------------------------------------------------

struct segment_view {
    segment_header header;
    segment_footer footer;
    std::span<const char> body;     // bytes 32 .. size-16
    std::vector<batch_view> batches; // views into the body, in order
    std::int64_t min_timestamp = -1; // over the batches' base timestamps >= 0; -1 when none
    std::int64_t max_timestamp = -1; // over the batches' max timestamps >= 0; -1 when none

    std::int64_t base_offset() const noexcept { return header.base_offset; }
    std::int64_t last_offset() const noexcept { return footer.last_offset; }
    // Absolute position in the .kfs of a batch of this view.
    std::int32_t position_of(const batch_view& b) const noexcept {
        return static_cast<std::int32_t>(segment_header_size + static_cast<std::size_t>(b.bytes.data() - body.data()));
    }
};

// Validates a whole .kfs: header and footer as above, size <= max_segment_size, the body CRC,
// a body that walks exactly into whole v2 batches (each structurally valid; its own CRC too
// when verify_batch_crcs — the body CRC already covers those bytes), at least one batch, the
// first batch's base offset == header base offset, batches strictly increasing (each base
// above the previous last offset), the sum of record counts == header message count, and the
// last batch's base + lastOffsetDelta == footer last offset.
result<segment_view, format_error> decode_segment(std::span<const char> whole, bool verify_batch_crcs = false);

// The time-index sidecar for a decoded segment.
time_index time_index_of(const segment_view& s) noexcept;

// The .index of a whole .kfs, rebuilt by walking its batches (decode_segment first), with
// KafScale's entry rule. For a .kfs orphaned without its .index.
result<std::string, format_error> rebuild_index(std::span<const char> whole,
                                                std::int32_t interval = default_index_interval);

// ---- range walking ----------------------------------------------------------------------

struct walk_options {
    walk_options() = default;
    bool verify_crc = true;                             // check each batch's CRC-32C
    std::size_t max_batch_bytes = default_max_batch_bytes; // larger lengths are errors, not waits
};

struct walk_result {
    std::vector<batch_view> batches;   // complete batches with last_offset() >= min_offset
    std::span<const char> selected;    // their bytes: from the first of them to `consumed`
    std::size_t consumed = 0;          // bytes of complete batches walked, skipped ones included
    // > 0 when the input ends inside a batch whose first 17 bytes (up to the magic) are
    // present: the whole size of that batch (12 + batchLength), so a reader can GET
    // [start + consumed, + pending_batch_size). 0 when the input ends on a batch boundary or
    // fewer than 17 bytes follow it — in particular when the range ran into the 16-byte
    // footer, which can thus never pass for a batch.
    std::size_t pending_batch_size = 0;
};

// Walks the batches at the start of `body_part`, which must begin at a batch start (an index
// position, minus 32 if the caller already stripped the header — any batch boundary works).
// Stops cleanly at the last complete batch: bytes after it (a batch cut by the range end, or
// the footer) are not an error, and `consumed` says where the complete batches end. Errors
// only for a complete or header-readable batch that is wrong (magic, length, CRC, fields) or
// for offsets that do not increase. Batches entirely below min_offset are skipped (clients
// discard leading records of the first batch themselves).
result<walk_result, format_error> walk_batches(std::span<const char> body_part, std::int64_t min_offset,
                                               const walk_options& opts = walk_options());

// ---- building ---------------------------------------------------------------------------

struct segment_meta {
    std::int64_t base_offset = 0;
    std::int64_t last_offset = -1;
    std::int32_t message_count = 0;
    std::int64_t created_ms = 0;
    std::int64_t min_timestamp = -1; // as in segment_view
    std::int64_t max_timestamp = -1;
    std::uint32_t body_crc = 0;
    std::size_t batch_count = 0;
    std::size_t size = 0;            // bytes of the .kfs
};

struct built_segment {
    std::string kfs;   // the whole .kfs object
    std::string index; // the whole .index object
    segment_meta meta;
};

time_index time_index_of(const segment_meta& m) noexcept;

// Builds one segment in one pass. Each appended batch is copied once into the buffer that
// becomes the .kfs object (pass expected_body_bytes and the buffer never reallocates), its
// baseOffset patched to the next offset, its bytes fed to the running body CRC, and its index
// entry, count and timestamps recorded. finish() writes header and footer in place.
// Single-threaded; move-only in practice (it owns the buffer).
class segment_builder {
public:
    // base_offset must be >= 0 (aborts otherwise: a programming error).
    explicit segment_builder(std::int64_t base_offset, std::int32_t index_interval = default_index_interval,
                             std::size_t expected_body_bytes = 0);

    // From now on every appended batch's partitionLeaderEpoch is set to `epoch` (in the
    // copy). Without it the field is stored as the producer sent it.
    void stamp_leader_epoch(std::int32_t epoch) noexcept { _leader_epoch = epoch; }

    // Appends one batch (a batch_view from split_batches, or any bytes of exactly one v2
    // batch; the batch CRC is not re-checked). Returns the base offset assigned to it; the
    // next batch gets returned + lastOffsetDelta + 1, as in KafScale's log.go. Fails, leaving
    // the builder unchanged, when the bytes are not one v2 batch (invalid) or the segment
    // would outgrow its fields: size > max_segment_size, message count > INT32_MAX, or offsets
    // past INT64_MAX (too_large). On too_large the caller finishes this segment and starts a
    // new one.
    result<std::int64_t, format_error> append(const batch_view& batch);
    // `verified_crc`: the batch's CRC field, known to match its bytes (batch_view::crc_verified);
    // the body CRC is then combined from it instead of computed over the batch again.
    result<std::int64_t, format_error> append(std::span<const char> batch_bytes,
                                              std::optional<std::uint32_t> verified_crc = std::nullopt);

    // Whether ALL of `batches` would append, without appending anything: a produce request's
    // batches are accepted whole or not at all, so check first, then append each (which then
    // cannot fail). Fails with what the first failing append would have returned.
    result<void, format_error> can_append(std::span<const batch_view> batches) const;

    // The next batch keeps `offset` as its base instead of following the last one: a merge
    // or a compaction copies batches with their own offsets, gaps and all. `offset` below the
    // next offset (offsets going back) is invalid.
    result<void, format_error> skip_to(std::int64_t offset);

    std::int64_t base_offset() const noexcept { return _base; }
    std::int64_t next_offset() const noexcept { return _next; }
    std::size_t batch_count() const noexcept { return _batches; }
    bool empty() const noexcept { return _batches == 0; }
    std::size_t body_bytes() const noexcept { return _buf.size() - segment_header_size; }
    std::size_t size_if_finished() const noexcept { return _buf.size() + segment_footer_size; }

    // The finished objects. Requires at least one batch (aborts otherwise: KafScale never
    // writes an empty segment and decode_segment rejects one). The builder is spent.
    built_segment finish(std::int64_t created_ms) &&;

private:
    std::int64_t _base;
    std::int64_t _next;
    std::string _buf; // header placeholder + body so far
    index_builder _index;
    std::uint32_t _crc = 0;
    std::int64_t _count = 0;
    std::size_t _batches = 0;
    std::int64_t _min_ts = -1;
    std::int64_t _max_ts = -1;
    std::int64_t _last = -1;
    std::optional<std::int32_t> _leader_epoch;
};

} // namespace skiff::storage
