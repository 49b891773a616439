// SCRAM server side: RFC 5802 §5 and §7 grammar, Kafka's ScramSaslServer behaviour.
#include <skiff/sasl/scram.hpp>

#include "crypto.hpp"
#include "scram_syntax.hpp"

#include <skiff/core/base64.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace skiff::sasl {

namespace {

bool is_alpha(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Common to both messages: bounded, UTF-8 (value-char is UTF8-char), no NUL.
bool acceptable_text(std::string_view m) noexcept {
    return !m.empty() && m.size() <= max_message_bytes && m.find('\0') == std::string_view::npos &&
           detail::valid_utf8(m);
}

// attr-val = ALPHA "=" value (Kafka allows several letters: "tokenauth"); value non-empty.
result<std::pair<std::string, std::string>> parse_extension(std::string_view field) {
    auto eq = field.find('=');
    if (eq == 0 || eq == std::string_view::npos || eq + 1 == field.size()) return errc::malformed;
    auto name = field.substr(0, eq);
    if (!std::all_of(name.begin(), name.end(), is_alpha)) return errc::malformed;
    return std::pair{std::string(name), std::string(field.substr(eq + 1))};
}

result<void> add_extension(std::vector<std::pair<std::string, std::string>>& exts, std::string_view field) {
    auto ext = parse_extension(field);
    if (!ext) return ext.error();
    for (const auto& [n, v] : exts)
        if (n == ext->first) return errc::malformed; // duplicate
    exts.push_back(std::move(*ext));
    return ok();
}

result<std::string> decode_name(std::string_view s) {
    auto name = decode_saslname(s);
    if (!name) return name;
    if (name->empty() || name->size() > max_name_bytes) return errc::malformed;
    return name;
}

std::string default_server_nonce() {
    std::string raw = detail::random_bytes(32);
    std::string nonce = base64_encode(raw);
    while (!nonce.empty() && nonce.back() == '=') nonce.pop_back();
    return nonce;
}

const std::string& process_fake_key() {
    static const std::string key = detail::random_bytes(32);
    return key;
}

} // namespace

result<std::string> decode_saslname(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == ',') return errc::malformed;
        if (c != '=') {
            out.push_back(c);
            continue;
        }
        auto esc = s.substr(i + 1, 2);
        if (esc == "2C")
            out.push_back(',');
        else if (esc == "3D")
            out.push_back('=');
        else
            return errc::malformed;
        i += 2;
    }
    return out;
}

std::string encode_saslname(std::string_view username) {
    std::string out;
    out.reserve(username.size());
    for (char c : username) {
        if (c == ',')
            out += "=2C";
        else if (c == '=')
            out += "=3D";
        else
            out.push_back(c);
    }
    return out;
}

bool client_first::token_auth() const noexcept {
    const auto* v = extension("tokenauth");
    if (v == nullptr || v->size() != 4) return false;
    std::string lower = *v;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
    return lower == "true";
}

const std::string* client_first::extension(std::string_view name) const noexcept {
    for (const auto& [n, v] : extensions)
        if (n == name) return &v;
    return nullptr;
}

result<client_first> parse_client_first(std::string_view m) {
    if (!acceptable_text(m)) return errc::malformed;
    client_first out;
    // gs2-header = gs2-cbind-flag "," [ authzid ] ","
    if (m.starts_with("p=") || m.starts_with("y,")) return errc::unsupported; // channel binding (Kafka: none)
    if (!m.starts_with("n,")) return errc::malformed;
    auto second = m.find(',', 2);
    if (second == std::string_view::npos) return errc::malformed;
    auto authz = m.substr(2, second - 2);
    if (!authz.empty()) {
        if (!authz.starts_with("a=")) return errc::malformed;
        auto name = decode_name(authz.substr(2));
        if (!name) return name.error();
        out.authzid = std::move(*name);
    }
    out.gs2_header = std::string(m.substr(0, second + 1));
    auto bare = m.substr(second + 1);
    out.bare = std::string(bare);

    // client-first-message-bare = [reserved-mext ","] username "," nonce ["," extensions]
    auto fields = detail::split_commas(bare);
    if (fields[0].starts_with("m=")) return errc::unsupported; // a mandatory extension we do not know
    if (fields.size() < 2 || !fields[0].starts_with("n=") || !fields[1].starts_with("r=")) return errc::malformed;
    auto user = decode_name(fields[0].substr(2));
    if (!user) return user.error();
    out.username = std::move(*user);
    auto nonce = fields[1].substr(2);
    if (!detail::valid_nonce(nonce)) return errc::malformed;
    out.nonce = std::string(nonce);
    for (std::size_t i = 2; i < fields.size(); ++i)
        if (auto r = add_extension(out.extensions, fields[i]); !r) return r.error();
    return out;
}

result<client_final> parse_client_final(std::string_view m) {
    if (!acceptable_text(m)) return errc::malformed;
    // client-final-message = channel-binding "," nonce ["," extensions] "," proof
    auto fields = detail::split_commas(m);
    if (fields.size() < 3 || !fields[0].starts_with("c=") || !fields[1].starts_with("r=") ||
        !fields.back().starts_with("p="))
        return errc::malformed;
    client_final out;
    auto cb = detail::base64_decode_strict(fields[0].substr(2));
    if (!cb || cb->empty()) return errc::malformed;
    out.channel_binding = std::move(*cb);
    auto nonce = fields[1].substr(2);
    if (!detail::valid_nonce(nonce)) return errc::malformed;
    out.nonce = std::string(nonce);
    for (std::size_t i = 2; i + 1 < fields.size(); ++i) {
        if (fields[i].starts_with("p=")) return errc::malformed; // a second proof
        if (auto r = add_extension(out.extensions, fields[i]); !r) return r.error();
    }
    auto proof = detail::base64_decode_strict(fields.back().substr(2));
    if (!proof || proof->empty()) return errc::malformed;
    out.proof = std::move(*proof);
    out.without_proof = std::string(m.substr(0, m.size() - fields.back().size() - 1));
    return out;
}

scram_credential fake_credential(scram_mechanism m, std::string_view username, std::string_view key) {
    std::string label = fmt::format("{}\x1f{}", mechanism_name(m), username);
    // Separate labels keep salt and keys independent; HMAC keeps them unpredictable without key.
    std::string salt = detail::hmac(scram_mechanism::sha_256, key, "salt\x1f" + label);
    std::string stored = detail::hmac(m, key, "stored\x1f" + label);
    std::string server = detail::hmac(m, key, "server\x1f" + label);
    return scram_credential(m, std::move(salt), default_iterations, std::move(stored), std::move(server));
}

scram_server::scram_server(options o) : _opts(std::move(o)) {}

scram_server::~scram_server() { clear_secrets(); }

void scram_server::clear_secrets() noexcept {
    detail::wipe(_cred.stored_key);
    detail::wipe(_cred.server_key);
    detail::wipe(_cred.salt);
    _server_first.clear();
    _nonce.clear();
}

std::error_code scram_server::fail(errc e) {
    clear_secrets();
    _state = state::failed;
    _failure = make_error_code(e);
    return _failure;
}

std::string_view scram_server::server_error() const noexcept {
    if (_failure.category() != error_category()) return "";
    switch (static_cast<errc>(_failure.value())) {
    case errc::malformed: return "invalid-encoding";
    case errc::unsupported: return "extensions-not-supported";
    case errc::unknown_user:
    case errc::bad_proof:
    case errc::invalid_credential: return "invalid-proof";
    case errc::authzid_mismatch:
    case errc::bad_state: return "other-error";
    }
    return "other-error";
}

result<std::string> scram_server::step(std::string_view msg) {
    switch (_state) {
    case state::client_first: return on_client_first(msg);
    case state::client_final: return on_client_final(msg);
    case state::complete:
    case state::failed: break;
    }
    // Leaves a completed exchange complete: a stray message does not undo an authentication,
    // the broker refuses it.
    return make_error_code(errc::bad_state);
}

result<std::string> scram_server::on_client_first(std::string_view msg) {
    auto parsed = parse_client_first(msg);
    if (!parsed) return fail(static_cast<errc>(parsed.error().value()));
    _first = std::move(*parsed);
    // Kafka: "Client requested an authorization id that is different from username". Checked
    // before the lookup: it depends on the message only, so it says nothing about the user.
    if (!_first.authzid.empty() && _first.authzid != _first.username) return fail(errc::authzid_mismatch);
    if (_first.token_auth() && !_opts.allow_token_auth) return fail(errc::unsupported);

    std::optional<scram_credential> cred;
    if (_opts.lookup) cred = _opts.lookup(_first, _opts.mechanism);
    if (cred && cred->mechanism == _opts.mechanism && valid(*cred)) {
        _cred = std::move(*cred);
    } else {
        // RFC 5802 §5.1: go on with a made-up salt so the failure comes at the same step.
        _unknown_user = true;
        const std::string& key = _opts.fake_credential_key.empty() ? process_fake_key() : _opts.fake_credential_key;
        _cred = fake_credential(_opts.mechanism, _first.username, key);
    }
    std::string snonce = _opts.server_nonce ? _opts.server_nonce() : default_server_nonce();
    if (!detail::valid_nonce(snonce)) return fail(errc::bad_state); // a test hook that returned garbage
    _nonce = _first.nonce + snonce;
    _server_first = fmt::format("r={},s={},i={}", _nonce, base64_encode(_cred.salt), _cred.iterations);
    _state = state::client_final;
    return _server_first;
}

result<std::string> scram_server::on_client_final(std::string_view msg) {
    auto parsed = parse_client_final(msg);
    if (!parsed) return fail(static_cast<errc>(parsed.error().value()));
    const client_final& fin = *parsed;
    // c= must carry the gs2 header of the client-first ("biws" for "n,,"): RFC 5802 §7.
    if (fin.channel_binding != _first.gs2_header) return fail(errc::malformed);
    // Kafka's ScramSaslServer accepts a final nonce that ends with the combined one
    // (clientFinalMessage.nonce().endsWith(serverFirstMessage.nonce())), and librdkafka up to
    // at least 2.0.2 relies on it: it sends its c-nonce again in front. The AuthMessage below
    // uses the nonce as sent, so the proof still binds exactly what the client signed.
    if (!std::string_view(fin.nonce).ends_with(_nonce)) return fail(errc::malformed);
    const auto m = _opts.mechanism;
    if (fin.proof.size() != hash_size(m)) return fail(errc::malformed);

    // AuthMessage = client-first-message-bare "," server-first-message ","
    //               client-final-message-without-proof        (RFC 5802 §3)
    std::string auth = _first.bare + "," + _server_first + "," + fin.without_proof;
    std::string client_signature = detail::hmac(m, _cred.stored_key, auth);
    std::string client_key = detail::xor_bytes(fin.proof, client_signature);
    std::string computed_stored = detail::hash(m, client_key);
    const bool proof_ok = detail::equal_constant_time(computed_stored, _cred.stored_key);
    std::string server_signature = detail::hmac(m, _cred.server_key, auth);
    detail::wipe(client_key);
    detail::wipe(computed_stored);
    detail::wipe(client_signature);

    if (_unknown_user) return fail(errc::unknown_user);
    if (!proof_ok) return fail(errc::bad_proof);
    clear_secrets();
    _username = _first.username;
    _state = state::complete;
    return "v=" + base64_encode(server_signature);
}

} // namespace skiff::sasl
