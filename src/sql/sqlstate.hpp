// SQLite result codes and messages to Postgres SQLSTATEs (errcodes.txt). Any thread.
#pragma once

#include <skiff/pgwire/backend.hpp>

#include <string_view>

namespace skiff::sql {

// syntax -> 42601, no such table -> 42P01, no such column -> 42703, no such function ->
// 42883, interrupted -> 57014, too big -> 54000, out of memory -> 53200, type/range trouble ->
// 22000, the rest -> XX000. The message is SQLite's.
pgwire::sql_error map_sqlite_error(int rc, std::string_view message);

} // namespace skiff::sql
