// What the Postgres wire server (pgwire/server.hpp) asks of the query engine behind it. The
// server owns the protocol (framing, startup, simple and extended query, cancel, errors); a
// backend owns SQL. `skiff sql` plugs the SQLite engine of the sql module in here.
//
// Everything here runs on the server's core: a backend that does blocking work (SQLite) does
// it elsewhere and resumes on this core. Cancellation (a CancelRequest, the client closing,
// shutdown) arrives as the stop_token of the call; a cancelled call answers an sql_error with
// SQLSTATE 57014 (query_canceled), never success.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/task.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace skiff::pgwire {

// Type OIDs of the values skiff sends (pg_type.dat).
namespace oid {
inline constexpr std::uint32_t boolean = 16;
inline constexpr std::uint32_t bytea = 17;
inline constexpr std::uint32_t name = 19;
inline constexpr std::uint32_t int8 = 20;
inline constexpr std::uint32_t int2 = 21;
inline constexpr std::uint32_t int4 = 23;
inline constexpr std::uint32_t text = 25;
inline constexpr std::uint32_t oid_type = 26;
inline constexpr std::uint32_t json = 114;
inline constexpr std::uint32_t float8 = 701;
inline constexpr std::uint32_t unknown = 705;
inline constexpr std::uint32_t varchar = 1043;
inline constexpr std::uint32_t timestamptz = 1184;
} // namespace oid

struct column_desc {
    column_desc() = default;
    column_desc(std::string n, std::uint32_t t) : name(std::move(n)), type_oid(t) {}
    std::string name;
    std::uint32_t type_oid = oid::text;
    std::int16_t type_size = -1;     // pg_type.typlen: -1 variable
    std::int32_t type_modifier = -1;
};

// An ErrorResponse. sqlstate is five characters (errcodes.txt): 42601 syntax_error, 42P01
// undefined_table, 57014 query_canceled, 54000 program_limit_exceeded, 53000
// insufficient_resources, 0A000 feature_not_supported, 08P01 protocol_violation, XX000
// internal_error, 58030 io_error ...
struct sql_error {
    sql_error() = default;
    sql_error(std::string state, std::string msg) : sqlstate(std::move(state)), message(std::move(msg)) {}
    std::string sqlstate = "XX000";
    std::string message;
    std::string detail; // optional
    std::string hint;   // optional
};

// A field in text format (the only result format skiff sends); nullopt is SQL NULL.
using value = std::optional<std::string>;
using row = std::vector<value>;

// Where a statement's results go. The server implements it over the connection: rows are sent
// as they come, and a call suspends while the socket is full, so a backend that streams its rows
// through here never holds a whole result. An error from a call (the client went away, the
// query was cancelled) ends the statement: the backend stops and returns that error.
class result_writer {
public:
    virtual ~result_writer() = default;
    // Starts a result set (RowDescription). Only for statements that return rows; at most once
    // per statement, before its rows. In the extended protocol, when the client already asked
    // Describe for the portal, the server checks the columns match and sends nothing.
    virtual runtime::task<result<void, sql_error>> columns(std::vector<column_desc> cols) = 0;
    // Rows of the current result set, in order (DataRow each).
    virtual runtime::task<result<void, sql_error>> rows(std::vector<row> batch) = 0;
    // Ends one statement (CommandComplete with `tag`: "SELECT 3", "SET", "BEGIN", "SHOW").
    virtual runtime::task<result<void, sql_error>> complete(std::string tag) = 0;
};

// A parsed statement of the extended protocol (Parse, then Describe statement).
struct statement_info {
    statement_info() = default;
    std::vector<std::uint32_t> param_types; // one per $n, oid::unknown resolved to what the engine infers (text when it cannot)
    std::vector<column_desc> columns;       // empty: the statement returns no rows (NoData)
};

struct startup_info {
    startup_info() = default;
    std::string user;
    std::string database;
    std::string application_name;
    std::vector<std::pair<std::string, std::string>> options; // every startup parameter as sent
};

// One client connection's state in the engine. Calls never overlap: the server waits for each
// to finish before the next (the protocol is sequential per connection).
class session {
public:
    virtual ~session() = default;

    // Simple query protocol: `sql` may hold several statements separated by ';'. Each
    // statement's results go to `out` (columns/rows/complete). On the first failing statement
    // return its error (statements before it stay answered); an empty query string completes
    // nothing (the server sends EmptyQueryResponse when no statement ran).
    virtual runtime::task<result<void, sql_error>> simple_query(std::string sql, result_writer& out,
                                                                std::stop_token st) = 0;

    // Extended protocol, Parse (+ Describe statement): one statement. `param_types` are the
    // client's declared types (0 = unspecified); the answer gives one type per parameter.
    virtual runtime::task<result<statement_info, sql_error>> prepare(std::string sql,
                                                                     std::vector<std::uint32_t> param_types,
                                                                     std::stop_token st) = 0;

    // Extended protocol, Execute of a portal bound from a prepared statement: runs `sql` (as given
    // to prepare) with `params` in text format (nullopt = NULL), sending its results to `out`.
    virtual runtime::task<result<void, sql_error>> execute(std::string sql, std::vector<value> params,
                                                           result_writer& out, std::stop_token st) = 0;

    // ParameterStatus values sent after authentication (server_version, server_encoding,
    // client_encoding, DateStyle, TimeZone, integer_datetimes, standard_conforming_strings ...).
    virtual std::vector<std::pair<std::string, std::string>> parameter_status() const = 0;
};

class backend {
public:
    virtual ~backend() = default;
    // A session for a client that finished startup; an error refuses the connection
    // (ErrorResponse, e.g. 3D000 invalid_catalog_name for an unknown database).
    virtual result<std::unique_ptr<session>, sql_error> open(const startup_info& who) = 0;
};

} // namespace skiff::pgwire
