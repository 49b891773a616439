#include "catalog.hpp"

#include "topic_vtab.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <regex>

namespace skiff::sql {

namespace {

std::string quote_literal(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        out += c;
        if (c == '\'') out += '\'';
    }
    return out + "'";
}

std::string quote_ident(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        out += c;
        if (c == '"') out += '"';
    }
    return out + "\"";
}

void text_result(sqlite3_context* ctx, const std::string& s) {
    sqlite3_result_text(ctx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
}

void fn_regexp(sqlite3_context* ctx, int, sqlite3_value** argv, bool icase) {
    // `x REGEXP y` calls regexp(y, x).
    auto* pat = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
    auto* subject = reinterpret_cast<const char*>(sqlite3_value_text(argv[1]));
    if (!pat || !subject) {
        sqlite3_result_null(ctx);
        return;
    }
    try {
        auto flags = std::regex::ECMAScript;
        if (icase) flags |= std::regex::icase;
        std::regex re(pat, flags);
        sqlite3_result_int(ctx, std::regex_search(subject, re) ? 1 : 0);
    } catch (const std::regex_error& e) {
        auto msg = fmt::format("invalid regular expression: {}", e.what());
        sqlite3_result_error(ctx, msg.c_str(), -1);
    }
}

void fn_const_text(sqlite3_context* ctx, int, sqlite3_value**) {
    text_result(ctx, static_cast<const char*>(sqlite3_user_data(ctx)));
}

void fn_true(sqlite3_context* ctx, int, sqlite3_value**) { sqlite3_result_int(ctx, 1); }
void fn_null(sqlite3_context* ctx, int, sqlite3_value**) { sqlite3_result_null(ctx); }

void fn_format_type(sqlite3_context* ctx, int, sqlite3_value** argv) {
    switch (sqlite3_value_int(argv[0])) {
    case 16: text_result(ctx, "boolean"); break;
    case 17: text_result(ctx, "bytea"); break;
    case 20: text_result(ctx, "bigint"); break;
    case 23: text_result(ctx, "integer"); break;
    case 25: text_result(ctx, "text"); break;
    case 114: text_result(ctx, "json"); break;
    case 701: text_result(ctx, "double precision"); break;
    default: text_result(ctx, "text");
    }
}

void fn_quote_ident(sqlite3_context* ctx, int, sqlite3_value** argv) {
    auto* s = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
    if (!s) return sqlite3_result_null(ctx);
    text_result(ctx, quote_ident(s));
}

struct constant_fn {
    const char* name;
    int args;
    const char* value;
};

} // namespace

int install_functions(sqlite3* db, const std::string& database) {
    static const std::string version = fmt::format("PostgreSQL 15.0 (skiff sql over SQLite {})", sqlite3_libversion());
    constexpr int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
    int rc = sqlite3_create_function(db, "regexp", 2, flags, nullptr,
                                     [](sqlite3_context* c, int n, sqlite3_value** v) { fn_regexp(c, n, v, false); },
                                     nullptr, nullptr);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(db, "match", 2, flags, nullptr,
                                     [](sqlite3_context* c, int n, sqlite3_value** v) { fn_regexp(c, n, v, true); },
                                     nullptr, nullptr);
    // The database name must outlive the connection: keep one copy per process.
    static std::vector<std::unique_ptr<std::string>> names;
    static std::mutex names_mutex;
    const char* dbname;
    {
        std::lock_guard lock(names_mutex);
        auto it = std::find_if(names.begin(), names.end(), [&](auto& p) { return *p == database; });
        if (it == names.end()) {
            names.push_back(std::make_unique<std::string>(database));
            it = names.end() - 1;
        }
        dbname = (*it)->c_str();
    }
    const constant_fn constants[] = {
        {"version", 0, version.c_str()},   {"current_database", 0, dbname}, {"current_schema", 0, "public"},
        {"current_user", 0, "skiff"},      {"session_user", 0, "skiff"},    {"pg_get_userbyid", 1, "skiff"},
        {"pg_encoding_to_char", 1, "UTF8"}, {"current_setting", 1, ""},     {"array_to_string", 2, ""},
        {"pg_get_expr", 2, ""},             {"pg_get_expr", 3, ""},
    };
    for (auto& c : constants)
        if (rc == SQLITE_OK)
            rc = sqlite3_create_function(db, c.name, c.args, flags, const_cast<char*>(c.value), fn_const_text, nullptr,
                                         nullptr);
    const std::pair<const char*, int> truths[] = {{"pg_table_is_visible", 1}, {"pg_type_is_visible", 1},
                                                  {"has_table_privilege", 2}, {"has_schema_privilege", 2},
                                                  {"has_database_privilege", 2}};
    for (auto& [name, n] : truths)
        if (rc == SQLITE_OK) rc = sqlite3_create_function(db, name, n, flags, nullptr, fn_true, nullptr, nullptr);
    const std::pair<const char*, int> nulls[] = {{"obj_description", 2}, {"obj_description", 1}, {"col_description", 2},
                                                 {"shobj_description", 2}, {"pg_get_indexdef", 3},
                                                 {"pg_get_statisticsobjdef_columns", 1}, {"pg_get_constraintdef", 2}, {"pg_get_triggerdef", 2}};
    for (auto& [name, n] : nulls)
        if (rc == SQLITE_OK) rc = sqlite3_create_function(db, name, n, flags, nullptr, fn_null, nullptr, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "format_type", 2, flags, nullptr, fn_format_type, nullptr, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "quote_ident", 1, flags, nullptr, fn_quote_ident, nullptr, nullptr);
    if (rc == SQLITE_OK) rc = sqlite3_create_function(db, "pg_backend_pid", 0, flags, nullptr, fn_null, nullptr, nullptr);
    return rc;
}

namespace {

constexpr const char* catalog_schema = R"(
CREATE TABLE IF NOT EXISTS pg_catalog.pg_namespace(oid INTEGER, nspname TEXT, nspowner INTEGER, nspacl TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_class(oid INTEGER, relname TEXT, relnamespace INTEGER, reltype INTEGER,
  relowner INTEGER, relam INTEGER, relkind TEXT, relpersistence TEXT, relchecks INTEGER, relhasindex BOOLEAN,
  relhasrules BOOLEAN, relhastriggers BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN,
  relispartition BOOLEAN, reloptions TEXT, reltablespace INTEGER, reloftype INTEGER, relreplident TEXT,
  reltoastrelid INTEGER, relnatts INTEGER, reltuples REAL, relacl TEXT, relpartbound TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_attribute(attrelid INTEGER, attname TEXT, atttypid INTEGER, atttypmod INTEGER,
  attnum INTEGER, attlen INTEGER, attnotnull BOOLEAN, attisdropped BOOLEAN, atthasdef BOOLEAN, attcollation INTEGER,
  attidentity TEXT, attgenerated TEXT, attstorage TEXT, attcompression TEXT, attstattarget INTEGER, attacl TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_type(oid INTEGER, typname TEXT, typnamespace INTEGER, typlen INTEGER,
  typtype TEXT, typcollation INTEGER, typelem INTEGER, typarray INTEGER, typbasetype INTEGER, typrelid INTEGER);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_am(oid INTEGER, amname TEXT, amtype TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_database(oid INTEGER, datname TEXT, datdba INTEGER, encoding INTEGER,
  datcollate TEXT, datctype TEXT, datacl TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_roles(oid INTEGER, rolname TEXT, rolsuper BOOLEAN);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_user(usesysid INTEGER, usename TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_attrdef(oid INTEGER, adrelid INTEGER, adnum INTEGER, adbin TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_index(indexrelid INTEGER, indrelid INTEGER, indisprimary BOOLEAN,
  indisunique BOOLEAN, indisclustered BOOLEAN, indisvalid BOOLEAN, indisreplident BOOLEAN);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_constraint(oid INTEGER, conname TEXT, conrelid INTEGER, contype TEXT,
  conindid INTEGER, confrelid INTEGER, conparentid INTEGER);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_collation(oid INTEGER, collname TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_inherits(inhrelid INTEGER, inhparent INTEGER, inhseqno INTEGER);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_trigger(oid INTEGER, tgrelid INTEGER, tgname TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_policy(oid INTEGER, polrelid INTEGER, polname TEXT, polpermissive BOOLEAN,
  polroles TEXT, polqual TEXT, polwithcheck TEXT, polcmd TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_statistic_ext(oid INTEGER, stxrelid INTEGER, stxname TEXT, stxnamespace INTEGER,
  stxkind TEXT, stxstattarget INTEGER, stxexprs TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_publication(oid INTEGER, pubname TEXT);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_publication_rel(oid INTEGER, prrelid INTEGER, prpubid INTEGER);
CREATE TABLE IF NOT EXISTS pg_catalog.pg_settings(name TEXT, setting TEXT);
CREATE TABLE IF NOT EXISTS information_schema.tables(table_catalog TEXT, table_schema TEXT, table_name TEXT,
  table_type TEXT);
CREATE TABLE IF NOT EXISTS information_schema.columns(table_catalog TEXT, table_schema TEXT, table_name TEXT,
  column_name TEXT, ordinal_position INTEGER, data_type TEXT, is_nullable TEXT, udt_name TEXT);
CREATE TABLE IF NOT EXISTS information_schema.schemata(catalog_name TEXT, schema_name TEXT, schema_owner TEXT);
)";

int exec(sqlite3* db, const std::string& sql, std::string& err) {
    char* msg = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg);
    if (rc != SQLITE_OK) {
        err = msg ? msg : sqlite3_errstr(rc);
        sqlite3_free(msg);
    }
    return rc;
}

const char* type_name(std::uint32_t oid) {
    switch (oid) {
    case 20: return "bigint";
    case 114: return "json";
    default: return "text";
    }
}

} // namespace

std::string sync_topics(sqlite3* db, const std::vector<std::string>& topics, std::vector<std::string>& created) {
    std::string err;
    bool attached = false;
    {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_database_list WHERE name = 'pg_catalog'", -1, &st, nullptr) ==
            SQLITE_OK)
            attached = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    if (!attached) {
        if (exec(db, "ATTACH ':memory:' AS pg_catalog; ATTACH ':memory:' AS information_schema;", err) != SQLITE_OK)
            return err;
        if (exec(db, catalog_schema, err) != SQLITE_OK) return err;
        std::string fixed = "BEGIN;"
                            "INSERT INTO pg_catalog.pg_namespace VALUES (11,'pg_catalog',10,NULL),(2200,'public',10,NULL),"
                            "(13000,'information_schema',10,NULL);"
                            "INSERT INTO pg_catalog.pg_am VALUES (2,'heap','t');"
                            "INSERT INTO pg_catalog.pg_roles VALUES (10,'skiff',0);"
                            "INSERT INTO pg_catalog.pg_user VALUES (10,'skiff');"
                            "INSERT INTO pg_catalog.pg_database VALUES (1,'skiff',10,6,'C','C',NULL);"
                            "INSERT INTO information_schema.schemata VALUES ('skiff','public','skiff');"
                            "INSERT INTO pg_catalog.pg_type VALUES "
                            "(16,'bool',11,1,'b',0,0,1000,0,0),(17,'bytea',11,-1,'b',0,0,1001,0,0),"
                            "(20,'int8',11,8,'b',0,0,1016,0,0),(23,'int4',11,4,'b',0,0,1007,0,0),"
                            "(25,'text',11,-1,'b',100,0,1009,0,0),(114,'json',11,-1,'b',0,0,199,0,0),"
                            "(701,'float8',11,8,'b',0,0,1022,0,0),(1184,'timestamptz',11,8,'b',0,0,1185,0,0);"
                            "COMMIT;";
        if (exec(db, fixed, err) != SQLITE_OK) return err;
    }
    std::string sql = "BEGIN; DELETE FROM pg_catalog.pg_class; DELETE FROM pg_catalog.pg_attribute;"
                      "DELETE FROM information_schema.tables; DELETE FROM information_schema.columns;";
    for (std::size_t i = 0; i < topics.size(); ++i) {
        int oid = table_oid_base + static_cast<int>(i);
        auto name = quote_literal(topics[i]);
        sql += fmt::format("INSERT INTO pg_catalog.pg_class VALUES ({},{},{},0,10,2,'r','p',0,0,0,0,0,0,0,NULL,0,0,'d',0,"
                           "{},-1,NULL,NULL);",
                           oid, name, public_namespace_oid, std::size(topic_columns));
        sql += fmt::format("INSERT INTO information_schema.tables VALUES ('skiff','public',{},'BASE TABLE');", name);
        int n = 0;
        for (auto& c : topic_columns) {
            ++n;
            sql += fmt::format("INSERT INTO pg_catalog.pg_attribute VALUES ({},'{}',{},-1,{},-1,{},0,0,{},'','','x','',-1,NULL);",
                               oid, c.name, c.pg_type, n, n <= 4 ? 1 : 0, c.pg_type == 25 ? 100 : 0);
            sql += fmt::format("INSERT INTO information_schema.columns VALUES ('skiff','public',{},'{}',{},'{}','{}','{}');",
                               name, c.name, n, type_name(c.pg_type), n <= 4 ? "NO" : "YES",
                               c.pg_type == 20 ? "int8" : (c.pg_type == 114 ? "json" : "text"));
        }
    }
    sql += "COMMIT;";
    if (exec(db, sql, err) != SQLITE_OK) {
        exec(db, "ROLLBACK", err);
        return err;
    }
    for (auto& t : topics) {
        if (std::find(created.begin(), created.end(), t) != created.end()) continue;
        auto ddl = fmt::format("CREATE VIRTUAL TABLE temp.{} USING skiff_topic({})", quote_ident(t), quote_literal(t));
        if (exec(db, ddl, err) != SQLITE_OK) return err;
        created.push_back(t);
    }
    return {};
}

} // namespace skiff::sql
