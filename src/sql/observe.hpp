// The engine's metrics and per-query traces, on the home core (the pgwire server's).
//
// Workers are other threads and the metrics registries and trace rings are per thread, so
// nothing here is touched by a worker: scan counters and gauges are the workers' atomics,
// sampled by callback metrics at scrape time; a query's outcome and latency are recorded,
// and its trace (a "sql.query" root with one "sql.get" child per GET, at the GETs' real
// times) written, by the session on the home core once the worker's verdict has arrived.
#pragma once

#include "job.hpp"
#include "topic_vtab.hpp"

#include <skiff/metrics/registry.hpp>
#include <skiff/pgwire/backend.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::sql {

class query_metrics {
public:
    // Registers the skiff_sql_* metrics in the calling thread's registry. The referenced
    // atomics and callbacks must outlive this object.
    void register_metrics(const scan_counters& c, const std::atomic<std::uint64_t>& rows,
                          std::function<std::int64_t()> running, std::function<std::int64_t()> queued);
    // A query a session submitted has ended: `err` null on success. `totals` false when the
    // worker's figures are not known (rejected before a worker took it, or the client left
    // while rows were being sent: the worker may still be running).
    void finish(job& j, const pgwire::sql_error* err, bool totals);

private:
    void register_sampled(metrics::registry& reg, const scan_counters& c, const std::atomic<std::uint64_t>& rows,
                          std::function<std::int64_t()> running, std::function<std::int64_t()> queued);
    metrics::counter _ok, _error, _cancelled, _timeout, _limit;
    metrics::histogram _latency;
    std::vector<metrics::registration> _sampled;
};

// "ok", "error", "cancelled", "timeout" or "limit".
std::string_view outcome_of(const pgwire::sql_error* err, cancel_reason reason) noexcept;

// The first 80 characters of a statement for its trace, with the contents of string literals
// replaced by '?' (they may hold keys or values) and runs of white space collapsed. Bound
// parameters never reach it.
std::string statement_summary(std::string_view sql);

} // namespace skiff::sql
