#include "rewrite.hpp"

#include <catch2/catch.hpp>

using namespace skiff::sql;

TEST_CASE("split_statements splits at top-level semicolons only", "[sql][rewrite]") {
    auto s = split_statements("SELECT 1; SELECT ';' ; -- x; y\n SELECT \"a;b\" FROM t;;  ");
    REQUIRE(s.size() == 3);
    CHECK(s[0] == "SELECT 1");
    CHECK(s[1] == "SELECT ';'");
    CHECK(s[2] == "-- x; y\n SELECT \"a;b\" FROM t");
    CHECK(split_statements("  ; -- only a comment\n").empty());
    CHECK(split_statements("").empty());
}

TEST_CASE("rewrite drops casts, collations and pg_catalog function schemas", "[sql][rewrite]") {
    CHECK(rewrite_postgres("SELECT '1'::int8, x::pg_catalog.regtype::pg_catalog.text") == "SELECT '1', x");
    CHECK(rewrite_postgres("SELECT a::character varying(10), b::double precision, c::text[]") == "SELECT a, b, c");
    CHECK(rewrite_postgres("SELECT t::timestamp with time zone FROM x") == "SELECT t FROM x");
    CHECK(rewrite_postgres("WHERE c.relname COLLATE pg_catalog.default = 'x'") == "WHERE c.relname  = 'x'");
    CHECK(rewrite_postgres("SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c") ==
          "SELECT pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c");
}

TEST_CASE("rewrite maps regular expression operators to REGEXP", "[sql][rewrite]") {
    CHECK(rewrite_postgres("n.nspname !~ '^pg_toast'") == "n.nspname  NOT REGEXP  '^pg_toast'");
    CHECK(rewrite_postgres("c.relname OPERATOR(pg_catalog.~) '^(t)$'") == "c.relname  REGEXP  '^(t)$'");
    CHECK(rewrite_postgres("a ~* 'x' AND b !~* 'y'") == "a  MATCH  'x' AND b  NOT MATCH  'y'");
    CHECK(rewrite_postgres("name ILIKE 'a%'") == "name LIKE 'a%'");
}

TEST_CASE("rewrite turns $n into ?n and leaves literals, identifiers and comments alone", "[sql][rewrite]") {
    CHECK(rewrite_postgres("SELECT * FROM t WHERE a = $1 AND b < $12") == "SELECT * FROM t WHERE a = ?1 AND b < ?12");
    CHECK(rewrite_postgres("SELECT '$1 ::int ~ x', \"a::b\" -- ::c ~\n") == "SELECT '$1 ::int ~ x', \"a::b\" -- ::c ~\n");
    CHECK(rewrite_postgres("SELECT 'it''s'::text") == "SELECT 'it''s'");
    CHECK(rewrite_postgres("SELECT a$1 FROM t") == "SELECT a$1 FROM t");
}

TEST_CASE("classify recognises what the session answers itself", "[sql][rewrite]") {
    CHECK(classify("SELECT 1").kind == statement_kind::query);
    CHECK(classify("  with x as (select 1) select * from x").kind == statement_kind::query);
    auto set = classify("SET datestyle TO 'ISO'");
    CHECK(set.kind == statement_kind::set);
    CHECK(set.tag == "SET");
    CHECK(classify("begin").tag == "BEGIN");
    CHECK(classify("START TRANSACTION READ ONLY").tag == "START TRANSACTION");
    CHECK(classify("COMMIT").kind == statement_kind::commit);
    CHECK(classify("end").kind == statement_kind::commit);
    CHECK(classify("ROLLBACK").kind == statement_kind::rollback);
    auto show = classify("SHOW TRANSACTION ISOLATION LEVEL");
    CHECK(show.kind == statement_kind::show);
    CHECK(show.name == "transaction_isolation");
    CHECK(classify("show \"server_version\"").name == "server_version");
    CHECK(classify("/* c */ DISCARD ALL").tag == "DISCARD ALL");
    CHECK(classify("   ").kind == statement_kind::empty);
}

TEST_CASE("rewrite turns array(subquery) and = any (list) into SQLite forms", "[sql][rewrite]") {
    CHECK(rewrite_postgres("array_to_string(array(select rolname from r where oid = any (p.roles)), ',')") ==
          "array_to_string((select rolname from r where oid  IN (p.roles)), ',')");
    CHECK(rewrite_postgres("'d' = any(stxkind)") == "'d'  IN (stxkind)");
    CHECK(rewrite_postgres("SELECT any_value, array_length FROM t") == "SELECT any_value, array_length FROM t");
}
