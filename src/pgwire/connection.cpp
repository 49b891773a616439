// A connection's life: startup (SSL/GSSENC refusal, CancelRequest, version check, limits),
// then the message loop. The query flows themselves are in extended.cpp.
#include "connection.hpp"

#include <skiff/core/log.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <sys/socket.h>

#include <chrono>
#include <random>

namespace skiff::pgwire::detail {

namespace {

constexpr std::size_t read_chunk = 16 * 1024;

struct forward_stop {
    std::stop_source* target;
    void operator()() const noexcept { target->request_stop(); }
};

// The cancel key is what authorises a CancelRequest, so it must not be guessable.
std::int32_t random_secret() {
    std::int32_t v = 0;
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof(v)) != 1) {
        std::random_device rd;
        v = static_cast<std::int32_t>(rd());
    }
    return v;
}

std::int32_t allocate_pid(server_state& s) {
    for (;;) {
        std::int32_t pid = s.next_pid;
        s.next_pid = pid == 0x7fffffff ? 1 : pid + 1;
        if (!s.by_pid.contains(pid)) return pid;
    }
}

std::string printable_type(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    return fmt::format("\\x{:02x}", u);
}

} // namespace

connection::connection(server_state* s, runtime::tcp_stream sock) : _s(s), _sock(std::move(sock)) {}

connection::~connection() {
    if (_registered) {
        _s->by_pid.erase(_pid);
        --_s->sessions;
    }
}

bool connection::cancel(std::int32_t secret) noexcept {
    if (secret != _secret || !_query) return false;
    _query->request_stop();
    return true;
}

runtime::task<bool> connection::read_more(std::stop_token st) {
    if (_in_pos > 0 && _in_pos * 2 >= _in.size()) {
        _in.erase(0, _in_pos);
        _in_pos = 0;
    }
    const std::size_t old = _in.size();
    _in.resize(old + read_chunk);
    auto n = co_await _sock.read_some(std::span<char>(_in.data() + old, read_chunk), st);
    if (!n || *n == 0) {
        _in.resize(old);
        if (!n && runtime::is_cancelled(n.error())) co_return false;
        _eof = true;
        _conn_stop.request_stop();
        co_return false;
    }
    _in.resize(old + *n);
    co_return true;
}

runtime::task<bool> connection::flush() {
    if (_out.empty()) co_return true;
    auto w = co_await _sock.write_all(std::span<const char>(_out.data(), _out.size()), _conn_stop.get_token());
    _out.clear();
    if (!w) {
        _conn_stop.request_stop();
        co_return false;
    }
    co_return true;
}

runtime::task<void> connection::fatal(sql_error e) {
    ++_s->stats.errors;
    codec::error_response(_out, e, "FATAL");
    // The connection may already be stopping (shutdown): the last words get their own short
    // deadline instead of the connection's token, and a peer that does not read loses them.
    auto bytes = std::move(_out);
    _out.clear();
    runtime::deadline_scope scope(runtime::reactor::local().now() + std::chrono::seconds(1));
    auto w = co_await _sock.write_all(std::span<const char>(bytes.data(), bytes.size()), scope.token());
    (void)w;
    _terminate = true;
    _conn_stop.request_stop();
}

runtime::task<void> connection::protocol_violation(std::string message) {
    ++_s->stats.protocol_violations;
    log::debug("pgwire: protocol violation from {}: {}", _sock.peer_address().to_string(), message);
    sql_error e("08P01", std::move(message));
    co_await fatal(std::move(e));
}

runtime::task<std::optional<connection::owned_frame>> connection::next_frame() {
    for (;;) {
        std::string_view buf(_in);
        buf.remove_prefix(_in_pos);
        auto fr = codec::next_message(buf, _s->cfg.max_message_bytes);
        if (fr.status == codec::frame_status::complete) {
            owned_frame f{fr.f.type, std::string(fr.f.body)};
            _in_pos += fr.f.size;
            co_return f;
        }
        if (fr.status == codec::frame_status::bad_length) {
            co_await protocol_violation("invalid message length");
            co_return std::nullopt;
        }
        if (fr.status == codec::frame_status::too_long) {
            std::string m = fmt::format("message of type '{}' is longer than {} bytes", printable_type(buf[0]),
                                        _s->cfg.max_message_bytes);
            co_await protocol_violation(std::move(m));
            co_return std::nullopt;
        }
        // Postgres flushes at Sync/Flush only; flushing too before blocking costs nothing and
        // keeps a client that forgot Flush from waiting forever.
        if (!_out.empty()) {
            bool flushed = co_await flush();
            if (!flushed) co_return std::nullopt;
        }
        bool more = co_await read_more(_conn_stop.get_token());
        if (!more) {
            // EOF in the middle of a message is just the end: nobody is left to answer.
            co_return std::nullopt;
        }
    }
}

runtime::task<void> connection::watch_eof(std::stop_token st) {
    // Input that arrives while the query runs (pipelined messages) is kept; past one message's
    // worth we stop reading and rely on the next read to notice EOF.
    while (!st.stop_requested() && _in.size() - _in_pos <= _s->cfg.max_message_bytes) {
        bool more = co_await read_more(st);
        if (!more) co_return;
    }
}

runtime::task<void> connection::handle_cancel_request(const codec::startup_message& m) {
    auto it = _s->by_pid.find(m.cancel_pid);
    if (it != _s->by_pid.end() && it->second->cancel(m.cancel_secret)) {
        ++_s->stats.cancels;
        log::debug("pgwire: cancel request for backend {}", m.cancel_pid);
    }
    // Postgres answers a CancelRequest with nothing, matched or not: the sender learns nothing.
    co_return;
}

runtime::task<connection::startup_outcome> connection::startup() {
    runtime::deadline_scope deadline(runtime::reactor::local().now() + _s->cfg.startup_timeout,
                                     _conn_stop.get_token());
    for (;;) {
        std::string_view buf(_in);
        buf.remove_prefix(_in_pos);
        auto fr = codec::next_startup(buf);
        if (fr.status == codec::frame_status::need_more) {
            bool more = co_await read_more(deadline.token());
            if (!more) {
                if (deadline.expired()) log::debug("pgwire: startup timed out");
                co_return startup_outcome::closed;
            }
            continue;
        }
        if (fr.status != codec::frame_status::complete) {
            co_await protocol_violation("invalid length of startup packet");
            co_return startup_outcome::closed;
        }
        auto parsed = codec::parse_startup(fr.f.body);
        _in_pos += fr.f.size;
        if (!parsed) {
            co_await protocol_violation(std::move(parsed).error());
            co_return startup_outcome::closed;
        }
        codec::startup_message m = std::move(*parsed);
        if (m.code == codec::ssl_request_code || m.code == codec::gssenc_request_code) {
            // Bytes already behind the request would be read as if they had been encrypted
            // (CVE-2021-23214): refuse instead of answering.
            if (_in_pos != _in.size()) {
                co_await protocol_violation("received unencrypted data after SSL request");
                co_return startup_outcome::closed;
            }
            _out.push_back('N');
            bool flushed = co_await flush();
            if (!flushed) co_return startup_outcome::closed;
            continue;
        }
        if (m.code == codec::cancel_request_code) {
            co_await handle_cancel_request(m);
            co_return startup_outcome::closed;
        }
        const unsigned major = m.code >> 16, minor = m.code & 0xffffu;
        if (major != 3) {
            ++_s->stats.protocol_violations;
            sql_error e("0A000", fmt::format("unsupported frontend protocol {}.{}: server supports 3.0 to 3.0",
                                             major, minor));
            co_await fatal(std::move(e));
            co_return startup_outcome::closed;
        }
        startup_info who;
        std::vector<std::string> unrecognized;
        for (auto& [k, v] : m.params) {
            if (k == "user") who.user = v;
            else if (k == "database") who.database = v;
            else if (k == "application_name") who.application_name = v;
            if (k.starts_with("_pq_.")) unrecognized.push_back(k);
        }
        who.options = std::move(m.params);
        if (who.database.empty()) who.database = who.user;
        if (who.user.empty()) {
            sql_error e("28000", "no PostgreSQL user name specified in startup packet");
            co_await fatal(std::move(e));
            co_return startup_outcome::closed;
        }
        // 3.x with x > 0 or protocol options: say what we speak, as Postgres does, and go on.
        if (minor > 0 || !unrecognized.empty()) codec::negotiate_protocol_version(_out, 0, unrecognized);
        if (_s->sessions >= _s->cfg.max_connections) {
            sql_error e("53300", "sorry, too many clients already");
            co_await fatal(std::move(e));
            co_return startup_outcome::closed;
        }
        auto opened = _s->engine->open(who);
        if (!opened) {
            co_await fatal(std::move(opened).error());
            co_return startup_outcome::closed;
        }
        _session = std::move(*opened);
        _pid = allocate_pid(*_s);
        _secret = random_secret();
        _s->by_pid.emplace(_pid, this);
        ++_s->sessions;
        _registered = true;
        codec::authentication_ok(_out);
        for (const auto& [k, v] : _session->parameter_status()) codec::parameter_status(_out, k, v);
        codec::backend_key_data(_out, _pid, _secret);
        codec::ready_for_query(_out);
        bool flushed = co_await flush();
        co_return flushed ? startup_outcome::ready : startup_outcome::closed;
    }
}

runtime::task<void> connection::run() {
    std::stop_callback<forward_stop> on_shutdown(_s->connections.stop_token(), forward_stop{&_conn_stop});
    auto outcome = co_await startup();
    while (outcome == startup_outcome::ready && !_terminate && !ended_by_connection()) {
        auto f = co_await next_frame();
        if (!f) break;
        const char type = f->type;
        if (_skip_until_sync && type != 'S' && type != 'X') continue;
        switch (type) {
        case 'Q': {
            auto q = codec::parse_query(f->body);
            if (!q) {
                co_await protocol_violation(std::move(q).error());
                break;
            }
            co_await on_query(std::move(*q));
            break;
        }
        case 'P': {
            auto m = codec::parse_parse(f->body);
            if (!m) {
                co_await protocol_violation(std::move(m).error());
                break;
            }
            co_await on_parse(std::move(*m));
            break;
        }
        case 'B': {
            auto m = codec::parse_bind(f->body);
            if (!m) {
                co_await protocol_violation(std::move(m).error());
                break;
            }
            co_await on_bind(std::move(*m));
            break;
        }
        case 'D':
        case 'C': {
            auto m = codec::parse_describe(f->body);
            if (!m) {
                co_await protocol_violation(std::move(m).error());
                break;
            }
            if (type == 'D') on_describe(*m);
            else on_close(*m);
            break;
        }
        case 'E': {
            auto m = codec::parse_execute(f->body);
            if (!m) {
                co_await protocol_violation(std::move(m).error());
                break;
            }
            co_await on_execute(std::move(*m));
            break;
        }
        case 'S':
            on_sync();
            (void)co_await flush();
            break;
        case 'H':
            (void)co_await flush();
            break;
        case 'X':
            _terminate = true;
            break;
        case 'd': case 'c': case 'f':
            break; // CopyData/CopyDone/CopyFail outside COPY are ignored, as Postgres does
        default: {
            std::string m = fmt::format("invalid frontend message type {}", static_cast<int>(static_cast<unsigned char>(type)));
            co_await protocol_violation(std::move(m));
            break;
        }
        }
    }
    // Shutdown with the client still there: tell it why, as Postgres does on a fast shutdown.
    if (_s->connections.is_closed() && !_eof && !_terminate && _sock.is_open() && outcome == startup_outcome::ready) {
        sql_error e("57P01", "terminating connection due to administrator command");
        co_await fatal(std::move(e));
    }
    _sock.close();
}

runtime::task<void> serve_connection(server_state* s, runtime::tcp_stream sock) {
    ++s->stats.connections_open;
    int one = 1;
    ::setsockopt(sock.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    {
        connection c(s, std::move(sock));
        co_await c.run();
    }
    --s->stats.connections_open;
}

} // namespace skiff::pgwire::detail
