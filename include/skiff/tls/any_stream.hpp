// A connection's byte stream, plain TCP or TLS over it: for servers whose listeners are
// either (the Kafka listeners, the HTTP endpoint) and clients that may speak either. A reader
// and a writer may use it concurrently, which both kinds allow. Use it on the core that made
// the socket.
#pragma once

#include <skiff/runtime/socket.hpp>
#include <skiff/tls/stream.hpp>

#include <optional>
#include <span>
#include <stop_token>

namespace skiff::tls {

class any_stream {
public:
    any_stream() = default;
    explicit any_stream(runtime::tcp_stream s) : _tcp(std::move(s)) {}
    explicit any_stream(tls::stream s) : _tls(std::move(s)) {}

    // As tcp_stream / tls::stream: 0 means the peer closed; cancellation is never success.
    runtime::task<result<std::size_t>> read_some(std::span<char> buf, std::stop_token st = {}) {
        return _tls ? _tls->read_some(buf, std::move(st)) : _tcp.read_some(buf, std::move(st));
    }
    runtime::task<result<void>> write_all(std::span<const char> buf, std::stop_token st = {}) {
        return _tls ? _tls->write_all(buf, std::move(st)) : _tcp.write_all(buf, std::move(st));
    }
    // Ends the sending direction: TLS sends close_notify first (Kafka's SslTransportLayer.close
    // does, and a client then sees an orderly end rather than "unexpected eof"; best effort,
    // bounded by the tls module at 1 s), then both half-close the socket.
    runtime::task<void> shutdown() {
        if (_tls) {
            co_await _tls->shutdown();
        } else {
            _tcp.shutdown_write();
        }
    }
    void close() noexcept {
        if (_tls) _tls->close();
        _tcp.close();
    }
    int fd() const noexcept { return _tls ? _tls->fd() : _tcp.fd(); }
    bool is_tls() const noexcept { return _tls.has_value(); }

private:
    runtime::tcp_stream _tcp;
    std::optional<tls::stream> _tls;
};

} // namespace skiff::tls
