// Rendering of scraped metrics and traces: JSON (docs/metrics.schema.json), the Prometheus text
// exposition format, trace JSON, Chrome trace-event JSON and the self-contained timeline page.
// Pure functions of their inputs (no I/O, any thread); docs/observability.md describes the
// documents they produce.
#pragma once

#include <skiff/metrics/registry.hpp>
#include <skiff/metrics/trace.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::metrics {

// ---- metrics ----

// One JSON document: per family its help, unit and series, each series with the sum over
// cores and the per-core values. Histograms report count, sum, min, max, mean, p50, p90, p99
// and p999 in the metric's base unit (seconds or bytes).
std::string metrics_json(const std::vector<core_snapshot>& cores, std::int64_t unix_ms);

struct prometheus_options {
    // true: one series per core with a `core` label (sum them in PromQL);
    // false: only the sums over cores, without a `core` label.
    bool per_core = true;
};
// Prometheus text exposition format 0.0.4: # HELP / # TYPE per family, counters as is
// (their names end in _total), histograms as _bucket{le=...} (powers of two of the raw unit
// within a per-unit range, then +Inf), _sum and _count, in base units.
std::string metrics_prometheus(const std::vector<core_snapshot>& cores, const prometheus_options& opts = {});
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

// ---- traces ----

// One core's finished spans and ring counters, as a scrape carries them.
struct trace_snapshot {
    unsigned core = 0;
    std::vector<span_record> spans;
    std::uint64_t dropped_low = 0;
    std::uint64_t dropped_high = 0;
    std::size_t capacity_low = 0;
    std::size_t capacity_high = 0;
};

struct trace_query {
    std::size_t limit = 100;  // most recent traces (by root start) to return
    std::string root;         // only traces whose root span has this name ("" = any)
    bool linked = false;      // also return the traces that link to the selected ones
    // Parses "limit=20&root=flush&linked=1" (other keys are ignored; bad numbers keep the default).
    static trace_query parse(std::string_view query_string);
};

// {"schema":"skiff.traces.v1", ..., "traces":[{trace_id, root, spans:[...]}]} — newest first.
std::string traces_json(const std::vector<trace_snapshot>& cores, const trace_query& q);
// Chrome trace-event format: "X" complete events, pid 1, tid = core; spans that overlap
// without nesting (parallel PUTs) go to extra tracks of the same core ("core N · lane k",
// tid = core + 1000 * k) so they render side by side; links become flow arrows.
std::string traces_chrome(const std::vector<trace_snapshot>& cores, const trace_query& q);
// The timeline page with `traces_json_document` (a traces_json() result) embedded, so it
// renders without any further request (also when saved to a file). No external assets.
std::string traces_view_html(std::string_view traces_json_document);

} // namespace skiff::metrics
