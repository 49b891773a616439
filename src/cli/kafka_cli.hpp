// What the Kafka commands of the `skiff` binary (topic, cluster, group, produce, consume, user)
// share: the common flags (security included: TLS and SASL, docs/cli.md "Security"), running a
// client coroutine from main, error sentences and exit codes, tables for people and JSON for
// scripts.
//
// A command's shape (see topic_cmd.cpp):
//
//   CLI::App app("...", "skiff topic");
//   kafka_options ko;
//   auto* sub = app.add_subcommand("list", "...");
//   add_kafka_options(*sub, ko);
//   if (auto code = parse_args(app, args)) return *code;          // --help, usage errors
//   return run_with_client(ko, "skiff topic list",
//                          [&](client::client& c) { return list_topics(c, &ko); });
//
// The callable must not itself be a coroutine lambda with captures (they dangle after the
// first suspension): let it call a coroutine function and pass state as parameters.
#pragma once

#include <skiff/client/client.hpp>
#include <skiff/client/errc.hpp>
#include <skiff/client/security.hpp>
#include <skiff/core/result.hpp>
#include <skiff/runtime/task.hpp>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::cli {

// Exit codes of every Kafka command (also in each command's --help, `exit_codes_help`).
inline constexpr int exit_ok = 0;
inline constexpr int exit_broker_error = 1; // the broker answered with an error (or a check failed),
                                            // or refused the SASL credentials
inline constexpr int exit_usage = 2;        // bad arguments (security settings included)
inline constexpr int exit_unreachable = 3;  // cannot connect to a broker, the TLS handshake failed, or
                                            // the broker did not answer in time
inline constexpr int exit_protocol = 4;     // the answer was not understood / no common API version
extern const char* const exit_codes_help;   // a footer for --help listing the codes above

struct kafka_options {
    std::string brokers = "127.0.0.1:9092"; // comma-separated host:port list
    bool json = false;
    int timeout_ms = 30000;                 // per request; connecting gets the same budget
    std::string client_id = "skiff-cli";

    // Security (empty: not given; a flag or its SKIFF_* variable wins over --command-config).
    std::string security_protocol;  // PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    std::string sasl_mechanism;     // PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    std::string sasl_username;
    std::string sasl_password_file; // else SKIFF_SASL_PASSWORD, else sasl.jaas.config's password
    std::string ssl_ca_file;
    std::string ssl_cert_file;
    std::string ssl_key_file;
    std::string command_config;     // a Java-style properties file (kafka-topics.sh --command-config)

    // Brokers, timeouts and client id; security is PLAINTEXT (see security()).
    client::client_config config() const;
    // The security settings from the flags, SKIFF_SASL_PASSWORD and --command-config, checked
    // (reads the password and properties files). The error is one sentence: a usage error.
    result<client::security_config, std::string> security() const;
};

// Adds --brokers/-b (SKIFF_BROKERS), --json (SKIFF_JSON), --timeout-ms (SKIFF_TIMEOUT_MS),
// --client-id (SKIFF_CLIENT_ID) and the security flags (--security-protocol, --sasl-mechanism,
// --sasl-username, --sasl-password-file, --ssl-ca-file, --ssl-cert-file, --ssl-key-file,
// --command-config; SKIFF_SECURITY_PROTOCOL etc.) to `app`.
void add_kafka_options(CLI::App& app, kafka_options& o);

// A Java-style .properties text (Kafka's --command-config files): key/value pairs in order,
// with '#'/'!' comments, '=' / ':' / blank separators, backslash escapes and continuations.
std::vector<std::pair<std::string, std::string>> parse_properties(std::string_view text);

// The options of a JAAS entry such as sasl.jaas.config's
//   org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b";
// module: the login module's class name. Error: one sentence (not naming any value).
struct jaas_entry {
    std::string module;
    std::vector<std::pair<std::string, std::string>> options;
};
result<jaas_entry, std::string> parse_jaas(std::string_view text);

// Parses `args` (without the program and command names) into `app`. nullopt: go on; otherwise
// the exit code to return now (0 after --help, exit_usage after an error, both printed).
std::optional<int> parse_args(CLI::App& app, const std::vector<std::string>& args);

// Creates a reactor, connects a client to o.brokers and runs fn(client) to its end, then
// closes the client. Returns fn's exit code, or the one for a failed connect (its sentence
// printed as "<command>: <message>").
int run_with_client(const kafka_options& o, const std::string& command,
                    const std::function<runtime::task<int>(client::client&)>& fn);

// The exit code for an error's class (broker_error → 1, transport → 3, protocol → 4).
int exit_code(const client::error& e);
// Prints "<command>: <message>" to stderr and returns exit_code(e).
int report(const std::string& command, const client::error& e);
// Prints "<command>: <sentence>" to stderr and returns `code`.
int report(const std::string& command, const std::string& sentence, int code);

// A Kafka error code about `subject` ("topic 'x'", "group 'g'") in one sentence:
// "topic 'x' already exists (TOPIC_ALREADY_EXISTS)", "topic 'x': invalid config: <the broker's
// words> (INVALID_CONFIG)", or "<subject>: <NAME>" for codes without a phrase of their own.
std::string kafka_error_sentence(const std::string& subject, kafka::error_code code,
                                 const std::optional<std::string>& message = {});

// A table for people: columns left-aligned, two spaces apart, a header row in capitals.
class table {
public:
    explicit table(std::vector<std::string> header) : _header(std::move(header)) {}
    void add(std::vector<std::string> row) { _rows.push_back(std::move(row)); }
    bool empty() const noexcept { return _rows.empty(); }
    void print(std::FILE* out = stdout) const;

private:
    std::vector<std::string> _header;
    std::vector<std::vector<std::string>> _rows;
};

// Prints `j` on one line (scripts read it with jq) and a newline.
void print_json(const nlohmann::json& j, std::FILE* out = stdout);

// "k=v" → {k, v}; nullopt when there is no '=' or the key is empty.
std::optional<std::pair<std::string, std::string>> split_key_value(const std::string& kv);

} // namespace skiff::cli
