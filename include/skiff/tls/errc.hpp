// Error codes of the tls module: handshake outcomes, stream failures and context (certificate
// file) problems. Socket failures keep their errno in std::system_category; cancellation and
// timeouts are runtime::errc::cancelled / timed_out. Pure; any core or thread.
#pragma once

#include <system_error>

namespace skiff::tls {

enum class errc {
    handshake_failed = 1, // no common version or cipher, or an alert we cannot classify
    certificate_invalid,  // the peer's certificate failed our verification (unknown CA, expired,
                          // wrong name)
    certificate_required, // a required client certificate was not presented
    certificate_rejected, // the peer refused our certificate (it sent a certificate alert)
    not_tls,              // the peer spoke something else first (e.g. a plaintext Kafka request)
    protocol_error,       // a malformed or unexpected TLS record
    closed,               // the connection ended during the handshake, or the stream is unusable
                          // (closed, or a write was cancelled halfway through a record)
    bad_config,           // a configuration value is refused (version below TLSv1.2, missing CA)
    file_unreadable,      // a certificate, key or CA file cannot be opened
    bad_pem,              // a file does not hold what it should in PEM form
    key_mismatch,         // the private key does not belong to the certificate
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

} // namespace skiff::tls

template <>
struct std::is_error_code_enum<skiff::tls::errc> : std::true_type {};
