// The query flows: simple Query, and the extended protocol's Parse/Bind/Describe/Execute/Close/
// Sync (protocol docs, "Message Flow"). Statements and portals live per connection; portals die
// at Sync, which ends the implicit transaction as in Postgres' autocommit.
#include "connection.hpp"

#include <skiff/core/log.hpp>
#include <skiff/runtime/when_all.hpp>

#include <fmt/format.h>

#include <exception>
#include <tuple>

namespace skiff::pgwire::detail {

namespace {

struct forward_stop {
    std::stop_source* target;
    void operator()() const noexcept { target->request_stop(); }
};

sql_error canceled() { return sql_error("57014", "canceling statement due to user request"); }

// With a row limit, Postgres tags each Execute's CommandComplete with the rows that Execute
// sent ("SELECT 2" for the last two of five), not the statement's total.
std::string select_tag(const std::string& tag, std::size_t rows) {
    if (!tag.starts_with("SELECT ")) return tag;
    return fmt::format("SELECT {}", rows);
}

// Publishes the running call's stop source for CancelRequest while it is in scope.
class query_registration {
public:
    query_registration(std::stop_source*& slot, std::stop_source* src) : _slot(slot) { _slot = src; }
    ~query_registration() { _slot = nullptr; }
    query_registration(const query_registration&) = delete;
    query_registration& operator=(const query_registration&) = delete;

private:
    std::stop_source*& _slot;
};

// Ends the EOF watcher once the backend call is done, however it ends: an exception escaping
// the backend would otherwise leave the watcher (and the connection) waiting forever.
template <typename T>
runtime::task<T> finish_then_stop(runtime::task<T> call, std::stop_source* done) {
    std::optional<T> r;
    try {
        T v = co_await std::move(call);
        r.emplace(std::move(v));
    } catch (const std::exception& e) {
        log::warn("pgwire: the SQL backend threw: {}", e.what());
        r.emplace(failure{sql_error("XX000", "internal error in the SQL engine")});
    }
    done->request_stop();
    co_return std::move(*r);
}

} // namespace

// The connection as a result_writer: messages go to the output buffer, which is written once
// it holds flush_threshold bytes; the write suspends the backend until the socket takes it.
class query_writer final : public result_writer {
public:
    // `described`: in the extended protocol, the columns the client already got from Describe
    // (nullptr when it did not ask); `extended` sends no RowDescription from here.
    query_writer(connection& c, std::stop_token st, bool extended, const std::vector<column_desc>* described)
        : _c(c), _st(std::move(st)), _extended(extended), _described(described) {}

    runtime::task<result<void, sql_error>> columns(std::vector<column_desc> cols) override {
        if (_st.stop_requested()) co_return canceled();
        if (!_extended) {
            codec::row_description(_c._out, cols);
        } else if (_described && _described->size() != cols.size()) {
            co_return sql_error("XX000", "the statement's result columns differ from its description");
        }
        co_return ok();
    }

    runtime::task<result<void, sql_error>> rows(std::vector<row> batch) override {
        for (auto& r : batch) {
            if (_st.stop_requested()) co_return canceled();
            if (_limit > 0 && _sent >= _limit) {
                // Past the Execute's row limit: kept for the next Execute.
                for (const auto& v : r) _spill.bytes += v ? v->size() + 4 : 4;
                _spill.rows.push_back(std::move(r));
                if (_spill.bytes > max_suspended_bytes) {
                    sql_error e("54000", fmt::format("a portal fetched with a row limit keeps at most {} bytes of "
                                                     "rows; fetch without a limit or in larger steps",
                                                     max_suspended_bytes));
                    co_return e;
                }
                continue;
            }
            codec::data_row(_c._out, r);
            ++_sent;
            if (_c._out.size() >= flush_threshold) {
                bool flushed = co_await _c.flush();
                if (!flushed) co_return sql_error("08006", "connection lost while sending rows");
            }
        }
        co_return ok();
    }

    runtime::task<result<void, sql_error>> complete(std::string tag) override {
        if (_st.stop_requested()) co_return canceled();
        ++completed;
        if (!_spill.rows.empty()) {
            _spill.tag = std::move(tag);
            codec::portal_suspended(_c._out);
            co_return ok();
        }
        codec::command_complete(_c._out, _limit > 0 ? select_tag(tag, _sent) : tag);
        co_return ok();
    }

    // Limits this Execute to `max_rows` rows (0: all).
    void limit(std::size_t max_rows) noexcept { _limit = max_rows; }
    // Rows past the limit, with the tag, when the statement was suspended.
    std::optional<suspended_rows> take_suspended() {
        if (_spill.rows.empty()) return std::nullopt;
        return std::move(_spill);
    }

    std::size_t completed = 0;

private:
    connection& _c;
    std::stop_token _st;
    bool _extended;
    const std::vector<column_desc>* _described;
    std::size_t _limit = 0;
    std::size_t _sent = 0;
    suspended_rows _spill;
};

template <typename T>
runtime::task<T> connection::guarded(runtime::task<T> call) {
    std::stop_source done;
    auto a = finish_then_stop(std::move(call), &done);
    auto b = watch_eof(done.get_token());
    auto both = co_await runtime::when_all(std::move(a), std::move(b));
    co_return std::move(std::get<0>(both));
}

void connection::send_error(const sql_error& e, bool extended) {
    ++_s->stats.errors;
    codec::error_response(_out, e);
    if (extended) _skip_until_sync = true;
}

runtime::task<void> connection::on_query(std::string sql) {
    ++_s->stats.queries;
    // A simple Query drops the unnamed statement and portal (Postgres: exec_simple_query).
    _statements.erase("");
    _portals.erase("");
    std::stop_source q;
    std::stop_callback<forward_stop> link(_conn_stop.get_token(), forward_stop{&q});
    query_registration reg(_query, &q);
    query_writer w(*this, q.get_token(), false, nullptr);
    auto call = _session->simple_query(std::move(sql), w, q.get_token());
    auto r = co_await guarded(std::move(call));
    if (ended_by_connection()) co_return; // EOF, shutdown or a failed write: no one to answer
    if (!r) send_error(r.error(), false);
    else if (w.completed == 0) codec::empty_query_response(_out);
    codec::ready_for_query(_out);
    (void)co_await flush();
}

runtime::task<void> connection::on_parse(codec::parse_message m) {
    if (m.statement.empty()) {
        _statements.erase("");
    } else if (_statements.contains(m.statement)) {
        send_error(sql_error("42P05", fmt::format("prepared statement \"{}\" already exists", m.statement)), true);
        co_return;
    }
    std::stop_source q;
    std::stop_callback<forward_stop> link(_conn_stop.get_token(), forward_stop{&q});
    query_registration reg(_query, &q);
    std::string sql = m.query;
    auto call = _session->prepare(std::move(sql), std::move(m.param_types), q.get_token());
    auto r = co_await guarded(std::move(call));
    if (ended_by_connection()) co_return;
    if (!r) {
        send_error(r.error(), true);
        co_return;
    }
    _statements[m.statement] = prepared{std::move(m.query), std::move(*r)};
    codec::parse_complete(_out);
}

runtime::task<void> connection::on_bind(codec::bind_message m) {
    auto it = _statements.find(m.statement);
    if (it == _statements.end()) {
        send_error(sql_error("26000", fmt::format("prepared statement \"{}\" does not exist", m.statement)), true);
        co_return;
    }
    if (!m.portal.empty() && _portals.contains(m.portal)) {
        send_error(sql_error("42P03", fmt::format("portal \"{}\" already exists", m.portal)), true);
        co_return;
    }
    const auto& info = it->second.info;
    if (m.params.size() != info.param_types.size()) {
        send_error(sql_error("08P01", fmt::format("bind message supplies {} parameters, but prepared statement "
                                                  "\"{}\" requires {}",
                                                  m.params.size(), m.statement, info.param_types.size())),
                   true);
        co_return;
    }
    if (!codec::all_text(m.param_formats)) {
        send_error(sql_error("0A000", "binary-format parameters are not supported; send them as text"), true);
        co_return;
    }
    if (!codec::all_text(m.result_formats)) {
        send_error(sql_error("0A000", "binary result format is not supported; ask for text"), true);
        co_return;
    }
    portal p;
    p.sql = it->second.sql;
    p.params = std::move(m.params);
    p.columns = info.columns;
    _portals[m.portal] = std::move(p);
    codec::bind_complete(_out);
    co_return;
}

void connection::on_describe(const codec::describe_message& m) {
    if (m.kind == 'S') {
        auto it = _statements.find(m.name);
        if (it == _statements.end()) {
            send_error(sql_error("26000", fmt::format("prepared statement \"{}\" does not exist", m.name)), true);
            return;
        }
        codec::parameter_description(_out, it->second.info.param_types);
        if (it->second.info.columns.empty()) codec::no_data(_out);
        else codec::row_description(_out, it->second.info.columns);
        return;
    }
    auto it = _portals.find(m.name);
    if (it == _portals.end()) {
        send_error(sql_error("34000", fmt::format("portal \"{}\" does not exist", m.name)), true);
        return;
    }
    if (it->second.columns.empty()) codec::no_data(_out);
    else codec::row_description(_out, it->second.columns);
    it->second.described = true;
}

runtime::task<void> connection::on_execute(codec::execute_message m) {
    auto it = _portals.find(m.portal);
    if (it == _portals.end()) {
        send_error(sql_error("34000", fmt::format("portal \"{}\" does not exist", m.portal)), true);
        co_return;
    }
    if (it->second.rest) {
        co_await resume_portal(it->second, m.max_rows > 0 ? static_cast<std::size_t>(m.max_rows) : 0);
        co_return;
    }
    ++_s->stats.queries;
    std::string sql = it->second.sql;
    std::vector<value> params = it->second.params;
    std::vector<column_desc> described = it->second.columns;
    const bool was_described = it->second.described;
    const std::string portal_name = m.portal;
    std::stop_source q;
    std::stop_callback<forward_stop> link(_conn_stop.get_token(), forward_stop{&q});
    query_registration reg(_query, &q);
    query_writer w(*this, q.get_token(), true, was_described ? &described : nullptr);
    if (m.max_rows > 0) w.limit(static_cast<std::size_t>(m.max_rows));
    auto call = _session->execute(std::move(sql), std::move(params), w, q.get_token());
    auto r = co_await guarded(std::move(call));
    if (ended_by_connection()) co_return;
    if (!r) {
        send_error(r.error(), true);
        co_return;
    }
    if (w.completed == 0) codec::empty_query_response(_out);
    auto rest = w.take_suspended();
    if (rest) {
        // Looked up again: the map is not touched while the call runs, but say so in code.
        auto again = _portals.find(portal_name);
        if (again != _portals.end()) again->second.rest = std::move(rest);
    }
}

runtime::task<void> connection::resume_portal(portal& p, std::size_t max_rows) {
    auto& rest = *p.rest;
    std::size_t sent = 0;
    while (rest.next < rest.rows.size() && (max_rows == 0 || sent < max_rows)) {
        codec::data_row(_out, rest.rows[rest.next]);
        rest.rows[rest.next] = row{}; // sent: free it now
        ++rest.next;
        ++sent;
        if (_out.size() >= flush_threshold) {
            bool flushed = co_await flush();
            if (!flushed) co_return;
        }
    }
    if (rest.next < rest.rows.size()) {
        codec::portal_suspended(_out);
        co_return;
    }
    codec::command_complete(_out, select_tag(rest.tag, sent));
    p.rest.reset();
}

void connection::on_close(const codec::describe_message& m) {
    // Closing something that does not exist is not an error (protocol docs, Close).
    if (m.kind == 'S') _statements.erase(m.name);
    else _portals.erase(m.name);
    codec::close_complete(_out);
}

void connection::on_sync() {
    _skip_until_sync = false;
    _portals.clear();
    codec::ready_for_query(_out);
}

} // namespace skiff::pgwire::detail
