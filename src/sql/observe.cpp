#include "observe.hpp"

#include <skiff/core/log.hpp>
#include <skiff/metrics/trace.hpp>

#include <cctype>
#include <stdexcept>

namespace skiff::sql {

namespace {

metrics::counter outcome_counter(metrics::registry& reg, const char* outcome) {
    return reg.counter("skiff_sql_queries_total", "Queries run by skiff sql, by outcome.", {{"outcome", outcome}});
}

// The atomics are shared with the workers; relaxed loads are enough for a scrape.
std::function<std::uint64_t()> load(const std::atomic<std::uint64_t>& a) {
    return [&a] { return a.load(std::memory_order_relaxed); };
}

} // namespace

void query_metrics::register_metrics(const scan_counters& c, const std::atomic<std::uint64_t>& rows,
                                     std::function<std::int64_t()> running, std::function<std::int64_t()> queued) {
    auto& reg = metrics::registry::local();
    _ok = outcome_counter(reg, "ok");
    _error = outcome_counter(reg, "error");
    _cancelled = outcome_counter(reg, "cancelled");
    _timeout = outcome_counter(reg, "timeout");
    _limit = outcome_counter(reg, "limit");
    _latency = reg.histogram("skiff_sql_query_duration_seconds",
                             "Time from submitting a query to its last row or error.", metrics::unit::seconds);
    // Sampled metrics can be registered once per thread: a second engine on the same core (not
    // something `skiff sql` does) keeps only the per-query metrics.
    try {
        register_sampled(reg, c, rows, std::move(running), std::move(queued));
    } catch (const std::invalid_argument& e) {
        log::warn("sql: a second engine on this core: its scan metrics are not exported ({})", e.what());
        _sampled.clear();
    }
}

void query_metrics::register_sampled(metrics::registry& reg, const scan_counters& c,
                                     const std::atomic<std::uint64_t>& rows, std::function<std::int64_t()> running,
                                     std::function<std::int64_t()> queued) {
    _sampled.push_back(reg.counter_fn("skiff_sql_rows_total", "Rows returned by queries.", {}, load(rows)));
    _sampled.push_back(reg.counter_fn("skiff_sql_scanned_bytes_total", "Bytes read from the bucket by scans.", {},
                                      load(c.bytes), metrics::unit::bytes));
    _sampled.push_back(reg.counter_fn("skiff_sql_scanned_segments_total", "Segments read by scans.", {}, load(c.segments)));
    _sampled.push_back(reg.counter_fn("skiff_sql_pruned_segments_total",
                                      "Segments skipped by their .kfst time bounds.", {}, load(c.segments_pruned)));
    _sampled.push_back(reg.counter_fn("skiff_sql_gets_total", "GET requests made by scans.", {}, load(c.gets)));
    _sampled.push_back(reg.counter_fn("skiff_sql_read_ahead_hits_total",
                                      "Segments already fetched when the scan reached them.", {}, load(c.read_ahead_hits)));
    const auto* in_flight = &c.gets_in_flight;
    _sampled.push_back(reg.gauge_fn("skiff_sql_gets_in_flight", "GET requests of scans in flight now.", {}, [in_flight] {
        return static_cast<std::int64_t>(in_flight->load(std::memory_order_relaxed));
    }));
    _sampled.push_back(reg.gauge_fn("skiff_sql_queries_running", "Queries running on a worker now.", {}, std::move(running)));
    _sampled.push_back(reg.gauge_fn("skiff_sql_queries_queued", "Queries waiting for a worker now.", {}, std::move(queued)));
}

std::string_view outcome_of(const pgwire::sql_error* err, cancel_reason reason) noexcept {
    if (!err) return "ok";
    if (err->sqlstate == "54000") return "limit";
    if (err->sqlstate == "57014" || err->sqlstate == "57P01" || reason != cancel_reason::none)
        return reason == cancel_reason::timeout ? "timeout" : "cancelled";
    return "error";
}

void query_metrics::finish(job& j, const pgwire::sql_error* err, bool totals) {
    auto outcome = outcome_of(err, j.reason());
    if (outcome == "ok") _ok.inc();
    else if (outcome == "limit") _limit.inc();
    else if (outcome == "timeout") _timeout.inc();
    else if (outcome == "cancelled") _cancelled.inc();
    else _error.inc();
    auto now = metrics::trace_now_ns();
    if (j.submitted_ns) _latency.record(static_cast<std::uint64_t>(std::max<std::int64_t>(0, now - j.submitted_ns)));

    auto root = metrics::span::root("sql.query");
    if (!root.active()) return;
    root.set_start_ns(j.submitted_ns ? j.submitted_ns : now);
    root.set("kind", j.what == job::kind::prepare ? "prepare" : "query");
    root.set("statement", j.statement);
    root.set("outcome", outcome);
    if (err) root.set("sqlstate", err->sqlstate);
    if (totals) {
        const auto& t = j.totals;
        root.set("rows", t.rows);
        root.set("bytes", t.bytes);
        root.set("segments", t.segments);
        root.set("segments_pruned", t.segments_pruned);
        root.set("gets", t.gets);
        root.set("read_ahead_hits", t.read_ahead_hits);
        if (t.gets_untraced) root.set("gets_untraced", t.gets_untraced);
        if (t.started_ns) {
            auto queued = metrics::span::child_of("sql.queued", root.context());
            queued.set_start_ns(j.submitted_ns ? j.submitted_ns : t.started_ns);
            queued.end_at(t.started_ns);
        }
        for (const auto& g : t.get_timings) {
            auto get = metrics::span::child_of("sql.get", root.context());
            get.set_start_ns(g.start_ns);
            get.set("key", g.key);
            get.set("offset", g.offset);
            get.set("bytes", g.bytes);
            get.set("ok", g.ok);
            get.end_at(g.end_ns);
        }
    } else {
        root.set("totals", "unknown");
    }
    root.end_at(now);
}

std::string statement_summary(std::string_view sql) {
    constexpr std::size_t max_chars = 80;
    std::string out;
    bool in_literal = false, space = false;
    for (std::size_t i = 0; i < sql.size() && out.size() < max_chars; ++i) {
        char c = sql[i];
        if (in_literal) {
            if (c != '\'') continue;
            if (i + 1 < sql.size() && sql[i + 1] == '\'') { // '' inside a literal
                ++i;
                continue;
            }
            in_literal = false;
            out += "?'";
            continue;
        }
        if (c == '\'') {
            in_literal = true;
            if (space && !out.empty()) out += ' ';
            space = false;
            out += c;
            continue;
        }
        if (std::isspace(static_cast<unsigned char>(c))) {
            space = true;
            continue;
        }
        if (space && !out.empty()) out += ' ';
        space = false;
        out += c;
    }
    if (in_literal && out.size() < max_chars) out += "?'";
    if (out.size() > max_chars) out.resize(max_chars);
    return out;
}

} // namespace skiff::sql
