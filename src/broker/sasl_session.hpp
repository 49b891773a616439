// A connection's SASL state (Kafka's SaslServerAuthenticator): which phase it is in, the
// mechanism's exchange in progress, the authenticated principal and when its session ends
// (KIP-368). Private to the broker module; one per connection, touched only by its core.
//
//   handshake ──SaslHandshake v1──> authenticate ──SaslAuthenticate...──> authenticated
//             └─SaslHandshake v0──> raw_token (size-prefixed tokens, no Kafka header) ─┘
//   authenticated ──SaslHandshake──> re-authentication (same principal required)
//   any failure ──> failed (the answer is sent, then the connection closes)
#pragma once

#include <skiff/runtime/clock.hpp>
#include <skiff/sasl/scram.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::broker {

struct sasl_session {
    enum class phase { handshake, authenticate, raw_token, authenticated, failed };
    phase state = phase::handshake;
    std::string mechanism;                     // chosen by the last SaslHandshake
    std::string authenticated_mechanism;       // of the current session (re-authentication keeps it)
    std::unique_ptr<sasl::scram_server> scram; // the SCRAM exchange in progress
    std::string user;                          // authenticated user name ("" before)
    bool reauthenticating = false;             // an exchange on an authenticated connection
    std::optional<runtime::time_point> expires; // the session's end (KIP-368), when set
    int authentications = 0;                   // successful ones on this connection

    bool authenticated() const noexcept { return !user.empty() && state != phase::failed; }
};

} // namespace skiff::broker
