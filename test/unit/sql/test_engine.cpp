// The engine end to end through pgwire::session: real segments (built with the storage
// engine's builders, one batch gzip-compressed) in a memory bucket, read by worker threads.
#include "observe_fixture.hpp"

#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <span>
#include <thread>

using namespace skiff;
using namespace sql_test;
using pgwire::sql_error;

TEST_CASE("counts, aggregates and typed columns over every segment", "[sql][engine]") {
    fixture f;
    f.start();
    auto w = f.ok_query("SELECT count(*) FROM orders");
    REQUIRE(w.got.size() == 1);
    CHECK(w.cell(0, 0) == "250");
    CHECK(w.cols.at(0).type_oid == pgwire::oid::int8);
    CHECK(w.tags == std::vector<std::string>{"SELECT 1"});

    w = f.ok_query("SELECT partition, count(*), min(\"offset\"), max(\"offset\") FROM orders GROUP BY partition ORDER BY 1");
    REQUIRE(w.got.size() == 2);
    CHECK(w.got[0] == pgwire::row{"0", "200", "0", "199"});
    CHECK(w.got[1] == pgwire::row{"1", "50", "0", "49"});

    w = f.ok_query("SELECT json_extract(value, '$.kind') AS kind, sum(json_extract(value, '$.n')) FROM orders "
                   "WHERE partition = 0 GROUP BY kind ORDER BY kind");
    REQUIRE(w.got.size() == 2);
    CHECK(w.got[0] == pgwire::row{"a", std::to_string(99 * 100)}); // even 0..198
    CHECK(w.got[1] == pgwire::row{"b", std::to_string(100 * 100)}); // odd 1..199

    w = f.ok_query("SELECT topic, key, value, headers, timestamp FROM orders WHERE partition = 1 AND \"offset\" = 3");
    REQUIRE(w.got.size() == 1);
    CHECK(w.got[0] == pgwire::row{"orders", "k3", R"({"n":3,"kind":"b"})", R"([{"key":"h","value":"3"}])",
                                   std::to_string(ts0 + 3)});
    CHECK(w.cols.at(3).type_oid == pgwire::oid::text);
    CHECK(w.cols.at(4).type_oid == pgwire::oid::int8);
}

TEST_CASE("offset and timestamp constraints prune segments and stay exact", "[sql][engine]") {
    fixture f;
    f.start();
    auto before = f.engine->stats();
    auto w = f.ok_query("SELECT count(*), min(\"offset\") FROM orders WHERE partition = 0 AND \"offset\" >= 150");
    CHECK(w.got.at(0) == pgwire::row{"50", "150"});
    auto after = f.engine->stats();
    CHECK(after.segments_scanned - before.segments_scanned == 1); // only the segment at base 100

    w = f.ok_query("SELECT partition, \"offset\" FROM orders WHERE timestamp BETWEEN " + std::to_string(ts0 + 48) +
                   " AND " + std::to_string(ts0 + 51) + " ORDER BY partition, \"offset\"");
    REQUIRE(w.got.size() == 6);
    CHECK(w.got[0] == pgwire::row{"0", "48"});
    CHECK(w.got[3] == pgwire::row{"0", "51"});
    CHECK(w.got[5] == pgwire::row{"1", "49"});

    w = f.ok_query("SELECT count(*) FROM orders WHERE \"offset\" > 10 AND \"offset\" < 10.5");
    CHECK(w.cell(0, 0) == "0");
    w = f.ok_query("SELECT count(*) FROM orders WHERE \"offset\" = NULL");
    CHECK(w.cell(0, 0) == "0");
}

TEST_CASE("a join of two topics", "[sql][engine]") {
    fixture f;
    f.start();
    auto w = f.ok_query("WITH p AS MATERIALIZED (SELECT key, value FROM payments) "
                        "SELECT count(*), count(DISTINCT o.key) FROM orders o JOIN p ON p.key = o.key");
    CHECK(w.got.at(0) == pgwire::row{"40", "20"});
}

TEST_CASE("session statements, several statements per query, errors with SQLSTATEs", "[sql][engine]") {
    fixture f;
    f.start();
    auto w = f.ok_query("BEGIN; SET application_name = 'x'; SHOW application_name; SELECT 1 AS one; COMMIT");
    CHECK(w.tags == std::vector<std::string>{"BEGIN", "SET", "SHOW", "SELECT 1", "COMMIT"});
    CHECK(w.got.at(0) == pgwire::row{"x"});
    CHECK(f.ok_query("SHOW server_version").cell(0, 0) == "15.0");
    CHECK(f.failed_query("SHOW nope").sqlstate == "42704");
    CHECK(f.failed_query("SELEC 1").sqlstate == "42601");
    CHECK(f.failed_query("SELECT * FROM no_such_topic").sqlstate == "42P01");
    CHECK(f.failed_query("SELECT nope FROM orders").sqlstate == "42703");
    CHECK(f.failed_query("CREATE TABLE t(a)").sqlstate == "25006");
    auto mixed = f.ok_query("SELECT x'00ff' AS b, 1.5 AS r, NULL AS n");
    CHECK(mixed.got.at(0) == pgwire::row{"\\x00ff", "1.5", std::nullopt});
    CHECK(mixed.cols.at(0).type_oid == pgwire::oid::bytea);
    CHECK(mixed.cols.at(1).type_oid == pgwire::oid::float8);
    auto stats = f.engine->stats();
    CHECK(stats.query_errors >= 5);
}

TEST_CASE("extended protocol: prepare describes, execute binds text parameters", "[sql][engine]") {
    fixture f;
    f.start();
    std::string sql = "SELECT value, \"offset\" FROM orders WHERE partition = $1 AND \"offset\" = $2";
    auto info = f.home->run_until_complete(f.session->prepare(sql, {}, {}));
    REQUIRE(info.has_value());
    CHECK(info->param_types == std::vector<std::uint32_t>{pgwire::oid::text, pgwire::oid::text});
    REQUIRE(info->columns.size() == 2);
    CHECK(info->columns[0].name == "value");
    CHECK(info->columns[1].type_oid == pgwire::oid::int8);
    collecting_writer w;
    std::vector<pgwire::value> params{"1", "7"};
    auto r = f.home->run_until_complete(f.session->execute(sql, params, w, {}));
    REQUIRE(r.has_value());
    REQUIRE(w.got.size() == 1);
    CHECK(w.got[0] == pgwire::row{R"({"n":7,"kind":"b"})", "7"});
    CHECK(w.cols.at(1).type_oid == pgwire::oid::int8);
    auto bad = f.home->run_until_complete(f.session->prepare("SELECT FROM WHERE", {}, {}));
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().sqlstate == "42601");
}

TEST_CASE("guardrails: scan limits fail the query with 54000", "[sql][engine]") {
    fixture f;
    sql::engine_config cfg;
    cfg.max_scan_segments = 2;
    f.start(cfg);
    auto e = f.failed_query("SELECT count(*) FROM orders");
    CHECK(e.sqlstate == "54000");
    CHECK(e.message == "query scanned more than 2 segments (--max-scan-segments)");
    CHECK(f.ok_query("SELECT count(*) FROM payments").cell(0, 0) == "20"); // within the limit
}

TEST_CASE("a query waiting on the store is cancelled, and a timeout cancels it too", "[sql][engine]") {
    fixture f;
    f.faults.emplace_back("get", ".kfs", storage::mem_fault::hang, -1);
    sql::engine_config cfg;
    cfg.query_timeout = std::chrono::milliseconds(300);
    f.start(cfg);
    std::stop_source stop;
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        stop.request_stop();
    });
    collecting_writer w;
    auto t0 = std::chrono::steady_clock::now();
    auto r = f.run("SELECT count(*) FROM orders", w, stop.get_token());
    canceller.join();
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().sqlstate == "57014");
    CHECK(r.error().message == "canceling statement due to user request");
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(290));

    auto e = f.failed_query("SELECT count(*) FROM orders");
    CHECK(e.sqlstate == "57014");
    CHECK(e.message == "canceling statement due to statement timeout");
    // The worker is free again afterwards.
    CHECK(f.ok_query("SELECT 42").cell(0, 0) == "42");
}

namespace {

// Waits until the engine has `running` queries on workers and `queued` waiting, then runs a
// count over the (hanging) store.
runtime::task<result<void, sql_error>> when_busy(sql::engine* e, pgwire::session* s, collecting_writer* w,
                                                 std::uint64_t running, std::uint64_t queued) {
    for (int i = 0; i < 400; ++i) {
        auto st = e->stats();
        if (st.queries_running >= running && st.queries_queued >= queued) break;
        auto slept = co_await runtime::sleep(std::chrono::milliseconds(5));
        (void)slept;
    }
    std::string sql = "SELECT count(*) FROM orders";
    co_return co_await s->simple_query(sql, *w, {});
}

} // namespace

TEST_CASE("beyond the workers and the queue, a query fails with 53300", "[sql][engine]") {
    fixture f;
    f.faults.emplace_back("get", ".kfs", storage::mem_fault::hang, -1);
    sql::engine_config cfg;
    cfg.max_concurrent_queries = 1;
    cfg.max_queued_queries = 1;
    cfg.query_timeout = std::chrono::milliseconds(500);
    f.start(cfg);
    auto s2 = f.engine->open(pgwire::startup_info{});
    auto s3 = f.engine->open(pgwire::startup_info{});
    REQUIRE(s2.has_value());
    REQUIRE(s3.has_value());
    collecting_writer w1, w2, w3;
    auto a = when_busy(f.engine.get(), f.session.get(), &w1, 0, 0);
    auto b = when_busy(f.engine.get(), s2->get(), &w2, 1, 0);
    auto c = when_busy(f.engine.get(), s3->get(), &w3, 1, 1);
    auto all = f.home->run_until_complete(runtime::when_all(std::move(a), std::move(b), std::move(c)));
    auto& [ra, rb, rc] = all;
    REQUIRE_FALSE(ra.has_value());
    CHECK(ra.error().message == "canceling statement due to statement timeout");
    REQUIRE_FALSE(rb.has_value()); // waited, then ran into the hanging store too
    CHECK(rb.error().sqlstate == "57014");
    REQUIRE_FALSE(rc.has_value());
    CHECK(rc.error().sqlstate == "53300");
}
