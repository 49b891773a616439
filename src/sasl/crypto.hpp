// The hash primitives SCRAM and PLAIN need, over OpenSSL; internal to the sasl module.
// Byte strings are std::string. OpenSSL fails here only without memory or its default
// provider, neither recoverable: those abort rather than return a key made of garbage.
#pragma once

#include <skiff/sasl/credential.hpp>

#include <string>
#include <optional>
#include <string_view>

namespace skiff::sasl::detail {

std::string hash(scram_mechanism m, std::string_view data);
std::string hmac(scram_mechanism m, std::string_view key, std::string_view data);
// Hi() of RFC 5802 = PBKDF2-HMAC with one output block of the hash's size.
std::string pbkdf2(scram_mechanism m, std::string_view password, std::string_view salt, int iterations);
std::string random_bytes(std::size_t n);
// OPENSSL_cleanse, then clear: for every buffer that held a password or a derived secret.
void wipe(std::string& s) noexcept;
// CRYPTO_memcmp; false on different sizes (sizes are not secret here).
bool equal_constant_time(std::string_view a, std::string_view b) noexcept;
// a XOR b; sizes must match (the caller checked).
std::string xor_bytes(std::string_view a, std::string_view b);

// Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) noexcept;
// base64_decode that also refuses non-canonical encodings (stray bits in the last group).
std::optional<std::string> base64_decode_strict(std::string_view text);

// salt, stored_key and server_key from an already salted password.
scram_credential credential_from_salted(scram_mechanism m, std::string salt, int iterations, std::string_view salted);

} // namespace skiff::sasl::detail
