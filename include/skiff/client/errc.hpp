// Error codes of the Kafka client module, and `error`: a code, the Kafka error code when a
// broker answered with one, and one sentence for the operator.
#pragma once

#include <skiff/kafka/errors.hpp>

#include <optional>
#include <string>
#include <system_error>
#include <utility>

namespace skiff::client {

enum class errc {
    connection_refused = 1, // nobody listens at the broker's address
    unreachable,            // the connection could not be made for another reason
    timed_out,              // connecting or a request took longer than its timeout
    disconnected,           // the connection closed before the answer arrived
    protocol_error,         // the peer's bytes are not a valid Kafka answer (is it a Kafka port?)
    unsupported_version,    // no version of the API is spoken by both the broker and skiff
    broker_error,           // the broker answered with a Kafka error code (error::kafka)
    not_found,              // a topic, partition, broker or coordinator unknown to the metadata
    bad_address,            // "host:port" cannot be parsed or resolved
    cancelled,              // the caller's stop token fired
    authentication_failed,  // SASL: refused credentials, a mechanism the broker does not offer,
                            // or a broker that failed to prove it knows the credential (SCRAM)
    tls_failed,             // the TLS handshake failed (untrusted or misnamed certificate, not a
                            // TLS port, refused client certificate)
    bad_config,             // the security settings cannot be used (unreadable certificate file,
                            // unknown SASL mechanism, no user name)
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

struct error {
    error() = default;
    error(errc c, std::string m) : code(c), message(std::move(m)) {}
    error(kafka::error_code k, std::string m) : code(errc::broker_error), kafka(k), message(std::move(m)) {}

    // True for failures to reach or hear from a broker (refused, unreachable, timed out,
    // disconnected, bad address): the CLI's "cannot connect" class.
    bool is_transport() const noexcept;
    // True for authentication_failed, tls_failed and bad_config: another broker or another
    // attempt would fail the same way, so callers do not retry them.
    bool is_security() const noexcept;

    errc code = errc::unreachable;
    kafka::error_code kafka = kafka::error_code::none; // set with errc::broker_error
    std::string message;                               // one sentence, no trailing period
};

// `error` for a Kafka error code in an answer: "<what>: <NAME>" (e.g. "topic 'x': TOPIC_ALREADY_EXISTS")
// with the broker's own message appended when it sent one.
error broker_error(kafka::error_code code, std::string what, const std::optional<std::string>& message = {});

} // namespace skiff::client

template <>
struct std::is_error_code_enum<skiff::client::errc> : std::true_type {};
