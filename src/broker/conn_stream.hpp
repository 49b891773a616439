// A Kafka connection's byte stream: the accepted TCP socket, or TLS over it (SSL and SASL_SSL
// listeners). The connection's reader and writer use it concurrently, which both kinds allow.
// Private to the broker module; used on the core that accepted the socket.
#pragma once

#include <skiff/runtime/socket.hpp>
#include <skiff/tls/stream.hpp>

#include <optional>
#include <span>
#include <stop_token>

namespace skiff::broker {

class conn_stream {
public:
    conn_stream() = default;
    explicit conn_stream(runtime::tcp_stream s) : _tcp(std::move(s)) {}
    explicit conn_stream(tls::stream s) : _tls(std::move(s)) {}

    runtime::task<result<std::size_t>> read_some(std::span<char> buf, std::stop_token st = {}) {
        return _tls ? _tls->read_some(buf, std::move(st)) : _tcp.read_some(buf, std::move(st));
    }
    runtime::task<result<void>> write_all(std::span<const char> buf, std::stop_token st = {}) {
        return _tls ? _tls->write_all(buf, std::move(st)) : _tcp.write_all(buf, std::move(st));
    }
    // TLS: close_notify before the socket closes (Kafka's SslTransportLayer.close does), so a
    // client sees an orderly end rather than "unexpected eof". Best effort, bounded by the tls
    // module (1 s). Nothing for plain TCP.
    runtime::task<void> shutdown() {
        if (_tls) co_await _tls->shutdown();
    }
    void close() noexcept {
        if (_tls) _tls->close();
        _tcp.close();
    }
    bool is_tls() const noexcept { return _tls.has_value(); }
    const tls::stream* tls_stream() const noexcept { return _tls ? &*_tls : nullptr; }

private:
    runtime::tcp_stream _tcp;
    std::optional<tls::stream> _tls;
};

} // namespace skiff::broker
