#include "wire_client.hpp"

#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <cstring>

namespace skiff::test {

namespace {

void put32(std::string& out, std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
}
void put16(std::string& out, std::uint16_t v) {
    out.push_back(static_cast<char>(v >> 8));
    out.push_back(static_cast<char>(v & 0xff));
}
void putstr(std::string& out, const std::string& s) {
    out += s;
    out.push_back('\0');
}
std::uint32_t get32(const std::string& b, std::size_t at) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(b.at(at + i));
    return v;
}
std::uint16_t get16(const std::string& b, std::size_t at) {
    return static_cast<std::uint16_t>((static_cast<unsigned char>(b.at(at)) << 8) | static_cast<unsigned char>(b.at(at + 1)));
}
std::string untyped(const std::string& body) {
    std::string out;
    put32(out, static_cast<std::uint32_t>(body.size() + 4));
    return out + body;
}

} // namespace

std::string typed_bytes(char type, const std::string& body) {
    std::string out(1, type);
    put32(out, static_cast<std::uint32_t>(body.size() + 4));
    return out + body;
}

std::string startup_bytes(const std::vector<std::pair<std::string, std::string>>& params, std::uint32_t version) {
    std::string b;
    put32(b, version);
    for (const auto& [k, v] : params) {
        putstr(b, k);
        putstr(b, v);
    }
    b.push_back('\0');
    return untyped(b);
}
std::string ssl_request_bytes() {
    std::string b;
    put32(b, 80877103);
    return untyped(b);
}
std::string gssenc_request_bytes() {
    std::string b;
    put32(b, 80877104);
    return untyped(b);
}
std::string cancel_request_bytes(std::int32_t pid, std::int32_t secret) {
    std::string b;
    put32(b, 80877102);
    put32(b, static_cast<std::uint32_t>(pid));
    put32(b, static_cast<std::uint32_t>(secret));
    return untyped(b);
}
std::string query_bytes(const std::string& sql) {
    std::string b;
    putstr(b, sql);
    return typed_bytes('Q', b);
}
std::string parse_bytes(const std::string& name, const std::string& sql, const std::vector<std::uint32_t>& types) {
    std::string b;
    putstr(b, name);
    putstr(b, sql);
    put16(b, static_cast<std::uint16_t>(types.size()));
    for (auto t : types) put32(b, t);
    return typed_bytes('P', b);
}
std::string bind_bytes(const std::string& portal, const std::string& stmt,
                       const std::vector<std::optional<std::string>>& params, const std::vector<std::int16_t>& pf,
                       const std::vector<std::int16_t>& rf) {
    std::string b;
    putstr(b, portal);
    putstr(b, stmt);
    put16(b, static_cast<std::uint16_t>(pf.size()));
    for (auto f : pf) put16(b, static_cast<std::uint16_t>(f));
    put16(b, static_cast<std::uint16_t>(params.size()));
    for (const auto& p : params) {
        if (!p) {
            put32(b, 0xffffffffu);
            continue;
        }
        put32(b, static_cast<std::uint32_t>(p->size()));
        b += *p;
    }
    put16(b, static_cast<std::uint16_t>(rf.size()));
    for (auto f : rf) put16(b, static_cast<std::uint16_t>(f));
    return typed_bytes('B', b);
}
std::string describe_bytes(char kind, const std::string& name) {
    std::string b(1, kind);
    putstr(b, name);
    return typed_bytes('D', b);
}
std::string close_bytes(char kind, const std::string& name) {
    std::string b(1, kind);
    putstr(b, name);
    return typed_bytes('C', b);
}
std::string execute_bytes(const std::string& portal, std::int32_t max_rows) {
    std::string b;
    putstr(b, portal);
    put32(b, static_cast<std::uint32_t>(max_rows));
    return typed_bytes('E', b);
}
std::string sync_bytes() { return typed_bytes('S', ""); }
std::string flush_bytes() { return typed_bytes('H', ""); }
std::string terminate_bytes() { return typed_bytes('X', ""); }

std::string error_field(const std::string& body, char field) {
    std::size_t i = 0;
    while (i < body.size() && body[i] != '\0') {
        const char f = body[i++];
        auto end = body.find('\0', i);
        if (end == std::string::npos) return {};
        if (f == field) return body.substr(i, end - i);
        i = end + 1;
    }
    return {};
}

std::vector<std::optional<std::string>> data_row_values(const std::string& body) {
    std::vector<std::optional<std::string>> out;
    const auto n = get16(body, 0);
    std::size_t at = 2;
    for (std::uint16_t i = 0; i < n; ++i) {
        const auto len = get32(body, at);
        at += 4;
        if (len == 0xffffffffu) {
            out.emplace_back(std::nullopt);
            continue;
        }
        out.emplace_back(body.substr(at, len));
        at += len;
    }
    return out;
}

std::vector<std::pair<std::string, std::uint32_t>> row_description_columns(const std::string& body) {
    std::vector<std::pair<std::string, std::uint32_t>> out;
    const auto n = get16(body, 0);
    std::size_t at = 2;
    for (std::uint16_t i = 0; i < n; ++i) {
        auto end = body.find('\0', at);
        std::string name = body.substr(at, end - at);
        at = end + 1;
        const auto type = get32(body, at + 6);
        at += 18;
        out.emplace_back(std::move(name), type);
    }
    return out;
}

std::string cstring_body(const std::string& body) { return body.substr(0, body.find('\0')); }

std::string types_of(const std::vector<wire_msg>& msgs) {
    std::string s;
    for (const auto& m : msgs) s.push_back(m.type);
    return s;
}

runtime::task<std::optional<wire_client>> wire_client::connect(runtime::socket_address addr) {
    auto s = co_await runtime::tcp_stream::connect(addr);
    if (!s) co_return std::nullopt;
    wire_client c;
    c._s = std::move(*s);
    co_return c;
}

runtime::task<std::optional<wire_client>> wire_client::session(runtime::socket_address addr, const char* user) {
    auto c = co_await connect(addr);
    if (!c) co_return std::nullopt;
    std::vector<std::pair<std::string, std::string>> params{{"user", user}, {"database", "test"}};
    std::string hello = startup_bytes(params);
    bool sent = co_await c->send(std::move(hello));
    if (!sent) co_return std::nullopt;
    auto msgs = co_await c->read_until('Z');
    if (msgs.empty() || msgs.back().type != 'Z') co_return std::nullopt;
    for (const auto& m : msgs) {
        if (m.type == 'K') {
            c->pid = static_cast<std::int32_t>(get32(m.body, 0));
            c->secret = static_cast<std::int32_t>(get32(m.body, 4));
        }
    }
    c->startup_messages = std::move(msgs);
    co_return c;
}

runtime::task<bool> wire_client::send(std::string bytes) {
    auto w = co_await _s.write_all(std::span<const char>(bytes.data(), bytes.size()));
    co_return w.has_value();
}

runtime::task<std::optional<wire_msg>> wire_client::read_msg(std::chrono::milliseconds deadline) {
    runtime::deadline_scope scope(runtime::reactor::local().now() + deadline);
    for (;;) {
        if (_buf.size() >= 5) {
            const auto len = get32(_buf, 1);
            if (_buf.size() >= len + 1u) {
                wire_msg m{_buf[0], _buf.substr(5, len - 4)};
                _buf.erase(0, len + 1u);
                co_return m;
            }
        }
        char tmp[16384];
        auto n = co_await _s.read_some(std::span<char>(tmp, sizeof(tmp)), scope.token());
        if (!n || *n == 0) co_return std::nullopt;
        _buf.append(tmp, *n);
    }
}

runtime::task<std::vector<wire_msg>> wire_client::read_until(char type, std::chrono::milliseconds deadline) {
    std::vector<wire_msg> out;
    for (;;) {
        auto m = co_await read_msg(deadline);
        if (!m) co_return out;
        const bool last = m->type == type;
        out.push_back(std::move(*m));
        if (last) co_return out;
    }
}

runtime::task<std::optional<char>> wire_client::read_byte() {
    if (!_buf.empty()) {
        char c = _buf[0];
        _buf.erase(0, 1);
        co_return c;
    }
    runtime::deadline_scope scope(runtime::reactor::local().now() + std::chrono::seconds(10));
    char c = 0;
    auto n = co_await _s.read_some(std::span<char>(&c, 1), scope.token());
    if (!n || *n == 0) co_return std::nullopt;
    co_return c;
}

runtime::task<bool> wire_client::closed_by_server(std::chrono::milliseconds deadline) {
    runtime::deadline_scope scope(runtime::reactor::local().now() + deadline);
    for (;;) {
        char tmp[4096];
        auto n = co_await _s.read_some(std::span<char>(tmp, sizeof(tmp)), scope.token());
        if (!n) co_return !runtime::is_cancelled(n.error()); // ECONNRESET counts as closed
        if (*n == 0) co_return true;
        _buf.append(tmp, *n);
    }
}

} // namespace skiff::test
