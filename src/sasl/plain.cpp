// SASL PLAIN: RFC 4616 §2, Kafka's PlainSaslServer rules.
#include <skiff/sasl/plain.hpp>
#include <skiff/sasl/scram.hpp>

#include "crypto.hpp"

#include <openssl/crypto.h>

namespace skiff::sasl {

plain_message::~plain_message() { detail::wipe(password); }

void wipe_buffer(void* data, std::size_t size) noexcept {
    if (data != nullptr && size != 0) OPENSSL_cleanse(data, size);
}

result<plain_message> parse_plain(std::string_view m) {
    // message = [authzid] UTF8NUL authcid UTF8NUL passwd
    if (m.empty() || m.size() > max_message_bytes) return errc::malformed;
    auto nul1 = m.find('\0');
    if (nul1 == std::string_view::npos) return errc::malformed;
    auto nul2 = m.find('\0', nul1 + 1);
    if (nul2 == std::string_view::npos || m.find('\0', nul2 + 1) != std::string_view::npos) return errc::malformed;
    auto authzid = m.substr(0, nul1);
    auto authcid = m.substr(nul1 + 1, nul2 - nul1 - 1);
    auto password = m.substr(nul2 + 1);
    if (authzid.size() > max_name_bytes || authcid.empty() || authcid.size() > max_name_bytes || password.empty() ||
        password.size() > max_plain_password_bytes)
        return errc::malformed;
    if (!detail::valid_utf8(authzid) || !detail::valid_utf8(authcid) || !detail::valid_utf8(password))
        return errc::malformed;
    plain_message out;
    out.authzid = std::string(authzid);
    out.authcid = std::string(authcid);
    out.password = std::string(password);
    return out;
}

bool verify_password(const scram_credential& c, std::string_view password) {
    if (!valid(c)) return false;
    std::string salted = detail::pbkdf2(c.mechanism, password, c.salt, c.iterations);
    auto derived = detail::credential_from_salted(c.mechanism, c.salt, c.iterations, salted);
    detail::wipe(salted);
    // Both keys, so a credential whose server_key was tampered with does not pass either.
    const bool stored_ok = detail::equal_constant_time(derived.stored_key, c.stored_key);
    const bool server_ok = detail::equal_constant_time(derived.server_key, c.server_key);
    return stored_ok && server_ok;
}

namespace {
const std::string& plain_fake_key() {
    static const std::string key = detail::random_bytes(32);
    return key;
}
} // namespace

result<std::string> plain_authenticate(std::string_view message, const plain_lookup& lookup) {
    auto parsed = parse_plain(message);
    if (!parsed) return parsed.error();
    plain_message& msg = *parsed;
    if (!msg.authzid.empty() && msg.authzid != msg.authcid) return errc::authzid_mismatch;
    std::optional<scram_credential> cred;
    if (lookup) cred = lookup(msg.authcid);
    if (!cred || !valid(*cred)) {
        // The same PBKDF2 a real user costs, then the same answer.
        (void)verify_password(fake_credential(scram_mechanism::sha_512, msg.authcid, plain_fake_key()), msg.password);
        return errc::unknown_user;
    }
    if (!verify_password(*cred, msg.password)) return errc::bad_proof;
    return std::move(msg.authcid);
}

} // namespace skiff::sasl
