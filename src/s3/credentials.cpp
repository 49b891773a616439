#include <skiff/s3/credentials.hpp>

#include <skiff/core/ascii.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace skiff::s3 {

namespace {

using section = std::map<std::string, std::string, std::less<>>;
using ini_file = std::map<std::string, section, std::less<>>;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

// The subset of the INI dialect the AWS CLI writes: [section], key = value, '#'/';' comment
// lines. Indented lines belong to nested blocks (`s3 =` then `  addressing_style = path`) that
// carry no credentials, so they are skipped. Errors name the line but never echo it: the
// line may hold a secret.
result<ini_file, std::string> parse_ini(std::istream& in, const std::string& path) {
    ini_file out;
    section* current = nullptr;
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        ++number;
        std::string_view raw = line;
        if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
        std::string_view text = trim(raw);
        if (text.empty() || text.front() == '#' || text.front() == ';') continue;
        auto where = [&] { return path + ":" + std::to_string(number) + ": "; };
        if (raw.front() == ' ' || raw.front() == '\t') {
            if (current == nullptr) return failure{where() + "indented line before any [section]"};
            continue;
        }
        if (text.front() == '[') {
            if (text.back() != ']') return failure{where() + "section header is missing its closing ']'"};
            current = &out[std::string(trim(text.substr(1, text.size() - 2)))];
            continue;
        }
        auto eq = text.find('=');
        if (eq == std::string_view::npos) return failure{where() + "expected 'key = value'"};
        if (current == nullptr) return failure{where() + "setting appears before any [section]"};
        (*current)[ascii_lowercase(trim(text.substr(0, eq)))] = std::string(trim(text.substr(eq + 1)));
    }
    return out;
}

// A file that does not exist is "no data" (nullopt), not an error; one that exists but cannot
// be read or parsed is an error, because silently ignoring it would pick other credentials.
result<std::optional<ini_file>, std::string> read_ini(const std::string& path) {
    std::error_code ec;
    bool exists = std::filesystem::exists(path, ec);
    if (ec) return failure{"cannot access " + path + ": " + ec.message()};
    if (!exists) return std::optional<ini_file>{};
    std::ifstream in(path, std::ios::binary);
    if (!in) return failure{"cannot open " + path + " for reading"};
    auto parsed = parse_ini(in, path);
    if (!parsed) return failure{std::move(parsed).error()};
    return std::optional<ini_file>{std::move(parsed).value()};
}

std::optional<std::string> non_empty(const env_lookup& env, std::string_view name) {
    auto v = env(name);
    if (v && !v->empty()) return v;
    return std::nullopt;
}

std::string expand_home(std::string path, const std::optional<std::string>& home) {
    if (home && (path == "~" || path.rfind("~/", 0) == 0)) path = *home + path.substr(1);
    return path;
}

const section* find_section(const std::optional<ini_file>& file, std::string_view name) {
    if (!file) return nullptr;
    auto it = file->find(name);
    return it == file->end() ? nullptr : &it->second;
}

// The config file spells profiles "[profile NAME]", except the default one, which is
// "[default]" (the CLI also accepts "[profile default]").
const section* find_config_profile(const std::optional<ini_file>& file, const std::string& profile) {
    if (!file) return nullptr;
    for (const auto& [name, values] : *file) {
        std::string_view n = name;
        if (profile == "default" && n == "default") return &values;
        if (n.rfind("profile", 0) == 0 && n.size() > 7 && (n[7] == ' ' || n[7] == '\t') &&
            trim(n.substr(7)) == profile) {
            return &values;
        }
    }
    return nullptr;
}

std::string get(const section* s, std::string_view key) {
    if (s == nullptr) return {};
    auto it = s->find(key);
    return it == s->end() ? std::string{} : it->second;
}

// Credentials held by one profile section: nullopt when it has neither key, an error when
// it has only one of them.
result<std::optional<credentials>, std::string> creds_from(const section* s, const std::string& where) {
    if (s == nullptr) return std::optional<credentials>{};
    credentials c{get(s, "aws_access_key_id"), get(s, "aws_secret_access_key"), get(s, "aws_session_token")};
    if (c.session_token.empty()) c.session_token = get(s, "aws_security_token"); // legacy spelling
    if (c.access_key_id.empty() && c.secret_access_key.empty()) return std::optional<credentials>{};
    if (c.access_key_id.empty()) return failure{where + " has aws_secret_access_key but no aws_access_key_id"};
    if (c.secret_access_key.empty()) return failure{where + " has aws_access_key_id but no aws_secret_access_key"};
    return std::optional<credentials>{std::move(c)};
}

} // namespace

std::string describe(const credentials& c) {
    std::string out;
    const auto& id = c.access_key_id;
    if (id.empty()) {
        out = "<no access key id>";
    } else if (id.size() >= 12) {
        out = id.substr(0, 4) + "\u2026" + id.substr(id.size() - 4);
    } else {
        out = "<" + std::to_string(id.size()) + "-char access key id>";
    }
    out += c.secret_access_key.empty() ? ", no secret" : ", secret <redacted>";
    out += c.session_token.empty() ? ", no session token" : ", session token <redacted>";
    return out;
}

env_lookup process_env() {
    return [](std::string_view name) -> std::optional<std::string> {
        const char* v = std::getenv(std::string(name).c_str());
        if (v == nullptr) return std::nullopt;
        return std::string(v);
    };
}

namespace {

// load_credentials, except that "no source has keys" sets `none_found` (the temporary sources
// of credential_provider.hpp come next in the chain) instead of being final.
result<loaded_credentials, std::string> load_credentials_impl(const env_lookup& env, bool& none_found) {
    none_found = false;
    loaded_credentials out;
    auto home = non_empty(env, "HOME");
    auto chosen_profile = non_empty(env, "AWS_PROFILE");
    std::string profile = chosen_profile.value_or("default");

    std::string creds_path;
    if (auto p = non_empty(env, "AWS_SHARED_CREDENTIALS_FILE")) {
        creds_path = expand_home(*p, home);
    } else if (home) {
        creds_path = *home + "/.aws/credentials";
    }
    std::string config_path;
    if (auto p = non_empty(env, "AWS_CONFIG_FILE")) {
        config_path = expand_home(*p, home);
    } else if (home) {
        config_path = *home + "/.aws/config";
    }

    // Files are parsed only when something is still missing, so a broken ~/.aws cannot stop a
    // fully env-configured broker.
    std::optional<std::optional<ini_file>> creds_file;
    std::optional<std::optional<ini_file>> config_file;
    auto load = [](std::optional<std::optional<ini_file>>& slot,
                   const std::string& path) -> result<void, std::string> {
        if (slot) return {};
        if (path.empty()) {
            slot.emplace();
            return {};
        }
        auto r = read_ini(path);
        if (!r) return failure{std::move(r).error()};
        slot.emplace(std::move(r).value());
        return {};
    };

    // 1. environment
    auto env_id = non_empty(env, "AWS_ACCESS_KEY_ID");
    auto env_secret = non_empty(env, "AWS_SECRET_ACCESS_KEY");
    if (env_id && env_secret) {
        out.creds = {*env_id, *env_secret, non_empty(env, "AWS_SESSION_TOKEN").value_or("")};
        out.source = "environment";
    } else if (env_id || env_secret) {
        return failure{std::string(env_id ? "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"
                                          : "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not") +
                       "; set both, or unset both to use the shared credentials files"};
    } else {
        // 2. shared credentials file, 3. shared config file
        if (auto r = load(creds_file, creds_path); !r) return failure{std::move(r).error()};
        if (auto r = load(config_file, config_path); !r) return failure{std::move(r).error()};
        const section* in_creds = find_section(*creds_file, profile);
        const section* in_config = find_config_profile(*config_file, profile);
        if (chosen_profile && in_creds == nullptr && in_config == nullptr) {
            return failure{"AWS_PROFILE names profile '" + profile + "', which is in neither " +
                           (creds_path.empty() ? std::string("<no credentials file>") : creds_path) +
                           " nor " + (config_path.empty() ? std::string("<no config file>") : config_path)};
        }
        auto from_creds = creds_from(in_creds, creds_path + " profile '" + profile + "'");
        if (!from_creds) return failure{std::move(from_creds).error()};
        auto from_config = creds_from(in_config, config_path + " profile '" + profile + "'");
        if (!from_config) return failure{std::move(from_config).error()};
        if (from_creds.value()) {
            out.creds = std::move(*from_creds.value());
            out.source = creds_path + " [" + profile + "]";
        } else if (from_config.value()) {
            out.creds = std::move(*from_config.value());
            out.source = config_path + " [profile " + profile + "]";
        } else {
            auto file_state = [](const std::string& path, const std::optional<ini_file>& f,
                                 const section* s) -> std::string {
                if (path.empty()) return "no path (HOME is unset)";
                if (!f) return path + " does not exist";
                if (s == nullptr) return path + " has no such profile";
                return path + " has the profile but no keys";
            };
            none_found = true;
            return failure{"no AWS credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                           "add aws_access_key_id/aws_secret_access_key to profile '" + profile +
                           "' (credentials file: " + file_state(creds_path, *creds_file, in_creds) +
                           "; config file: " + file_state(config_path, *config_file, in_config) + ")"};
        }
    }

    if (auto r = non_empty(env, "AWS_REGION")) {
        out.region = *r;
    } else if (auto d = non_empty(env, "AWS_DEFAULT_REGION")) {
        out.region = *d;
    } else {
        if (auto r = load(config_file, config_path); !r) return failure{std::move(r).error()};
        out.region = get(find_config_profile(*config_file, profile), "region");
        if (out.region.empty()) {
            if (auto r = load(creds_file, creds_path); !r) return failure{std::move(r).error()};
            out.region = get(find_section(*creds_file, profile), "region");
        }
    }
    return out;
}

} // namespace

result<loaded_credentials, std::string> load_credentials(const env_lookup& env) {
    bool none_found = false;
    return load_credentials_impl(env, none_found);
}

result<std::optional<loaded_credentials>, std::string> find_static_credentials(const env_lookup& env) {
    bool none_found = false;
    auto r = load_credentials_impl(env, none_found);
    if (r) return std::optional<loaded_credentials>{std::move(r).value()};
    if (none_found) return std::optional<loaded_credentials>{};
    return failure{std::move(r).error()};
}

result<profile_settings, std::string> load_profile_settings(const env_lookup& env) {
    profile_settings out;
    auto home = non_empty(env, "HOME");
    out.profile = non_empty(env, "AWS_PROFILE").value_or("default");
    std::string creds_path;
    if (auto p = non_empty(env, "AWS_SHARED_CREDENTIALS_FILE")) creds_path = expand_home(*p, home);
    else if (home) creds_path = *home + "/.aws/credentials";
    std::string config_path;
    if (auto p = non_empty(env, "AWS_CONFIG_FILE")) config_path = expand_home(*p, home);
    else if (home) config_path = *home + "/.aws/config";
    std::optional<ini_file> config_file, creds_file;
    if (!config_path.empty()) {
        auto r = read_ini(config_path);
        if (!r) return failure{std::move(r).error()};
        config_file = std::move(r).value();
    }
    if (!creds_path.empty()) {
        auto r = read_ini(creds_path);
        if (!r) return failure{std::move(r).error()};
        creds_file = std::move(r).value();
    }
    // The config file first (where the CLI writes these settings), then the credentials file.
    const section* in_config = find_config_profile(config_file, out.profile);
    const section* in_creds = find_section(creds_file, out.profile);
    for (const char* key : {"credential_process", "role_arn", "web_identity_token_file", "role_session_name", "region"}) {
        std::string v = get(in_config, key);
        if (!v.empty()) {
            out.values[key] = v;
            out.where[key] = config_path + " [profile " + out.profile + "]";
            continue;
        }
        v = get(in_creds, key);
        if (!v.empty()) {
            out.values[key] = v;
            out.where[key] = creds_path + " [" + out.profile + "]";
        }
    }
    if (auto it = out.values.find("web_identity_token_file"); it != out.values.end()) {
        it->second = expand_home(it->second, home);
    }
    return out;
}

} // namespace skiff::s3
