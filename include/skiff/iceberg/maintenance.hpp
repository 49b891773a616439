// Table maintenance for the sink's tables: expire old snapshots, then delete the files no
// live snapshot references (those of expired snapshots, of steps that lost a race, of a sink
// killed before its commit). Both are crash-safe: expiry is a commit like any other (a lost
// race re-reads and tries again), and a file is deleted only when the current metadata does
// not reference it and its name says it was made longer ago than `orphan_grace` (a sink's
// commit in flight references files the metadata does not yet know; it is never that old).
// Files whose names carry no time (another writer's) are never deleted.
//
// One core: the store's.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/iceberg/errc.hpp>
#include <skiff/iceberg/table_store.hpp>
#include <skiff/runtime/task.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

namespace skiff::iceberg {

struct maintenance_config {
    maintenance_config() {}
    std::chrono::milliseconds expire_after{7LL * 24 * 3600 * 1000}; // snapshots older than this go...
    int keep_snapshots = 10;                                         // ...except the newest this many
    std::chrono::milliseconds orphan_grace{3600 * 1000};             // unreferenced files younger than this stay
    int max_commit_attempts = 16;
    // Small-file rewriting: data files below small_file_bytes of one partition value (and one
    // schema) are rewritten into files of up to target_file_bytes once there are at least
    // rewrite_min_files of them (0: never), as a "replace" snapshot.
    int rewrite_min_files = 8;
    std::size_t small_file_bytes = std::size_t{32} << 20;
    std::size_t target_file_bytes = std::size_t{128} << 20;
    bool zstd = true;
};

struct maintenance_result {
    maintenance_result() = default;
    int rewritten_files = 0;      // small files replaced...
    int new_files = 0;            // ...by this many
    bool rewrite_conflict = false; // another writer committed first: the rewrite was dropped (next pass)
    int expired_snapshots = 0;
    int version = 0;              // the table's version afterwards
    std::int64_t deleted_files = 0;
    std::int64_t deleted_bytes = 0;
    std::int64_t kept_young = 0;  // unreferenced but within the grace period
    std::int64_t referenced_files = 0;
};

// Rewrites small files, expires, then deletes orphans. `now_ms`: wall clock in ms (a parameter for tests).
runtime::task<result<maintenance_result, iceberg_error>> maintain(table_store& table, const maintenance_config& cfg,
                                                                   std::int64_t now_ms, std::stop_token st);

// maintain() every `every` until `st` fires, with the wall clock; results and failures are
// logged (a failed pass is retried at the next one).
runtime::task<void> maintain_every(table_store& table, const maintenance_config& cfg, std::chrono::milliseconds every,
                                   std::stop_token st);
// One line for the log when a pass changed anything ("" otherwise).
std::string describe(const maintenance_result& r);

// Only the rewrite (maintain runs it first).
runtime::task<result<maintenance_result, iceberg_error>> rewrite_small_files(table_store& table, const maintenance_config& cfg,
                                                                              std::int64_t now_ms, std::stop_token st);

// The creation time (ms) in a file name the sink wrote: "<ms>-..." or "snap-<id>-<n>-<ms>-...";
// nullopt for any other name.
std::optional<std::int64_t> file_time_ms(std::string_view key);

} // namespace skiff::iceberg
