// One client connection of the Postgres wire server, and the state the server shares with its
// connections (the cancel registry). Private to src/pgwire.
#pragma once

#include <skiff/pgwire/backend.hpp>
#include <skiff/pgwire/codec.hpp>
#include <skiff/pgwire/server.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

namespace skiff::pgwire::detail {

class connection;

// DataRows are coalesced up to this many bytes before a write: one syscall per ~64 KiB, not per row.
inline constexpr std::size_t flush_threshold = 64 * 1024;

struct server_state {
    server_config cfg;
    backend* engine = nullptr;
    runtime::tcp_listener listener;
    runtime::socket_address bound;
    runtime::gate connections{"pgwire connections"};
    server_stats stats;
    // Connections past startup, by process id, for CancelRequest.
    std::unordered_map<std::int32_t, connection*> by_pid;
    std::int32_t next_pid = 1;
    std::size_t sessions = 0;
};

// Runs one accepted socket to its end (startup or cancel, then queries until Terminate, EOF,
// a protocol violation or shutdown). Spawned under server_state::connections.
runtime::task<void> serve_connection(server_state* s, runtime::tcp_stream sock);

struct prepared {
    std::string sql;
    statement_info info;
};

// An Execute with a row limit runs the statement to its end and keeps the rows past the limit
// here, for the next Executes (PortalSuspended until they are gone). Bounded by
// max_suspended_bytes: the backend interface streams and cannot pause between Executes.
inline constexpr std::size_t max_suspended_bytes = 64u << 20;

struct suspended_rows {
    std::vector<row> rows;
    std::size_t next = 0; // first row not sent yet
    std::size_t bytes = 0;
    std::string tag;      // the statement's CommandComplete tag, once it completed
};

struct portal {
    std::string sql;
    std::vector<value> params;
    std::vector<column_desc> columns;
    bool described = false; // the client already has the RowDescription
    std::optional<suspended_rows> rest;
};

class connection {
public:
    connection(server_state* s, runtime::tcp_stream sock);
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    runtime::task<void> run();

    // CancelRequest from another connection: stops the running query, if any, when the secret
    // matches. True when a query was running.
    bool cancel(std::int32_t secret) noexcept;

private:
    friend class query_writer;
    struct owned_frame {
        char type = 0;
        std::string body;
    };
    enum class startup_outcome { ready, closed };

    runtime::task<startup_outcome> startup();
    runtime::task<void> handle_cancel_request(const codec::startup_message& m);
    // Reads until one typed message is complete; nullopt when the connection should end
    // (EOF, shutdown, or a framing violation already answered).
    runtime::task<std::optional<owned_frame>> next_frame();
    // Appends more input; false on EOF, error or stop.
    runtime::task<bool> read_more(std::stop_token st);
    runtime::task<bool> flush();
    // Sends a FATAL error and ends the connection after it.
    runtime::task<void> fatal(sql_error e);
    runtime::task<void> protocol_violation(std::string message);

    // Per message type (extended.cpp).
    runtime::task<void> on_query(std::string sql);
    runtime::task<void> on_parse(codec::parse_message m);
    runtime::task<void> on_bind(codec::bind_message m);
    void on_describe(const codec::describe_message& m);
    runtime::task<void> on_execute(codec::execute_message m);
    runtime::task<void> resume_portal(portal& p, std::size_t max_rows);
    void on_close(const codec::describe_message& m);
    void on_sync();
    // An ErrorResponse; in the extended protocol also the start of skip-until-Sync.
    void send_error(const sql_error& e, bool extended);
    bool ended_by_connection() const noexcept { return _conn_stop.stop_requested(); }

    // Runs a backend call while watching the socket for EOF (the client went away), so the
    // query is cancelled instead of running for nobody.
    template <typename T>
    runtime::task<T> guarded(runtime::task<T> call);
    runtime::task<void> watch_eof(std::stop_token st);

    server_state* _s;
    runtime::tcp_stream _sock;
    std::string _in;
    std::size_t _in_pos = 0;
    std::string _out;
    std::stop_source _conn_stop; // shutdown, EOF or a failed write: the connection is over
    std::stop_source* _query = nullptr; // the running backend call's source, for CancelRequest
    std::unique_ptr<session> _session;
    std::int32_t _pid = 0;
    std::int32_t _secret = 0;
    bool _registered = false;
    bool _eof = false;
    bool _terminate = false;
    bool _skip_until_sync = false;
    std::map<std::string, prepared> _statements;
    std::map<std::string, portal> _portals;
};

} // namespace skiff::pgwire::detail
