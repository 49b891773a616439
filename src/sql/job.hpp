// One query on its way from a session (on the server's core) to a worker thread and back: the
// statement, a bounded channel of results, and cancellation. Shared by both sides.
#pragma once

#include <skiff/pgwire/backend.hpp>
#include <skiff/runtime/reactor.hpp>

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace skiff::sql {

struct event {
    enum class kind { columns, rows, complete, error, prepared } what = kind::error;
    std::vector<pgwire::column_desc> cols;
    std::vector<pgwire::row> rows;
    std::string tag;
    pgwire::sql_error err;
    pgwire::statement_info info;
    bool terminal() const noexcept { return what == kind::complete || what == kind::error || what == kind::prepared; }
};

enum class cancel_reason : int { none = 0, user = 1, timeout = 2, shutdown = 3 };

// One GET a scan made for the query, for its trace (times: metrics trace clock, ns).
struct get_timing {
    std::string key;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    bool ok = true;
};

// What the worker did for one job. Written by the worker before it pushes the terminal event
// and read by the session after it received that event (push/next order them).
struct job_totals {
    std::int64_t started_ns = 0; // the worker took the job
    std::int64_t ended_ns = 0;
    std::uint64_t rows = 0;
    std::uint64_t bytes = 0;
    std::uint64_t segments = 0;
    std::uint64_t segments_pruned = 0;
    std::uint64_t gets = 0;
    std::uint64_t read_ahead_hits = 0;
    std::vector<get_timing> get_timings; // at most max_traced_gets
    std::uint64_t gets_untraced = 0;     // beyond that bound
};
inline constexpr std::size_t max_traced_gets = 256;

struct job : std::enable_shared_from_this<job> {
    enum class kind { run, prepare } what = kind::run;
    std::string sql; // already rewritten for SQLite
    std::vector<pgwire::value> params;
    std::vector<std::uint32_t> param_types;
    bool infer_types = true; // column types from the first row (simple query) or declared types only
    std::optional<std::chrono::steady_clock::time_point> deadline;

    runtime::reactor* home = nullptr; // the session's reactor
    std::size_t capacity = 4;         // non-terminal events buffered before the worker waits
    std::int64_t submitted_ns = 0;    // trace clock, on the session's core
    std::string statement;            // for the trace: statement_summary(sql)
    job_totals totals;                // worker side until the terminal event (see job_totals)

    // Worker side: false when the session left (the rest of the result is dropped).
    bool push(event e);
    // Session side (home reactor): `co_await j.next()`.
    struct next_awaiter {
        job* j;
        bool await_ready();
        bool await_suspend(std::coroutine_handle<> h);
        event await_resume();
    };
    next_awaiter next() { return {this}; }
    // Session side: stop delivering (the client went away); the worker stops at its next row.
    void abandon();

    // Any thread. The first reason wins.
    void cancel(cancel_reason r);
    cancel_reason reason() const noexcept { return static_cast<cancel_reason>(_reason.load()); }

    // Worker side: where cancel() reaches the running statement.
    void attach(sqlite3* db, runtime::reactor* worker);
    void detach();
    std::stop_token scan_token() const { return _scan_stop.get_token(); }

private:
    std::mutex _m;
    std::condition_variable _space;
    std::deque<event> _q;
    std::coroutine_handle<> _waiter;
    bool _abandoned = false;
    std::atomic<int> _reason{0};
    sqlite3* _db = nullptr;
    runtime::reactor* _worker = nullptr;
    std::stop_source _scan_stop;
};

pgwire::sql_error cancel_error(cancel_reason r);

} // namespace skiff::sql
