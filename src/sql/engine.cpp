// The engine: a bounded queue of jobs in front of the worker threads, a watchdog for
// --query-timeout, and the sessions that turn pgwire calls into jobs.
#include <skiff/sql/engine.hpp>

#include "job.hpp"
#include "observe.hpp"
#include "rewrite.hpp"
#include "worker.hpp"

#include <skiff/core/log.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/reactor.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace skiff::sql {

using pgwire::sql_error;

struct engine::impl {
    engine_config cfg;
    runtime::reactor* home = nullptr;
    worker_shared shared;
    std::vector<std::thread> threads;
    std::thread watchdog;

    std::mutex m;
    std::condition_variable work_cv, watch_cv;
    std::deque<std::shared_ptr<job>> queue;
    std::vector<std::weak_ptr<job>> active; // queued or running, for the watchdog and shutdown
    bool stopping = false;
    std::atomic<std::uint64_t> queries{0}, errors{0}, running{0};
    query_metrics obs; // home core

    result<void, sql_error> submit(const std::shared_ptr<job>& j) {
        std::lock_guard lock(m);
        if (stopping) return failure{sql_error{"57P01", "terminating connection due to administrator command"}};
        if (queue.size() >= cfg.max_queued_queries)
            return failure{sql_error{"53300", fmt::format("too many queries: {} running and {} waiting (--max-concurrent-queries)",
                                                          cfg.max_concurrent_queries, queue.size())}};
        if (cfg.query_timeout.count() > 0) j->deadline = std::chrono::steady_clock::now() + cfg.query_timeout;
        queue.push_back(j);
        active.push_back(j);
        ++queries;
        work_cv.notify_one();
        return ok();
    }

    std::shared_ptr<job> take() {
        std::unique_lock lock(m);
        work_cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return nullptr;
        auto j = std::move(queue.front());
        queue.pop_front();
        ++running;
        return j;
    }

    void done(const std::shared_ptr<job>& j) {
        --running;
        std::lock_guard lock(m);
        std::erase_if(active, [&](const std::weak_ptr<job>& w) {
            auto s = w.lock();
            return !s || s == j;
        });
    }

    void watch() {
        std::unique_lock lock(m);
        while (!stopping) {
            watch_cv.wait_for(lock, std::chrono::milliseconds(20));
            auto now = std::chrono::steady_clock::now();
            for (auto& w : active)
                if (auto j = w.lock(); j && j->deadline && now >= *j->deadline && j->reason() == cancel_reason::none)
                    j->cancel(cancel_reason::timeout);
        }
    }
};

namespace {

class sql_session final : public pgwire::session {
public:
    sql_session(engine::impl& e, pgwire::startup_info who) : _e(e), _who(std::move(who)) {
        for (auto& [k, v] : parameter_status()) _settings[lower(k)] = v;
        _settings["transaction_isolation"] = "read committed";
        _settings["search_path"] = "public";
        _settings["max_identifier_length"] = "63";
        _settings["statement_timeout"] = fmt::format("{}", e.cfg.query_timeout.count());
        for (auto& [k, v] : _who.options) _settings[lower(k)] = v;
    }

    runtime::task<result<void, sql_error>> simple_query(std::string sql, pgwire::result_writer& out,
                                                        std::stop_token st) override {
        auto stmts = split_statements(sql);
        for (auto& s : stmts) {
            auto r = co_await run_statement(s, {}, {}, true, out, st);
            if (!r) co_return r;
        }
        co_return ok();
    }

    runtime::task<result<pgwire::statement_info, sql_error>> prepare(std::string sql, std::vector<std::uint32_t> param_types,
                                                               std::stop_token st) override {
        auto c = classify(sql);
        if (c.kind == statement_kind::show) {
            pgwire::statement_info info;
            info.columns.emplace_back(c.name, pgwire::oid::text);
            co_return info;
        }
        if (c.kind != statement_kind::query) co_return pgwire::statement_info{};
        auto j = make_job(sql, {}, std::move(param_types), false);
        j->what = job::kind::prepare;
        auto sub = _e.submit(j);
        if (!sub) co_return failure{sub.error()};
        std::stop_callback cb(st, [j] { j->cancel(cancel_reason::user); });
        while (true) {
            event ev = co_await j->next();
            if (ev.what == event::kind::prepared) co_return std::move(ev.info);
            if (ev.what == event::kind::error) {
                ++_e.errors;
                co_return failure{std::move(ev.err)};
            }
            if (ev.what == event::kind::complete) co_return pgwire::statement_info{};
        }
    }

    runtime::task<result<void, sql_error>> execute(std::string sql, std::vector<pgwire::value> params,
                                                   pgwire::result_writer& out, std::stop_token st) override {
        std::vector<std::uint32_t> types; // text: SQLite's affinity converts where a column needs it
        auto r = co_await run_statement(sql, std::move(params), std::move(types), false, out, st);
        co_return r;
    }

    std::vector<std::pair<std::string, std::string>> parameter_status() const override {
        return {{"server_version", "15.0"},
                {"server_encoding", "UTF8"},
                {"client_encoding", "UTF8"},
                {"DateStyle", "ISO, MDY"},
                {"IntervalStyle", "postgres"},
                {"TimeZone", "UTC"},
                {"integer_datetimes", "on"},
                {"standard_conforming_strings", "on"},
                {"is_superuser", "off"},
                {"session_authorization", _who.user.empty() ? "skiff" : _who.user},
                {"application_name", _who.application_name}};
    }

private:

    static std::string lower(std::string s) {
        for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return s;
    }

    std::shared_ptr<job> make_job(const std::string& sql, std::vector<pgwire::value> params,
                                  std::vector<std::uint32_t> types, bool infer) {
        auto j = std::make_shared<job>();
        j->sql = rewrite_postgres(sql);
        j->params = std::move(params);
        j->param_types = std::move(types);
        j->infer_types = infer;
        j->home = _e.home;
        j->capacity = std::max<std::size_t>(1, _e.cfg.chunks_in_flight);
        return j;
    }

    // SET name {TO|=} value: remembered for SHOW; nothing else changes.
    void remember_set(std::string_view stmt) {
        std::string s(stmt);
        auto words_end = s.find_first_of("=");
        std::string head = words_end == std::string::npos ? s : s.substr(0, words_end);
        std::string value = words_end == std::string::npos ? "" : s.substr(words_end + 1);
        std::vector<std::string> words;
        std::string w;
        for (char c : head + " ") {
            if (std::isspace(static_cast<unsigned char>(c))) {
                if (!w.empty()) words.push_back(lower(w));
                w.clear();
            } else {
                w += c;
            }
        }
        // SET [SESSION|LOCAL] name [TO value]
        std::size_t i = 1;
        if (i < words.size() && (words[i] == "session" || words[i] == "local")) ++i;
        if (i >= words.size()) return;
        std::string name = words[i];
        if (words_end == std::string::npos) {
            auto to = std::find(words.begin(), words.end(), "to");
            if (to == words.end()) return;
            std::string rest;
            auto pos = lower(s).find(" to ");
            if (pos != std::string::npos) rest = s.substr(pos + 4);
            value = rest;
        }
        while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(0, 1);
        while (!value.empty() && (std::isspace(static_cast<unsigned char>(value.back())) || value.back() == ';'))
            value.pop_back();
        if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') value = value.substr(1, value.size() - 2);
        _settings[name] = value;
    }

    runtime::task<result<void, sql_error>> answer_show(const classified& c, pgwire::result_writer& out) {
        auto it = _settings.find(c.name);
        if (it == _settings.end()) {
            ++_e.errors;
            co_return failure{sql_error{"42704", fmt::format("unrecognized configuration parameter \"{}\"", c.name)}};
        }
        std::vector<pgwire::column_desc> cols;
        cols.emplace_back(c.name, pgwire::oid::text);
        auto r1 = co_await out.columns(std::move(cols));
        if (!r1) co_return r1;
        std::vector<pgwire::row> rows(1);
        rows[0].push_back(it->second);
        auto r2 = co_await out.rows(std::move(rows));
        if (!r2) co_return r2;
        std::string tag = "SHOW";
        co_return co_await out.complete(std::move(tag));
    }

    runtime::task<result<void, sql_error>> run_statement(const std::string& sql, std::vector<pgwire::value> params,
                                                         std::vector<std::uint32_t> types, bool infer,
                                                         pgwire::result_writer& out, std::stop_token st) {
        auto c = classify(sql);
        switch (c.kind) {
        case statement_kind::empty: co_return ok();
        case statement_kind::show: co_return co_await answer_show(c, out);
        case statement_kind::set: remember_set(sql); [[fallthrough]];
        case statement_kind::begin:
        case statement_kind::commit:
        case statement_kind::rollback:
        case statement_kind::ignored: {
            std::string tag = c.tag;
            co_return co_await out.complete(std::move(tag));
        }
        case statement_kind::query: break;
        }
        if (st.stop_requested()) co_return failure{cancel_error(cancel_reason::user)};
        auto j = make_job(sql, std::move(params), std::move(types), infer);
        j->submitted_ns = metrics::trace_now_ns();
        j->statement = statement_summary(j->sql);
        auto sub = _e.submit(j);
        if (!sub) {
            ++_e.errors;
            _e.obs.finish(*j, &sub.error(), false);
            co_return failure{sub.error()};
        }
        std::stop_callback cb(st, [j] { j->cancel(cancel_reason::user); });
        while (true) {
            event ev = co_await j->next();
            if (j->reason() != cancel_reason::none && !ev.terminal()) continue; // drain to the worker's verdict
            switch (ev.what) {
            case event::kind::columns: {
                auto r = co_await out.columns(std::move(ev.cols));
                if (!r) {
                    j->abandon();
                    _e.obs.finish(*j, &r.error(), false);
                    co_return r;
                }
                break;
            }
            case event::kind::rows: {
                auto r = co_await out.rows(std::move(ev.rows));
                if (!r) {
                    j->abandon();
                    _e.obs.finish(*j, &r.error(), false);
                    co_return r;
                }
                break;
            }
            case event::kind::prepared:
            case event::kind::complete: {
                _e.obs.finish(*j, nullptr, true);
                if (ev.tag.empty()) co_return ok();
                co_return co_await out.complete(std::move(ev.tag));
            }
            case event::kind::error:
                ++_e.errors;
                _e.obs.finish(*j, &ev.err, true);
                co_return failure{std::move(ev.err)};
            }
        }
    }

    engine::impl& _e;
    pgwire::startup_info _who;
    std::map<std::string, std::string> _settings;
};

} // namespace

engine::engine(std::unique_ptr<impl> i) : _impl(std::move(i)) {}

engine::~engine() {
    {
        std::lock_guard lock(_impl->m);
        _impl->stopping = true;
        for (auto& w : _impl->active)
            if (auto j = w.lock()) j->cancel(cancel_reason::shutdown);
        // take() hands out nothing once stopping: answer the queued jobs here.
        for (auto& j : _impl->queue) {
            event ev;
            ev.what = event::kind::error;
            ev.err = cancel_error(cancel_reason::shutdown);
            j->push(std::move(ev));
        }
        _impl->queue.clear();
    }
    _impl->work_cv.notify_all();
    _impl->watch_cv.notify_all();
    for (auto& t : _impl->threads) t.join();
    if (_impl->watchdog.joinable()) _impl->watchdog.join();
}

result<std::unique_ptr<engine>, std::string> engine::create(engine_config cfg, store_opener open, runtime::reactor& home) {
    auto i = std::make_unique<impl>();
    cfg.max_concurrent_queries = std::max<std::size_t>(1, cfg.max_concurrent_queries);
    i->cfg = cfg;
    i->home = &home;
    i->shared.cfg = cfg;
    i->shared.open = std::move(open);
    auto* raw = i.get();
    i->obs.register_metrics(i->shared.counters, i->shared.rows, [raw] { return static_cast<std::int64_t>(raw->running.load()); },
                            [raw] {
                                std::lock_guard lock(raw->m);
                                return static_cast<std::int64_t>(raw->queue.size());
                            });
    i->shared.take = [raw] { return raw->take(); };
    i->shared.done = [raw](const std::shared_ptr<job>& j) { raw->done(j); };
    std::unique_ptr<engine> e(new engine(std::move(i)));
    std::vector<std::future<std::string>> ready;
    for (std::size_t n = 0; n < cfg.max_concurrent_queries; ++n) {
        auto p = std::make_shared<std::promise<std::string>>();
        ready.push_back(p->get_future());
        e->_impl->threads.emplace_back([raw, n, p] {
            worker_main(raw->shared, static_cast<unsigned>(n + 1), [p](std::string err) { p->set_value(std::move(err)); });
        });
    }
    e->_impl->watchdog = std::thread([raw] { raw->watch(); });
    for (auto& f : ready)
        if (auto err = f.get(); !err.empty()) return failure{std::string("a query worker cannot start: ") + err};
    return e;
}

result<std::unique_ptr<pgwire::session>, sql_error> engine::open(const pgwire::startup_info& who) {
    std::unique_ptr<pgwire::session> s = std::make_unique<sql_session>(*_impl, who);
    return s;
}

engine_stats engine::stats() const {
    engine_stats s;
    s.queries = _impl->queries;
    s.query_errors = _impl->errors;
    s.rows = _impl->shared.rows;
    s.bytes_scanned = _impl->shared.counters.bytes;
    s.segments_scanned = _impl->shared.counters.segments;
    s.gets = _impl->shared.counters.gets;
    s.gets_in_flight = _impl->shared.counters.gets_in_flight;
    s.read_ahead_hits = _impl->shared.counters.read_ahead_hits;
    s.queries_running = _impl->running;
    std::lock_guard lock(_impl->m);
    s.queries_queued = _impl->queue.size();
    return s;
}

} // namespace skiff::sql
