// The accept loop of the Postgres wire server; connections are in connection.cpp.
#include "connection.hpp"

#include <skiff/core/log.hpp>
#include <skiff/pgwire/server.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <chrono>

namespace skiff::pgwire {

using namespace std::chrono_literals;

struct server::impl : detail::server_state {};

server::server(std::unique_ptr<impl> i) : _impl(std::move(i)) {}
server::~server() = default;

result<std::unique_ptr<server>, std::string> server::create(server_config cfg, backend& engine) {
    auto addr = runtime::socket_address::parse(cfg.addr);
    if (!addr) return failure{fmt::format("pgwire: bad listen address {}: {}", cfg.addr, addr.error())};
    auto l = runtime::tcp_listener::listen(*addr);
    if (!l) return failure{fmt::format("pgwire: cannot listen on {}: {}", cfg.addr, l.error())};
    auto im = std::make_unique<impl>();
    im->cfg = std::move(cfg);
    im->engine = &engine;
    im->listener = std::move(*l);
    im->bound = im->listener.local_address();
    return std::unique_ptr<server>(new server(std::move(im)));
}

runtime::socket_address server::local_address() const { return _impl->bound; }
const server_stats& server::stats() const noexcept { return _impl->stats; }

runtime::task<void> server::serve(std::stop_token st) {
    impl& im = *_impl;
    // Sessions are capped at startup (53300, after the startup packet, so that CancelRequests
    // still get through when the server is full); this cap bounds the sockets that have not
    // finished startup yet, which the startup timeout reaps.
    const std::size_t hard_cap = im.cfg.max_connections * 2 + 16;
    while (!st.stop_requested()) {
        auto c = co_await im.listener.accept(st);
        if (!c) {
            if (runtime::is_cancelled(c.error()) || st.stop_requested()) break;
            // EMFILE, ENFILE, ENOBUFS...: back off instead of spinning on the error.
            log::warn("pgwire: accept on {} failed: {}", im.bound.to_string(), c.error().message());
            auto slept = co_await runtime::sleep(50ms, st);
            (void)slept;
            continue;
        }
        ++im.stats.connections;
        if (im.connections.count() >= hard_cap) {
            c->close();
            continue;
        }
        auto spawned = im.connections.spawn(detail::serve_connection(&im, std::move(*c)));
        (void)spawned; // the gate only closes below
    }
    im.listener.close();
    // Closing the gate fires its stop token: running queries are cancelled, idle reads end.
    co_await im.connections.close();
}

} // namespace skiff::pgwire
