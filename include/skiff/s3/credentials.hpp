// AWS credentials and where they come from.
//
// Lookup order (the AWS CLI/SDK order, restricted to static sources):
//   1. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
//   2. shared credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials),
//      section [NAME];
//   3. shared config file (AWS_CONFIG_FILE or ~/.aws/config), section [profile NAME]
//      ([default] for the default profile);
// where NAME is AWS_PROFILE or "default". Region: AWS_REGION, AWS_DEFAULT_REGION, then the
// profile's `region` in the config file (or the credentials file).
//
// The environment is read through an injectable lookup so tests never see the real one.
// Loading reads files, so call it at startup or from a blocking-allowed thread, never from a
// reactor core. Error messages never contain secret keys or session tokens.
#pragma once

#include <skiff/core/result.hpp>

#include <fmt/format.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::s3 {

struct credentials {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token; // empty for long-term keys

    bool complete() const noexcept { return !access_key_id.empty() && !secret_access_key.empty(); }
};

// "AKIA…MPLE, secret <redacted>, session token <redacted>" (or "no session token"): the
// only form in which credentials may be logged. The access key id is shortened too, since
// it identifies the account holder; its prefix (AKIA long-term, ASIA temporary) is kept.
std::string describe(const credentials& c);

// Returns the value of an environment variable, or nullopt when it is unset.
using env_lookup = std::function<std::optional<std::string>(std::string_view)>;

// The process environment (getenv). Not thread-safe against concurrent setenv.
env_lookup process_env();

struct loaded_credentials {
    credentials creds;
    std::string region;  // empty when no source names one
    std::string source;  // e.g. "environment" or "/home/u/.aws/credentials [default]"
};

// Resolves credentials and region as described above. Fails with a plain sentence when no
// source has both keys, when a source is half-filled (an id without a secret), when an
// explicitly chosen AWS_PROFILE exists in neither file, or when a file exists but cannot be
// read or parsed. A missing file is not an error.
result<loaded_credentials, std::string> load_credentials(const env_lookup& env);

// load_credentials, except that finding no keys anywhere is nullopt, not an error (the
// temporary sources of credential_provider.hpp come next in the chain).
result<std::optional<loaded_credentials>, std::string> find_static_credentials(const env_lookup& env);

// The profile's settings that name a temporary source (credential_process, role_arn,
// web_identity_token_file, role_session_name) and its region, from the config file's
// [profile NAME] (or [default]), else the credentials file's [NAME]. Missing files or keys
// are simply absent; a file that exists but cannot be read or parsed is an error.
struct profile_settings {
    std::string profile;                                   // AWS_PROFILE or "default"
    std::map<std::string, std::string, std::less<>> values; // key -> value
    std::map<std::string, std::string, std::less<>> where;  // key -> "path [profile NAME]"
    std::string value(std::string_view key) const {
        auto it = values.find(key);
        return it == values.end() ? std::string{} : it->second;
    }
};
result<profile_settings, std::string> load_profile_settings(const env_lookup& env);

} // namespace skiff::s3

// fmt::format("{}", creds) prints describe(creds), so a log line cannot leak the secret.
template <>
struct fmt::formatter<skiff::s3::credentials> : fmt::formatter<std::string_view> {
    template <typename FormatContext>
    auto format(const skiff::s3::credentials& c, FormatContext& ctx) const {
        return fmt::formatter<std::string_view>::format(skiff::s3::describe(c), ctx);
    }
};
