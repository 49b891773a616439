// A Postgres wire protocol (v3) server on the reactor, for `skiff sql`. It speaks the
// protocol; the SQL is the backend's (pgwire/backend.hpp).
//
// What it does: startup (protocol 3.0; SSLRequest and GSSENCRequest answered 'N' and the
// startup continues in plain text; no password: trust, for 127.0.0.1), the simple query
// protocol, the extended protocol (Parse/Bind/Describe/Execute/Close/Sync/Flush, named and
// unnamed statements and portals, text-format parameters and results), CancelRequest (by
// process id and secret key, from another connection), Terminate. Errors are ErrorResponse with
// a SQLSTATE; after an error in the extended protocol, messages are skipped until Sync, as
// Postgres does. Garbage (a bad length, an unknown message type, a message over the limit, a
// startup that never ends) is answered 08P01 where the framing still allows and the connection
// is closed; it never crashes or hangs the server.
//
// Use a server on the reactor thread that created it.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/pgwire/backend.hpp>
#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

namespace skiff::pgwire {

struct server_config {
    server_config() = default;
    std::string addr = "127.0.0.1:5432";        // numeric host:port; port 0 picks a free one
    std::size_t max_connections = 64;            // beyond: 53300 too_many_connections, then close
    std::size_t max_message_bytes = 1u << 20;    // a larger message is a protocol violation
    runtime::duration startup_timeout = std::chrono::seconds(10);
};

struct server_stats {
    std::uint64_t connections = 0;       // accepted
    std::uint64_t connections_open = 0;
    std::uint64_t queries = 0;           // simple-query strings and Executes
    std::uint64_t errors = 0;            // ErrorResponses sent
    std::uint64_t cancels = 0;           // CancelRequests that matched a running query
    std::uint64_t protocol_violations = 0;
};

class server {
public:
    // Binds the listening socket now (so the caller can print the port); the error says why not.
    static result<std::unique_ptr<server>, std::string> create(server_config cfg, backend& engine);
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    runtime::socket_address local_address() const;
    // Accepts and serves until `st` fires, then cancels running queries, closes every
    // connection and returns once all have finished.
    runtime::task<void> serve(std::stop_token st);
    const server_stats& stats() const noexcept;

private:
    struct impl;
    explicit server(std::unique_ptr<impl> i);
    std::unique_ptr<impl> _impl;
};

} // namespace skiff::pgwire
