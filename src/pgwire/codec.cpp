// Postgres v3 message layouts (protocol docs, "Message Formats"). Every integer is big-endian;
// every length word counts itself but not the type byte.
#include <skiff/core/endian.hpp>
#include <skiff/pgwire/codec.hpp>

#include <fmt/format.h>

namespace skiff::pgwire::codec {

namespace {

// A bounds-checked reader over one message body; the first failure sticks, so callers read a
// whole message and test once.
class reader {
public:
    explicit reader(std::string_view b) : _b(b) {}

    bool ok() const noexcept { return _ok; }
    bool at_end() const noexcept { return _pos == _b.size(); }

    std::int16_t i16() {
        if (!need(2)) return 0;
        auto v = be::read_i16(_b.data() + _pos);
        _pos += 2;
        return v;
    }
    std::int32_t i32() {
        if (!need(4)) return 0;
        auto v = be::read_i32(_b.data() + _pos);
        _pos += 4;
        return v;
    }
    std::uint8_t byte() {
        if (!need(1)) return 0;
        return static_cast<std::uint8_t>(_b[_pos++]);
    }
    std::string cstring() {
        if (!_ok) return {};
        auto nul = _b.find('\0', _pos);
        if (nul == std::string_view::npos) {
            _ok = false;
            return {};
        }
        std::string s(_b.substr(_pos, nul - _pos));
        _pos = nul + 1;
        return s;
    }
    std::string bytes(std::size_t n) {
        if (!need(n)) return {};
        std::string s(_b.substr(_pos, n));
        _pos += n;
        return s;
    }
    // A count that precedes n items of at least `min_item` bytes each: refusing counts the rest
    // of the body cannot hold keeps a hostile count from reserving gigabytes.
    std::size_t count(std::size_t min_item) {
        auto n = i16();
        if (!_ok) return 0;
        if (n < 0 || static_cast<std::size_t>(n) * min_item > _b.size() - _pos) {
            _ok = false;
            return 0;
        }
        return static_cast<std::size_t>(n);
    }

private:
    bool need(std::size_t n) {
        if (_ok && _b.size() - _pos >= n) return true;
        _ok = false;
        return false;
    }
    std::string_view _b;
    std::size_t _pos = 0;
    bool _ok = true;
};

template <typename T>
result<T, std::string> finish(const reader& r, T v, const char* what) {
    if (!r.ok()) return failure{fmt::format("invalid {} message: truncated or missing a terminator", what)};
    if (!r.at_end()) return failure{fmt::format("invalid {} message: bytes after the end", what)};
    return v;
}

// Opens a typed message; the length is patched by `close_msg`.
std::size_t open_msg(std::string& out, char type) {
    out.push_back(type);
    const std::size_t at = out.size();
    out.append(4, '\0');
    return at;
}
void close_msg(std::string& out, std::size_t at) {
    be::write_u32(out.data() + at, static_cast<std::uint32_t>(out.size() - at));
}
void append_cstring(std::string& out, std::string_view s) {
    for (char c : s)
        if (c != '\0') out.push_back(c);
    out.push_back('\0');
}
void empty_msg(std::string& out, char type) {
    out.push_back(type);
    be::append_u32(out, 4);
}

void error_fields(std::string& out, const sql_error& e, std::string_view severity) {
    out.push_back('S');
    append_cstring(out, severity);
    out.push_back('V');
    append_cstring(out, severity);
    out.push_back('C');
    // A SQLSTATE is exactly five characters; a malformed one from a backend would confuse
    // clients that index tables by it.
    append_cstring(out, e.sqlstate.size() == 5 ? std::string_view(e.sqlstate) : std::string_view("XX000"));
    out.push_back('M');
    append_cstring(out, e.message);
    if (!e.detail.empty()) {
        out.push_back('D');
        append_cstring(out, e.detail);
    }
    if (!e.hint.empty()) {
        out.push_back('H');
        append_cstring(out, e.hint);
    }
    out.push_back('\0');
}

} // namespace

frame_result next_message(std::string_view buf, std::size_t max_bytes) {
    frame_result r;
    if (buf.size() < 5) return r;
    const auto len = be::read_u32(buf.data() + 1);
    if (len < 4 || len > 0x7fffffffu) {
        r.status = frame_status::bad_length;
        return r;
    }
    if (len + 1u > max_bytes) {
        r.status = frame_status::too_long;
        return r;
    }
    if (buf.size() < len + 1u) return r;
    r.status = frame_status::complete;
    r.f.type = buf[0];
    r.f.body = buf.substr(5, len - 4);
    r.f.size = len + 1u;
    return r;
}

frame_result next_startup(std::string_view buf) {
    frame_result r;
    if (buf.size() < 4) return r;
    const auto len = be::read_u32(buf.data());
    if (len < 8) {
        r.status = frame_status::bad_length;
        return r;
    }
    if (len > max_startup_bytes) {
        r.status = frame_status::too_long;
        return r;
    }
    if (buf.size() < len) return r;
    r.status = frame_status::complete;
    r.f.body = buf.substr(4, len - 4);
    r.f.size = len;
    return r;
}

result<startup_message, std::string> parse_startup(std::string_view body) {
    reader r(body);
    startup_message m;
    m.code = static_cast<std::uint32_t>(r.i32());
    if (!r.ok()) return failure{std::string("invalid startup packet: no version")};
    if (m.code == ssl_request_code || m.code == gssenc_request_code) {
        return finish(r, std::move(m), "SSL/GSSENC request");
    }
    if (m.code == cancel_request_code) {
        m.cancel_pid = r.i32();
        m.cancel_secret = r.i32();
        return finish(r, std::move(m), "cancel request");
    }
    if ((m.code >> 16) != 3) return m; // the caller refuses the version; the rest is unknown
    // Name/value pairs, ended by an empty name.
    for (;;) {
        std::string name = r.cstring();
        if (!r.ok()) return failure{std::string("invalid startup packet layout: expected terminator as last byte")};
        if (name.empty()) break;
        std::string val = r.cstring();
        if (!r.ok()) return failure{fmt::format("invalid startup packet: no value for parameter \"{}\"", name)};
        m.params.emplace_back(std::move(name), std::move(val));
    }
    return finish(r, std::move(m), "startup");
}

result<std::string, std::string> parse_query(std::string_view body) {
    reader r(body);
    std::string q = r.cstring();
    return finish(r, std::move(q), "Query");
}

result<parse_message, std::string> parse_parse(std::string_view body) {
    reader r(body);
    parse_message m;
    m.statement = r.cstring();
    m.query = r.cstring();
    const auto n = r.count(4);
    m.param_types.reserve(n);
    for (std::size_t i = 0; i < n; ++i) m.param_types.push_back(static_cast<std::uint32_t>(r.i32()));
    return finish(r, std::move(m), "Parse");
}

result<bind_message, std::string> parse_bind(std::string_view body) {
    reader r(body);
    bind_message m;
    m.portal = r.cstring();
    m.statement = r.cstring();
    auto nf = r.count(2);
    m.param_formats.reserve(nf);
    for (std::size_t i = 0; i < nf; ++i) m.param_formats.push_back(r.i16());
    auto np = r.count(4);
    m.params.reserve(np);
    for (std::size_t i = 0; i < np && r.ok(); ++i) {
        const auto len = r.i32();
        if (len == -1) {
            m.params.emplace_back(std::nullopt);
        } else if (len < 0) {
            return failure{std::string("invalid Bind message: negative parameter length")};
        } else {
            m.params.emplace_back(r.bytes(static_cast<std::size_t>(len)));
        }
    }
    auto nr = r.count(2);
    m.result_formats.reserve(nr);
    for (std::size_t i = 0; i < nr; ++i) m.result_formats.push_back(r.i16());
    if (r.ok() && nf > 1 && nf != np) {
        return failure{fmt::format("bind message has {} parameter formats but {} parameters", nf, np)};
    }
    return finish(r, std::move(m), "Bind");
}

result<describe_message, std::string> parse_describe(std::string_view body) {
    reader r(body);
    describe_message m;
    m.kind = static_cast<char>(r.byte());
    m.name = r.cstring();
    if (r.ok() && m.kind != 'S' && m.kind != 'P') {
        return failure{fmt::format("invalid Describe/Close message subtype {}", static_cast<int>(m.kind))};
    }
    return finish(r, std::move(m), "Describe/Close");
}

result<execute_message, std::string> parse_execute(std::string_view body) {
    reader r(body);
    execute_message m;
    m.portal = r.cstring();
    m.max_rows = r.i32();
    return finish(r, std::move(m), "Execute");
}

bool all_text(const std::vector<std::int16_t>& formats) noexcept {
    for (auto f : formats)
        if (f != 0) return false;
    return true;
}

void authentication_ok(std::string& out) {
    out.push_back('R');
    be::append_u32(out, 8);
    be::append_u32(out, 0);
}

void parameter_status(std::string& out, std::string_view name, std::string_view value) {
    auto at = open_msg(out, 'S');
    append_cstring(out, name);
    append_cstring(out, value);
    close_msg(out, at);
}

void backend_key_data(std::string& out, std::int32_t pid, std::int32_t secret) {
    out.push_back('K');
    be::append_u32(out, 12);
    be::append_i32(out, pid);
    be::append_i32(out, secret);
}

void ready_for_query(std::string& out, char tx_status) {
    out.push_back('Z');
    be::append_u32(out, 5);
    out.push_back(tx_status);
}

void row_description(std::string& out, const std::vector<column_desc>& cols) {
    auto at = open_msg(out, 'T');
    be::append_i16(out, static_cast<std::int16_t>(cols.size()));
    for (const auto& c : cols) {
        append_cstring(out, c.name);
        be::append_u32(out, 0); // table oid: not a table column
        be::append_i16(out, 0); // attribute number
        be::append_u32(out, c.type_oid);
        be::append_i16(out, c.type_size);
        be::append_i32(out, c.type_modifier);
        be::append_i16(out, 0); // text format
    }
    close_msg(out, at);
}

void data_row(std::string& out, const row& r) {
    auto at = open_msg(out, 'D');
    be::append_i16(out, static_cast<std::int16_t>(r.size()));
    for (const auto& v : r) {
        if (!v) {
            be::append_i32(out, -1);
            continue;
        }
        be::append_u32(out, static_cast<std::uint32_t>(v->size()));
        out.append(*v);
    }
    close_msg(out, at);
}

void command_complete(std::string& out, std::string_view tag) {
    auto at = open_msg(out, 'C');
    append_cstring(out, tag);
    close_msg(out, at);
}

void empty_query_response(std::string& out) { empty_msg(out, 'I'); }

void error_response(std::string& out, const sql_error& e, std::string_view severity) {
    auto at = open_msg(out, 'E');
    error_fields(out, e, severity);
    close_msg(out, at);
}

void notice_response(std::string& out, const sql_error& e, std::string_view severity) {
    auto at = open_msg(out, 'N');
    error_fields(out, e, severity);
    close_msg(out, at);
}

void parse_complete(std::string& out) { empty_msg(out, '1'); }
void bind_complete(std::string& out) { empty_msg(out, '2'); }
void close_complete(std::string& out) { empty_msg(out, '3'); }
void no_data(std::string& out) { empty_msg(out, 'n'); }
void portal_suspended(std::string& out) { empty_msg(out, 's'); }

void parameter_description(std::string& out, const std::vector<std::uint32_t>& types) {
    auto at = open_msg(out, 't');
    be::append_i16(out, static_cast<std::int16_t>(types.size()));
    for (auto t : types) be::append_u32(out, t);
    close_msg(out, at);
}

void negotiate_protocol_version(std::string& out, std::int32_t newest_minor,
                                const std::vector<std::string>& unrecognized) {
    auto at = open_msg(out, 'v');
    be::append_i32(out, newest_minor);
    be::append_i32(out, static_cast<std::int32_t>(unrecognized.size()));
    for (const auto& s : unrecognized) append_cstring(out, s);
    close_msg(out, at);
}

} // namespace skiff::pgwire::codec
