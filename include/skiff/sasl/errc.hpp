// Error codes of the sasl module (PLAIN and SCRAM server side, stored credentials).
//
// The detailed code is for logs and metrics. What a client may be told is client_message():
// unknown_user and bad_proof read the same there, so a client cannot tell a missing user
// from a wrong password. Pure; any core or thread.
#pragma once

#include <system_error>

namespace skiff::sasl {

enum class errc {
    malformed = 1,      // a client message that does not parse: syntax, size, UTF-8, escapes,
                        // base64, nonce or channel binding that does not match
    unsupported,        // valid but not offered: channel binding, mandatory extension (m=),
                        // delegation tokens, an unknown mechanism
    unknown_user,       // no credential for the user (client sees authentication_failed's text)
    bad_proof,          // wrong password / client proof (client sees the same text)
    authzid_mismatch,   // authorization id given and different from the user (Kafka refuses it)
    bad_state,          // a message after the exchange completed or failed
    invalid_credential, // a credential outside Kafka's bounds (iterations, key sizes)
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

// The one sentence a client may see for an error of this module (SaslAuthenticate's
// error_message). Never names the user and never tells unknown_user from bad_proof.
const char* client_message(std::error_code ec) noexcept;

} // namespace skiff::sasl

template <>
struct std::is_error_code_enum<skiff::sasl::errc> : std::true_type {};
