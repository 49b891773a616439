// fsck: a full check of a namespace in an object store. Unlike restore (which reads one
// footer per partition), fsck reads every segment and index: it is an operator's tool.
//
// Per partition it reports the segments with their offset ranges, .kfs without .index,
// .index without .kfs, offset gaps between segments, overlapping segments, and corrupt
// objects (a .kfs that does not decode — wrong header, footer, CRC or framing — or an .index
// that does not fit its segment or has an entry that is not one of its batch starts). With repair, missing or unusable indexes are rebuilt from
// their segments and uploaded.
//
// Segments a merge covered (docs/lifecycle.md, "Merging") are warnings too: a segment whose
// batches all lie, byte for byte, inside an earlier segment is a merge's source waiting for
// its delete; readers take a segment's end from the next base, so each offset is read once.
// The same holds when the later segment starts inside the earlier one with the same bytes and
// goes on past it (copies). A segment a compaction rewrote into an earlier one (same batch
// headers, fewer records) is a warning as well: a reader taking each segment's end from the
// next base reads each of its offsets once, in the compacted or the original version.
//
// Time-index sidecars (.kfst) are optional: a segment without one is fine, a sidecar without
// its .kfs is a harmless leftover (a warning). A sidecar that does not decode or does not
// describe its segment (time_index_of the decoded .kfs) is a problem, since a reader pruning
// by it could skip records; repair rewrites it.
//
// Gaps are warnings, not problems: a takeover leaves offsets unused on purpose, and a
// deposed owner's late segment may land inside such a gap (docs/cluster.md, "Storage");
// readers skip them. Overlaps are problems: an offset in two segments could be read with
// two different contents.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/object_store.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace skiff::storage {

struct fsck_segment {
    std::int64_t base = 0;
    std::int64_t last = -1; // -1 when the segment is corrupt
    std::uint64_t size = 0;
    bool has_index = false;
};

struct fsck_gap {
    std::int64_t first = 0; // first missing offset
    std::int64_t last = 0;  // last missing offset
};

struct fsck_partition {
    std::string topic;
    std::int32_t partition = 0;
    std::vector<fsck_segment> segments;        // valid ones, by base offset
    std::vector<std::int64_t> orphan_kfs;      // .kfs without .index (bases)
    std::vector<std::int64_t> orphan_index;    // .index without .kfs (bases)
    std::vector<fsck_gap> gaps;                // warnings: clean() ignores them
    std::vector<fsck_gap> overlaps;            // offsets claimed by two segments with different bytes
    std::vector<std::int64_t> merged_away;     // warnings: sources a merge already holds (bases)
    // Warnings: sources a compaction already rewrote into an earlier segment (bases): every
    // batch the earlier one holds in their range has a source batch with the same offsets and
    // producer fields and no fewer records (compaction keeps batch headers).
    std::vector<std::int64_t> compacted_away;
    // Warnings: offsets stored twice byte for byte, where a later segment starts inside an
    // earlier one and goes on past it (the earlier one grew by a merge that a crash cut off
    // before its manifest). Readers take the earlier one's end from the next base: read once.
    std::vector<fsck_gap> copies;
    std::vector<std::string> corrupt;          // one sentence per corrupt object
    std::vector<std::int64_t> repaired;        // indexes rebuilt and uploaded
    std::vector<std::int64_t> orphan_time_index; // warnings: .kfst without .kfs (bases)
    std::vector<std::string> bad_time_index;   // one sentence per .kfst not describing its segment
    std::vector<std::int64_t> repaired_time_index; // sidecars rewritten by repair
    std::size_t time_indexes = 0;              // sidecars found beside a valid segment
    bool clean() const noexcept {
        return orphan_kfs.empty() && orphan_index.empty() && overlaps.empty() && corrupt.empty() &&
               bad_time_index.empty();
    }
};

struct fsck_report {
    std::vector<fsck_partition> partitions;
    std::size_t objects_listed = 0;
    std::size_t foreign_keys = 0; // keys under the namespace that are not segments (left alone)
    bool clean() const noexcept {
        for (auto& p : partitions)
            if (!p.clean()) return false;
        return true;
    }
};

runtime::task<result<fsck_report, store_error>> fsck(object_store& store, std::string ns, bool repair,
                                                     std::int32_t index_interval = 100);

// Human-readable report, one block per partition.
std::string format_fsck_report(const fsck_report& r, const std::string& where);

} // namespace skiff::storage
