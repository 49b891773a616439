// HTTP/1.1 server on the reactor. Message syntax per RFC 9112 (request line, header fields,
// Content-Length framing); anything it cannot frame safely is answered and the connection
// closed, with a lingering close so the client reads the answer before the socket goes away.
#include <skiff/core/log.hpp>
#include <skiff/http/server.hpp>
#include <skiff/tls/any_stream.hpp>
#include <skiff/core/ascii.hpp>
#include <skiff/core/percent.hpp>
#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace skiff::http {

using namespace std::chrono_literals;

class server::impl {
public:
    server_config cfg;
    runtime::tcp_listener listener;
    runtime::socket_address bound;
    // path → (method, handler)
    std::map<std::string, std::vector<std::pair<std::string, handler>>, std::less<>> routes;
    runtime::gate connections{"http server connections"};
};

namespace {

constexpr std::size_t max_header_fields = 100;

bool is_tchar(char c) noexcept {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-': case '.':
    case '^': case '_': case '`': case '|': case '~': return true;
    default: return false;
    }
}

bool is_token(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
}

std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Whether a comma-separated header value (Connection) lists `token`.
bool has_token(std::string_view value, std::string_view token) noexcept {
    while (!value.empty()) {
        const auto comma = value.find(',');
        if (iequals(trim(value.substr(0, comma)), token)) return true;
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
    }
    return false;
}

int fail(std::string* why, int status, std::string msg) {
    if (why) *why = std::move(msg);
    return status;
}

// End of the head (index just past the empty line), or npos.
std::size_t find_head_end(std::string_view buf) noexcept {
    std::size_t from = 0;
    for (;;) {
        const auto nl = buf.find('\n', from);
        if (nl == std::string_view::npos) return std::string_view::npos;
        if (nl + 1 < buf.size() && buf[nl + 1] == '\n') return nl + 2;
        if (nl + 2 < buf.size() && buf[nl + 1] == '\r' && buf[nl + 2] == '\n') return nl + 3;
        from = nl + 1;
    }
}

std::string status_line_and_headers(int status, const server::response& r, std::size_t body_len, bool keep_alive) {
    std::string head = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n"
                                   "Cache-Control: no-store\r\nConnection: {}\r\n",
                                   status, server::reason(status), r.content_type, body_len,
                                   keep_alive ? "keep-alive" : "close");
    for (const auto& [k, v] : r.headers) {
        // Header injection guard: handlers' extra headers cannot smuggle lines in.
        if (!is_token(k) || v.find_first_of("\r\n") != std::string::npos) continue;
        head += k;
        head += ": ";
        head += v;
        head += "\r\n";
    }
    head += "\r\n";
    return head;
}

server::response plain(int status, std::string_view why) {
    return server::response(status, "text/plain; charset=utf-8",
                            fmt::format("{} {}{}{}\n", status, server::reason(status), why.empty() ? "" : ": ", why));
}

runtime::task<result<void>> send_response(tls::any_stream& s, const server::response& r, bool head_only,
                                          bool keep_alive, std::stop_token st) {
    const std::string head = status_line_and_headers(r.status, r, r.body.size(), keep_alive);
    if (head_only || r.body.empty()) co_return co_await s.write_all(head, st);
    if (r.body.size() <= 64 * 1024) {
        std::string all = head + r.body; // one send for small answers
        co_return co_await s.write_all(all, st);
    }
    auto w = co_await s.write_all(head, st);
    if (!w) co_return w;
    co_return co_await s.write_all(r.body, st);
}

// Reads up to 16 KiB more into buf. 0 means the peer closed.
runtime::task<result<std::size_t>> read_more(tls::any_stream& s, std::string& buf, std::stop_token st) {
    const std::size_t old = buf.size();
    buf.resize(old + 16 * 1024);
    auto n = co_await s.read_some(std::span<char>(buf.data() + old, 16 * 1024), st);
    buf.resize(old + (n ? *n : 0));
    co_return n;
}

// After an error answer: stop sending, drain what the client still sends (briefly), then
// close, so the kernel does not reset the connection under the unread answer.
runtime::task<void> lingering_close(tls::any_stream& s, std::stop_token parent) {
    co_await s.shutdown();
    runtime::deadline_scope scope(runtime::reactor::local().now() + 1s, parent);
    std::string sink;
    std::size_t drained = 0;
    while (drained < 256 * 1024) {
        sink.clear();
        auto n = co_await read_more(s, sink, scope.token());
        if (!n || *n == 0) break;
        drained += *n;
    }
    s.close();
}

runtime::task<server::response> call_handler(server::handler h, const server::request& req) {
    try {
        auto t = h(req);
        server::response r = co_await std::move(t);
        co_return r;
    } catch (const std::exception& e) {
        log::error("http: handler for {} {} failed: {}", req.method, req.path, e.what());
        co_return plain(500, "the handler failed");
    } catch (...) {
        log::error("http: handler for {} {} failed with an unknown exception", req.method, req.path);
        co_return plain(500, "the handler failed");
    }
}

} // namespace

const std::string* server::request::header(std::string_view lower_name) const noexcept {
    for (const auto& [k, v] : headers)
        if (k == lower_name) return &v;
    return nullptr;
}

std::optional<std::string> server::request::query_param(std::string_view name) const {
    return form_value(query, name);
}

std::string_view server::reason(int status) noexcept {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status >= 200 && status < 300 ? "OK" : status >= 500 ? "Server Error" : "Error";
    }
}

int server::parse_head(std::string_view head, request& out, std::string* why) {
    std::vector<std::string_view> lines;
    while (!head.empty()) {
        const auto nl = head.find('\n');
        std::string_view line = head.substr(0, nl);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back(line);
        if (nl == std::string_view::npos) break;
        head.remove_prefix(nl + 1);
    }
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
    if (lines.empty()) return fail(why, 400, "empty request");

    // Request line: method SP request-target SP HTTP-version.
    const std::string_view rl = lines[0];
    const auto sp1 = rl.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : rl.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || rl.find(' ', sp2 + 1) != rl.npos) {
        return fail(why, 400, "the request line is not 'METHOD target HTTP/1.1'");
    }
    const auto method = rl.substr(0, sp1);
    const auto target = rl.substr(sp1 + 1, sp2 - sp1 - 1);
    const auto version = rl.substr(sp2 + 1);
    if (!is_token(method)) return fail(why, 400, "the method is not a token");
    if (target.empty() || (target[0] != '/' && target != "*")) {
        return fail(why, 400, "the request target must be a path starting with '/'");
    }
    for (char c : target) {
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(why, 400, "control character in the target");
    }
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
        version[5] > '9' || version[7] < '0' || version[7] > '9') {
        return fail(why, 400, "the HTTP version is malformed");
    }
    if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
        return fail(why, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
    }
    out.method = std::string(method);
    out.target = std::string(target);
    const auto qpos = target.find('?');
    out.path = std::string(target.substr(0, qpos));
    out.query = qpos == std::string_view::npos ? std::string{} : std::string(target.substr(qpos + 1));
    out.version_minor = version[7] - '0';

    if (lines.size() - 1 > max_header_fields) return fail(why, 431, "too many header fields");
    bool have_length = false;
    for (std::size_t i = 1; i < lines.size(); ++i) {
        const std::string_view line = lines[i];
        if (line.empty()) return fail(why, 400, "empty line inside the head");
        if (line[0] == ' ' || line[0] == '\t') return fail(why, 400, "obsolete line folding is not accepted");
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) return fail(why, 400, "a header line has no ':'");
        const auto name = line.substr(0, colon);
        if (!is_token(name)) return fail(why, 400, "a header name is not a token");
        const auto value = trim(line.substr(colon + 1));
        for (char c : value) {
            const auto u = static_cast<unsigned char>(c);
            if ((u < 0x20 && c != '\t') || u == 0x7f) return fail(why, 400, "control character in a header value");
        }
        std::string lname = ascii_lowercase(name);
        if (lname == "content-length") {
            std::size_t n = 0;
            auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
            if (value.empty() || p != value.data() + value.size()) {
                return fail(why, 400, "Content-Length is not a number");
            }
            if (ec == std::errc::result_out_of_range) return fail(why, 413, "Content-Length is too large");
            if (ec != std::errc{}) return fail(why, 400, "Content-Length is not a number");
            if (have_length && n != out.content_length) return fail(why, 400, "conflicting Content-Length headers");
            have_length = true;
            out.content_length = n;
        } else if (lname == "transfer-encoding") {
            return fail(why, 501, "Transfer-Encoding (chunked request bodies) is not supported");
        }
        out.headers.emplace_back(std::move(lname), std::string(value));
    }
    if (out.version_minor == 1 && !out.header("host")) return fail(why, 400, "HTTP/1.1 requests need a Host header");
    return 0;
}

result<std::unique_ptr<server>, std::string> server::listen(server_config cfg) {
    auto addr = runtime::socket_address::parse(cfg.addr);
    if (!addr) return failure{fmt::format("cannot listen for HTTP: {}", addr.error())};
    auto l = runtime::tcp_listener::listen(*addr);
    if (!l) return failure{fmt::format("cannot listen on {} for HTTP: {}", cfg.addr, l.error())};
    std::unique_ptr<server> s(new server());
    s->_impl = std::make_unique<impl>();
    s->_impl->cfg = std::move(cfg);
    s->_impl->listener = std::move(*l);
    s->_impl->bound = s->_impl->listener.local_address();
    return s;
}

server::~server() = default;

void server::route(std::string method, std::string path, handler h) {
    auto& list = _impl->routes[path];
    for (auto& [m, existing] : list) {
        if (m == method) {
            existing = std::move(h);
            return;
        }
    }
    list.emplace_back(std::move(method), std::move(h));
}

runtime::socket_address server::local_address() const { return _impl->bound; }

namespace {

// One connection: requests in order (pipelining included) until close, error or shutdown.
runtime::task<void> serve_connection(server::impl* im, server::stats* stats,
                                     runtime::tcp_stream sock) {
    ++stats->open;
    int one = 1;
    ::setsockopt(sock.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const server_config& cfg = im->cfg;
    const std::stop_token stop = im->connections.stop_token();
    tls::any_stream s;
    if (cfg.tls) {
        const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(cfg.request_timeout);
        auto peer = sock.peer_address();
        auto t = co_await tls::stream::accept(cfg.tls->current(), std::move(sock), stop, timeout);
        if (!t) {
            ++stats->tls_failures;
            if (!runtime::is_cancelled(t.error())) {
                log::warn("http: TLS handshake with {} failed: {}", peer.to_string(), t.error().message());
            }
            --stats->open;
            co_return;
        }
        s = tls::any_stream(std::move(*t));
    } else {
        s = tls::any_stream(std::move(sock));
    }
    std::string buf;
    bool keep_alive = true;
    while (keep_alive && !stop.stop_requested()) {
        server::request req;
        int status = 0;
        std::string why;
        std::size_t head_end = std::string::npos;
        {
            runtime::deadline_scope scope(runtime::reactor::local().now() + cfg.request_timeout, stop);
            bool closed = false;
            for (;;) {
                // Tolerate empty lines before a request line (RFC 9112 §2.2).
                std::size_t lead = 0;
                while (lead < buf.size() && (buf[lead] == '\r' || buf[lead] == '\n')) ++lead;
                if (lead) buf.erase(0, lead);
                head_end = find_head_end(buf);
                if (head_end != std::string::npos) break;
                if (buf.size() > cfg.max_head_bytes) break;
                auto n = co_await read_more(s, buf, scope.token());
                if (!n || *n == 0) {
                    closed = true;
                    break;
                }
            }
            if (closed) break; // idle timeout, shutdown or the client went away
            if (head_end == std::string::npos || head_end > cfg.max_head_bytes) {
                status = 431;
                why = fmt::format("the request head exceeds {} bytes", cfg.max_head_bytes);
            } else {
                status = server::parse_head(std::string_view(buf).substr(0, head_end), req, &why);
            }
            if (status == 0 && req.content_length > cfg.max_body_bytes) {
                status = 413;
                why = fmt::format("the body exceeds {} bytes", cfg.max_body_bytes);
            }
            if (status == 0) {
                buf.erase(0, head_end);
                const auto* expect = req.header("expect");
                if (expect && iequals(*expect, "100-continue") && buf.size() < req.content_length) {
                    static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
                    auto w = co_await s.write_all(cont, scope.token());
                    if (!w) break;
                }
                while (buf.size() < req.content_length) {
                    auto n = co_await read_more(s, buf, scope.token());
                    if (!n || *n == 0) {
                        closed = true;
                        break;
                    }
                }
                if (closed) break;
                req.body = buf.substr(0, req.content_length);
                buf.erase(0, req.content_length);
            }
        }
        if (status != 0) {
            ++stats->bad_requests;
            ++stats->requests;
            auto r = plain(status, why);
            runtime::deadline_scope scope(runtime::reactor::local().now() + cfg.request_timeout, stop);
            auto w = co_await send_response(s, r, false, false, scope.token());
            (void)w;
            co_await lingering_close(s, stop);
            break;
        }

        if (const auto* c = req.header("connection")) {
            if (has_token(*c, "close")) keep_alive = false;
            else if (req.version_minor == 0 && !has_token(*c, "keep-alive")) keep_alive = false;
        } else if (req.version_minor == 0) {
            keep_alive = false;
        }

        // Route: exact path, then method (HEAD falls back to GET).
        server::response resp;
        const bool head_only = req.method == "HEAD";
        auto rit = im->routes.find(req.path);
        if (rit == im->routes.end()) {
            resp = plain(404, fmt::format("nothing at {}", req.path));
        } else {
            const server::handler* h = nullptr;
            for (const auto& [m, fn] : rit->second)
                if (m == req.method) h = &fn;
            if (!h && head_only) {
                for (const auto& [m, fn] : rit->second)
                    if (m == "GET") h = &fn;
            }
            if (!h) {
                std::string allow;
                bool has_get = false, has_head = false;
                for (const auto& [m, fn] : rit->second) {
                    if (!allow.empty()) allow += ", ";
                    allow += m;
                    has_get = has_get || m == "GET";
                    has_head = has_head || m == "HEAD";
                }
                if (has_get && !has_head) allow += ", HEAD";
                resp = plain(405, fmt::format("{} is not allowed on {} (allowed: {})", req.method, req.path, allow));
                resp.headers.emplace_back("Allow", allow);
            } else {
                // Copied: the route table may change while the handler runs.
                server::handler fn = *h;
                resp = co_await call_handler(std::move(fn), req);
            }
        }
        ++stats->requests;
        runtime::deadline_scope scope(runtime::reactor::local().now() + cfg.request_timeout, stop);
        auto w = co_await send_response(s, resp, head_only, keep_alive, scope.token());
        if (!w) break;
    }
    if (s.is_tls()) co_await s.shutdown(); // close_notify
    s.close();
    --stats->open;
}

// Over the connection cap: a best-effort 503 without waiting, then close.
void reject(runtime::tcp_stream s) {
    static constexpr std::string_view busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                                             "Content-Length: 24\r\nConnection: close\r\n\r\n"
                                             "503 too many connections";
    (void)::send(s.fd(), busy.data(), busy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::shutdown(s.fd(), SHUT_WR);
    s.close();
}

} // namespace

runtime::task<void> server::serve(std::stop_token st) {
    impl& im = *_impl;
    while (!st.stop_requested()) {
        auto c = co_await im.listener.accept(st);
        if (!c) {
            if (runtime::is_cancelled(c.error()) || st.stop_requested()) break;
            // EMFILE, ENFILE, ENOBUFS...: back off instead of spinning on the error.
            log::warn("http: accept on {} failed: {}", im.bound.to_string(), c.error().message());
            auto slept = co_await runtime::sleep(50ms, st);
            (void)slept;
            continue;
        }
        ++_stats.connections;
        if (im.connections.count() >= im.cfg.max_connections) {
            ++_stats.rejected;
            reject(std::move(*c));
            continue;
        }
        auto spawned = im.connections.spawn(serve_connection(&im, &_stats, std::move(*c)));
        (void)spawned; // the gate only closes below
    }
    co_await im.connections.close();
    im.listener.close();
}

} // namespace skiff::http
