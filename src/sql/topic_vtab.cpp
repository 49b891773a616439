// SQLite's virtual table interface (https://sqlite.org/vtab.html) over reader::segment_scan.
// xFilter and xNext drive the worker's reactor with run_until_complete: the worker thread does
// not otherwise run it, so this never re-enters; read-ahead GETs keep going in the kernel
// between calls.
#include "topic_vtab.hpp"

#include <skiff/metrics/trace.hpp>

#include "text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <limits>

namespace skiff::sql {

namespace {

struct topic_vtab {
    sqlite3_vtab base{};
    vtab_env* env = nullptr;
    std::string topic;
};

struct topic_cursor {
    sqlite3_vtab_cursor base{};
    std::unique_ptr<reader::segment_scan> scan;
    const reader::chunk* chunk = nullptr;
    std::size_t idx = 0;
    bool eof = true;
    std::int64_t rowid = 0;
    reader::scan_stats seen{};         // stats already added to the query and engine counters
    std::uint64_t in_flight_seen = 0;  // this scan's share of the gets_in_flight gauge
};

topic_vtab* tab_of(sqlite3_vtab_cursor* c) { return reinterpret_cast<topic_vtab*>(c->pVtab); }

std::string unquote(std::string_view s) {
    if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
        std::string out;
        char q = s.front();
        for (std::size_t i = 1; i + 1 < s.size(); ++i) {
            out += s[i];
            if (s[i] == q && i + 2 < s.size() && s[i + 1] == q) ++i;
        }
        return out;
    }
    return std::string(s);
}

int fail(sqlite3_vtab* tab, vtab_env* env, pgwire::sql_error e) {
    sqlite3_free(tab->zErrMsg);
    tab->zErrMsg = sqlite3_mprintf("%s", e.message.c_str());
    if (env->query && !env->query->error) env->query->error = std::move(e);
    return SQLITE_ERROR;
}

pgwire::sql_error from_reader(const reader::reader_error& e) {
    switch (e.code) {
    case reader::errc::cancelled: return {"57014", "canceling statement due to user request"};
    case reader::errc::store_failed: return {"58030", e.message};
    case reader::errc::corrupt: return {"XX001", e.message};
    case reader::errc::too_large: return {"54000", e.message};
    case reader::errc::invalid_argument: return {"22023", e.message};
    }
    return {"XX000", e.message};
}

int x_connect(sqlite3* db, void* aux, int argc, const char* const* argv, sqlite3_vtab** out, char** err) {
    if (argc < 4) {
        *err = sqlite3_mprintf("skiff_topic needs the topic name: USING skiff_topic('name')");
        return SQLITE_ERROR;
    }
    std::string decl = "CREATE TABLE x(";
    for (std::size_t i = 0; i < std::size(topic_columns); ++i) {
        if (i) decl += ", ";
        decl += fmt::format("\"{}\" {}", topic_columns[i].name, topic_columns[i].decltype_name);
    }
    decl += ")";
    if (int rc = sqlite3_declare_vtab(db, decl.c_str()); rc != SQLITE_OK) return rc;
    auto* t = new topic_vtab;
    t->env = static_cast<vtab_env*>(aux);
    t->topic = unquote(argv[3]);
    *out = &t->base;
    return SQLITE_OK;
}

int x_disconnect(sqlite3_vtab* v) {
    delete reinterpret_cast<topic_vtab*>(v);
    return SQLITE_OK;
}

int x_best_index(sqlite3_vtab*, sqlite3_index_info* info) {
    pushdown pd;
    int argv = 1;
    double rows = 1e6;
    bool partition_eq = false;
    for (int i = 0; i < info->nConstraint; ++i) {
        auto& c = info->aConstraint[i];
        if (!c.usable) continue;
        if (c.iColumn != col_partition && c.iColumn != col_offset && c.iColumn != col_timestamp) continue;
        pushdown::op op;
        switch (c.op) {
        case SQLITE_INDEX_CONSTRAINT_EQ: op = pushdown::op::eq; break;
        case SQLITE_INDEX_CONSTRAINT_LT: op = pushdown::op::lt; break;
        case SQLITE_INDEX_CONSTRAINT_LE: op = pushdown::op::le; break;
        case SQLITE_INDEX_CONSTRAINT_GT: op = pushdown::op::gt; break;
        case SQLITE_INDEX_CONSTRAINT_GE: op = pushdown::op::ge; break;
        default: continue;
        }
        if (c.iColumn == col_partition && op != pushdown::op::eq) continue;
        info->aConstraintUsage[i].argvIndex = argv++;
        // SQLite re-checks every row: the bounds given to the reader are exact for integers but
        // only a superset for other values (docs/sql.md), so nothing is omitted.
        info->aConstraintUsage[i].omit = 0;
        pd.terms.push_back({c.iColumn, op});
        if (c.iColumn == col_partition) partition_eq = true;
        rows /= (op == pushdown::op::eq) ? (c.iColumn == col_partition ? 8 : 1000) : 4;
    }
    // Rows come in (partition, offset) order: plan() orders segments by partition then base,
    // and the scan yields each partition's records in offset order.
    bool consumed = info->nOrderBy > 0;
    for (int i = 0; i < info->nOrderBy && consumed; ++i) {
        auto& o = info->aOrderBy[i];
        if (o.desc) consumed = false;
        else if (i == 0 && o.iColumn == col_partition) {
        } else if (o.iColumn == col_offset && (i == 1 ? info->aOrderBy[0].iColumn == col_partition : partition_eq)) {
        } else {
            consumed = false;
        }
    }
    info->orderByConsumed = consumed ? 1 : 0;
    auto enc = pd.encode();
    info->idxStr = sqlite3_mprintf("%s", enc.c_str());
    info->needToFreeIdxStr = 1;
    info->estimatedRows = static_cast<sqlite3_int64>(std::max(rows, 1.0));
    info->estimatedCost = std::max(rows, 1.0) * 10;
    return SQLITE_OK;
}

int x_open(sqlite3_vtab*, sqlite3_vtab_cursor** out) {
    auto* c = new topic_cursor;
    *out = &c->base;
    return SQLITE_OK;
}

void drop_gauge(topic_cursor* c, vtab_env* env) {
    if (env->counters && c->in_flight_seen) env->counters->gets_in_flight.fetch_sub(c->in_flight_seen);
    c->in_flight_seen = 0;
}

// Stops the scan's GETs still in flight and waits for them on the worker's reactor, so none
// finishes on a later turn (or never, when the reactor goes first) holding the scan's state.
void close_scan(topic_cursor* c, vtab_env* env) {
    if (!c->scan) return;
    try {
        env->reactor->run_until_complete(c->scan->close());
    } catch (const std::exception&) {
        // close() does not fail; the destructor below still stops whatever is left.
    }
    c->scan.reset();
}

int x_close(sqlite3_vtab_cursor* cur) {
    auto* c = reinterpret_cast<topic_cursor*>(cur);
    drop_gauge(c, tab_of(cur)->env);
    close_scan(c, tab_of(cur)->env);
    delete c;
    return SQLITE_OK;
}

// Adds what the scan did since the last call to the query and the engine, then checks the
// query's limits.
int account(topic_cursor* c, topic_vtab* t) {
    auto* env = t->env;
    const auto& s = c->scan->stats();
    auto d_bytes = s.bytes_read - c->seen.bytes_read;
    auto d_segments = s.segments_read - c->seen.segments_read;
    auto d_gets = s.gets - c->seen.gets;
    auto d_hits = s.read_ahead_hits - c->seen.read_ahead_hits;
    auto d_pruned = s.segments_pruned - c->seen.segments_pruned;
    c->seen = s;
    if (env->counters) {
        env->counters->bytes += d_bytes;
        env->counters->segments += d_segments;
        env->counters->gets += d_gets;
        env->counters->read_ahead_hits += d_hits;
        env->counters->segments_pruned += d_pruned;
        auto now = c->scan->gets_in_flight();
        env->counters->gets_in_flight += now;
        env->counters->gets_in_flight -= c->in_flight_seen;
        c->in_flight_seen = now;
    }
    if (auto* q = env->query) {
        q->bytes += d_bytes;
        q->segments += d_segments;
        q->gets += d_gets;
        q->read_ahead_hits += d_hits;
        q->segments_pruned += d_pruned;
        if (q->max_bytes && q->bytes > q->max_bytes)
            return fail(&t->base, env,
                        {"54000", fmt::format("query scanned more than {} bytes (--max-scan-bytes)", q->max_bytes)});
        if (q->max_segments && q->segments > q->max_segments)
            return fail(&t->base, env,
                        {"54000", fmt::format("query scanned more than {} segments (--max-scan-segments)",
                                              q->max_segments)});
    }
    return SQLITE_OK;
}

// The GET for the query's trace, on the trace clock (the steady clock from the trace epoch).
void record_get(get_log& q, const reader::get_event& e) {
    if (q.timings.size() >= max_traced_gets) {
        ++q.untraced;
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    const auto now_ns = metrics::trace_now_ns();
    auto at = [&](std::chrono::steady_clock::time_point t) {
        return now_ns - std::chrono::duration_cast<std::chrono::nanoseconds>(now - t).count();
    };
    get_timing g;
    g.key = std::string(e.key);
    if (e.range && e.range->k() != storage::byte_range::kind::suffix) g.offset = e.range->first();
    g.bytes = e.bytes;
    g.start_ns = at(e.start);
    g.end_ns = at(e.end);
    g.ok = e.ok;
    q.timings.push_back(std::move(g));
}

std::stop_token query_stop(vtab_env* env) { return env->query ? env->query->stop : std::stop_token{}; }

// Moves to the next record, fetching chunks as needed.
int advance(topic_cursor* c, topic_vtab* t) {
    if (c->chunk && c->idx + 1 < c->chunk->rows.size()) {
        ++c->idx;
        ++c->rowid;
        return SQLITE_OK;
    }
    try {
        auto next = t->env->reactor->run_until_complete(c->scan->next(query_stop(t->env)));
        if (int rc = account(c, t); rc != SQLITE_OK) return rc;
        if (!next) return fail(&t->base, t->env, from_reader(next.error()));
        c->chunk = *next;
        c->idx = 0;
        ++c->rowid;
        c->eof = c->chunk == nullptr;
        if (c->eof) drop_gauge(c, t->env);
        return SQLITE_OK;
    } catch (const std::exception& e) {
        return fail(&t->base, t->env, {"XX000", e.what()});
    }
}

int x_filter(sqlite3_vtab_cursor* cur, int, const char* idx_str, int argc, sqlite3_value** argv) {
    auto* c = reinterpret_cast<topic_cursor*>(cur);
    auto* t = tab_of(cur);
    auto* env = t->env;
    drop_gauge(c, env);
    close_scan(c, env);
    c->chunk = nullptr;
    c->eof = true;
    c->seen = {};
    auto pd = pushdown::decode(idx_str);
    reader::scan_bounds bounds;
    std::optional<std::int32_t> partition;
    for (int i = 0; i < argc && i < static_cast<int>(pd.terms.size()); ++i)
        if (!apply_term(pd.terms[static_cast<std::size_t>(i)], argv[i], bounds, partition)) return SQLITE_OK; // matches nothing
    try {
        auto& disc = env->discoveries[t->topic];
        if (!disc) disc = std::make_unique<reader::topic_discovery>(*env->store, env->ns, t->topic);
        auto refreshed = env->reactor->run_until_complete(disc->refresh(query_stop(env)));
        if (!refreshed) return fail(&t->base, env, from_reader(refreshed.error()));
        std::vector<std::int32_t> only;
        if (partition) only.push_back(*partition);
        auto segments = reader::plan(disc->partitions(), bounds, only);
        if (segments.empty()) return SQLITE_OK;
        auto cfg = env->scan_cfg;
        if (auto* q = env->query) {
            cfg.on_get = [log = q->gets_log](const reader::get_event& e) { record_get(*log, e); };
        }
        c->scan = std::make_unique<reader::segment_scan>(*env->store, env->ns, std::move(segments), bounds, std::move(cfg));
    } catch (const std::exception& e) {
        return fail(&t->base, env, {"XX000", e.what()});
    }
    c->eof = false;
    return advance(c, t);
}

int x_next(sqlite3_vtab_cursor* cur) {
    auto* c = reinterpret_cast<topic_cursor*>(cur);
    if (c->eof) return SQLITE_OK;
    return advance(c, tab_of(cur));
}

int x_eof(sqlite3_vtab_cursor* cur) { return reinterpret_cast<topic_cursor*>(cur)->eof ? 1 : 0; }

void result_bytes(sqlite3_context* ctx, const std::optional<std::string_view>& v) {
    if (!v) {
        sqlite3_result_null(ctx);
        return;
    }
    // Text when it is UTF-8, so json_extract and psql output work; raw bytes otherwise.
    if (valid_utf8(*v)) sqlite3_result_text(ctx, v->data(), static_cast<int>(v->size()), SQLITE_TRANSIENT);
    else sqlite3_result_blob(ctx, v->data(), static_cast<int>(v->size()), SQLITE_TRANSIENT);
}

int x_column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
    auto* c = reinterpret_cast<topic_cursor*>(cur);
    if (c->eof || !c->chunk) {
        sqlite3_result_null(ctx);
        return SQLITE_OK;
    }
    const auto& r = c->chunk->rows[c->idx];
    switch (col) {
    case col_topic: sqlite3_result_text(ctx, c->chunk->topic.data(), static_cast<int>(c->chunk->topic.size()), SQLITE_TRANSIENT); break;
    case col_partition: sqlite3_result_int64(ctx, r.partition); break;
    case col_offset: sqlite3_result_int64(ctx, r.offset); break;
    case col_timestamp: sqlite3_result_int64(ctx, r.timestamp); break;
    case col_key: result_bytes(ctx, r.key); break;
    case col_value: result_bytes(ctx, r.value); break;
    case col_headers: {
        std::string json = "[";
        if (r.headers)
            for (const auto& h : *r.headers) {
                if (json.size() > 1) json += ',';
                json += "{\"key\":";
                append_json_string(json, h.key);
                json += ",\"value\":";
                if (h.value) append_json_string(json, *h.value);
                else json += "null";
                json += '}';
            }
        json += ']';
        sqlite3_result_text(ctx, json.data(), static_cast<int>(json.size()), SQLITE_TRANSIENT);
        break;
    }
    default: sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
}

int x_rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
    *out = reinterpret_cast<topic_cursor*>(cur)->rowid;
    return SQLITE_OK;
}

sqlite3_module make_module() {
    sqlite3_module m{};
    m.iVersion = 1;
    m.xCreate = x_connect;
    m.xConnect = x_connect;
    m.xBestIndex = x_best_index;
    m.xDisconnect = x_disconnect;
    m.xDestroy = x_disconnect;
    m.xOpen = x_open;
    m.xClose = x_close;
    m.xFilter = x_filter;
    m.xNext = x_next;
    m.xEof = x_eof;
    m.xColumn = x_column;
    m.xRowid = x_rowid;
    return m;
}

const sqlite3_module topic_module = make_module();

} // namespace

std::string pushdown::encode() const {
    std::string s;
    for (auto& t : terms) {
        s += static_cast<char>('0' + t.column);
        s += static_cast<char>(t.what);
    }
    return s;
}

pushdown pushdown::decode(const char* s) {
    pushdown pd;
    if (!s) return pd;
    for (std::size_t n = std::strlen(s), i = 0; i + 1 < n; i += 2)
        pd.terms.push_back({s[i] - '0', static_cast<op>(s[i + 1])});
    return pd;
}

bool apply_term(const pushdown::term& t, sqlite3_value* v, reader::scan_bounds& b, std::optional<std::int32_t>& partition) {
    int type = sqlite3_value_numeric_type(v);
    if (type == SQLITE_NULL) return false; // a comparison with NULL is never true
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT) return true; // text/blob: no bound, SQLite decides
    double d = sqlite3_value_double(v);
    bool integral = type == SQLITE_INTEGER;
    std::int64_t i = sqlite3_value_int64(v);
    constexpr double lim = 9.2e18;
    if (!integral) {
        if (std::isnan(d)) return false;
        if (d > lim || d < -lim) return true; // beyond int64: leave it to SQLite
    }
    using op = pushdown::op;
    std::optional<std::int64_t> lo, hi; // inclusive
    switch (t.what) {
    case op::eq:
        if (!integral && d != std::floor(d)) return false;
        lo = hi = integral ? i : static_cast<std::int64_t>(d);
        break;
    case op::ge: lo = integral ? i : static_cast<std::int64_t>(std::ceil(d)); break;
    case op::gt:
        if (integral && i == std::numeric_limits<std::int64_t>::max()) return false;
        lo = integral ? i + 1 : static_cast<std::int64_t>(std::floor(d)) + 1;
        break;
    case op::le: hi = integral ? i : static_cast<std::int64_t>(std::floor(d)); break;
    case op::lt:
        if (integral && i == std::numeric_limits<std::int64_t>::min()) return false;
        hi = integral ? i - 1 : static_cast<std::int64_t>(std::ceil(d)) - 1;
        break;
    }
    auto tighten = [](std::optional<std::int64_t>& mn, std::optional<std::int64_t>& mx, std::optional<std::int64_t> l,
                      std::optional<std::int64_t> h) {
        if (l) mn = mn ? std::max(*mn, *l) : *l;
        if (h) mx = mx ? std::min(*mx, *h) : *h;
        return !(mn && mx && *mn > *mx);
    };
    switch (t.column) {
    case col_partition: {
        if (!lo || !hi) return true;
        if (*lo < 0 || *lo > std::numeric_limits<std::int32_t>::max()) return false;
        auto p = static_cast<std::int32_t>(*lo);
        if (partition && *partition != p) return false;
        partition = p;
        return true;
    }
    case col_offset: return tighten(b.min_offset, b.max_offset, lo, hi);
    case col_timestamp: return tighten(b.min_timestamp, b.max_timestamp, lo, hi);
    default: return true;
    }
}

int register_topic_module(sqlite3* db, vtab_env* env) {
    return sqlite3_create_module_v2(db, "skiff_topic", &topic_module, env, nullptr);
}

} // namespace skiff::sql
