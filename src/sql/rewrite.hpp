// Postgres -> SQLite text translation for the statements clients send (psql's backslash
// commands, drivers' probes). Small on purpose: docs/sql.md lists every rule. Any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace skiff::sql {

// Splits a simple-query string at top-level ';' (not inside quotes or comments). Empty
// statements (only whitespace/comments) are dropped.
std::vector<std::string> split_statements(std::string_view sql);

// Rewrites one statement:
//  - `expr::type` casts (type with optional schema, `(n)` and `[]`) are dropped;
//  - `OPERATOR(pg_catalog.~)` and `~` become REGEXP, `!~` NOT REGEXP, `~*` MATCH, `!~*` NOT MATCH
//    (SQLite calls the regexp() and match() functions catalog.cpp registers);
//  - `COLLATE pg_catalog.default` / `COLLATE "default"` / `COLLATE "C"` are dropped;
//  - `pg_catalog.f(` becomes `f(` (functions; tables keep their schema, an attached database);
//  - `array(subquery)` becomes `(subquery)` (a scalar: its first row), `= any (x)` becomes `IN (x)`;
//  - `ILIKE` becomes LIKE (SQLite's LIKE already ignores ASCII case);
//  - `$n` parameters become `?n`.
// Text inside string literals, quoted identifiers and comments is never touched.
std::string rewrite_postgres(std::string_view sql);

// What the session answers itself instead of handing to SQLite.
enum class statement_kind { query, set, begin, commit, rollback, show, ignored, empty };
struct classified {
    statement_kind kind = statement_kind::query;
    std::string tag;  // CommandComplete tag for the non-query kinds ("SET", "BEGIN", ...)
    std::string name; // SHOW's parameter, lower case
};
classified classify(std::string_view stmt);

} // namespace skiff::sql
