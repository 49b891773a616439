// The Iceberg sink: appends a topic's records, read straight from its segments in the bucket,
// to one Iceberg v2 table, exactly once.
//
// Exactly once without a second system: every snapshot's summary carries, under
// "skiff.next-offsets", the next offset to read of every partition the table covers
// (cumulative: the current snapshot alone says where to resume). A step reads from those
// offsets, writes data files, a manifest and a manifest list, and commits by creating the next
// metadata version if absent (table_store.hpp). When another writer committed first, the step
// re-reads the table: if the winner covered none of the offsets this step read, the step
// rebases (a new manifest list on the winner's snapshot; the manifest and data files stay) and
// commits again; if it covered any, this step's files are deleted and the next step starts
// from the winner's offsets. A crash before the commit leaves files no snapshot references;
// maintenance deletes them (docs/iceberg.md).
//
// One core: the store's; steps run one at a time.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/iceberg/errc.hpp>
#include <skiff/iceberg/schema.hpp>
#include <skiff/reader/segment_reader.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/object_store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace skiff::iceberg {

struct step_result;

struct sink_config {
    sink_config() {}
    std::string ns = "default";  // the namespace of the topic's segments
    std::string topic;
    std::string table_prefix;    // the table's key prefix in the same store (no trailing '/')
    std::string location;        // the URI engines read the table at (its metadata's "location")
    partitioning partition_by = partitioning::day;
    std::vector<projection> projections;
    std::chrono::milliseconds commit_interval{10'000};
    std::size_t commit_bytes = 128u << 20; // record bytes per commit at most (one step)
    std::size_t row_group_bytes = 32u << 20;
    bool zstd = true;
    int max_commit_attempts = 16;         // rebases before a step gives up (the next step retries)
    std::string sink_id;                  // in summaries and file names; random when empty
    reader::scan_config scan;
    // Called after every step that committed or gave up; for logs and metrics.
    std::function<void(const step_result&)> on_step;
    // Only partitions for which this returns true are read (a broker in a cluster sinks the
    // partitions it owns; the others' sinks commit theirs to the same table). Empty: all.
    std::function<bool(std::int32_t partition)> owns_partition;
    // Test hook: called at each stage of a step ("data", "manifest", "list", "commit") before
    // it runs; returning false stops the step there as a crash would (nothing cleaned up).
    std::function<bool(std::string_view stage)> before_stage;
};

struct step_result {
    step_result() = default;
    bool committed = false;    // a snapshot was added
    bool abandoned = false;    // another writer covered these offsets first; files deleted
    bool more = false;         // stopped at commit_bytes (or abandoned): step again at once
    int version = 0;           // the table's metadata version after the step
    std::int64_t snapshot_id = 0;
    std::int64_t rows = 0;
    std::int64_t record_bytes = 0;
    std::int64_t file_bytes = 0;
    int files = 0;
    int conflicts = 0;         // commits lost to another writer during the step
    std::uint64_t dead_letters = 0;
    std::map<std::int32_t, std::int64_t> next_offsets; // the table's, after the step
    std::int64_t oldest_timestamp_ms = -1; // of the rows committed (produce-to-visible lag)
    std::chrono::steady_clock::duration took{};
};

struct sink_stats {
    std::uint64_t steps = 0, commits = 0, conflicts = 0, abandoned = 0, rows = 0, record_bytes = 0, file_bytes = 0,
                  files = 0, dead_letters = 0, skipped_by_retention = 0, failures = 0;
};

class sink {
public:
    sink(storage::object_store& store, sink_config cfg);
    ~sink();
    sink(const sink&) = delete;
    sink& operator=(const sink&) = delete;

    // Creates the table if it does not exist (or evolves its schema to the projections), reads
    // what is new up to commit_bytes, and commits it. A step with nothing new commits nothing.
    runtime::task<result<step_result, iceberg_error>> step(std::stop_token st);
    // Steps every commit_interval (at once again while a step was cut by commit_bytes) until
    // `st` fires; a failed step is logged, counted and retried at the next interval.
    runtime::task<void> run(std::stop_token st);

    const sink_stats& stats() const noexcept;
    const sink_config& config() const noexcept;

    struct impl;

private:
    std::unique_ptr<impl> _impl;
};

// Where a topic's table lives: key prefix `<warehouse>/<topic>` (warehouse default
// "iceberg/<ns>") and the URI `<base>/<prefix>` engines read (base default: the store's own,
// `store_uri`). Trailing slashes of warehouse and base are ignored.
struct table_place {
    std::string prefix, location;
};
table_place place_table(std::string_view warehouse, std::string_view ns, std::string_view base, std::string_view store_uri,
                        std::string_view topic);

// "skiff.next-offsets" of a snapshot summary ({"0":123,...}); empty when absent, an error when
// it does not parse.
result<std::map<std::int32_t, std::int64_t>, iceberg_error> parse_next_offsets(const std::map<std::string, std::string>& summary);
std::string format_next_offsets(const std::map<std::int32_t, std::int64_t>& offsets);

} // namespace skiff::iceberg
