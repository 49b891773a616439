// SASL PLAIN (RFC 4616) server side, as Kafka's PlainSaslServer: one message
// "authzid NUL authcid NUL passwd", checked against the user's stored SCRAM credential
// (PBKDF2 of the offered password with the stored salt and iterations, compared in constant
// time). Only over TLS: the password crosses the wire in clear.
//
// Nothing keeps the password: every copy this module makes is wiped with OPENSSL_cleanse
// before return. The caller owns the buffer the message came in and wipes it too
// (wipe_buffer). An unknown user costs one PBKDF2 of the default iterations, like a user.
// Costs `iterations` HMACs (about a millisecond at 4096): fine on a reactor core for a
// connection's one authentication, not for a flood (the broker rate-limits failures).
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/sasl/credential.hpp>
#include <skiff/sasl/errc.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::sasl {

// A parsed PLAIN message. The password is wiped when the object dies.
struct plain_message {
    std::string authzid; // empty, or equal to authcid (Kafka refuses others)
    std::string authcid;
    std::string password;

    plain_message() = default;
    plain_message(const plain_message&) = delete;
    plain_message& operator=(const plain_message&) = delete;
    plain_message(plain_message&&) noexcept = default;
    plain_message& operator=(plain_message&&) noexcept = default;
    ~plain_message();
};

// Bounds (RFC 4616 says "MUST accept up to 255 octets" for each field).
inline constexpr std::size_t max_plain_password_bytes = 1024;

// Parses strictly: at most max_message_bytes, exactly two NULs, valid UTF-8 in every field,
// authcid of 1..max_name_bytes, authzid of 0..max_name_bytes, password of
// 1..max_plain_password_bytes. errc::malformed otherwise.
result<plain_message> parse_plain(std::string_view message);

// The stored credential of a user for PLAIN (any SCRAM mechanism; the broker prefers
// SCRAM-SHA-512), or nullopt. Must not block.
using plain_lookup = std::function<std::optional<scram_credential>(std::string_view username)>;

// Parses and verifies one PLAIN message; returns the authenticated user. Errors:
// malformed; authzid_mismatch (authzid neither empty nor the user); unknown_user and
// bad_proof (the same client_message()).
result<std::string> plain_authenticate(std::string_view message, const plain_lookup& lookup);

// Checks a password against a credential; constant time in the comparison. Wipes its copies.
bool verify_password(const scram_credential& c, std::string_view password);

// OPENSSL_cleanse over a caller's buffer (the request bytes that carried a password).
void wipe_buffer(void* data, std::size_t size) noexcept;

} // namespace skiff::sasl
