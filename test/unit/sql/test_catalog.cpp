// The catalog answers psql's own describe queries (as psql 15 sends them, from `psql -E`)
// after the rewriter, on a real SQLite connection with the real topic module registered.
#include "catalog.hpp"
#include "rewrite.hpp"
#include "topic_vtab.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace skiff::sql;

namespace {

struct db_fixture {
    sqlite3* db = nullptr;
    vtab_env env;
    std::vector<std::string> created;
    db_fixture() {
        REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
        REQUIRE(register_topic_module(db, &env) == SQLITE_OK);
        REQUIRE(install_functions(db, "skiff") == SQLITE_OK);
    }
    ~db_fixture() { sqlite3_close(db); }

    std::vector<std::vector<std::string>> query(const std::string& pg_sql) {
        auto sql = rewrite_postgres(pg_sql);
        sqlite3_stmt* st = nullptr;
        int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
        INFO(sql);
        INFO(sqlite3_errmsg(db));
        REQUIRE(rc == SQLITE_OK);
        std::vector<std::vector<std::string>> rows;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            std::vector<std::string> r;
            for (int i = 0; i < sqlite3_column_count(st); ++i) {
                auto* t = sqlite3_column_text(st, i);
                r.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
            }
            rows.push_back(std::move(r));
        }
        CHECK(rc == SQLITE_DONE);
        sqlite3_finalize(st);
        return rows;
    }
};

const char* psql_dt = R"(SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' WHEN 'm' THEN 'materialized view' WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 't' THEN 'TOAST table' WHEN 'f' THEN 'foreign table' WHEN 'p' THEN 'partitioned table' WHEN 'I' THEN 'partitioned index' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.relkind IN ('r','p','')
      AND n.nspname <> 'pg_catalog'
      AND n.nspname !~ '^pg_toast'
      AND n.nspname <> 'information_schema'
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;)";

const char* psql_d_lookup = R"(SELECT c.oid,
  n.nspname,
  c.relname
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname OPERATOR(pg_catalog.~) '^(pay\-ments)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 2, 3;)";

} // namespace

TEST_CASE("psql's \\dt lists one table per topic", "[sql][catalog]") {
    db_fixture f;
    REQUIRE(sync_topics(f.db, {"orders", "pay-ments"}, f.created).empty());
    auto rows = f.query(psql_dt);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0] == std::vector<std::string>{"public", "orders", "table", "skiff"});
    CHECK(rows[1] == std::vector<std::string>{"public", "pay-ments", "table", "skiff"});

    // A topic that appears later shows up after the next sync; the virtual table exists once.
    REQUIRE(sync_topics(f.db, {"audit", "orders", "pay-ments"}, f.created).empty());
    CHECK(f.query(psql_dt).size() == 3);
    CHECK(f.created.size() == 3);
}

TEST_CASE("psql's \\d lookup and the column list come from the catalog", "[sql][catalog]") {
    db_fixture f;
    REQUIRE(sync_topics(f.db, {"orders", "pay-ments"}, f.created).empty());
    auto found = f.query(psql_d_lookup);
    REQUIRE(found.size() == 1);
    CHECK(found[0][1] == "public");
    CHECK(found[0][2] == "pay-ments");
    auto cols = f.query("SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a "
                        "WHERE a.attrelid = '" + found[0][0] + "' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum");
    REQUIRE(cols.size() == std::size(topic_columns));
    CHECK(cols[1] == std::vector<std::string>{"partition", "bigint"});
    CHECK(cols[5] == std::vector<std::string>{"value", "text"});
    CHECK(cols[6] == std::vector<std::string>{"headers", "json"});
    auto info = f.query("SELECT table_name, column_name, data_type FROM information_schema.columns "
                        "WHERE table_name = 'orders' AND ordinal_position = 3");
    REQUIRE(info.size() == 1);
    CHECK(info[0] == std::vector<std::string>{"orders", "offset", "bigint"});
}

TEST_CASE("Postgres functions clients probe answer", "[sql][catalog]") {
    db_fixture f;
    auto r = f.query("SELECT current_database(), current_schema(), pg_catalog.version() LIKE 'PostgreSQL 15%', "
                     "'abc' ~ '^a', 'ABC' ~* '^a', 'abc' !~ 'z'");
    REQUIRE(r.size() == 1);
    CHECK(r[0] == std::vector<std::string>{"skiff", "public", "1", "1", "1", "1"});
}

TEST_CASE("xBestIndex terms round-trip and fold into exact integer bounds", "[sql][catalog]") {
    pushdown pd;
    pd.terms.push_back({col_partition, pushdown::op::eq});
    pd.terms.push_back({col_offset, pushdown::op::gt});
    pd.terms.push_back({col_timestamp, pushdown::op::le});
    auto back = pushdown::decode(pd.encode().c_str());
    REQUIRE(back.terms.size() == 3);
    CHECK(back.terms[1].column == col_offset);
    CHECK(back.terms[1].what == pushdown::op::gt);

    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT 3, 10, 2.5, NULL, 'x'", -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    auto v = [&](int i) { return sqlite3_column_value(st, i); };
    skiff::reader::scan_bounds b;
    std::optional<std::int32_t> part;
    CHECK(apply_term({col_partition, pushdown::op::eq}, v(0), b, part));
    CHECK(part == 3);
    CHECK_FALSE(apply_term({col_partition, pushdown::op::eq}, v(1), b, part)); // partition 3 and 10
    CHECK(apply_term({col_offset, pushdown::op::gt}, v(1), b, part));
    CHECK(b.min_offset == 11);
    CHECK(apply_term({col_offset, pushdown::op::lt}, v(2), b, part) == false); // offset > 10 and < 2.5
    skiff::reader::scan_bounds t;
    CHECK(apply_term({col_timestamp, pushdown::op::le}, v(2), t, part));
    CHECK(t.max_timestamp == 2);
    CHECK_FALSE(apply_term({col_timestamp, pushdown::op::ge}, v(2), t, part)); // empty range: 3..2
    CHECK(t.min_timestamp == 3);
    CHECK_FALSE(apply_term({col_offset, pushdown::op::eq}, v(3), t, part)); // = NULL matches nothing
    skiff::reader::scan_bounds u;
    CHECK(apply_term({col_offset, pushdown::op::lt}, v(4), u, part)); // text: no bound
    CHECK_FALSE(u.max_offset.has_value());
    CHECK_FALSE(apply_term({col_offset, pushdown::op::eq}, v(2), u, part)); // = 2.5 on an integer column
    sqlite3_finalize(st);
    sqlite3_close(db);
}
