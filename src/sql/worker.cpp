#include "worker.hpp"

#include "catalog.hpp"
#include "sqlstate.hpp"
#include "text.hpp"

#include <skiff/core/log.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/reader/segment_reader.hpp>

#include <fmt/format.h>

#include <cctype>
#include <exception>

namespace skiff::sql {

namespace {

using pgwire::sql_error;

// Topic list refreshes: at most this often (a LIST per refresh), and always when a statement
// names a table SQLite does not know.
constexpr auto topics_refresh_interval = std::chrono::seconds(2);

std::uint32_t oid_of_decltype(const char* decl) {
    if (!decl) return 0;
    std::string d;
    for (const char* p = decl; *p; ++p) d += static_cast<char>(std::toupper(static_cast<unsigned char>(*p)));
    if (d.find("BOOL") != std::string::npos) return pgwire::oid::boolean;
    if (d.find("INT") != std::string::npos) return pgwire::oid::int8;
    if (d.find("CHAR") != std::string::npos || d.find("TEXT") != std::string::npos) return pgwire::oid::text;
    if (d.find("BLOB") != std::string::npos) return pgwire::oid::bytea;
    if (d.find("REAL") != std::string::npos || d.find("FLOA") != std::string::npos || d.find("DOUB") != std::string::npos)
        return pgwire::oid::float8;
    return 0;
}

std::uint32_t oid_of_value(int type) {
    switch (type) {
    case SQLITE_INTEGER: return pgwire::oid::int8;
    case SQLITE_FLOAT: return pgwire::oid::float8;
    case SQLITE_BLOB: return pgwire::oid::bytea;
    default: return pgwire::oid::text;
    }
}

std::vector<pgwire::column_desc> describe(sqlite3_stmt* st, bool from_row) {
    std::vector<pgwire::column_desc> cols;
    int n = sqlite3_column_count(st);
    for (int i = 0; i < n; ++i) {
        auto oid = oid_of_decltype(sqlite3_column_decltype(st, i));
        if (!oid) oid = from_row ? oid_of_value(sqlite3_column_type(st, i)) : pgwire::oid::text;
        pgwire::column_desc c(sqlite3_column_name(st, i), oid);
        if (oid == pgwire::oid::int8 || oid == pgwire::oid::float8) c.type_size = 8;
        cols.push_back(std::move(c));
    }
    return cols;
}

pgwire::value render(sqlite3_stmt* st, int i, std::uint32_t oid) {
    switch (sqlite3_column_type(st, i)) {
    case SQLITE_NULL: return std::nullopt;
    case SQLITE_INTEGER:
        if (oid == pgwire::oid::boolean) return std::string(sqlite3_column_int64(st, i) ? "t" : "f");
        return std::to_string(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT: return float8_text(sqlite3_column_double(st, i));
    case SQLITE_BLOB: {
        std::string_view b(static_cast<const char*>(sqlite3_column_blob(st, i)),
                           static_cast<std::size_t>(sqlite3_column_bytes(st, i)));
        // Text columns carry the hex form too: the client asked for text, and raw bytes that
        // are not UTF-8 would break its decoder.
        return bytea_hex(b);
    }
    default: {
        auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
        return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(st, i)));
    }
    }
}

// "0", "-12", "42": no sign but '-', no leading zero, no space, fits in int64.
std::optional<std::int64_t> canonical_integer(std::string_view s) {
    std::string_view digits = s;
    if (!digits.empty() && digits.front() == '-') digits.remove_prefix(1);
    if (digits.empty() || digits.size() > 19 || (digits.size() > 1 && digits.front() == '0')) return std::nullopt;
    for (char c : digits)
        if (c < '0' || c > '9') return std::nullopt;
    if (s == "-0") return std::nullopt;
    try {
        return std::stoll(std::string(s));
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

struct stmt_guard {
    sqlite3_stmt* st = nullptr;
    ~stmt_guard() { sqlite3_finalize(st); }
};

class worker {
public:
    worker(worker_shared& s, runtime::reactor& r, storage::object_store& store, sqlite3* db)
        : _shared(s), _reactor(r), _db(db) {
        _env.reactor = &r;
        _env.store = &store;
        _env.ns = s.cfg.ns;
        _env.counters = &s.counters;
        _env.scan_cfg.parallel_gets = s.cfg.parallel_gets;
        _env.scan_cfg.read_ahead_bytes = s.cfg.read_ahead_bytes;
    }

    std::string init() {
        if (register_topic_module(_db, &_env) != SQLITE_OK) return sqlite3_errmsg(_db);
        if (install_functions(_db, "skiff") != SQLITE_OK) return sqlite3_errmsg(_db);
        return refresh_topics(std::stop_token{});
    }

    void run(job& j) {
        log::debug("sql: {}{}", j.what == job::kind::prepare ? "prepare " : "", j.sql);
        j.attach(_db, &_reactor);
        _qs = query_scan_state{};
        j.totals.started_ns = metrics::trace_now_ns();
        event ev;
        try {
            ev = execute(j);
        } catch (const std::exception& e) {
            ev.what = event::kind::error;
            ev.err = {"XX000", e.what()};
        }
        _env.query = nullptr;
        j.detach();
        auto& t = j.totals;
        t.ended_ns = metrics::trace_now_ns();
        t.rows = _qs.rows;
        t.bytes = _qs.bytes;
        t.segments = _qs.segments;
        t.segments_pruned = _qs.segments_pruned;
        t.gets = _qs.gets;
        t.read_ahead_hits = _qs.read_ahead_hits;
        t.get_timings = std::move(_qs.gets_log->timings);
        t.gets_untraced = _qs.gets_log->untraced;
        _qs.gets_log->timings.clear(); // a GET still in flight must not grow a moved-from vector
        if (ev.what == event::kind::error && j.reason() != cancel_reason::none) ev.err = cancel_error(j.reason());
        j.push(std::move(ev));
    }

private:
    std::string refresh_topics(std::stop_token st) {
        auto listed = _reactor.run_until_complete(reader::list_topics(*_env.store, _env.ns, std::move(st)));
        if (!listed) return listed.error().message;
        _last_refresh = std::chrono::steady_clock::now();
        if (*listed == _topics && !_created.empty()) return {};
        _topics = std::move(*listed);
        return sync_topics(_db, _topics, _created);
    }

    event error(sql_error e) {
        event ev;
        ev.what = event::kind::error;
        ev.err = std::move(e);
        return ev;
    }

    event execute(job& j) {
        if (j.reason() != cancel_reason::none) return error(cancel_error(j.reason()));
        bool refreshed = false;
        if (std::chrono::steady_clock::now() - _last_refresh > topics_refresh_interval) {
            auto err = refresh_topics(j.scan_token());
            if (!err.empty()) return error({"58030", "cannot list the topics: " + err});
            refreshed = true;
        }
        stmt_guard g;
        while (true) {
            const char* tail = nullptr;
            int rc = sqlite3_prepare_v2(_db, j.sql.c_str(), static_cast<int>(j.sql.size()), &g.st, &tail);
            if (rc == SQLITE_OK) break;
            std::string msg = sqlite3_errmsg(_db);
            if (!refreshed && msg.find("no such table") != std::string::npos) {
                refreshed = true;
                auto err = refresh_topics(j.scan_token());
                if (err.empty()) continue;
            }
            if (auto empty = empty_catalog_answer(j)) return *empty;
            return error(map_sqlite_error(rc, msg));
        }
        if (!g.st) { // only comments or whitespace
            event ev;
            ev.what = j.what == job::kind::prepare ? event::kind::prepared : event::kind::complete;
            return ev;
        }
        if (j.what == job::kind::prepare) {
            event ev;
            ev.what = event::kind::prepared;
            int n = sqlite3_bind_parameter_count(g.st);
            for (int i = 0; i < n; ++i) {
                auto declared = static_cast<std::size_t>(i) < j.param_types.size() ? j.param_types[static_cast<std::size_t>(i)] : 0;
                ev.info.param_types.push_back(declared && declared != pgwire::oid::unknown ? declared : pgwire::oid::text);
            }
            ev.info.columns = describe(g.st, false);
            return ev;
        }
        if (!sqlite3_stmt_readonly(g.st)) return error({"25006", "skiff sql is read-only: only queries are allowed"});
        if (auto bad = bind(j, g.st)) return error(std::move(*bad));

        auto& qs = _qs;
        qs.max_bytes = _shared.cfg.max_scan_bytes;
        qs.max_segments = _shared.cfg.max_scan_segments;
        qs.stop = j.scan_token();
        _env.query = &qs;

        std::vector<pgwire::column_desc> cols;
        std::vector<pgwire::row> batch;
        std::uint64_t count = 0;
        bool sent_columns = false;
        auto rows_per_chunk = std::max<std::size_t>(1, _shared.cfg.rows_per_chunk);
        while (true) {
            int rc = sqlite3_step(g.st);
            if (rc == SQLITE_ROW) {
                if (!sent_columns) {
                    cols = describe(g.st, j.infer_types);
                    event ev;
                    ev.what = event::kind::columns;
                    ev.cols = cols;
                    if (!j.push(std::move(ev))) return error(cancel_error(cancel_reason::user));
                    sent_columns = true;
                }
                pgwire::row r;
                r.reserve(cols.size());
                for (int i = 0; i < static_cast<int>(cols.size()); ++i)
                    r.push_back(render(g.st, i, cols[static_cast<std::size_t>(i)].type_oid));
                batch.push_back(std::move(r));
                ++count;
                qs.rows = count;
                if (batch.size() >= rows_per_chunk) {
                    event ev;
                    ev.what = event::kind::rows;
                    ev.rows = std::move(batch);
                    batch = {};
                    _shared.rows += ev.rows.size();
                    if (!j.push(std::move(ev))) return error(cancel_error(cancel_reason::user));
                }
                continue;
            }
            if (rc == SQLITE_DONE) break;
            if (j.reason() != cancel_reason::none) return error(cancel_error(j.reason()));
            if (qs.error) return error(std::move(*qs.error));
            return error(map_sqlite_error(rc, sqlite3_errmsg(_db)));
        }
        if (!sent_columns && sqlite3_column_count(g.st) > 0) {
            event ev;
            ev.what = event::kind::columns;
            ev.cols = describe(g.st, false);
            if (!j.push(std::move(ev))) return error(cancel_error(cancel_reason::user));
        }
        if (!batch.empty()) {
            event ev;
            ev.what = event::kind::rows;
            ev.rows = std::move(batch);
            _shared.rows += ev.rows.size();
            if (!j.push(std::move(ev))) return error(cancel_error(cancel_reason::user));
        }
        // A cancel that raced the last row still ends as cancelled, never as success.
        if (j.reason() != cancel_reason::none) return error(cancel_error(j.reason()));
        event done;
        done.what = event::kind::complete;
        done.tag = fmt::format("SELECT {}", count);
        return done;
    }

    // psql's \d asks for policies, statistics objects, publications, inheritance ... with
    // Postgres syntax SQLite cannot compile (arrays, generate_series). Skiff has none of these
    // objects, so such a query, when it fails to compile, is answered with no rows.
    std::optional<event> empty_catalog_answer(job& j) {
        static constexpr const char* always_empty[] = {
            "pg_catalog.pg_publication", "pg_catalog.pg_inherits", "pg_catalog.pg_policy",
            "pg_catalog.pg_statistic_ext", "pg_catalog.pg_trigger", "pg_catalog.pg_rewrite",
            "pg_catalog.pg_partitioned_table", "pg_catalog.pg_foreign_table", "pg_catalog.pg_sequence",
            "pg_catalog.pg_constraint", "pg_catalog.pg_index"};
        std::string lower;
        for (char c : j.sql) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        bool hit = false;
        for (auto* name : always_empty) hit = hit || lower.find(name) != std::string::npos;
        if (!hit) return std::nullopt;
        for (auto& t : _topics)
            if (lower.find(t) != std::string::npos) return std::nullopt; // a topic is involved: a real error
        event cols;
        cols.what = event::kind::columns;
        cols.cols.emplace_back("?column?", pgwire::oid::text);
        if (j.what == job::kind::prepare) {
            cols.what = event::kind::prepared;
            cols.info.columns = std::move(cols.cols);
            return cols;
        }
        j.push(std::move(cols));
        event done;
        done.what = event::kind::complete;
        done.tag = "SELECT 0";
        return done;
    }

    std::optional<sql_error> bind(job& j, sqlite3_stmt* st) {
        int n = sqlite3_bind_parameter_count(st);
        if (static_cast<std::size_t>(n) != j.params.size())
            return sql_error{"08P01", fmt::format("bind message supplies {} parameters, but prepared statement requires {}",
                                                  j.params.size(), n)};
        for (int i = 0; i < n; ++i) {
            auto& p = j.params[static_cast<std::size_t>(i)];
            auto type = static_cast<std::size_t>(i) < j.param_types.size() ? j.param_types[static_cast<std::size_t>(i)] : 0;
            int rc;
            if (!p) rc = sqlite3_bind_null(st, i + 1);
            else if (type == pgwire::oid::int8 || type == pgwire::oid::int4 || type == pgwire::oid::int2) {
                try {
                    rc = sqlite3_bind_int64(st, i + 1, std::stoll(*p));
                } catch (const std::exception&) {
                    return sql_error{"22P02", fmt::format("invalid input syntax for type bigint: \"{}\"", *p)};
                }
            } else if (type == pgwire::oid::float8) {
                try {
                    rc = sqlite3_bind_double(st, i + 1, std::stod(*p));
                } catch (const std::exception&) {
                    return sql_error{"22P02", fmt::format("invalid input syntax for type double precision: \"{}\"", *p)};
                }
            } else if (auto n = canonical_integer(*p)) {
                // Unspecified types arrive as text; Postgres would infer a number from the
                // context, SQLite compares an integer with text as unequal. A canonical integer is
                // bound as one: against a TEXT column SQLite's affinity turns it back into text.
                rc = sqlite3_bind_int64(st, i + 1, *n);
            } else {
                rc = sqlite3_bind_text(st, i + 1, p->data(), static_cast<int>(p->size()), SQLITE_TRANSIENT);
            }
            if (rc != SQLITE_OK) return map_sqlite_error(rc, sqlite3_errmsg(_db));
        }
        return std::nullopt;
    }

    worker_shared& _shared;
    runtime::reactor& _reactor;
    sqlite3* _db;
    vtab_env _env;
    std::vector<std::string> _topics;
    query_scan_state _qs; // the running job's; copied into its totals when it ends
    std::vector<std::string> _created;
    std::chrono::steady_clock::time_point _last_refresh{};
};

runtime::task<result<worker_store, std::string>> open_store(worker_shared* s, runtime::reactor* r) {
    co_return s->open(*r);
}

// The store (an S3 client's curl multi) must be let go on its reactor, as it was made.
runtime::task<void> release_store(worker_store* w) {
    w->keep_alive.reset();
    w->store = nullptr;
    co_return;
}

} // namespace

void worker_main(worker_shared& shared, unsigned index, std::function<void(std::string)> started) {
    runtime::reactor_config rc;
    rc.cq_entries = 1024;
    auto r = runtime::reactor::create(index, rc);
    if (!r) return started(r.error());
    auto store = (*r)->run_until_complete(open_store(&shared, r->get()));
    if (!store) return started(store.error());
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
        started(fmt::format("cannot open SQLite: {}", db ? sqlite3_errmsg(db) : "out of memory"));
        sqlite3_close(db);
        (*r)->run_until_complete(release_store(&*store));
        return;
    }
    {
        worker w(shared, **r, *store->store, db);
        auto err = w.init();
        started(err);
        if (err.empty()) {
            while (auto j = shared.take()) {
                w.run(*j);
                shared.done(j);
            }
        }
    }
    sqlite3_close(db);
    (*r)->run_until_complete(release_store(&*store));
}

} // namespace skiff::sql
