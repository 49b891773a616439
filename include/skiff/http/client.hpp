// HTTP client: libcurl multi driven by this core's reactor.
//
// One client (one CURLM) per core. curl's socket callback records which fds and directions
// curl wants; the reactor arms one-shot io_uring POLL_ADDs for them; curl's timer callback
// moves a single reactor timer. Completions resume the awaiting coroutine. No thread pool,
// no blocking call, and libcurl is never called from inside its own callbacks. Keep-alive
// connections are pooled by the multi handle and reused across requests.
//
// Use a client only on the reactor thread that created it.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/task.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::http {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct request {
    std::string method = "GET"; // GET, PUT, HEAD, DELETE, POST
    std::string url;            // fully encoded; sent as is
    header_list headers;        // sent in this order, exactly as given
    // Request body. The caller keeps the bytes alive until the request completes.
    std::span<const char> body;
    // Whole-request deadline (connect + send + wait + receive). Every request has one, except
    // a streaming request (body_sink set) with timeout 0: it lives until the server ends the
    // body or the caller cancels (connect_timeout and TCP keep-alive probes still hold).
    std::chrono::milliseconds timeout{30000};
    std::chrono::milliseconds connect_timeout{5000};
    // Streaming: when set, the body of a 2xx response goes to this function piece by piece as
    // it arrives instead of into response::body (which stays empty), and max_response_bytes
    // does not apply to it: the sink bounds what it keeps. Bodies of other statuses (errors)
    // are collected and limited as usual. It runs inside libcurl's write callback: it must not
    // use the client or resume a coroutine (reactor::schedule, e.g. through a oneshot, is
    // fine). Returning false aborts the transfer: transport_error with CURLE_WRITE_ERROR.
    std::function<bool(std::string_view)> body_sink;
};

struct response {
    int status = 0;
    header_list headers; // names lowercased, in arrival order
    std::string body;

    // First header with this (lowercase) name, if any.
    const std::string* header(std::string_view lower_name) const noexcept;
};

// A transfer that produced no HTTP response (or was cut short). curl_code is the CURLcode;
// `cancelled` is set when the caller's stop_token fired — never reported as success.
struct transport_error {
    int curl_code = 0;
    std::string message; // curl's explanation, no credentials
    bool cancelled = false;
    bool timed_out = false;
};

struct client_config {
    // Pooled keep-alive connections kept per host.
    long max_host_connections = 0;     // 0: unlimited
    long max_total_connections = 0;    // 0: unlimited
    long max_connects_cache = 64;
    std::string ca_file;               // empty: the system CA store
    bool verify_peer = true;
    // A response body larger than this fails the request (transport_error with curl_code
    // CURLE_FILESIZE_EXCEEDED) instead of growing memory without bound on a hostile or broken
    // server: rejected at the header when Content-Length announces more, otherwise as soon
    // as the received bytes pass it. HEAD, 204 and 304 responses are not limited (no body).
    std::size_t max_response_bytes = std::size_t{256} << 20;
    // HTTP proxy URL. Empty: no proxy at all — the http_proxy/https_proxy environment is
    // ignored, so an inherited variable can never reroute S3 traffic (or loopback tests).
    std::string proxy;
};

struct client_stats {
    std::uint64_t requests = 0;
    std::uint64_t connections_opened = 0; // new TCP connections (not reused)
    std::uint64_t transport_errors = 0;
    std::uint64_t cancelled = 0;
    std::size_t in_flight = 0;
};

// Lifetime contract: destroy a client on its reactor thread, while that reactor still exists,
// and only after every send() has finished or had its stop_token signalled (a cancelled
// send() may resume after the client is gone: it touches only its own frame). Debug builds
// abort when requests are still in flight; release builds log an error and resolve them as
// cancelled. Polls the ring still holds for the client's sockets are cancelled and their
// state outlives the client until their completions arrive.
class client {
public:
    // Must be called on a reactor thread; the client belongs to that reactor.
    explicit client(client_config cfg = {});
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    // Sends one request and returns its response (any status) or a transport error.
    // Cancellable through `st`: the transfer is removed from the multi handle and the
    // result is transport_error{cancelled=true}.
    // `st` must be signalled on this reactor's thread (as for every runtime operation). A
    // token already stopped returns cancelled without touching the network. A timeout gives
    // transport_error{timed_out=true, curl_code=CURLE_OPERATION_TIMEDOUT}. Requests with a body
    // other than POST stream it through curl's read callback without copying; curl's
    // automatic "Expect: 100-continue" is suppressed unless the caller passes an Expect header.
    runtime::task<result<response, transport_error>> send(request req, std::stop_token st = {});

    const client_stats& stats() const noexcept;

    class impl;

private:
    std::unique_ptr<impl> _impl;
};

namespace detail {
// For tests: poll states on this thread whose client is gone and whose completion the ring
// has not delivered yet (they free themselves when it arrives).
std::size_t orphaned_sockets() noexcept;
} // namespace detail

} // namespace skiff::http
