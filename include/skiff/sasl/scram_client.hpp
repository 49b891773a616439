// SCRAM-SHA-256 / SCRAM-SHA-512 client side (RFC 5802, RFC 7677) as Kafka's ScramSaslClient
// speaks it: no channel binding ("n,,"), no authzid, no extensions.
//
//   scram_client c({scram_mechanism::sha_512, "alice", password});
//   auto first = c.first_message();             // "n,,n=alice,r=<nonce>"       -> SaslAuthenticate
//   auto fin = c.final_message(server_first);   // "c=biws,r=...,p=<proof>"    -> SaslAuthenticate
//   auto ok = c.verify_final(server_final);     // checks "v=": the broker knew the credential
//
// Mutual authentication: verify_final() refuses a server signature that does not match
// (errc::bad_proof), so a broker that does not hold the user's credential is not trusted.
// Errors (sasl::errc): malformed (a server message outside the grammar, a nonce that does not
// extend ours, bad base64), invalid_credential (iterations outside Kafka's 4096..16384 or an
// empty salt), bad_proof (wrong server signature, or the server sent "e=": server_error()),
// bad_state (a call out of order). Any error ends the exchange (state failed).
//
// Secrets (the password, the salted password, keys) are wiped with OPENSSL_cleanse as soon as
// they are no longer needed and when the object dies. Pure: no I/O; any core, one thread at a
// time per object. final_message() costs `iterations` HMACs (a few milliseconds).
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/sasl/credential.hpp>
#include <skiff/sasl/errc.hpp>

#include <string>
#include <string_view>

namespace skiff::sasl {

class scram_client {
public:
    struct options {
        scram_mechanism mechanism = scram_mechanism::sha_512;
        std::string username; // as stored; escaped here (',' -> =2C, '=' -> =3D)
        std::string password; // wiped by the client once used
        // Tests only: the c-nonce (RFC 7677's example). Default: 24 bytes from RAND_bytes in
        // base64 without padding.
        std::string nonce;
    };

    enum class state { initial, first_sent, final_sent, complete, failed };

    explicit scram_client(options o);
    ~scram_client();
    scram_client(const scram_client&) = delete;
    scram_client& operator=(const scram_client&) = delete;

    // client-first-message: "n,,n=<saslname>,r=<c-nonce>". bad_state unless initial;
    // malformed for an empty user name.
    result<std::string> first_message();
    // client-final-message from the server-first-message. Wipes the password.
    result<std::string> final_message(std::string_view server_first);
    // Checks the server-final-message: "v=<signature>" must match; "e=<error>" fails.
    result<void> verify_final(std::string_view server_final);

    state current_state() const noexcept { return _state; }
    bool complete() const noexcept { return _state == state::complete; }
    scram_mechanism mechanism() const noexcept { return _opts.mechanism; }
    // The server-error-value of an "e=" message (server-first or server-final), else empty.
    const std::string& server_error() const noexcept { return _server_error; }

private:
    std::error_code fail(errc e) noexcept;
    void clear_secrets() noexcept;

    options _opts;
    state _state = state::initial;
    std::string _first_bare;
    std::string _server_signature; // expected v=, raw bytes
    std::string _server_error;
};

} // namespace skiff::sasl
