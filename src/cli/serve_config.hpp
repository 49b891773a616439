// `skiff serve`'s settings: the flag table, where each value came from (precedence: flag >
// SKIFF_* environment variable > --config file > default), the broker_config they make, and
// --print-config's rendering of them. No I/O besides reading the config file (and, for an S3
// store, the AWS credential files); the start-up checks are in serve_checks.hpp.
#pragma once

#include <skiff/broker/config.hpp>
#include <skiff/core/result.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::cli {

enum class value_kind { text, number, boolean };

struct serve_flag {
    const char* name; // without "--"; also the config file's key
    value_kind kind;
    const char* meta;
    const char* help;
    // The default shown by --help and --print-config, read from a default-constructed
    // broker_config so the text cannot drift from what the broker does; null where there is
    // none (the help sentence says what happens).
    std::string (*default_of)(const broker::broker_config&) = nullptr;
    bool quote_default = false; // --help shows (default "default") rather than (default default)
    // Never printed (--print-config masks it). None yet; SASL passwords will be.
    bool secret = false;
};

std::span<const serve_flag> serve_flags() noexcept;
// The value forms every source accepts (flag, variable, file): true/1/yes/on, false/0/no/off;
// a decimal integer with nothing after it.
std::optional<bool> parse_flag_bool(std::string_view v);
std::optional<std::int64_t> parse_flag_int(std::string_view v);
const serve_flag* find_serve_flag(std::string_view name) noexcept;

// SKIFF_SEGMENT_BYTES for segment-bytes.
std::string env_name(std::string_view flag);

enum class value_source { default_value, file, env, flag };

struct setting {
    setting() = default;
    std::string value;
    value_source source = value_source::default_value;
    int line = 0; // in the config file, for source == file
};

struct serve_options {
    serve_options() = default;
    std::map<std::string, setting, std::less<>> values; // only flags given somewhere
    std::string config_path;                            // --config or SKIFF_CONFIG; empty: none
    bool help = false;
    bool print_config = false;
    bool check = false;
};

// Returns an environment variable's value, nullopt when unset.
using env_fn = std::function<std::optional<std::string>(const std::string&)>;
env_fn process_environment();

// Reads the arguments after "serve", the SKIFF_* variables and the config file. The error is
// one sentence ("unknown flag --x", "unknown key 'foo' in skiff.toml (line 3)", ...): a usage
// error (exit status 2).
result<serve_options, std::string> parse_serve_options(const std::vector<std::string>& args, const env_fn& env);

// Validates every value and the combinations (contradictory flags) and makes the broker's
// configuration. The error is one sentence naming the flag and, for a value that did not
// come from the command line, where it came from. Sets the log level (--log-level).
result<broker::broker_config, std::string> make_broker_config(const serve_options& o);

// --print-config: the effective settings as TOML that --config accepts, each with where it
// came from; secrets (and passwords inside URLs) masked, S3 credentials described, never shown.
std::string render_config(const serve_options& o, const broker::broker_config& cfg);

void print_serve_usage(std::FILE* out);

} // namespace skiff::cli
