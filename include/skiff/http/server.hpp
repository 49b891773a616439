// A small HTTP/1.1 server on the reactor (runtime::tcp_listener), for the observability
// endpoints and test peers — not a general web server.
//
// What it does: keep-alive (HTTP/1.1 default, HTTP/1.0 with "Connection: keep-alive") and
// pipelined requests, request bodies framed by Content-Length, HEAD on every GET route,
// limits on the request head and body, an idle/read deadline per request and a cap on
// connections. What it answers on bad input (and then closes the connection, since the framing
// can no longer be trusted): 400 for a malformed request, 413 for a body over the limit,
// 431 for a head over the limit, 501 for Transfer-Encoding (chunked request bodies are not
// supported), 505 for a version other than HTTP/1.0 or 1.1. Unknown paths get 404, a known
// path with another method 405 with an Allow header; the connection stays open for both. A
// handler that throws gives 500. Garbage never crashes the server.
//
// Every connection runs under a runtime::gate; serve() returns once its stop token fired
// and every connection has finished (in-flight requests are cut at their next read or write).
// Use a server on the reactor thread that created it.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/tls/context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::http {

struct server_config {
    std::string addr = "127.0.0.1:0"; // numeric host:port; port 0 picks a free one
    std::size_t max_head_bytes = 16 * 1024;  // request line + headers
    std::size_t max_body_bytes = 64 * 1024;
    std::size_t max_connections = 128;       // beyond: 503 and close
    // Deadline for receiving one whole request, counted from when the server starts waiting
    // for it (so it is also the keep-alive idle timeout) and for sending its answer.
    runtime::duration request_timeout = std::chrono::seconds(30);
    // HTTPS: every connection starts with a TLS handshake (bounded by request_timeout) with the
    // holder's current certificate; a reload applies to new connections. Null: plain HTTP.
    std::shared_ptr<tls::context_holder> tls;
};

class server {
public:
    struct request {
        std::string method;  // as sent (methods are case-sensitive)
        std::string target;  // path + optional "?query", as sent
        std::string path;    // target before '?'
        std::string query;   // after '?', still percent-encoded
        int version_minor = 1; // HTTP/1.<minor>
        std::vector<std::pair<std::string, std::string>> headers; // names lowercased
        std::size_t content_length = 0; // from the Content-Length header (validated)
        std::string body;

        // First header with this lowercase name.
        const std::string* header(std::string_view lower_name) const noexcept;
        // Percent-decoded query parameter (`+` is a space), or nullopt.
        std::optional<std::string> query_param(std::string_view name) const;
    };

    struct response {
        int status = 200;
        std::string content_type = "text/plain; charset=utf-8";
        std::string body;
        std::vector<std::pair<std::string, std::string>> headers; // extra headers

        response() = default;
        response(int s, std::string ct, std::string b)
            : status(s), content_type(std::move(ct)), body(std::move(b)) {}
    };

    // A handler gets the request by reference (valid until its task finishes). Handlers that
    // are coroutine lambdas must not capture: keep the lambda a plain function returning the
    // task of a coroutine that takes its state as parameters.
    using handler = std::function<runtime::task<response>(const request&)>;

    struct stats {
        std::uint64_t connections = 0;  // accepted
        std::uint64_t requests = 0;     // answered (any status)
        std::uint64_t bad_requests = 0; // 400/413/431/501/505
        std::uint64_t rejected = 0;     // connections turned away over max_connections
        std::uint64_t tls_failures = 0; // HTTPS: handshakes refused (plaintext, bad certificates)
        std::size_t open = 0;
    };

    // Binds the listening socket. The error is one sentence ("cannot listen on
    // 127.0.0.1:9644 for HTTP: Address already in use").
    static result<std::unique_ptr<server>, std::string> listen(server_config cfg = {});
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    // Adds a route for an exact path. Call before serve() (or between requests).
    void route(std::string method, std::string path, handler h);

    // Accepts and serves connections until `st` fires (signal it on this reactor's thread),
    // then waits for every connection to finish. Call once.
    runtime::task<void> serve(std::stop_token st);

    runtime::socket_address local_address() const;
    const stats& counters() const noexcept { return _stats; }

    // Parsing, exposed for tests: `head` is the request line and header lines (CRLF or LF),
    // up to and including the empty line. Returns 0 when it parsed, else the status to answer
    // (400, 431, 501, 505) with the reason in `why`.
    static int parse_head(std::string_view head, request& out, std::string* why = nullptr);
    static std::string_view reason(int status) noexcept;

    class impl;

private:
    server() = default;
    std::unique_ptr<impl> _impl;
    stats _stats;
};

} // namespace skiff::http
