// S3 settings shared by every command that talks to S3 (s3, fsck, later serve): flags first,
// then the environment, then the AWS shared files.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/s3/client.hpp>

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace skiff::cli {

struct s3_flags {
    std::optional<std::string> endpoint; // --s3-endpoint
    std::optional<std::string> region;   // --s3-region
    bool path_style = false;             // --s3-path-style
};

// Credentials from the AWS chain (docs/credentials.md: environment, web identity, ~/.aws with
// credential_process, container, IMDSv2; temporary ones through a started provider); endpoint
// from the flag, SKIFF_S3_ENDPOINT, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL; region from the flag, SKIFF_S3_REGION, AWS_REGION,
// AWS_DEFAULT_REGION or the profile, else us-east-1. The error is one sentence.
result<s3::client_config, std::string> make_s3_config(const s3_flags& flags);

// Parses `args` (in command-line order) into `app` with the messages `skiff s3` and `skiff fsck`
// have always printed ("skiff: --range needs a value", "skiff: <CLI11's reason>"), which scripts
// and test/integration/test_cli.sh match. Returns the exit status (2) when they do not parse.
std::optional<int> parse_s3_style_args(CLI::App& app, const std::vector<std::string>& args);

} // namespace skiff::cli
