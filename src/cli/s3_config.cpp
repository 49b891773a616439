#include "s3_config.hpp"

#include <skiff/s3/credential_provider.hpp>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>

namespace skiff::cli {

namespace {
std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}
} // namespace

result<s3::client_config, std::string> make_s3_config(const s3_flags& flags) {
    // The whole chain (docs/credentials.md): static keys, or a provider of temporary ones.
    auto creds = s3::load_client_credentials(s3::process_env());
    if (!creds) return failure{creds.error()};
    s3::client_config cfg;
    cfg.creds = creds->creds;
    cfg.provider = creds->provider;
    cfg.creds_source = creds->source;
    if (flags.region) cfg.region = *flags.region;
    else if (auto r = env("SKIFF_S3_REGION")) cfg.region = *r;
    else if (!creds->region.empty()) cfg.region = creds->region;
    else cfg.region = "us-east-1";
    if (flags.endpoint) cfg.endpoint = *flags.endpoint;
    else if (auto e = env("SKIFF_S3_ENDPOINT")) cfg.endpoint = *e;
    else if (auto e2 = env("AWS_ENDPOINT_URL_S3")) cfg.endpoint = *e2;
    else if (auto e3 = env("AWS_ENDPOINT_URL")) cfg.endpoint = *e3;
    cfg.path_style = flags.path_style;
    return cfg;
}

std::optional<int> parse_s3_style_args(CLI::App& app, const std::vector<std::string>& args) {
    std::vector<std::string> reversed(args.rbegin(), args.rend()); // CLI11 pops from the back
    try {
        app.parse(reversed);
    } catch (const CLI::ArgumentMismatch& e) {
        std::string what = e.what();
        std::fprintf(stderr, "skiff: %s needs a value\n", what.substr(0, what.find(':')).c_str());
        return 2;
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "skiff: %s\n", e.what());
        return 2;
    }
    return std::nullopt;
}

} // namespace skiff::cli
