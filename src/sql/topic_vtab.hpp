// The skiff_topic virtual table module: one table per topic, rows streamed from a
// reader::segment_scan on the worker's reactor. Worker thread only.
#pragma once

#include "job.hpp"

#include <skiff/pgwire/backend.hpp>
#include <skiff/reader/segment_reader.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/storage/object_store.hpp>

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace skiff::sql {

// The columns every topic table has (docs/sql.md), in order.
struct topic_column {
    const char* name;
    const char* decltype_name; // as declared to SQLite
    std::uint32_t pg_type;     // as reported by pg_catalog / information_schema
};
inline constexpr topic_column topic_columns[] = {
    {"topic", "TEXT", pgwire::oid::text},       {"partition", "INTEGER", pgwire::oid::int8},
    {"offset", "INTEGER", pgwire::oid::int8},   {"timestamp", "INTEGER", pgwire::oid::int8},
    {"key", "TEXT", pgwire::oid::text},         {"value", "TEXT", pgwire::oid::text},
    {"headers", "TEXT", pgwire::oid::json},
};
inline constexpr int col_topic = 0, col_partition = 1, col_offset = 2, col_timestamp = 3, col_key = 4, col_value = 5,
                     col_headers = 6;

struct get_log {
    std::vector<get_timing> timings; // at most max_traced_gets
    std::uint64_t untraced = 0;      // beyond that bound
};

// Limits and counters of the query running on a worker; the vtab fails the query with
// `error` when a limit is crossed (SQLite only carries a message).
struct query_scan_state {
    std::uint64_t max_bytes = 0;    // 0 = unlimited
    std::uint64_t max_segments = 0; // 0 = unlimited
    std::uint64_t bytes = 0;
    std::uint64_t segments = 0;
    std::uint64_t gets = 0;
    std::uint64_t read_ahead_hits = 0;
    std::uint64_t segments_pruned = 0;
    std::uint64_t rows = 0;
    // The GETs for the query's trace. Shared with the scans' GET callbacks: GETs still in
    // flight when a scan is destroyed end on a later turn of the reactor, possibly after the
    // query (or the worker) is gone, and write into this query's log, not the next one's.
    std::shared_ptr<get_log> gets_log = std::make_shared<get_log>();
    std::stop_token stop;
    std::optional<pgwire::sql_error> error;
};

// Engine-wide counters the vtab feeds (read by metrics from any thread).
struct scan_counters {
    std::atomic<std::uint64_t> bytes{0}, segments{0}, segments_pruned{0}, gets{0}, read_ahead_hits{0}, gets_in_flight{0};
};

struct vtab_env {
    runtime::reactor* reactor = nullptr;
    storage::object_store* store = nullptr;
    std::string ns;
    reader::scan_config scan_cfg;
    scan_counters* counters = nullptr;
    query_scan_state* query = nullptr; // set by the worker around each statement
    std::map<std::string, std::unique_ptr<reader::topic_discovery>> discoveries;
};

// Registers "skiff_topic" on `db`; `env` outlives the connection.
int register_topic_module(sqlite3* db, vtab_env* env);

// What xBestIndex decided, decoded again in xFilter. Exposed for tests.
struct pushdown {
    enum class op : char { eq = 'E', lt = 'L', le = 'l', gt = 'G', ge = 'g' };
    struct term {
        int column = 0;
        op what = op::eq;
    };
    std::vector<term> terms; // in argv order
    std::string encode() const;
    static pushdown decode(const char* s);
};

// Folds one constraint value into bounds (only integer-valued columns: partition, offset,
// timestamp). Returns false when the constraint can match nothing (NULL, `= 1.5`). Bounds stay
// a superset of the matching rows: SQLite re-checks every constraint.
bool apply_term(const pushdown::term& t, sqlite3_value* v, reader::scan_bounds& b,
                std::optional<std::int32_t>& partition);

} // namespace skiff::sql
