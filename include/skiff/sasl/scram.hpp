// SCRAM-SHA-256 / SCRAM-SHA-512 server side (RFC 5802, RFC 7677) as Kafka implements it
// (ScramSaslServer, ScramMessages): one scram_server per authentication, fed the client's
// SaslAuthenticate bytes in order.
//
//   client-first  "n,[a=authzid],n=user,r=cnonce[,ext=value...]"  -> server-first
//   server-first  "r=cnonce+snonce,s=<salt base64>,i=<iterations>"
//   client-final  "c=biws,r=cnonce+snonce[,ext=value...],p=<proof base64>" -> server-final
//   server-final  "v=<server signature base64>"
//
// Refused as Kafka refuses them: channel binding ("p=..." and "y" gs2 flags), an authzid other
// than the user, a mandatory extension ("m="). Delegation tokens (`tokenauth=true`) are parsed
// and reported; they are refused unless options::allow_token_auth.
//
// An unknown user is answered with a fake credential derived from the user name and a
// per-process key (same salt each time, default iterations), and fails at client-final after
// the same work as a wrong password; both give client_message() "Invalid username or
// password". Messages longer than max_message_bytes are malformed. Nothing here throws for
// any input, does I/O or blocks: call from any core, one thread at a time per object.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/sasl/credential.hpp>
#include <skiff/sasl/errc.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::sasl {

// Any single SASL message above this is malformed (a SCRAM message is ~200 bytes).
inline constexpr std::size_t max_message_bytes = 4096;
// A user name (after =2C/=3D unescaping), PLAIN's authcid and authzid: at most this.
inline constexpr std::size_t max_name_bytes = 255;

// The parts of a client-first-message (RFC 5802 §7).
struct client_first {
    std::string authzid;  // unescaped; empty when the gs2 header had no "a="
    std::string username; // unescaped (=2C -> ',', =3D -> '=')
    std::string nonce;    // c-nonce: printable ASCII except ','
    std::vector<std::pair<std::string, std::string>> extensions; // in order, names [A-Za-z]+, unique
    std::string gs2_header; // as sent, e.g. "n,," (what c= must encode)
    std::string bare;       // client-first-message-bare as sent (part of the AuthMessage)

    bool token_auth() const noexcept; // extension tokenauth=true (case-insensitive, as Java's parseBoolean)
    const std::string* extension(std::string_view name) const noexcept;
};

// The parts of a client-final-message.
struct client_final {
    std::string channel_binding; // decoded c=
    std::string nonce;           // r=
    std::vector<std::pair<std::string, std::string>> extensions;
    std::string proof;           // decoded p=
    std::string without_proof;   // client-final-message-without-proof as sent
};

// Parsers, exposed for tests and the fuzzer. errc::malformed on anything outside the grammar
// (missing or reordered attributes, bad base64, invalid UTF-8, bad escapes, empty or oversized
// names, duplicate extensions, too long); errc::unsupported for channel binding or "m=".
result<client_first> parse_client_first(std::string_view message);
result<client_final> parse_client_final(std::string_view message);

// Unescapes a saslname (RFC 5802 §5.1): "=2C" -> ',', "=3D" -> '='; any other '=' is malformed.
result<std::string> decode_saslname(std::string_view s);
// The reverse, for clients and tests.
std::string encode_saslname(std::string_view username);

// The credential of (username, mechanism), or nullopt when there is none. Called once, from
// step(), on the calling thread; must not block (the broker keeps users in memory).
using credential_lookup = std::function<std::optional<scram_credential>(const client_first&, scram_mechanism)>;

class scram_server {
public:
    struct options {
        scram_mechanism mechanism = scram_mechanism::sha_512;
        credential_lookup lookup;
        bool allow_token_auth = false;
        // Tests only: the s-nonce to append (RFC 7677's example). Default: 32 bytes from
        // RAND_bytes, base64 without padding.
        std::function<std::string()> server_nonce;
        // Key of the fake credentials of unknown users; empty = a random per-process key.
        std::string fake_credential_key;
    };

    enum class state { client_first, client_final, complete, failed };

    explicit scram_server(options o);
    ~scram_server();
    scram_server(const scram_server&) = delete;
    scram_server& operator=(const scram_server&) = delete;

    // Feeds the next client message; returns the server's answer (server-first, then
    // server-final). On error the exchange is over (state failed, secrets wiped): the broker
    // answers SaslAuthenticate with client_message(error) and SASL_AUTHENTICATION_FAILED.
    // errc::bad_state once complete or failed.
    result<std::string> step(std::string_view client_message);

    state current_state() const noexcept { return _state; }
    bool complete() const noexcept { return _state == state::complete; }
    scram_mechanism mechanism() const noexcept { return _opts.mechanism; }
    // The authenticated user; empty until complete.
    const std::string& username() const noexcept { return _username; }
    // The parsed client-first (extensions, token_auth); empty before the first step.
    const client_first& first() const noexcept { return _first; }
    // The reason of the failure, for logs and metrics; errc{} while not failed.
    std::error_code failure_reason() const noexcept { return _failure; }
    // RFC 5802's server-error-value for the failure ("invalid-proof" for both unknown user and
    // wrong password), for a server-final "e=" where a caller wants one.
    std::string_view server_error() const noexcept;

private:
    result<std::string> on_client_first(std::string_view msg);
    result<std::string> on_client_final(std::string_view msg);
    std::error_code fail(errc e);
    void clear_secrets() noexcept;

    options _opts;
    state _state = state::client_first;
    client_first _first;
    std::string _server_first;
    std::string _nonce; // c-nonce + s-nonce
    scram_credential _cred;
    bool _unknown_user = false;
    std::string _username;
    std::error_code _failure;
};

// A credential that fails every proof, derived from (key, mechanism, username): what an
// unknown user gets, so its salt is stable and its cost that of a real user.
scram_credential fake_credential(scram_mechanism m, std::string_view username, std::string_view key);

} // namespace skiff::sasl
