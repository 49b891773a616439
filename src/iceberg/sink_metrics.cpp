// sink_metrics.hpp.
#include <skiff/iceberg/sink_metrics.hpp>

#include <chrono>

namespace skiff::iceberg {

namespace {

std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

} // namespace

void sink_metrics::on_step(const step_result& r) {
    if (!r.next_offsets.empty()) _next = r.next_offsets;
    if (!r.committed) return;
    _last_commit_ms = wall_ms();
    if (r.oldest_timestamp_ms >= 0) _visible_lag_ms = _last_commit_ms - r.oldest_timestamp_ms;
}

void sink_metrics::attach(const sink& s) {
    auto& reg = metrics::registry::local();
    const metrics::labels l = {{"topic", _topic}};
    const sink* k = &s;
    auto counter = [&](const char* name, const char* help, std::uint64_t sink_stats::*field) {
        _regs.push_back(reg.counter_fn(name, help, l, [k, field] { return k->stats().*field; }));
    };
    counter("skiff_iceberg_rows_total", "Records committed to the topic's Iceberg table.", &sink_stats::rows);
    counter("skiff_iceberg_record_bytes_total", "Key, value and header bytes of those records.", &sink_stats::record_bytes);
    counter("skiff_iceberg_file_bytes_total", "Bytes of Parquet data files committed.", &sink_stats::file_bytes);
    counter("skiff_iceberg_files_total", "Parquet data files committed.", &sink_stats::files);
    counter("skiff_iceberg_commits_total", "Snapshots this sink added to the table.", &sink_stats::commits);
    counter("skiff_iceberg_conflicts_total", "Commits lost to another writer (then rebased or given up).", &sink_stats::conflicts);
    counter("skiff_iceberg_abandoned_total", "Steps given up because another writer committed their offsets first.",
            &sink_stats::abandoned);
    counter("skiff_iceberg_dead_letters_total", "Records whose value did not fit the JSON projections.", &sink_stats::dead_letters);
    counter("skiff_iceberg_failures_total", "Steps that failed (retried at the next interval).", &sink_stats::failures);
    counter("skiff_iceberg_skipped_by_retention_total", "Offsets deleted by retention before the sink read them.",
            &sink_stats::skipped_by_retention);
    const sink_metrics* self = this;
    _regs.push_back(reg.gauge_fn("skiff_iceberg_visible_lag_ms",
                                 "At the last commit: how long ago its oldest record was produced (produce to visible).", l,
                                 [self] { return self->_visible_lag_ms; }));
    _regs.push_back(reg.gauge_fn("skiff_iceberg_lag_offsets",
                                 "Offsets acknowledged on this broker's partitions but not yet in the table (-1: not known).", l,
                                 [self] { return self->_lag_offsets; }));
    _regs.push_back(reg.gauge_fn("skiff_iceberg_last_commit_age_ms", "Time since this sink's last commit (-1: none yet).", l,
                                 [self] { return self->_last_commit_ms ? wall_ms() - self->_last_commit_ms : std::int64_t{-1}; }));
}

} // namespace skiff::iceberg
