#include "sqlstate.hpp"

#include <sqlite3.h>

namespace skiff::sql {

pgwire::sql_error map_sqlite_error(int rc, std::string_view message) {
    auto has = [&](std::string_view s) { return message.find(s) != std::string_view::npos; };
    const char* state = "XX000";
    int primary = rc & 0xff;
    if (primary == SQLITE_INTERRUPT) state = "57014";
    else if (primary == SQLITE_TOOBIG) state = "54000";
    else if (primary == SQLITE_NOMEM) state = "53200";
    else if (primary == SQLITE_RANGE) state = "08P01"; // a parameter index the statement does not have
    else if (has("syntax error") || has("incomplete input") || has("unrecognized token")) state = "42601";
    else if (has("no such table")) state = "42P01";
    else if (has("no such column")) state = "42703";
    else if (has("no such function") || has("wrong number of arguments")) state = "42883";
    else if (has("ambiguous column")) state = "42702";
    else if (has("datatype mismatch") || has("integer overflow") || has("malformed JSON") || has("bad JSON path"))
        state = "22000";
    else if (primary == SQLITE_MISMATCH) state = "22000";
    return {state, std::string(message)};
}

} // namespace skiff::sql
