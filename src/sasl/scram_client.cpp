// SCRAM client side: RFC 5802 §3 (the proof and the server signature), §7 (the grammar);
// Kafka's ScramSaslClient and ScramMessages for what a Kafka broker sends.
#include <skiff/sasl/scram.hpp>
#include <skiff/sasl/scram_client.hpp>

#include "crypto.hpp"
#include "scram_syntax.hpp"

#include <skiff/core/base64.hpp>

#include <charconv>
#include <vector>

namespace skiff::sasl {

namespace {

std::string random_nonce() {
    std::string raw = detail::random_bytes(24);
    std::string nonce = base64_encode(raw);
    while (!nonce.empty() && nonce.back() == '=') nonce.pop_back();
    return nonce;
}

// A server message is text of bounded size without NUL.
bool acceptable(std::string_view m) noexcept {
    return !m.empty() && m.size() <= max_message_bytes && m.find('\0') == std::string_view::npos;
}

} // namespace

scram_client::scram_client(options o) : _opts(std::move(o)) {}

scram_client::~scram_client() { clear_secrets(); }

void scram_client::clear_secrets() noexcept {
    detail::wipe(_opts.password);
    detail::wipe(_server_signature);
}

std::error_code scram_client::fail(errc e) noexcept {
    _state = state::failed;
    clear_secrets();
    return make_error_code(e);
}

result<std::string> scram_client::first_message() {
    if (_state != state::initial) return fail(errc::bad_state);
    if (_opts.username.empty() || _opts.username.size() > max_name_bytes || !detail::valid_utf8(_opts.username)) {
        return fail(errc::malformed);
    }
    if (_opts.nonce.empty()) _opts.nonce = random_nonce();
    if (!detail::valid_nonce(_opts.nonce)) return fail(errc::malformed);
    _first_bare = "n=" + encode_saslname(_opts.username) + ",r=" + _opts.nonce;
    _state = state::first_sent;
    return "n,," + _first_bare;
}

result<std::string> scram_client::final_message(std::string_view server_first) {
    if (_state != state::first_sent) return fail(errc::bad_state);
    if (!acceptable(server_first)) return fail(errc::malformed);
    if (server_first.starts_with("e=")) {
        _server_error = std::string(server_first.substr(2));
        return fail(errc::bad_proof);
    }
    // server-first-message = [reserved-mext ","] nonce "," salt "," iteration-count ["," extensions]
    auto fields = detail::split_commas(server_first);
    if (fields.size() < 3) return fail(errc::malformed);
    if (fields[0].starts_with("m=")) return fail(errc::unsupported); // a mandatory extension we do not know
    if (!fields[0].starts_with("r=") || !fields[1].starts_with("s=") || !fields[2].starts_with("i=")) {
        return fail(errc::malformed);
    }
    const std::string_view nonce = fields[0].substr(2);
    // The server's nonce must extend ours (RFC 5802 §5.1 "r="): else it answers someone else.
    if (nonce.size() <= _opts.nonce.size() || !nonce.starts_with(_opts.nonce) || !detail::valid_nonce(nonce)) {
        return fail(errc::malformed);
    }
    auto salt = detail::base64_decode_strict(fields[1].substr(2));
    if (!salt || salt->empty() || salt->size() > max_salt_bytes) {
        return fail(salt && salt->empty() ? errc::invalid_credential : errc::malformed);
    }
    const std::string_view itext = fields[2].substr(2);
    int iterations = 0;
    auto [end, ec] = std::from_chars(itext.data(), itext.data() + itext.size(), iterations);
    if (ec != std::errc() || end != itext.data() + itext.size() || itext.empty() || itext[0] == '0') {
        return fail(errc::malformed);
    }
    // Kafka's bounds: far more iterations would make a hostile broker burn our CPU; fewer weaken
    // the proof an eavesdropper could attack offline.
    if (iterations < min_iterations || iterations > max_iterations) return fail(errc::invalid_credential);

    const scram_mechanism m = _opts.mechanism;
    std::string salted = detail::pbkdf2(m, _opts.password, *salt, iterations);
    detail::wipe(_opts.password);
    std::string client_key = detail::hmac(m, salted, "Client Key");
    std::string stored_key = detail::hash(m, client_key);
    std::string server_key = detail::hmac(m, salted, "Server Key");
    detail::wipe(salted);
    // c= is base64("n,,") = "biws": no channel binding, no authzid.
    std::string without_proof = "c=biws,r=" + std::string(nonce);
    std::string auth_message = _first_bare + "," + std::string(server_first) + "," + without_proof;
    std::string client_signature = detail::hmac(m, stored_key, auth_message);
    std::string proof = detail::xor_bytes(client_key, client_signature);
    _server_signature = detail::hmac(m, server_key, auth_message);
    detail::wipe(client_key);
    detail::wipe(stored_key);
    detail::wipe(server_key);
    detail::wipe(client_signature);
    std::string out = without_proof + ",p=" + base64_encode(proof);
    detail::wipe(proof);
    _state = state::final_sent;
    return out;
}

result<void> scram_client::verify_final(std::string_view server_final) {
    if (_state != state::final_sent) return fail(errc::bad_state);
    if (!acceptable(server_final)) return fail(errc::malformed);
    if (server_final.starts_with("e=")) {
        _server_error = std::string(server_final.substr(2));
        return fail(errc::bad_proof);
    }
    if (!server_final.starts_with("v=")) return fail(errc::malformed);
    auto fields = detail::split_commas(server_final);
    auto sig = detail::base64_decode_strict(fields[0].substr(2));
    if (!sig) return fail(errc::malformed);
    if (!detail::equal_constant_time(*sig, _server_signature)) return fail(errc::bad_proof);
    _state = state::complete;
    clear_secrets();
    return ok();
}

} // namespace skiff::sasl
