// The partition manifest: a checkpoint of what a partition's log holds, so restore reads one
// object and lists only what was written after it instead of every segment the partition
// ever had (docs/format.md, "Partition manifests").
//
// A manifest is a hint, never the truth: the segments in the bucket are. It says "at
// `covered_end`, the log started at `log_start` and held exactly these segments". Restore
// trusts it for what it lists, LISTs the partition after its last key for newer segments,
// and a background check compares it with a full LIST later. Readers of the reference format
// never see it: it lives under `{ns}/skiff~meta/`, a name no Kafka topic can have.
//
// Bytes (big-endian, like the .kfs):
//   "SKMF" | version u16 = 1 | flags u16 = 0 | epoch i32 | seq i64 | log_start i64 |
//   covered_end i64 | written_ms i64 | count u32 | topic_len u16 | topic | partition i32 |
//   count entries, each six varints relative to the one before (see encode_manifest) |
//   crc32c u32 of all the bytes before it | "END!"
// Entries are small (about 12 bytes for a typical segment), so 100,000 segments are one
// GET of about 1.2 MB.
//
// Pure functions over caller-owned bytes; any core. Decoding never trusts its input.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/record_batch.hpp> // format_error

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::storage {

inline constexpr std::string_view manifest_magic{"SKMF", 4};
inline constexpr std::uint16_t manifest_format_version = 1;

struct manifest_segment {
    std::int64_t base = 0;
    std::int64_t last = 0;            // >= base
    std::uint64_t kfs_size = 0;
    std::uint32_t index_size = 0;     // 0: the segment had no .index when the manifest was written
    std::int64_t max_timestamp = -1;  // the largest batch max timestamp; -1 when unknown
    std::int64_t created_ms = 0;      // the segment header's flush time
    friend bool operator==(const manifest_segment&, const manifest_segment&) = default;
};

struct manifest {
    std::int32_t epoch = 0;         // the owner's leader epoch when it wrote this
    std::int64_t seq = 0;           // per epoch, increasing
    std::int64_t log_start = 0;     // first offset served (may lie inside the first segment)
    std::int64_t covered_end = 0;   // every segment with a base below this is listed (or deleted)
    std::int64_t written_ms = 0;
    partition_id partition;
    std::vector<manifest_segment> segments; // increasing base, non-overlapping
    friend bool operator==(const manifest& a, const manifest& b) {
        return a.epoch == b.epoch && a.seq == b.seq && a.log_start == b.log_start && a.covered_end == b.covered_end &&
               a.written_ms == b.written_ms && a.partition.topic == b.partition.topic &&
               a.partition.partition == b.partition.partition && a.segments == b.segments;
    }
};

std::string encode_manifest(const manifest& m);

// Refuses (format_error) bad magic, another version, a wrong CRC or trailer, truncation,
// trailing bytes, segments out of order or overlapping, last < base, a segment at or past
// covered_end, or log_start past covered_end.
result<manifest, format_error> decode_manifest(std::span<const char> bytes);

// "{ns}/skiff~meta/{topic}/{partition}/": every manifest of the partition.
std::string manifest_prefix(const std::string& ns, const partition_id& p);
// "{ns}/skiff~meta/{topic}/": the manifests of every partition of a topic.
std::string manifest_topic_prefix(const std::string& ns, std::string_view topic);
// manifest_prefix + "manifest-{epoch:010}-{seq:020}": keys sort by (epoch, seq), so the last
// key listed is the newest owner's newest checkpoint.
std::string manifest_key(const std::string& ns, const partition_id& p, std::int32_t epoch, std::int64_t seq);

struct manifest_name {
    std::int32_t epoch = 0;
    std::int64_t seq = 0;
};
// The name part after manifest_prefix; nullopt for anything else.
std::optional<manifest_name> parse_manifest_name(std::string_view name);

} // namespace skiff::storage
