// One Kafka connection: requests are read ahead and handled concurrently, and answered
// strictly in the order they arrived (the protocol matches responses by order as much as by
// correlation id). The reader stops taking new requests at max_inflight_requests unanswered
// ones, so a client that never reads cannot make the broker buffer without bound.
//
// Handlers start in arrival order and every handler issues its cross-core work before its
// first suspension, so two produce requests of one connection reach a partition's core in
// the order they were sent (idempotent producers pipeline up to five).
#include "connection.hpp"
#include "handlers.hpp"

#include <skiff/core/log.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/tls/any_stream.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <deque>

namespace skiff::broker {

namespace {

struct pending {
    runtime::semaphore::units unit;  // of conn_state::inflight, returned once answered
    runtime::semaphore::units budget; // of conn_state::inflight_bytes, likewise
    std::optional<std::string> bytes;
    bool done = false;
    bool close_after = false;
};

struct conn_state {
    shard* sh = nullptr;
    tls::any_stream stream;
    conn_info info;
    std::string peer;
    std::deque<std::shared_ptr<pending>> queue;
    runtime::semaphore progress{0, "conn-progress"};
    runtime::semaphore inflight{64, "conn-inflight"};
    // Request bytes read but not answered (broker_config::max_inflight_request_bytes), however
    // many requests it pipelines; a larger request waits until the connection has none pending.
    runtime::semaphore inflight_bytes{64u << 20, "conn-inflight-bytes"};
    runtime::gate handlers{"conn-handlers"};
    std::stop_source stop; // ends the reader: peer gone, write failure, protocol error, shutdown
    bool reader_done = false;

    conn_state(std::size_t max_inflight, std::size_t max_bytes)
        : inflight(max_inflight, "conn-inflight"), inflight_bytes(max_bytes, "conn-inflight-bytes") {}
};

std::string host_of(const sockaddr_storage& ss) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
        inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    } else if (ss.ss_family == AF_INET6) {
        auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
        inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    }
    return buf;
}

runtime::task<void> run_handler(conn_state* c, std::shared_ptr<pending> slot, std::string frame, std::size_t at) {
    try {
        auto reply = co_await handle_request(*c->sh, c->info, std::move(frame), at);
        slot->bytes = std::move(reply);
        if (c->info.close_after_answer) slot->close_after = true;
    } catch (const unserved_request& e) {
        log::warn("connection {}: {}; closing the connection, as Kafka does", c->peer, e.what());
        slot->close_after = true;
    } catch (const std::exception& e) {
        // A handler bug must not take the broker down; the connection cannot continue
        // (the client would wait for this answer forever), so it is closed.
        log::error("connection {}: request failed: {}", c->peer, e.what());
        slot->close_after = true;
    }
    slot->done = true;
    c->progress.signal(1);
}

// Kafka's sasl.server.max.receive.size: before a SASL listener's client has authenticated, a
// frame above this closes the connection (nobody unauthenticated makes the broker buffer 64 MiB).
constexpr std::size_t max_unauthenticated_frame = 512 * 1024;

std::size_t frame_limit(const conn_state& c, std::size_t configured) {
    if (c.info.needs_sasl() && !c.info.sasl.authenticated()) return std::min(configured, max_unauthenticated_frame);
    return configured;
}

// Requests at least this large are handed over in the read buffer instead of copied out.
constexpr std::size_t large_frame = 64 * 1024;

// The read buffer holds `len` bytes of data; its size beyond that is room already allocated
// and never zero-filled again: a read that returns less than asked (every read over TLS ends at
// a 16 KiB record) leaves the room for the next one instead of shrinking the string and growing
// it, zero-filled, before each read (it cost SASL_SSL ~3 CPU-s/GB in memset; docs/benchmarks.md).
runtime::task<void> reader(conn_state* c) {
    std::string buf;
    std::size_t len = 0;
    std::size_t start = 0;
    const std::size_t max_frame = c->sh->cfg().max_frame_bytes;
    auto st = c->stop.get_token();
    for (;;) {
        // Frames already buffered.
        for (;;) {
            std::span<const char> avail(buf.data() + start, len - start);
            auto size = kafka::peek_frame_size(avail, frame_limit(*c, max_frame));
            if (!size) {
                log::warn("connection {}: {}; closing it", c->peer, size.error().message);
                c->stop.request_stop();
                co_return;
            }
            if (!*size || avail.size() < kafka::size_prefix_bytes + **size) break;
            // A client over its quota was told to wait (throttle_time_ms); a client that does not
            // (or predates KIP-219) is held to it here: its next request is not read before then.
            if (auto until = c->info.muted_until; until > runtime::reactor::local().now()) {
                auto slept = co_await runtime::sleep_until(until, st);
                if (!slept) co_return;
            }
            // A large request that ends the data takes the buffer itself (a produce of
            // megabytes is then never copied here); small ones are copied out of it.
            std::string frame;
            std::size_t at = 0;
            const std::size_t end = start + kafka::size_prefix_bytes + **size;
            if (**size >= large_frame && end == len) {
                at = start + kafka::size_prefix_bytes;
                buf.resize(len); // shrinking writes nothing
                frame = std::move(buf);
                buf = std::string();
                len = 0;
                start = 0;
            } else {
                frame.assign(avail.data() + kafka::size_prefix_bytes, **size);
                start = end;
            }
            auto unit = co_await c->inflight.acquire(1, st);
            if (!unit) co_return;
            const std::size_t need = std::min(std::max<std::size_t>(frame.size() - at, 1), c->inflight_bytes.capacity());
            auto budget = co_await c->inflight_bytes.acquire(need, st);
            if (!budget) co_return;
            auto slot = std::make_shared<pending>();
            slot->unit = std::move(*unit);
            slot->budget = std::move(*budget);
            c->queue.push_back(slot);
            auto spawned = c->handlers.spawn(run_handler(c, slot, std::move(frame), at));
            if (!spawned) {
                slot->done = true;
                slot->close_after = true;
            }
        }
        if (start > 0 && (start == len || start > (1u << 20))) {
            std::memmove(buf.data(), buf.data() + start, len - start);
            len -= start;
            start = 0;
        }
        // Read more: at least 64 KiB of room, more when a large frame is announced. The rest of
        // a large frame is read exactly, so that it ends the data (and moves, uncopied, to its
        // handler) even when the client pipelines the next request behind it.
        std::size_t want = 64 * 1024;
        if (len - start >= kafka::size_prefix_bytes) {
            auto size = kafka::peek_frame_size(std::span<const char>(buf.data() + start, len - start),
                                               frame_limit(*c, max_frame));
            if (size && *size) {
                const std::size_t rest = kafka::size_prefix_bytes + **size - (len - start);
                want = **size >= large_frame ? rest : std::max(want, rest);
            }
        }
        if (buf.size() < len + want) buf.resize(len + want);
        auto n = co_await c->stream.read_some(std::span<char>(buf.data() + len, want), st);
        if (!n || *n == 0) {
            if (!n && !runtime::is_cancelled(n.error())) {
                log::debug("connection {}: read failed: {}", c->peer, n.error().message());
            }
            if (len > start) log::debug("connection {}: closed with a partial request", c->peer);
            co_return;
        }
        len += *n;
    }
}

runtime::task<void> writer(conn_state* c) {
    std::string out;
    for (;;) {
        bool close = false;
        while (!c->queue.empty() && c->queue.front()->done) {
            auto& slot = *c->queue.front();
            if (slot.bytes) {
                // The common case, one answer ready, is written without a copy.
                if (out.empty()) {
                    out = std::move(*slot.bytes);
                } else {
                    out += *slot.bytes;
                }
            }
            close = close || slot.close_after;
            c->queue.pop_front();
            if (close) break;
        }
        if (!out.empty()) {
            auto w = co_await c->stream.write_all(out);
            out.clear();
            if (!w) {
                log::debug("connection {}: write failed: {}", c->peer, w.error().message());
                close = true;
            }
        }
        if (close) {
            c->stop.request_stop();
            // Nothing more will be written: let the remaining handlers finish unanswered.
            c->queue.clear();
            co_return;
        }
        if (c->queue.empty() && c->reader_done) co_return;
        auto u = co_await c->progress.acquire(1);
        if (u) u->consume();
    }
}

runtime::task<void> read_then_mark(conn_state* c) {
    co_await reader(c);
    c->reader_done = true;
    c->progress.signal(1);
}

} // namespace

namespace {
// SSL and SASL_SSL listeners: the TLS handshake, on this connection's own coroutine so a slow
// or hostile client never holds up the accept loop. A client certificate names the principal
// (SSL; on SASL_SSL the SASL user does). nullopt: refused, counted and logged without secrets.
runtime::task<std::optional<tls::any_stream>> open_stream(shard& sh, runtime::tcp_stream sock,
                                                      const listener_config* listener, conn_info& info,
                                                      const std::string& peer) {
    if (!listener || !uses_tls(listener->protocol)) co_return tls::any_stream(std::move(sock));
    auto ctx = sh.shared->tls->current();
    auto st = sh.stop.get_token();
    auto s = co_await tls::stream::accept(std::move(ctx), std::move(sock), st, sh.cfg().tls_handshake_timeout);
    if (!s) {
        const auto code = s.error();
        const bool not_tls = code == tls::errc::not_tls;
        sh.tls_handshake_failures[not_tls ? 1 : 0].inc();
        if (!runtime::is_cancelled(code)) {
            log::warn("connection {} to the {} listener: TLS handshake failed: {}", peer, listener->name(),
                      code.message());
        }
        co_return std::nullopt;
    }
    if (const auto& p = s->peer_principal()) info.principal = "User:" + *p;
    log::debug("connection {}: {} {} as {}", peer, s->protocol(), s->cipher(), info.principal);
    co_return tls::any_stream(std::move(*s));
}
} // namespace

runtime::task<void> serve_connection(shard& sh, runtime::tcp_stream sock, const listener_config* listener) {
    conn_state c(sh.cfg().max_inflight_requests, std::max<std::size_t>(sh.cfg().max_inflight_request_bytes, 1));
    c.sh = &sh;
    c.info.listener = listener;
    {
        sockaddr_storage local{};
        socklen_t len = sizeof local;
        if (::getsockname(sock.fd(), reinterpret_cast<sockaddr*>(&local), &len) == 0) {
            c.info.local_host = host_of(local);
            c.info.local_port = local.ss_family == AF_INET
                                    ? ntohs(reinterpret_cast<sockaddr_in*>(&local)->sin_port)
                                    : ntohs(reinterpret_cast<sockaddr_in6*>(&local)->sin6_port);
        }
        auto peer = sock.peer_address();
        c.peer = peer.to_string();
        c.info.client_host = "/" + host_of(peer.storage);
    }
    ++sh.open_connections;
    auto opened = co_await open_stream(sh, std::move(sock), listener, c.info, c.peer);
    if (!opened) {
        --sh.open_connections;
        co_return;
    }
    c.stream = std::move(*opened);
    // Shutdown stops the reader; requests already read are still answered.
    std::stop_callback on_shutdown(sh.stop.get_token(), [&c] { c.stop.request_stop(); });
    co_await runtime::when_all(read_then_mark(&c), writer(&c));
    co_await c.handlers.close();
    co_await c.stream.shutdown();
    --sh.open_connections;
    c.stream.close();
}

} // namespace skiff::broker
