// SCRAM credentials as skiff stores them: salted, iterated and hashed, never the password.
//
// Derived as Kafka's ScramFormatter does (RFC 5802 §3):
//   salted     = Hi(password, salt, i)           PBKDF2-HMAC-SHA-256/512
//   client_key = HMAC(salted, "Client Key")
//   stored_key = H(client_key)
//   server_key = HMAC(salted, "Server Key")
// stored_key lets the server check a client proof; server_key lets it prove itself. Neither
// gives the password back, but both are secrets: describe() and the fmt formatter never print
// them. Pure functions; any core or thread. Deriving costs `iterations` HMACs (milliseconds):
// keep it off a reactor core when many are made at once.
#pragma once

#include <skiff/core/result.hpp>

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace skiff::sasl {

enum class scram_mechanism { sha_256, sha_512 };

// "SCRAM-SHA-256" / "SCRAM-SHA-512": the SASL mechanism names Kafka uses.
std::string_view mechanism_name(scram_mechanism m) noexcept;
std::optional<scram_mechanism> mechanism_from_name(std::string_view name) noexcept;
// 32 or 64: the size of stored_key, server_key, client proofs and signatures.
std::size_t hash_size(scram_mechanism m) noexcept;

// Kafka's bounds (ScramMechanism.minIterations/maxIterations): a credential outside them is
// refused when made, parsed or used.
inline constexpr int min_iterations = 4096;
inline constexpr int max_iterations = 16384;
inline constexpr int default_iterations = 4096;
inline constexpr std::size_t default_salt_bytes = 32;
inline constexpr std::size_t max_salt_bytes = 1024;

struct scram_credential {
    scram_mechanism mechanism = scram_mechanism::sha_512;
    std::string salt;       // raw bytes
    int iterations = default_iterations;
    std::string stored_key; // raw bytes, hash_size(mechanism)
    std::string server_key; // raw bytes, hash_size(mechanism)

    scram_credential() = default;
    scram_credential(scram_mechanism m, std::string s, int i, std::string stored, std::string server)
        : mechanism(m), salt(std::move(s)), iterations(i), stored_key(std::move(stored)),
          server_key(std::move(server)) {}
    scram_credential(const scram_credential&) = default;
    scram_credential(scram_credential&&) noexcept = default;
    scram_credential& operator=(const scram_credential&) = default;
    scram_credential& operator=(scram_credential&&) noexcept = default;
    // Wipes the keys (OPENSSL_cleanse) so freed memory does not keep them.
    ~scram_credential();

    friend bool operator==(const scram_credential&, const scram_credential&) = default;
};

// Derives a credential from a password with a fresh random salt (RAND_bytes, 32 bytes).
// errc::invalid_credential when iterations is outside [min_iterations, max_iterations] or the
// password is empty. Never keeps the password or the salted password (wiped before return).
result<scram_credential> make_scram_credential(scram_mechanism m, std::string_view password,
                                               int iterations = default_iterations);
// Same with a given salt (tests with known answers; re-deriving). Also refuses an empty or
// oversized salt.
result<scram_credential> make_scram_credential(scram_mechanism m, std::string_view password, std::string_view salt,
                                               int iterations);

// Hi(password, salt, iterations) (RFC 5802 §2.2): what a client sends in
// AlterUserScramCredentials. invalid_credential as for make_scram_credential. A secret: the
// caller wipes it (wipe_buffer) once sent.
result<std::string> salt_password(scram_mechanism m, std::string_view password, std::string_view salt,
                                  int iterations);
// Random salt bytes (RAND_bytes), default_salt_bytes of them.
std::string random_salt();

// From an already salted password (Hi(password, salt, i)), as AlterUserScramCredentials
// carries it: the client salts and iterates, so the password never reaches the broker. Refuses
// (invalid_credential) a salted password of the wrong size for the mechanism, an empty or
// oversized salt, iterations outside Kafka's bounds.
result<scram_credential> scram_credential_from_salted(scram_mechanism m, std::string_view salted_password,
                                                      std::string_view salt, int iterations);

// Whether c is usable: iterations within bounds, salt 1..max_salt_bytes, keys of hash_size.
bool valid(const scram_credential& c) noexcept;

// "SCRAM-SHA-512, 4096 iterations, salt of 32 bytes, keys <redacted>": the only form in which
// a credential may be logged.
std::string describe(const scram_credential& c);

// JSON, for users.json in the store (docs/sasl.md):
//   {"mechanism":"SCRAM-SHA-512","iterations":4096,"salt":"<base64>",
//    "stored_key":"<base64>","server_key":"<base64>"}
// Parsing is strict: exactly these five members, the right types, canonical padded base64,
// key sizes of the mechanism, iterations within bounds. The error is one sentence naming the
// member at fault and never a key's value.
nlohmann::json credential_to_json(const scram_credential& c);
std::string credential_to_json_text(const scram_credential& c);
result<scram_credential, std::string> credential_from_json(const nlohmann::json& j);
result<scram_credential, std::string> credential_from_json_text(std::string_view text);

} // namespace skiff::sasl

// fmt::format("{}", cred) prints describe(cred), so a log line cannot leak a key.
template <>
struct fmt::formatter<skiff::sasl::scram_credential> : fmt::formatter<std::string_view> {
    template <typename FormatContext>
    auto format(const skiff::sasl::scram_credential& c, FormatContext& ctx) const {
        return fmt::formatter<std::string_view>::format(skiff::sasl::describe(c), ctx);
    }
};
