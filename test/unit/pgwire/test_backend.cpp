#include "test_backend.hpp"

#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <string_view>

namespace skiff::test {

using namespace std::chrono_literals;
using pgwire::column_desc;
using pgwire::result_writer;
using pgwire::sql_error;
using pgwire::value;

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::size_t count_params(std::string_view sql) {
    std::size_t n = 0;
    for (std::size_t i = 0; i + 1 < sql.size(); ++i) {
        if (sql[i] != '$') continue;
        std::size_t v = 0;
        auto [p, ec] = std::from_chars(sql.data() + i + 1, sql.data() + sql.size(), v);
        if (ec == std::errc() && v > n) n = v;
    }
    return n;
}

bool parse_count(std::string_view s, std::size_t& n) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    return ec == std::errc() && p == s.data() + s.size();
}

class toy_session final : public pgwire::session {
public:
    explicit toy_session(toy_counters* c) : _c(c) {}

    runtime::task<result<void, sql_error>> simple_query(std::string sql, result_writer& out,
                                                        std::stop_token st) override {
        std::string_view rest(sql);
        while (!rest.empty()) {
            auto semi = rest.find(';');
            std::string_view stmt = trim(rest.substr(0, semi));
            rest = semi == std::string_view::npos ? std::string_view{} : rest.substr(semi + 1);
            if (stmt.empty()) continue;
            std::string s(stmt);
            std::vector<value> none;
            auto r = co_await run(std::move(s), std::move(none), out, st);
            if (!r) co_return r;
        }
        co_return ok();
    }

    runtime::task<result<pgwire::statement_info, sql_error>> prepare(std::string sql, std::vector<std::uint32_t> types,
                                                               std::stop_token) override {
        std::string_view s = trim(sql);
        if (s.find(';') != std::string_view::npos && !trim(s.substr(s.find(';') + 1)).empty())
            co_return sql_error("42601", "cannot insert multiple commands into a prepared statement");
        if (s.starts_with("FAIL")) co_return sql_error("42601", "syntax error at or near \"FAIL\"");
        pgwire::statement_info info;
        const std::size_t n = count_params(s);
        for (std::size_t i = 0; i < n; ++i)
            info.param_types.push_back(i < types.size() && types[i] != 0 ? types[i] : pgwire::oid::text);
        if (s.starts_with("SELECT")) info.columns.emplace_back("n", pgwire::oid::int4);
        if (s.starts_with("ECHO"))
            for (std::size_t i = 0; i < n; ++i) info.columns.emplace_back(fmt::format("p{}", i + 1), pgwire::oid::text);
        co_return info;
    }

    runtime::task<result<void, sql_error>> execute(std::string sql, std::vector<value> params, result_writer& out,
                                                   std::stop_token st) override {
        std::string s(trim(sql));
        // Parameters are substituted as text, except in ECHO, which returns them as values.
        if (!s.starts_with("ECHO")) {
            for (std::size_t i = params.size(); i > 0; --i) {
                const std::string ref = fmt::format("${}", i);
                for (auto at = s.find(ref); at != std::string::npos; at = s.find(ref))
                    s.replace(at, ref.size(), params[i - 1].value_or("NULL"));
            }
        }
        auto r = co_await run(std::move(s), std::move(params), out, st);
        co_return r;
    }

    std::vector<std::pair<std::string, std::string>> parameter_status() const override {
        return {{"server_version", "15.0 (skiff test)"}, {"server_encoding", "UTF8"}, {"client_encoding", "UTF8"},
                {"DateStyle", "ISO, MDY"}, {"integer_datetimes", "on"}, {"standard_conforming_strings", "on"}};
    }

private:
    runtime::task<result<void, sql_error>> run(std::string stmt, std::vector<value> params, result_writer& out,
                                               std::stop_token st) {
        std::string_view s(stmt);
        if (s.empty()) co_return ok(); // completes nothing: EmptyQueryResponse
        if (s.starts_with("SELECT ")) {
            std::size_t n = 0;
            if (!parse_count(trim(s.substr(7)), n)) co_return sql_error("42601", "SELECT wants a count");
            std::vector<column_desc> cols{column_desc("n", pgwire::oid::int4)};
            auto c = co_await out.columns(std::move(cols));
            if (!c) co_return c;
            std::size_t i = 1;
            while (i <= n) {
                std::vector<pgwire::row> batch;
                for (; i <= n && batch.size() < 100; ++i) batch.push_back(pgwire::row{std::to_string(i)});
                auto w = co_await out.rows(std::move(batch));
                if (!w) co_return w;
            }
            std::string tag = fmt::format("SELECT {}", n);
            auto done = co_await out.complete(std::move(tag));
            co_return done;
        }
        if (s.starts_with("ECHO")) {
            std::vector<column_desc> cols;
            for (std::size_t i = 0; i < params.size(); ++i) cols.emplace_back(fmt::format("p{}", i + 1), pgwire::oid::text);
            auto c = co_await out.columns(std::move(cols));
            if (!c) co_return c;
            std::vector<pgwire::row> batch{pgwire::row(params.begin(), params.end())};
            auto w = co_await out.rows(std::move(batch));
            if (!w) co_return w;
            std::string tag = "SELECT 1";
            auto done = co_await out.complete(std::move(tag));
            co_return done;
        }
        if (s == "SLOW") {
            ++_c->slow_started;
            auto slept = co_await runtime::sleep(60s, st);
            if (!slept) {
                ++_c->slow_cancelled;
                co_return sql_error("57014", "canceling statement due to user request");
            }
            co_return sql_error("XX000", "SLOW was never cancelled");
        }
        if (s == "SET" || s == "BEGIN") {
            std::string tag(s);
            auto done = co_await out.complete(std::move(tag));
            co_return done;
        }
        sql_error e("42601", fmt::format("syntax error at or near \"{}\"", s.substr(0, s.find(' '))));
        e.hint = "the toy language knows SELECT n, ECHO, SLOW, SET, BEGIN";
        co_return e;
    }

    toy_counters* _c;
};

} // namespace

result<std::unique_ptr<pgwire::session>, sql_error> toy_backend::open(const pgwire::startup_info& who) {
    if (who.database == "nodb") return failure{sql_error("3D000", "database \"nodb\" does not exist")};
    ++counters.sessions_opened;
    counters.last_user = who.user;
    counters.last_application_name = who.application_name;
    return std::unique_ptr<pgwire::session>(new toy_session(&counters));
}

} // namespace skiff::test
