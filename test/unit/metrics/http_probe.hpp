// A raw HTTP/1.1 client over runtime::tcp_stream for server tests: writes exactly the bytes a
// test gives and parses responses itself, so a client library cannot hide a server bug.
#pragma once

#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/runtime/timer.hpp>

#include <charconv>
#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace skiff::test {

struct probe_response {
    int status = 0;
    std::map<std::string, std::string> headers; // lowercase names
    std::string body;
    bool ok = false; // a complete response was read
    std::string header(const std::string& k) const {
        auto it = headers.find(k);
        return it == headers.end() ? std::string{} : it->second;
    }
};

inline std::string lower_ascii(std::string s) {
    for (auto& c : s)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return s;
}

// Reads one response; `buf` keeps bytes that arrived past it (pipelining). HEAD answers have
// no body whatever Content-Length says.
inline runtime::task<probe_response> read_response(runtime::tcp_stream& s, std::string& buf, bool head = false) {
    using namespace std::chrono_literals;
    probe_response r;
    runtime::deadline_scope scope(runtime::reactor::local().now() + 10s);
    char chunk[16384];
    std::size_t end = std::string::npos;
    while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        auto n = co_await s.read_some(chunk, scope.token());
        if (!n || *n == 0) co_return r;
        buf.append(chunk, *n);
    }
    const std::string head_text = buf.substr(0, end);
    buf.erase(0, end + 4);
    // Status line.
    const auto eol = head_text.find("\r\n");
    const std::string status_line = head_text.substr(0, eol);
    if (status_line.size() < 12 || status_line.rfind("HTTP/1.1 ", 0) != 0) co_return r;
    r.status = std::stoi(status_line.substr(9, 3));
    std::size_t pos = eol == std::string::npos ? head_text.size() : eol + 2;
    while (pos < head_text.size()) {
        auto next = head_text.find("\r\n", pos);
        if (next == std::string::npos) next = head_text.size();
        const std::string line = head_text.substr(pos, next - pos);
        const auto colon = line.find(':');
        if (colon != std::string::npos) {
            std::string v = line.substr(colon + 1);
            while (!v.empty() && v.front() == ' ') v.erase(0, 1);
            r.headers[lower_ascii(line.substr(0, colon))] = v;
        }
        pos = next + 2;
    }
    if (head) {
        r.ok = true;
        co_return r;
    }
    auto cl = r.headers.find("content-length");
    if (cl == r.headers.end()) co_return r;
    const std::size_t len = std::stoul(cl->second);
    while (buf.size() < len) {
        auto n = co_await s.read_some(chunk, scope.token());
        if (!n || *n == 0) co_return r;
        buf.append(chunk, *n);
    }
    r.body = buf.substr(0, len);
    buf.erase(0, len);
    r.ok = true;
    co_return r;
}

// True when the server closed the connection (EOF) within a second and sent nothing more.
inline runtime::task<bool> closed_by_peer(runtime::tcp_stream& s, std::string& buf) {
    using namespace std::chrono_literals;
    if (!buf.empty()) co_return false;
    runtime::deadline_scope scope(runtime::reactor::local().now() + 2s);
    char c[256];
    auto n = co_await s.read_some(c, scope.token());
    co_return n.has_value() && *n == 0;
}

// One request on a fresh connection; the whole exchange.
inline runtime::task<probe_response> probe(runtime::socket_address addr, std::string raw, bool head = false) {
    probe_response failed;
    auto c = co_await runtime::tcp_stream::connect(addr);
    if (!c) co_return failed;
    auto w = co_await c->write_all(raw);
    if (!w) co_return failed;
    std::string buf;
    auto r = co_await read_response(*c, buf, head);
    co_return r;
}

inline std::string get_request(const std::string& target, const std::string& extra = {}) {
    return "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + "\r\n";
}

} // namespace skiff::test
