// The engine's metrics (in the home core's registry) and per-query traces (in its trace ring).
#include "observe.hpp"
#include "observe_fixture.hpp"

#include <skiff/metrics/registry.hpp>
#include <skiff/metrics/trace.hpp>

#include <algorithm>
#include <thread>

using namespace skiff;
using sql_test::fixture;

namespace {

// This thread's value of a counter or gauge (0 when absent). Cells outlive an engine on the
// thread, so tests compare before and after.
std::int64_t metric(std::string_view name, const metrics::labels& labels = {}) {
    auto snap = metrics::registry::local().snapshot();
    for (auto& f : snap.families) {
        if (f.name != name) continue;
        for (auto& s : f.series)
            if (s.labels == labels) return f.type == metrics::metric_type::gauge ? s.gauge : static_cast<std::int64_t>(s.counter);
    }
    return 0;
}

std::uint64_t latency_count() {
    auto snap = metrics::registry::local().snapshot();
    for (auto& f : snap.families)
        if (f.name == "skiff_sql_query_duration_seconds" && !f.series.empty()) return f.series[0].hist.count;
    return 0;
}

std::int64_t outcome(const char* o) { return metric("skiff_sql_queries_total", {{"outcome", o}}); }

// The spans of the newest sql.query trace on this thread.
std::vector<metrics::span_record> last_query_trace() {
    auto spans = metrics::trace_buffer::local().snapshot();
    const metrics::span_record* root = nullptr;
    for (auto& s : spans)
        if (s.name == "sql.query" && (!root || s.start_ns >= root->start_ns)) root = &s;
    std::vector<metrics::span_record> out;
    if (!root) return out;
    for (auto& s : spans)
        if (s.trace_id == root->trace_id) out.push_back(s);
    return out;
}

std::int64_t attr(const metrics::span_record& s, std::string_view key) {
    auto* a = s.attribute(key);
    return a && a->is_int ? a->num : -1;
}

std::string attr_str(const metrics::span_record& s, std::string_view key) {
    auto* a = s.attribute(key);
    return a && !a->is_int ? a->str : "";
}

} // namespace

TEST_CASE("queries are counted by outcome with their rows, bytes, segments and GETs", "[sql][metrics]") {
    fixture f;
    sql::engine_config cfg;
    cfg.max_scan_segments = 2;
    f.start(cfg);
    auto ok0 = outcome("ok"), err0 = outcome("error"), limit0 = outcome("limit");
    auto rows0 = metric("skiff_sql_rows_total"), bytes0 = metric("skiff_sql_scanned_bytes_total");
    auto segs0 = metric("skiff_sql_scanned_segments_total"), gets0 = metric("skiff_sql_gets_total");
    auto lat0 = latency_count();

    auto w = f.ok_query("SELECT \"offset\" FROM orders WHERE partition = 0 AND \"offset\" >= 150");
    CHECK(w.got.size() == 50);
    CHECK(outcome("ok") - ok0 == 1);
    CHECK(metric("skiff_sql_rows_total") - rows0 == 50);
    CHECK(metric("skiff_sql_scanned_segments_total") - segs0 == 1);
    CHECK(metric("skiff_sql_scanned_bytes_total") - bytes0 > 0);
    CHECK(metric("skiff_sql_gets_total") - gets0 >= 1);
    CHECK(latency_count() - lat0 == 1);

    CHECK(f.failed_query("SELECT nope FROM orders").sqlstate == "42703");
    CHECK(outcome("error") - err0 == 1);
    CHECK(f.failed_query("SELECT count(*) FROM orders").sqlstate == "54000"); // 3 segments > 2
    CHECK(outcome("limit") - limit0 == 1);
    CHECK(outcome("ok") - ok0 == 1);
    CHECK(latency_count() - lat0 == 3);
    // Nothing left running once the answers are in (the worker leaves the running count just
    // after it sent the answer).
    for (int i = 0; i < 200 && metric("skiff_sql_queries_running") != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(metric("skiff_sql_queries_running") == 0);
    CHECK(metric("skiff_sql_queries_queued") == 0);
    CHECK(metric("skiff_sql_gets_in_flight") == 0);

    // The query's trace carries its figures and a statement summary.
    auto spans = last_query_trace();
    REQUIRE_FALSE(spans.empty());
    auto root = std::find_if(spans.begin(), spans.end(), [](auto& s) { return s.name == "sql.query"; });
    REQUIRE(root != spans.end());
    CHECK(attr_str(*root, "outcome") == "limit");
    CHECK(attr_str(*root, "sqlstate") == "54000");
    CHECK(attr_str(*root, "statement") == "SELECT count(*) FROM orders");
}

TEST_CASE("a query's timeout and cancellation are counted as such", "[sql][metrics]") {
    fixture f;
    f.latency = std::chrono::milliseconds(50);
    sql::engine_config cfg;
    cfg.query_timeout = std::chrono::milliseconds(30);
    cfg.parallel_gets = 1;
    f.start(cfg);
    auto timeout0 = outcome("timeout");
    CHECK(f.failed_query("SELECT count(*) FROM orders").sqlstate == "57014");
    CHECK(outcome("timeout") - timeout0 == 1);
}

TEST_CASE("the query's trace has one span per GET, overlapping when GETs run in parallel", "[sql][trace]") {
    fixture f;
    f.latency = std::chrono::milliseconds(20);
    sql::engine_config cfg;
    cfg.parallel_gets = 4;
    f.start(cfg);
    auto w = f.ok_query("SELECT count(*) FROM orders");
    CHECK(w.cell(0, 0) == "250");

    auto spans = last_query_trace();
    auto root = std::find_if(spans.begin(), spans.end(), [](auto& s) { return s.name == "sql.query"; });
    REQUIRE(root != spans.end());
    CHECK(attr_str(*root, "outcome") == "ok");
    CHECK(attr(*root, "rows") == 1);
    CHECK(attr(*root, "segments") == 3);
    std::vector<metrics::span_record> gets;
    for (auto& s : spans)
        if (s.name == "sql.get") gets.push_back(s);
    REQUIRE(static_cast<std::int64_t>(gets.size()) == attr(*root, "gets"));
    REQUIRE(gets.size() >= 2);
    std::int64_t bytes = 0;
    for (auto& g : gets) {
        CHECK(g.parent_id == root->span_id);
        CHECK(root->start_ns <= g.start_ns);
        CHECK(g.end_ns <= root->end_ns);
        CHECK(g.end_ns - g.start_ns >= 15'000'000); // the store's 20 ms, measured by the reader
        CHECK(attr_str(g, "key").rfind("default/orders/", 0) == 0);
        bytes += attr(g, "bytes");
    }
    CHECK(bytes == attr(*root, "bytes"));
    // Four GETs may be in flight: some pair overlaps in time.
    bool overlap = false;
    for (std::size_t i = 0; i < gets.size(); ++i)
        for (std::size_t j = i + 1; j < gets.size(); ++j)
            overlap = overlap || (gets[i].start_ns < gets[j].end_ns && gets[j].start_ns < gets[i].end_ns);
    CHECK(overlap);
}

TEST_CASE("statement summaries hide string literals and stay short", "[sql][trace]") {
    CHECK(sql::statement_summary("SELECT *\n  FROM t WHERE key = 'secret' AND v = 'it''s'") ==
          "SELECT * FROM t WHERE key = '?' AND v = '?'");
    CHECK(sql::statement_summary("SELECT 'unterminated") == "SELECT '?'");
    auto long_sql = "SELECT " + std::string(200, 'x');
    CHECK(sql::statement_summary(long_sql).size() == 80);
    CHECK(sql::outcome_of(nullptr, sql::cancel_reason::none) == "ok");
    pgwire::sql_error timeout{"57014", "x"};
    CHECK(sql::outcome_of(&timeout, sql::cancel_reason::timeout) == "timeout");
    CHECK(sql::outcome_of(&timeout, sql::cancel_reason::user) == "cancelled");
}
