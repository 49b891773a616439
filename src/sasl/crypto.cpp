#include "crypto.hpp"

#include <skiff/core/base64.hpp>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace skiff::sasl::detail {

namespace {

[[noreturn]] void openssl_failed(const char* what) {
    std::fprintf(stderr, "skiff: OpenSSL %s failed\n", what);
    std::abort();
}

const EVP_MD* md(scram_mechanism m) noexcept { return m == scram_mechanism::sha_256 ? EVP_sha256() : EVP_sha512(); }

const unsigned char* bytes(std::string_view s) noexcept { return reinterpret_cast<const unsigned char*>(s.data()); }

} // namespace

std::string hash(scram_mechanism m, std::string_view data) {
    std::string out(hash_size(m), '\0');
    unsigned int len = 0;
    if (EVP_Digest(data.data(), data.size(), reinterpret_cast<unsigned char*>(out.data()), &len, md(m), nullptr) != 1 ||
        len != out.size())
        openssl_failed("digest");
    return out;
}

std::string hmac(scram_mechanism m, std::string_view key, std::string_view data) {
    std::string out(hash_size(m), '\0');
    unsigned int len = 0;
    if (HMAC(md(m), key.data(), static_cast<int>(key.size()), bytes(data), data.size(),
             reinterpret_cast<unsigned char*>(out.data()), &len) == nullptr ||
        len != out.size())
        openssl_failed("HMAC");
    return out;
}

std::string pbkdf2(scram_mechanism m, std::string_view password, std::string_view salt, int iterations) {
    std::string out(hash_size(m), '\0');
    if (PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()), bytes(salt),
                          static_cast<int>(salt.size()),
                          iterations, md(m), static_cast<int>(out.size()),
                          reinterpret_cast<unsigned char*>(out.data())) != 1)
        openssl_failed("PBKDF2");
    return out;
}

std::string random_bytes(std::size_t n) {
    std::string out(n, '\0');
    if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
        openssl_failed("RAND_bytes");
    return out;
}

void wipe(std::string& s) noexcept {
    if (!s.empty()) OPENSSL_cleanse(s.data(), s.size());
    s.clear();
}

bool equal_constant_time(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string xor_bytes(std::string_view a, std::string_view b) {
    std::string out(a.size(), '\0');
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        out[i] = static_cast<char>(static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]));
    return out;
}

bool valid_utf8(std::string_view s) noexcept {
    std::size_t i = 0;
    while (i < s.size()) {
        auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t n;
        std::uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1Fu;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0Fu;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07u;
        } else {
            return false; // continuation byte, overlong lead (C0, C1) or beyond U+10FFFF
        }
        if (s.size() - i - 1 < n) return false;
        for (std::size_t k = 1; k <= n; ++k) {
            auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc & 0xC0u) != 0x80u) return false;
            cp = (cp << 6) | (cc & 0x3Fu);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000)) return false; // overlong
        if (cp >= 0xD800 && cp <= 0xDFFF) return false;                       // surrogate
        if (cp > 0x10FFFF) return false;
        i += n + 1;
    }
    return true;
}

std::optional<std::string> base64_decode_strict(std::string_view text) {
    auto out = base64_decode(text);
    if (!out || base64_encode(*out) != text) return std::nullopt;
    return out;
}

scram_credential credential_from_salted(scram_mechanism m, std::string salt, int iterations, std::string_view salted) {
    std::string client_key = hmac(m, salted, "Client Key");
    scram_credential c(m, std::move(salt), iterations, hash(m, client_key), hmac(m, salted, "Server Key"));
    wipe(client_key);
    return c;
}

} // namespace skiff::sasl::detail
