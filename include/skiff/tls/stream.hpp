// tls::stream: a TLS connection over a runtime::tcp_stream, driven by the reactor. OpenSSL
// only ever sees two memory BIOs; the stream moves ciphertext between them and the socket with
// ring operations, so no OpenSSL call blocks and no thread is involved.
//
// One read_some and one write_all may be in flight at the same time (the broker's reader and
// writer of a connection): a reader waiting for bytes never holds up a writer and a writer
// waiting for the socket never holds up a reader. Two concurrent reads, or two concurrent
// writes, are not allowed.
//
// Errors: tls::errc for TLS outcomes, runtime::errc::cancelled when the stop_token fires
// (never success), runtime::errc::timed_out for a handshake past its timeout, errno codes for
// socket failures. Use a stream on the reactor thread that created it.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/tls/context.hpp>
#include <skiff/tls/errc.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>

namespace skiff::tls {

class stream {
public:
    stream() = default;
    stream(stream&&) noexcept;
    stream& operator=(stream&&) noexcept;
    ~stream();

    // Server side: runs the handshake on an accepted socket with a server context. Fails with
    // errc::not_tls when the first byte is not a TLS handshake record, errc::certificate_* when
    // a client certificate is missing or invalid, errc::closed when the peer leaves mid-way,
    // runtime::errc::timed_out after handshake_timeout, cancelled when `st` fires. On failure
    // the socket is closed (after a best-effort alert).
    static runtime::task<result<stream>> accept(std::shared_ptr<const context> ctx, runtime::tcp_stream sock,
                                                std::stop_token st, std::chrono::milliseconds handshake_timeout);
    // Client side, with a client context (its server_name is checked and sent as SNI).
    static runtime::task<result<stream>> connect(std::shared_ptr<const context> ctx, runtime::tcp_stream sock,
                                                 std::stop_token st, std::chrono::milliseconds handshake_timeout);

    // Decrypted bytes, at most buf.size(); 0 when the peer closed (close_notify, or a plain EOF
    // — Kafka clients often skip close_notify). Cancellable; a cancelled read loses no data.
    runtime::task<result<std::size_t>> read_some(std::span<char> buf, std::stop_token st = {});
    // Encrypts all of buf and sends it. Cancellable, but a write cancelled while sending leaves
    // a partial record on the wire: later writes then fail with errc::closed.
    runtime::task<result<void>> write_all(std::span<const char> buf, std::stop_token st = {});
    // Sends close_notify and half-closes the socket, best effort (gives up after `st` or 1 s).
    // Call once the writer is done; the reader may still run and will see the peer's reply.
    runtime::task<void> shutdown(std::stop_token st = {});
    // TLS 1.3: asks for a key update, sent ahead of the next write's data. errc::protocol_error
    // on TLS 1.2 or a stream that is not established.
    result<void> request_key_update();

    // Closes the socket at once. Await in-flight operations first (runtime::tcp_stream::close).
    void close() noexcept;
    bool is_open() const noexcept;
    int fd() const noexcept;
    runtime::socket_address peer_address() const;

    // The verified peer certificate's subject as Java's X500Principal.getName() prints it
    // ("CN=alice,OU=eng,O=acme"); nullopt when the peer sent no certificate.
    const std::optional<std::string>& peer_principal() const noexcept;
    // For logs: "TLSv1.3", "TLS_AES_256_GCM_SHA384".
    std::string protocol() const;
    std::string cipher() const;
    // The context this connection started with (kept alive across reloads).
    const std::shared_ptr<const context>& ctx() const noexcept;

    struct impl;

private:
    explicit stream(std::unique_ptr<impl> i) noexcept;
    static runtime::task<result<stream>> handshake(std::unique_ptr<impl> s, std::stop_token st,
                                                   std::chrono::milliseconds timeout);
    std::unique_ptr<impl> _impl;
};

} // namespace skiff::tls
