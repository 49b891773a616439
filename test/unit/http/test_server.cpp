#include "test_server.hpp"

#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace skiff::test {

using runtime::task;
using runtime::tcp_stream;

std::string pattern(std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = pattern_byte(i);
    return s;
}

struct http_test_server::parsed_request {
    std::string method;
    std::string target;
    std::string raw_head;
    std::vector<std::pair<std::string, std::string>> headers; // names lowercased
    std::string body;

    const std::string* header(std::string_view name) const {
        for (const auto& [n, v] : headers)
            if (n == name) return &v;
        return nullptr;
    }
};

namespace {

using header_vec = std::vector<std::pair<std::string, std::string>>;

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Parses "METHOD target HTTP/1.1\r\nName: value\r\n..." (without the blank line).
bool parse_head(std::string_view head, http_test_server::parsed_request& out) {
    out.raw_head = std::string(head);
    auto eol = head.find("\r\n");
    std::string_view first = head.substr(0, eol);
    auto sp1 = first.find(' ');
    auto sp2 = first.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) return false;
    out.method = std::string(first.substr(0, sp1));
    out.target = std::string(first.substr(sp1 + 1, sp2 - sp1 - 1));
    std::string_view rest = eol == std::string_view::npos ? std::string_view{} : head.substr(eol + 2);
    while (!rest.empty()) {
        auto e = rest.find("\r\n");
        std::string_view line = rest.substr(0, e);
        rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e + 2);
        auto colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        out.headers.emplace_back(lower(trim(line.substr(0, colon))), std::string(trim(line.substr(colon + 1))));
    }
    return true;
}

std::string reason_for(int status) {
    switch (status) {
    case 200: return "OK";
    case 404: return "Not Found";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

std::string make_response(int status, const header_vec& headers, std::string_view body, bool head_only,
                          bool with_length = true) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", status, reason_for(status));
    for (const auto& [n, v] : headers) out += fmt::format("{}: {}\r\n", n, v);
    if (with_length) out += fmt::format("Content-Length: {}\r\n", body.size());
    out += "\r\n";
    if (!head_only) out.append(body);
    return out;
}

std::size_t number_after(std::string_view target, std::string_view prefix) {
    auto s = target.substr(prefix.size());
    std::size_t v = 0;
    std::from_chars(s.data(), s.data() + s.size(), v);
    return v;
}

} // namespace

std::unique_ptr<http_test_server> http_test_server::start() {
    auto addr = runtime::socket_address::parse("127.0.0.1:0");
    if (!addr) {
        std::fprintf(stderr, "test server: %s\n", addr.error().c_str());
        std::abort();
    }
    auto l = runtime::tcp_listener::listen(*addr);
    if (!l) {
        std::fprintf(stderr, "test server: %s\n", l.error().c_str());
        std::abort();
    }
    std::unique_ptr<http_test_server> srv(new http_test_server(std::move(*l)));
    srv->_port = srv->_listener.local_address().port();
    auto spawned = srv->_gate.spawn(srv->accept_loop());
    if (!spawned) std::abort();
    return srv;
}

http_test_server::http_test_server(runtime::tcp_listener l) : _listener(std::move(l)) {}
http_test_server::~http_test_server() = default;

std::string http_test_server::url(std::string_view path) const {
    return fmt::format("http://127.0.0.1:{}{}", _port, path);
}

task<void> http_test_server::stop() {
    auto closing = _gate.close();
    co_await std::move(closing);
    _listener.close();
}

task<void> http_test_server::accept_loop() {
    const auto st = _gate.stop_token();
    for (;;) {
        auto accepting = _listener.accept(st);
        auto r = co_await std::move(accepting);
        if (!r) co_return; // cancelled: the server is stopping
        ++stats.accepts;
        auto spawned = _gate.spawn(serve(std::move(*r)));
        (void)spawned; // refused only while closing: the connection just closes
    }
}

task<void> http_test_server::serve(tcp_stream s) {
    const auto st = _gate.stop_token();
    std::string buf;
    std::vector<char> chunk(64 * 1024);
    for (;;) {
        std::size_t head_end;
        while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
            auto reading = s.read_some(chunk, st);
            auto r = co_await std::move(reading);
            if (!r) co_return;
            if (*r == 0) {
                ++stats.peer_closes;
                co_return;
            }
            buf.append(chunk.data(), *r);
        }
        parsed_request req;
        if (!parse_head(std::string_view(buf).substr(0, head_end), req)) co_return;
        buf.erase(0, head_end + 4);

        std::size_t length = 0;
        if (const auto* cl = req.header("content-length")) length = number_after(*cl, "");
        if (const auto* ex = req.header("expect");
            ex && lower(*ex) == "100-continue" && buf.size() < length && req.target != "/ignore-expect") {
            auto writing = s.write_all(std::string_view("HTTP/1.1 100 Continue\r\n\r\n"), st);
            auto w = co_await std::move(writing);
            if (!w) co_return;
        }
        while (buf.size() < length) {
            auto reading = s.read_some(chunk, st);
            auto r = co_await std::move(reading);
            if (!r) co_return;
            if (*r == 0) {
                ++stats.peer_closes;
                co_return;
            }
            buf.append(chunk.data(), *r);
        }
        req.body = buf.substr(0, length);
        buf.erase(0, length);
        ++stats.requests;

        auto responding = respond(s, req, buf, st);
        const bool keep = co_await std::move(responding);
        if (!keep) co_return;
    }
}

task<bool> http_test_server::respond(tcp_stream& s, const parsed_request& req, std::string& buf,
                                     std::stop_token st) {
    const std::string_view t = req.target;
    const bool head = req.method == "HEAD";
    std::string out;
    bool keep = true;

    if (t == "/hello") {
        out = make_response(200, {{"Content-Type", "text/plain"}}, "hello world", head);
    } else if (t == "/ignore-expect") {
        out = make_response(200, {{"X-Content-Length", std::to_string(req.body.size())}}, req.body, head);
    } else if (t == "/echo") {
        const auto* ex = req.header("expect");
        out = make_response(200,
                            {{"X-Method", req.method},
                             {"X-Expect", ex ? *ex : "none"},
                             {"X-Content-Length", std::to_string(req.body.size())}},
                            req.body, head);
    } else if (t == "/reqheaders") {
        out = make_response(200, {}, req.raw_head, head);
    } else if (t == "/headers") {
        out = make_response(200,
                            {{"X-Amz-Request-Id", "req-123"},
                             {"X-Multi", "one"},
                             {"ETag", "\"abc\""},
                             {"X-Multi", "two"},
                             {"X-Spaces", "   padded value   "},
                             {"CONTENT-TYPE", "text/plain"}},
                            "ok", head);
    } else if (t.starts_with("/n/")) {
        out = make_response(200, {}, t, head);
    } else if (t == "/not-modified") {
        // A 304 repeats the representation's length but has no body.
        out = "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 5000\r\n\r\n";
    } else if (t.starts_with("/status/")) {
        const int code = static_cast<int>(number_after(t, "/status/"));
        out = make_response(code, {}, fmt::format("status {}", code), head);
    } else if (t.starts_with("/delay/")) {
        auto sleeping = runtime::sleep(std::chrono::milliseconds(number_after(t, "/delay/")), st);
        auto slept = co_await sleeping;
        if (!slept) co_return false;
        out = make_response(200, {}, "late", head);
    } else if (t == "/hang") {
        ++stats.hangs;
        // Never answer; notice when the client gives up and closes.
        std::vector<char> chunk(4096);
        for (;;) {
            auto reading = s.read_some(chunk, st);
            auto r = co_await std::move(reading);
            if (!r) co_return false;
            if (*r == 0) {
                ++stats.peer_closes;
                co_return false;
            }
            buf.append(chunk.data(), *r);
        }
    } else if (t == "/truncate") {
        out = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789";
        keep = false;
    } else if (t == "/drop") {
        co_return false;
    } else if (t == "/continue") {
        out = "HTTP/1.1 100 Continue\r\nX-Interim: yes\r\n\r\n";
        out += make_response(200, {{"X-Final", "yes"}}, "after continue", head);
    } else if (t.starts_with("/large/")) {
        out = make_response(200, {}, pattern(number_after(t, "/large/")), head);
    } else if (t.starts_with("/stream/")) {
        out = make_response(200, {{"Connection", "close"}}, pattern(number_after(t, "/stream/")), head, false);
        keep = false;
    } else if (t.starts_with("/chunked/") || t == "/chunked-hang") {
        // Chunks written one at a time, a few milliseconds apart, so the client sees them
        // arrive separately; /chunked-hang sends one and then waits for the client to leave.
        const bool hang = t == "/chunked-hang";
        const std::size_t n = hang ? 1 : number_after(t, "/chunked/");
        auto writing_head = s.write_all(
            std::string_view("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"),
            st);
        if (!co_await std::move(writing_head)) co_return false;
        for (std::size_t i = 0; i < n; ++i) {
            const std::string line = fmt::format("line {}\n", i);
            const std::string chunk = fmt::format("{:x}\r\n{}\r\n", line.size(), line);
            auto writing = s.write_all(chunk, st);
            if (!co_await std::move(writing)) co_return false;
            auto sleeping = runtime::sleep(std::chrono::milliseconds(5), st);
            if (!co_await sleeping) co_return false;
        }
        if (hang) {
            std::vector<char> chunk(4096);
            for (;;) {
                auto reading = s.read_some(chunk, st);
                auto r = co_await std::move(reading);
                if (!r) co_return false;
                if (*r == 0) {
                    ++stats.peer_closes;
                    co_return false;
                }
            }
        }
        out = "0\r\n\r\n";
    } else if (t == "/close") {
        out = make_response(200, {{"Connection", "close"}}, "bye", head);
        keep = false;
    } else if (t == "/quiet-close") {
        out = make_response(200, {}, "bye", head);
        keep = false;
    } else {
        out = make_response(404, {}, "no such test path", head);
    }

    auto writing = s.write_all(out, st);
    auto w = co_await std::move(writing);
    if (!w) co_return false;
    co_return keep;
}

} // namespace skiff::test
