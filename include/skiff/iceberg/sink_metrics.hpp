// The skiff_iceberg_* metrics of one sink (labelled by topic) on this core's registry, for
// `skiff serve --iceberg-topics` and `skiff iceberg --http-addr` alike (docs/iceberg.md,
// "Metrics"). Counters read the sink's stats at scrape time; the lag gauges follow on_step.
// One core: the sink's.
#pragma once

#include <skiff/iceberg/sink.hpp>
#include <skiff/metrics/registry.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace skiff::iceberg {

class sink_metrics {
public:
    explicit sink_metrics(std::string topic) : _topic(std::move(topic)) {}
    sink_metrics(const sink_metrics&) = delete;
    sink_metrics& operator=(const sink_metrics&) = delete;

    // Registers the series; `s` must outlive this object.
    void attach(const sink& s);
    // Call from sink_config::on_step.
    void on_step(const step_result& r);
    // Offsets acknowledged but not yet in the table (high watermarks minus the table's next
    // offsets), for the owner of those watermarks to set (the broker: its partitions).
    void set_lag_offsets(std::int64_t n) noexcept { _lag_offsets = n; }
    // The table's next offsets after the last step that read them.
    const std::map<std::int32_t, std::int64_t>& next_offsets() const noexcept { return _next; }

private:
    std::string _topic;
    std::int64_t _visible_lag_ms = 0; // at the last commit: now - its oldest record's timestamp
    std::int64_t _last_commit_ms = 0; // wall clock of the last commit (0: none yet)
    std::int64_t _lag_offsets = -1;   // -1: not known (skiff iceberg has no watermarks)
    std::map<std::int32_t, std::int64_t> _next;
    std::vector<metrics::registration> _regs;
};

} // namespace skiff::iceberg
