// TLS over the ring with memory BIOs.
//
// OpenSSL reads ciphertext from `rbio` and writes ciphertext to `wbio`; both are unbounded
// memory BIOs, so SSL_* calls never block and never return WANT_WRITE. The stream moves bytes:
//
//   pull():  one recv at a time into rbio. Whoever needs bytes and finds a recv already in
//            flight waits for it to end (`progress`) instead of starting a second one.
//   flush(): everything pending in wbio goes out under `send_lock`, in order, so records
//            written by SSL_read (key update replies, alerts) and by SSL_write never interleave
//            mid-record. The lock holder loops until wbio is empty before letting go.
//
// All SSL_* calls happen between suspension points on the one reactor thread, so they are
// serialised without a lock. The reader never waits for the send lock: if a writer holds it,
// the writer sends whatever the reader produced before releasing (a reader stuck behind a
// slow send could deadlock two peers that both write large responses).
#include <skiff/tls/stream.hpp>

#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/timer.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <algorithm>
#include <climits>

namespace skiff::tls {

using namespace std::chrono_literals;
using runtime::task;

namespace {

// One TLS record's worth and then some: a recv rarely returns more on a busy connection.
// The receive buffer starts at 32 KiB per connection and doubles, up to 256 KiB, each time a
// recv fills it: a bulk producer is then read in a few large receives (fewer syscalls and
// wakeups: the kernel's share of a SASL_SSL produce was ~2.8 CPU-s/GB at 32 KiB), while the many
// idle or chatty connections keep the small one.
constexpr std::size_t recv_size = 32 * 1024;
constexpr std::size_t max_recv_size = 256 * 1024;
// Plaintext encrypted per round of write_all: large enough that a big response goes out in a
// few sends of whole 16 KiB records, small enough to bound the per-connection send buffer.
constexpr std::size_t write_chunk = 256 * 1024;

constexpr unsigned char record_handshake = 0x16; // RFC 8446 5.1 ContentType.handshake
constexpr unsigned char record_alert = 0x15;

bool has_reason(unsigned long e, std::initializer_list<int> reasons) {
    if (ERR_GET_LIB(e) != ERR_LIB_SSL) return false;
    return std::find(reasons.begin(), reasons.end(), ERR_GET_REASON(e)) != reasons.end();
}

// Maps a failed SSL_* call to our error; drains OpenSSL's thread-local error queue so the
// next connection on this thread does not inherit it.
std::error_code classify(int ssl_err, bool handshake) {
    std::error_code out = make_error_code(handshake ? errc::handshake_failed : errc::protocol_error);
    if (ssl_err != SSL_ERROR_SSL) {
        ERR_clear_error();
        return out;
    }
    while (unsigned long e = ERR_get_error()) {
        if (has_reason(e, {SSL_R_CERTIFICATE_VERIFY_FAILED})) {
            out = make_error_code(errc::certificate_invalid);
            break;
        }
        if (has_reason(e, {SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE, SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED})) {
            out = make_error_code(errc::certificate_required);
            break;
        }
        if (has_reason(e, {SSL_R_TLSV1_ALERT_UNKNOWN_CA, SSL_R_SSLV3_ALERT_BAD_CERTIFICATE,
                           SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN, SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED,
                           SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED, SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE})) {
            out = make_error_code(errc::certificate_rejected);
            break;
        }
    }
    ERR_clear_error();
    return out;
}

} // namespace

struct stream::impl {
    std::shared_ptr<const context> ctx;
    runtime::tcp_stream sock;
    SSL* ssl = nullptr;
    BIO* rbio = nullptr; // owned by ssl
    BIO* wbio = nullptr; // owned by ssl
    bool server = false;
    bool established = false;

    // Reading side.
    std::unique_ptr<char[]> recv_buf{new char[recv_size]}; // default-initialised: no zero fill
    std::size_t recv_cap = recv_size;
    bool reading = false;
    bool eof = false;
    std::error_code recv_error;
    std::uint64_t bytes_received = 0;
    unsigned char first_byte = 0;
    std::shared_ptr<runtime::oneshot<void>> progress = std::make_shared<runtime::oneshot<void>>();
    bool close_notify_received = false;

    // Sending side.
    runtime::semaphore send_lock{1, "tls.send"};
    std::unique_ptr<char[]> send_buf;
    std::size_t send_cap = 0;
    std::error_code write_broken;
    bool shutdown_sent = false;

    std::error_code fatal; // OpenSSL reported a fatal error: no more SSL I/O
    std::optional<std::string> principal;

    impl(std::shared_ptr<const context> c, runtime::tcp_stream s) : ctx(std::move(c)), sock(std::move(s)) {}
    ~impl() {
        if (ssl) SSL_free(ssl);
    }
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;
};

namespace {

using impl_t = stream::impl;

result<std::unique_ptr<impl_t>> make_impl(std::shared_ptr<const context> ctx, runtime::tcp_stream sock, bool server) {
    if (!ctx || ctx->is_server() != server) return errc::bad_config;
    auto s = std::make_unique<impl_t>(std::move(ctx), std::move(sock));
    s->server = server;
    s->ssl = SSL_new(s->ctx->native_handle());
    BIO* r = BIO_new(BIO_s_mem());
    BIO* w = BIO_new(BIO_s_mem());
    if (!s->ssl || !r || !w) {
        BIO_free(r);
        BIO_free(w);
        ERR_clear_error();
        return std::error_code(ENOMEM, std::system_category());
    }
    // An empty BIO means "no bytes yet" (retry), not end of stream: EOF is the socket's call.
    BIO_set_mem_eof_return(r, -1);
    BIO_set_mem_eof_return(w, -1);
    SSL_set_bio(s->ssl, r, w);
    s->rbio = r;
    s->wbio = w;
    // Idle connections give their 16 KiB record buffers back: a broker holds thousands.
    SSL_set_mode(s->ssl, SSL_MODE_RELEASE_BUFFERS);
    if (server) {
        SSL_set_accept_state(s->ssl);
    } else {
        SSL_set_connect_state(s->ssl);
        const std::string& name = s->ctx->server_name();
        if (!name.empty()) {
            unsigned char ip[16];
            const bool is_ip = inet_pton(AF_INET, name.c_str(), ip) == 1 || inet_pton(AF_INET6, name.c_str(), ip) == 1;
            int okay = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), name.c_str())
                             : (SSL_set_tlsext_host_name(s->ssl, name.c_str()) == 1 && SSL_set1_host(s->ssl, name.c_str()) == 1);
            if (!okay) {
                ERR_clear_error();
                return errc::bad_config;
            }
        }
    }
    return s;
}

// One recv into rbio, or wait for the one already in flight. Afterwards the caller retries
// its SSL_* call; s->eof tells it the peer closed.
task<result<void>> pull(impl_t* s, std::stop_token st) {
    if (s->recv_error) co_return s->recv_error;
    if (s->eof) co_return ok();
    if (s->reading) {
        std::shared_ptr<runtime::oneshot<void>> p = s->progress;
        auto w = co_await p->wait(st);
        if (!w) co_return failure{w.error()};
        co_return ok();
    }
    s->reading = true;
    std::span<char> buf(s->recv_buf.get(), s->recv_cap);
    auto n = co_await s->sock.read_some(buf, st);
    s->reading = false;
    std::shared_ptr<runtime::oneshot<void>> done = std::exchange(s->progress, std::make_shared<runtime::oneshot<void>>());
    done->set();
    if (!n) {
        // A cancelled recv read nothing: the next caller simply starts a new one.
        if (!runtime::is_cancelled(n.error())) s->recv_error = n.error();
        co_return failure{n.error()};
    }
    if (*n == 0) {
        s->eof = true;
        co_return ok();
    }
    if (s->bytes_received == 0) s->first_byte = static_cast<unsigned char>(buf[0]);
    s->bytes_received += *n;
    BIO_write(s->rbio, buf.data(), static_cast<int>(*n));
    if (*n == s->recv_cap && s->recv_cap < max_recv_size) {
        // Its bytes are in rbio already: the old buffer can go.
        s->recv_cap *= 2;
        s->recv_buf.reset(new char[s->recv_cap]);
    }
    co_return ok();
}

// Sends everything pending in wbio. Caller holds send_lock (or is the handshake, alone).
task<result<void>> flush_locked(impl_t* s, std::stop_token st) {
    for (;;) {
        std::size_t pending = BIO_ctrl_pending(s->wbio);
        if (pending == 0) co_return ok();
        if (s->write_broken) co_return s->write_broken;
        pending = std::min<std::size_t>(pending, INT_MAX);
        if (s->send_cap < pending) {
            s->send_buf.reset(new char[pending]); // default-initialised: no zero fill
            s->send_cap = pending;
        }
        int got = BIO_read(s->wbio, s->send_buf.get(), static_cast<int>(pending));
        if (got <= 0) co_return ok();
        std::span<const char> out(s->send_buf.get(), static_cast<std::size_t>(got));
        auto w = co_await s->sock.write_all(out, st);
        if (!w) {
            // Part of a record may be on the wire: nothing more can follow it.
            s->write_broken = make_error_code(errc::closed);
            co_return failure{w.error()};
        }
    }
}

// The reader's flush: never waits for the send lock. A holder sends our bytes before it
// releases, so leaving them in wbio is enough.
task<result<void>> flush_from_reader(impl_t* s, std::stop_token st) {
    if (BIO_ctrl_pending(s->wbio) == 0) co_return ok();
    auto lock = s->send_lock.try_acquire(1);
    if (!lock) co_return ok();
    auto r = co_await flush_locked(s, st);
    co_return r;
}

std::optional<std::string> verified_principal(SSL* ssl) {
    X509* peer = SSL_get0_peer_certificate(ssl);
    if (!peer || SSL_get_verify_result(ssl) != X509_V_OK) return std::nullopt;
    return principal_name(X509_get_subject_name(peer));
}

} // namespace

stream::stream(std::unique_ptr<impl> i) noexcept : _impl(std::move(i)) {}
stream::stream(stream&&) noexcept = default;
stream& stream::operator=(stream&&) noexcept = default;
stream::~stream() = default;

task<result<stream>> stream::accept(std::shared_ptr<const context> ctx, runtime::tcp_stream sock, std::stop_token st,
                                    std::chrono::milliseconds handshake_timeout) {
    auto s = make_impl(std::move(ctx), std::move(sock), true);
    if (!s) co_return failure{s.error()};
    auto r = co_await handshake(std::move(*s), std::move(st), handshake_timeout);
    co_return r;
}

task<result<stream>> stream::connect(std::shared_ptr<const context> ctx, runtime::tcp_stream sock, std::stop_token st,
                                     std::chrono::milliseconds handshake_timeout) {
    auto s = make_impl(std::move(ctx), std::move(sock), false);
    if (!s) co_return failure{s.error()};
    auto r = co_await handshake(std::move(*s), std::move(st), handshake_timeout);
    co_return r;
}

task<result<stream>> stream::handshake(std::unique_ptr<impl> s, std::stop_token st, std::chrono::milliseconds timeout) {
    runtime::deadline_scope scope(runtime::reactor::local().now() + timeout, st);
    const std::stop_token tok = scope.token();
    for (;;) {
        ERR_clear_error();
        const int ret = SSL_do_handshake(s->ssl);
        const int err = ret == 1 ? SSL_ERROR_NONE : SSL_get_error(s->ssl, ret);
        std::error_code failed;
        if (ret != 1 && err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) failed = classify(err, true);
        // Our next flight, or the alert that tells the peer why we give up.
        auto f = co_await flush_locked(s.get(), tok);
        if (failed) co_return failed;
        if (!f) {
            if (runtime::is_cancelled(f.error()) && scope.expired() && !st.stop_requested()) {
                co_return runtime::errc::timed_out;
            }
            co_return failure{f.error()};
        }
        if (ret == 1) break;
        if (err != SSL_ERROR_WANT_READ) continue;
        const bool first = s->bytes_received == 0;
        auto p = co_await pull(s.get(), tok);
        if (!p) {
            if (runtime::is_cancelled(p.error()) && scope.expired() && !st.stop_requested()) {
                co_return runtime::errc::timed_out;
            }
            co_return failure{p.error()};
        }
        if (s->eof) co_return errc::closed;
        // A Kafka request's first byte is its length's high byte (0x00), an HTTP request's a
        // letter: answer not_tls at once rather than wait for a record that never parses.
        if (first && s->bytes_received > 0) {
            const bool tls_start = s->first_byte == record_handshake || (!s->server && s->first_byte == record_alert);
            if (!tls_start) co_return errc::not_tls;
        }
    }
    s->established = true;
    s->principal = verified_principal(s->ssl);
    co_return stream(std::move(s));
}

task<result<std::size_t>> stream::read_some(std::span<char> buf, std::stop_token st) {
    impl* s = _impl.get();
    if (!s || !s->established) co_return errc::closed;
    if (buf.empty()) co_return std::size_t{0};
    for (;;) {
        if (s->close_notify_received) co_return std::size_t{0};
        if (s->fatal) co_return s->fatal;
        std::size_t got = 0;
        ERR_clear_error();
        const int ret = SSL_read_ex(s->ssl, buf.data(), buf.size(), &got);
        const int err = ret == 1 ? SSL_ERROR_NONE : SSL_get_error(s->ssl, ret);
        std::error_code failed;
        if (ret != 1 && err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE && err != SSL_ERROR_ZERO_RETURN) {
            failed = classify(err, false);
            s->fatal = failed;
        }
        // Reading can produce output (a key update reply, an alert); it must not wait in wbio.
        auto f = co_await flush_from_reader(s, st);
        if (ret == 1) co_return got;
        if (failed) co_return failed;
        if (!f) co_return failure{f.error()};
        if (err == SSL_ERROR_ZERO_RETURN) {
            s->close_notify_received = true;
            co_return std::size_t{0};
        }
        if (s->eof) co_return std::size_t{0};
        if (st.stop_requested()) co_return runtime::errc::cancelled;
        auto p = co_await pull(s, st);
        if (!p) co_return failure{p.error()};
    }
}

task<result<void>> stream::write_all(std::span<const char> buf, std::stop_token st) {
    impl* s = _impl.get();
    if (!s || !s->established || s->shutdown_sent) co_return errc::closed;
    if (s->fatal) co_return s->fatal;
    if (s->write_broken) co_return s->write_broken;
    auto lock = co_await s->send_lock.acquire(1, st);
    if (!lock) co_return failure{lock.error()};
    std::size_t done = 0;
    while (done < buf.size()) {
        if (s->fatal) co_return s->fatal;
        const std::size_t chunk = std::min(buf.size() - done, write_chunk);
        std::size_t written = 0;
        ERR_clear_error();
        const int ret = SSL_write_ex(s->ssl, buf.data() + done, chunk, &written);
        const int err = ret == 1 ? SSL_ERROR_NONE : SSL_get_error(s->ssl, ret);
        std::error_code failed;
        if (ret != 1 && err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
            failed = classify(err, false);
            s->fatal = failed;
        }
        // The whole chunk is encrypted (memory BIOs never refuse bytes): send it in one go.
        auto f = co_await flush_locked(s, st);
        if (failed) co_return failed;
        if (!f) co_return failure{f.error()};
        if (ret == 1) {
            done += written;
            continue;
        }
        if (err == SSL_ERROR_WANT_READ) {
            // Only a handshake message from the peer unblocks SSL_write (renegotiation is
            // off, so this is rare). Pulling while the reader also waits is safe: pull()
            // starts at most one recv, and SSL_read later finds what we buffered.
            auto p = co_await pull(s, st);
            if (!p) co_return failure{p.error()};
            if (s->eof) co_return errc::closed;
        }
    }
    // Data from an earlier SSL_key_update or from the reader may wait even when buf is empty.
    auto f = co_await flush_locked(s, st);
    co_return f;
}

task<void> stream::shutdown(std::stop_token st) {
    impl* s = _impl.get();
    if (!s || !s->established || s->fatal || s->write_broken || s->shutdown_sent || !s->sock.is_open()) co_return;
    runtime::deadline_scope scope(runtime::reactor::local().now() + 1s, st);
    const std::stop_token tok = scope.token();
    auto lock = co_await s->send_lock.acquire(1, tok);
    if (!lock) co_return;
    s->shutdown_sent = true;
    ERR_clear_error();
    SSL_shutdown(s->ssl); // queues close_notify in wbio; we do not wait for the peer's
    ERR_clear_error();
    auto f = co_await flush_locked(s, tok);
    if (f) s->sock.shutdown_write();
}

result<void> stream::request_key_update() {
    impl* s = _impl.get();
    if (!s || !s->established || s->fatal) return errc::closed;
    if (SSL_version(s->ssl) < TLS1_3_VERSION || SSL_key_update(s->ssl, SSL_KEY_UPDATE_REQUESTED) != 1) {
        ERR_clear_error();
        return errc::protocol_error;
    }
    return ok();
}

void stream::close() noexcept {
    if (_impl) _impl->sock.close();
}
bool stream::is_open() const noexcept { return _impl && _impl->sock.is_open(); }
int stream::fd() const noexcept { return _impl ? _impl->sock.fd() : -1; }
runtime::socket_address stream::peer_address() const {
    return _impl ? _impl->sock.peer_address() : runtime::socket_address{};
}
const std::optional<std::string>& stream::peer_principal() const noexcept {
    static const std::optional<std::string> none;
    return _impl ? _impl->principal : none;
}
std::string stream::protocol() const { return _impl && _impl->ssl ? SSL_get_version(_impl->ssl) : ""; }
std::string stream::cipher() const {
    if (!_impl || !_impl->ssl) return "";
    const char* c = SSL_get_cipher_name(_impl->ssl);
    return c ? c : "";
}
const std::shared_ptr<const context>& stream::ctx() const noexcept {
    static const std::shared_ptr<const context> none;
    return _impl ? _impl->ctx : none;
}

} // namespace skiff::tls
