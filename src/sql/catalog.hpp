// Enough of pg_catalog and information_schema for psql's \dt and \d, and the Postgres
// functions drivers and psql call (version(), current_database(), pg_table_is_visible() ...),
// on one SQLite connection. Worker thread only.
#pragma once

#include <sqlite3.h>

#include <string>
#include <vector>

namespace skiff::sql {

// Registers the functions (and regexp()/match() behind the rewriter's REGEXP and MATCH). SQLITE_OK or the error.
int install_functions(sqlite3* db, const std::string& database);

// (Re)builds the catalog databases for `topics` and creates a temp virtual table per topic
// not created yet. The error is SQLite's message.
std::string sync_topics(sqlite3* db, const std::vector<std::string>& topics, std::vector<std::string>& created);

// Oid of the first topic table; topic i has table_oid_base + i.
inline constexpr int table_oid_base = 16384;
inline constexpr int public_namespace_oid = 2200;

} // namespace skiff::sql
