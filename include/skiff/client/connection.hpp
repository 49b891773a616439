// One connection to one Kafka broker: TCP on the reactor (TLS over it for SSL and SASL_SSL),
// ApiVersions negotiated on open, then SASL for SASL_PLAINTEXT and SASL_SSL (SaslHandshake v1
// and SaslAuthenticate: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; see security.hpp), requests
// matched to answers by correlation id (several may be in flight: pipelining).
//
//   auto c = co_await connection::open("127.0.0.1:9092", {});          // result<unique_ptr<..>>
//   kafka::MetadataRequest req;                                         // every field filled;
//   auto md = co_await (*c)->send(std::move(req));                       // result<MetadataResponse>
//   co_await (*c)->close();                                             // always, before destroying
//
// send() picks the highest version both sides speak (versions.hpp) and drops the fields that
// version lacks (the generated normalize()), so callers fill a request once for every version.
// A request not answered within its timeout fails with errc::timed_out and, as in Kafka's own
// client, closes the connection (a late answer must not be read as the next one); the other
// requests in flight then fail with errc::disconnected. A connection that closed stays closed:
// is_open() turns false and the owner (client.hpp) opens a new one. A request that failed in
// flight is never resent here (the broker may have applied it).
//
// Reactor thread only: open, send and close on the reactor that opened it.
#pragma once

#include <skiff/client/errc.hpp>
#include <skiff/client/response_for.hpp>
#include <skiff/client/security.hpp>
#include <skiff/client/versions.hpp>
#include <skiff/core/result.hpp>
#include <skiff/kafka/frame.hpp>
#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/tls/any_stream.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <unordered_map>

namespace skiff::client {

struct connection_options {
    connection_options() = default;
    std::string client_id = "skiff";
    runtime::duration connect_timeout = std::chrono::seconds(10); // TCP connect, TLS handshake, ApiVersions
                                                                  // and SASL each get this much
    runtime::duration request_timeout = std::chrono::seconds(30);
    std::size_t max_frame_bytes = std::size_t{256} << 20; // larger answers are protocol errors
    security_config security;                             // PLAINTEXT unless set
};

struct request_options {
    request_options() = default;
    std::optional<runtime::duration> timeout;  // default: connection_options::request_timeout
    std::optional<std::int16_t> max_version;   // cap on the negotiated version
};

class connection {
public:
    // Connects to `address` ("host:port"; a host name is resolved with getaddrinfo, which
    // blocks), runs the TLS handshake if opts.security says so (the certificate must name the
    // host of `address` unless ssl_verify_hostname is false), negotiates versions and
    // authenticates with SASL if opts.security says so. Errors: bad_address, connection_refused,
    // unreachable, timed_out (connect_timeout), protocol_error (not a Kafka answer), cancelled;
    // tls_failed ("TLS handshake with HOST:PORT failed: <reason>"), bad_config (certificate
    // files, mechanism), authentication_failed ("authentication failed: <the broker's message>",
    // "the broker does not offer SASL mechanism X (it offers A, B)").
    static runtime::task<result<std::unique_ptr<connection>, error>>
    open(std::string address, connection_options opts, std::stop_token st = {});

    // Aborts if close() did not finish first while the connection was open (its reader
    // coroutine would outlive it).
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    // Sends `req` and returns the broker's answer. Errors: unsupported_version, timed_out,
    // disconnected, protocol_error (the answer does not decode). Kafka error codes inside
    // the answer are data, not errors: the caller reads them.
    template <typename Req>
    runtime::task<result<response_t<Req>, error>> send(Req req, request_options o = {});

    // The layer under send(): writes a complete request frame whose correlation id is
    // `correlation_id` (from next_correlation_id()) and returns the answer's body (the
    // response header removed), for (key, version).
    runtime::task<result<std::string, error>> roundtrip(kafka::api_key key, std::int16_t version,
                                                        std::int32_t correlation_id, std::string frame,
                                                        std::optional<runtime::duration> timeout);
    std::int32_t next_correlation_id() noexcept { return _next_correlation++; }

    const api_versions& versions() const noexcept { return _versions; }
    const std::string& address() const noexcept { return _address; }
    const connection_options& options() const noexcept { return _opts; }
    // False once closed, broken by an I/O or protocol error, or closed after a timeout.
    bool is_open() const noexcept { return _open; }
    std::size_t in_flight() const noexcept { return _pending.size(); }

    // Stops reading, fails the requests in flight with errc::disconnected and waits for the
    // reader to finish. Idempotent.
    runtime::task<void> close();

private:
    connection(std::string address, connection_options opts, tls::any_stream stream);
    struct pending;
    static runtime::task<void> read_loop(connection* self);
    runtime::task<result<void, error>> negotiate(std::stop_token st);
    runtime::task<result<void, error>> authenticate(std::stop_token st);
    runtime::task<result<std::string, error>> sasl_step(std::string bytes, const std::string& mechanism);
    void fail_all(const error& e);
    void shut(const error& why);
    template <typename Resp>
    result<Resp, error> decode_answer(const std::string& body, std::int16_t version) const;
    error decode_failure(std::string_view what, std::int16_t version, const kafka::decode_error& e) const;
    error encode_failure(std::string_view what, const kafka::encode_error& e) const;

    std::string _address;
    connection_options _opts;
    tls::any_stream _stream;
    api_versions _versions;
    std::int32_t _next_correlation = 1;
    bool _open = true;
    std::optional<error> _broken; // why the connection closed, for requests sent afterwards
    std::unordered_map<std::int32_t, pending*> _pending;
    runtime::semaphore _write_lock{1, "client-write"};
    std::stop_source _stop;
    runtime::gate _gate{"client-connection"};
};

// ---- implementation of the templates ----

template <typename Resp>
result<Resp, error> connection::decode_answer(const std::string& body, std::int16_t version) const {
    auto r = kafka::decode_message<Resp>(std::span<const char>(body.data(), body.size()), version);
    if (!r) return failure{decode_failure(Resp::message_name, version, r.error())};
    return std::move(*r);
}

template <typename Req>
runtime::task<result<response_t<Req>, error>> connection::send(Req req, request_options o) {
    using Resp = response_t<Req>;
    auto v = _versions.pick(Req::api, o.max_version);
    if (!v) co_return failure{v.error()};
    const std::int16_t version = *v;
    req.normalize(version);
    const std::int32_t corr = next_correlation_id();
    std::optional<std::string> client_id(_opts.client_id);
    auto frame = kafka::encode_request(req, version, corr, std::move(client_id));
    if (!frame) co_return failure{encode_failure(Req::message_name, frame.error())};
    auto t = roundtrip(Req::api, version, corr, std::move(*frame), o.timeout);
    auto body = co_await std::move(t);
    if (!body) co_return failure{body.error()};
    co_return decode_answer<Resp>(*body, version);
}

} // namespace skiff::client
