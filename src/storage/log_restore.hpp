// Restoring a partition log from its bucket at open(), and repairing what restore found
// missing. Neither keeps state of its own: restore hands back what it found, repair reports
// the index it stored.
//
// Private to src/storage. Called on the log's core.
#pragma once

#include "log_instruments.hpp"
#include "segment_cache.hpp"

#include <skiff/core/result.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/log_config.hpp>
#include <skiff/storage/object_store.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

namespace skiff::storage::detail {

struct restored_log {
    segment_map segments;          // names and sizes; only the newest segment's end is known
    std::int64_t next_offset = 0;  // also the high watermark: everything found is committed
    std::int64_t log_start = 0;
    restore_report report;
    std::vector<std::int64_t> to_repair; // segments without an .index
    metrics::span_context trace;         // the "restore" trace, parent of later repairs
    // Every manifest key found (sorted), the one used, and how far it reached; -1 when
    // the log was restored by a full LIST.
    std::vector<std::string> manifest_keys;
    std::string manifest_key;
    std::int64_t manifest_covered_end = -1;
};

// With use_manifest, starts from the partition's newest usable manifest and lists only the
// segments after it; otherwise (or when there is none) lists the partition's whole prefix.
// Pairs .kfs and .index by base offset and reads only the newest listed segment's footer (one
// small range GET) to find the next offset. Orphans and corrupt newest segments are
// reported, never fatal; a new segment never reuses the base of an orphan .index or a
// corrupt segment. Errors: a LIST's or a GET's store error.
runtime::task<result<restored_log, store_error>> restore(object_store& store, const std::string& ns,
                                                         const partition_id& id, log_instruments& m,
                                                         bool use_manifest);

// Rebuilds the missing .index of segment `base` from its .kfs and uploads it (if-absent).
// Calls on_repaired(index) once an index is in place (ours, or one uploaded meanwhile).
// Failures are counted and logged, not returned: the segment is still served by walking it.
runtime::task<void> repair(object_store& store, io_budget& budget, const std::string& ns, const partition_id& id,
                           const log_config& cfg,
                           log_instruments& m, std::int64_t base, metrics::span_context parent, std::stop_token st,
                           std::function<void(std::shared_ptr<const std::string>)> on_repaired);

} // namespace skiff::storage::detail
