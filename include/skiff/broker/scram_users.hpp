// SASL/SCRAM users: the credentials a broker authenticates against, as Kafka keeps them per
// user and mechanism (one SCRAM-SHA-256 and one SCRAM-SHA-512 credential at most each).
//
// Stored in the object store as `{ns}/skiff~meta/users.json`, beside the topics and quotas, and
// installed on every core as part of the catalog snapshot (so a change made on one broker
// reaches the others the way a topic change does). Only salted, iterated, hashed credentials
// are stored (docs/sasl.md); the format:
//   {"version":1,"users":{"alice":[{"mechanism":"SCRAM-SHA-512","iterations":4096,
//                                   "salt":"..","stored_key":"..","server_key":".."}]}}
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/sasl/credential.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::broker {

struct scram_user_table {
    std::map<std::string, std::map<sasl::scram_mechanism, sasl::scram_credential>, std::less<>> users;

    // The credential of (user, mechanism), or nullopt.
    std::optional<sasl::scram_credential> find(std::string_view user, sasl::scram_mechanism m) const;
    // For PLAIN: the user's SCRAM-SHA-512 credential, else its SCRAM-SHA-256 one.
    std::optional<sasl::scram_credential> find_any(std::string_view user) const;
    friend bool operator==(const scram_user_table&, const scram_user_table&) = default;
};

std::string scram_users_key(std::string_view ns);
std::string encode_scram_users(const scram_user_table& t);
// Strict: the version, user names of 1..255 bytes, each credential as credential_from_json
// checks it, no mechanism twice for a user. The error names the user at fault, never a key.
result<scram_user_table, std::string> decode_scram_users(std::string_view json);

} // namespace skiff::broker
