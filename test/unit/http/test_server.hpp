// A small HTTP/1.1 server for the http client tests, running on the test's own reactor
// (127.0.0.1, an ephemeral port). It serves keep-alive requests with Content-Length bodies;
// the path picks the behaviour:
//
//   /hello            200 "hello world"
//   /echo             200, body = request body; x-method, x-expect, x-content-length headers.
//                     Answers "Expect: 100-continue" with an interim 100 before reading.
//   /ignore-expect    like /echo, but never sends the interim 100 the client asked for
//   /reqheaders       200, body = the raw request head as received
//   /headers          200 with mixed-case, repeated and padded header fields
//   /n/<anything>     200, body = the request target
//   /status/<code>    that status, body "status <code>"
//   /not-modified     304 with "Content-Length: 5000" and (correctly) no body
//   /delay/<ms>       200 "late" after <ms> milliseconds
//   /hang             reads until the client closes; never answers
//   /truncate         announces 1000 body bytes, sends 10, closes
//   /drop             closes without answering
//   /continue         an unsolicited "100 Continue" (with a header), then 200
//   /large/<n>        200 with n pattern bytes (Content-Length)
//   /stream/<n>       200 with n pattern bytes, no Content-Length, ended by closing
//   /chunked/<n>      200, chunked: n chunks "line <i>\n" written 5 ms apart
//   /chunked-hang     200, chunked: one chunk "line 0\n", then waits for the client to close
//   /close            200 with "Connection: close", then closes
//   /quiet-close      200 keep-alive response, then closes without saying so
//
// HEAD gets the same head as GET and no body. Counters let tests see what the server saw.
#pragma once

#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::test {

// Deterministic bytes covering all 256 values (zeros included) for byte-exact checks.
inline char pattern_byte(std::size_t i) noexcept { return static_cast<char>((i * 131 + i / 4093) & 0xff); }
std::string pattern(std::size_t n);

class http_test_server {
public:
    struct counters {
        int accepts = 0;     // connections accepted
        int requests = 0;    // complete requests parsed
        int peer_closes = 0; // connections on which the client closed first (read saw EOF)
        int hangs = 0;       // /hang requests received
    };

    // Listens and starts accepting. Call on the reactor thread; aborts if it cannot listen.
    static std::unique_ptr<http_test_server> start();
    ~http_test_server();

    std::string url(std::string_view path) const;
    std::uint16_t port() const noexcept { return _port; }
    // Stops accepting, cancels every connection handler, waits for them. Call before destroying.
    runtime::task<void> stop();

    counters stats;

    struct parsed_request;

private:
    explicit http_test_server(runtime::tcp_listener l);
    runtime::task<void> accept_loop();
    runtime::task<void> serve(runtime::tcp_stream s);
    runtime::task<bool> respond(runtime::tcp_stream& s, const parsed_request& req, std::string& buf,
                                std::stop_token st);

    runtime::tcp_listener _listener;
    std::uint16_t _port = 0;
    runtime::gate _gate{"http-test-server"};
};

} // namespace skiff::test
