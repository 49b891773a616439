// Shared plumbing of the Kafka commands: flags, the reactor around a client, errors, output.
#include "kafka_cli.hpp"

#include <skiff/runtime/reactor.hpp>
#include <skiff/sasl/plain.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>

namespace skiff::cli {

const char* const exit_codes_help =
    "Exit status: 0 ok; 1 the broker answered with an error or refused the SASL credentials; 2 bad\n"
    "arguments or security settings; 3 cannot connect to a broker, the TLS handshake failed, or it\n"
    "did not answer within --timeout-ms; 4 the broker's answer was not understood (or it speaks no\n"
    "version of an API that skiff speaks).\n"
    "Security: --security-protocol PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL, --sasl-mechanism,\n"
    "--sasl-username, --sasl-password-file (or SKIFF_SASL_PASSWORD), --ssl-ca-file, --ssl-cert-file,\n"
    "--ssl-key-file, or --command-config FILE (Kafka's properties); see docs/cli.md.";

client::client_config kafka_options::config() const {
    client::client_config c;
    c.bootstrap.clear();
    std::size_t pos = 0;
    while (pos <= brokers.size()) {
        auto comma = brokers.find(',', pos);
        if (comma == std::string::npos) comma = brokers.size();
        std::string one = brokers.substr(pos, comma - pos);
        one.erase(0, one.find_first_not_of(" \t"));
        one.erase(one.find_last_not_of(" \t") + 1);
        if (!one.empty()) c.bootstrap.push_back(std::move(one));
        pos = comma + 1;
    }
    c.conn.client_id = client_id;
    c.conn.request_timeout = std::chrono::milliseconds(timeout_ms);
    c.conn.connect_timeout = std::chrono::milliseconds(timeout_ms);
    return c;
}

void add_kafka_options(CLI::App& app, kafka_options& o) {
    app.add_option("-b,--brokers", o.brokers, "bootstrap brokers, HOST:PORT[,HOST:PORT...]")
        ->envname("SKIFF_BROKERS")
        ->capture_default_str();
    app.add_flag("--json", o.json, "print JSON (one document) instead of a table")->envname("SKIFF_JSON");
    app.add_option("--timeout-ms", o.timeout_ms, "time limit of connecting and of each request")
        ->envname("SKIFF_TIMEOUT_MS")
        ->check(CLI::Range(1, 3600000))
        ->capture_default_str();
    app.add_option("--client-id", o.client_id, "client id sent to the broker")
        ->envname("SKIFF_CLIENT_ID")
        ->capture_default_str();
    app.add_option("--security-protocol", o.security_protocol,
                   "PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's security.protocol)")
        ->envname("SKIFF_SECURITY_PROTOCOL");
    app.add_option("--sasl-mechanism", o.sasl_mechanism, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        ->envname("SKIFF_SASL_MECHANISM");
    app.add_option("--sasl-username", o.sasl_username, "SASL user name")->envname("SKIFF_SASL_USERNAME");
    app.add_option("--sasl-password-file", o.sasl_password_file,
                   "read the SASL password from the first line of this file (else SKIFF_SASL_PASSWORD)")
        ->envname("SKIFF_SASL_PASSWORD_FILE");
    app.add_option("--ssl-ca-file", o.ssl_ca_file, "PEM CA certificates to verify the brokers (default: the system's)")
        ->envname("SKIFF_SSL_CA_FILE");
    app.add_option("--ssl-cert-file", o.ssl_cert_file, "PEM client certificate (mutual TLS), with --ssl-key-file")
        ->envname("SKIFF_SSL_CERT_FILE");
    app.add_option("--ssl-key-file", o.ssl_key_file, "PEM private key of --ssl-cert-file (unencrypted)")
        ->envname("SKIFF_SSL_KEY_FILE");
    app.add_option("--command-config", o.command_config,
                   "Kafka client properties file: security.protocol, sasl.mechanism, sasl.jaas.config, "
                   "ssl.ca.location, ssl.certificate.location, ssl.key.location")
        ->envname("SKIFF_COMMAND_CONFIG");
}

std::vector<std::pair<std::string, std::string>> parse_properties(std::string_view text) {
    // java.util.Properties.load: logical lines (a line ending in an odd number of backslashes
    // continues, the next line's leading blanks dropped), comments, key up to the first
    // unescaped '=', ':' or blank, then blanks, one optional '=' or ':', blanks, the value.
    std::vector<std::string> lines;
    {
        std::string logical;
        bool continuing = false;
        std::size_t pos = 0;
        while (pos <= text.size()) {
            auto nl = text.find_first_of("\r\n", pos);
            if (nl == std::string_view::npos) nl = text.size();
            std::string_view line = text.substr(pos, nl - pos);
            pos = nl + 1;
            if (nl < text.size() && text[nl] == '\r' && pos < text.size() && text[pos] == '\n') ++pos;
            std::size_t lead = 0;
            while (lead < line.size() && (line[lead] == ' ' || line[lead] == '\t' || line[lead] == '\f')) ++lead;
            line.remove_prefix(lead);
            if (!continuing && (line.empty() || line[0] == '#' || line[0] == '!')) {
                if (nl == text.size()) break;
                continue;
            }
            std::size_t slashes = 0;
            while (slashes < line.size() && line[line.size() - 1 - slashes] == '\\') ++slashes;
            if (slashes % 2 == 1) {
                logical.append(line.substr(0, line.size() - 1));
                continuing = true;
            } else {
                logical.append(line);
                lines.push_back(std::move(logical));
                logical.clear();
                continuing = false;
            }
            if (nl == text.size()) break;
        }
        if (continuing) lines.push_back(std::move(logical));
    }
    auto unescape = [](std::string_view s) {
        std::string out;
        for (std::size_t i = 0; i < s.size(); ++i) {
            char c = s[i];
            if (c != '\\' || i + 1 == s.size()) {
                out.push_back(c);
                continue;
            }
            c = s[++i];
            switch (c) {
            case 't': out.push_back('\t'); break;
            case 'n': out.push_back('\n'); break;
            case 'r': out.push_back('\r'); break;
            case 'f': out.push_back('\f'); break;
            case 'u': {
                unsigned cp = 0;
                std::size_t j = 0;
                for (; j < 4 && i + 1 + j < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1 + j])); ++j) {
                    cp = cp * 16 + static_cast<unsigned>(std::stoi(std::string(1, s[i + 1 + j]), nullptr, 16));
                }
                i += j;
                if (cp < 0x80) {
                    out.push_back(static_cast<char>(cp));
                } else if (cp < 0x800) {
                    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
                    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
                } else {
                    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
                    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
                    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
                }
                break;
            }
            default: out.push_back(c); break;
            }
        }
        return out;
    };
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string& line : lines) {
        std::size_t i = 0;
        while (i < line.size()) {
            const char c = line[i];
            if (c == '\\') {
                i += 2;
                continue;
            }
            if (c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f') break;
            ++i;
        }
        const std::size_t key_end = std::min(i, line.size());
        std::size_t v = key_end;
        while (v < line.size() && (line[v] == ' ' || line[v] == '\t' || line[v] == '\f')) ++v;
        if (v < line.size() && (line[v] == '=' || line[v] == ':')) ++v;
        while (v < line.size() && (line[v] == ' ' || line[v] == '\t' || line[v] == '\f')) ++v;
        out.emplace_back(unescape(std::string_view(line).substr(0, key_end)),
                         unescape(std::string_view(line).substr(std::min(v, line.size()))));
    }
    return out;
}

result<jaas_entry, std::string> parse_jaas(std::string_view text) {
    // Kafka's JaasConfig: "<LoginModuleClass> <flag> [name=value ...];" with values quoted by
    // '"' (backslash escapes inside) or bare tokens. One entry: a client has one login.
    jaas_entry e;
    std::size_t i = 0;
    auto skip_blanks = [&] {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    };
    auto token = [&] {
        std::size_t start = i;
        while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])) && text[i] != '=' &&
               text[i] != ';' && text[i] != '"') {
            ++i;
        }
        return std::string(text.substr(start, i - start));
    };
    skip_blanks();
    e.module = token();
    if (e.module.empty()) return failure{std::string("sasl.jaas.config does not start with a login module class")};
    skip_blanks();
    const std::string flag = token();
    if (flag != "required" && flag != "requisite" && flag != "sufficient" && flag != "optional") {
        return failure{std::string("sasl.jaas.config: the login module must be followed by a control flag "
                                   "(required, requisite, sufficient or optional)")};
    }
    for (;;) {
        skip_blanks();
        if (i >= text.size()) return failure{std::string("sasl.jaas.config does not end with ';'")};
        if (text[i] == ';') {
            ++i;
            skip_blanks();
            if (i != text.size()) return failure{std::string("sasl.jaas.config holds more than one login module")};
            return e;
        }
        std::string name = token();
        skip_blanks();
        if (name.empty() || i >= text.size() || text[i] != '=') {
            return failure{std::string("sasl.jaas.config: expected name=\"value\" options after the control flag")};
        }
        ++i;
        skip_blanks();
        std::string value;
        if (i < text.size() && text[i] == '"') {
            ++i;
            bool closed = false;
            while (i < text.size()) {
                char c = text[i++];
                if (c == '\\' && i < text.size()) {
                    value.push_back(text[i++]);
                } else if (c == '"') {
                    closed = true;
                    break;
                } else {
                    value.push_back(c);
                }
            }
            if (!closed) return failure{"sasl.jaas.config: the value of " + name + " lacks its closing quote"};
        } else {
            value = token();
        }
        e.options.emplace_back(std::move(name), std::move(value));
    }
}

namespace {

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// The first line of `path`, without its line end. Error: one sentence.
result<std::string, std::string> read_first_line(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return failure{"cannot read " + what + " '" + path + "': " + std::strerror(errno)};
    std::string line;
    std::getline(in, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) return failure{what + " '" + path + "' is empty"};
    return line;
}

// What --command-config may set; empty strings: not set.
struct file_settings {
    std::string protocol, mechanism, username, password, ca, cert, key, identification;
    bool identification_set = false;
    ~file_settings() { sasl::wipe_buffer(password.data(), password.capacity()); }
};

result<void, std::string> read_command_config(const std::string& path, file_settings& f) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return failure{"cannot read --command-config '" + path + "': " + std::strerror(errno)};
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    auto props = parse_properties(text);
    sasl::wipe_buffer(text.data(), text.capacity());
    std::string jaas;
    std::string rd_user, rd_password;
    for (auto& [key, value] : props) {
        const std::string where = "--command-config '" + path + "': ";
        if (key == "security.protocol") {
            f.protocol = value;
        } else if (key == "sasl.mechanism" || key == "sasl.mechanisms") {
            f.mechanism = value;
        } else if (key == "sasl.jaas.config") {
            jaas = value;
        } else if (key == "sasl.username") {
            rd_user = value;
        } else if (key == "sasl.password") {
            rd_password = value;
        } else if (key == "ssl.ca.location") {
            f.ca = value;
        } else if (key == "ssl.certificate.location") {
            f.cert = value;
        } else if (key == "ssl.key.location") {
            f.key = value;
        } else if (key == "ssl.endpoint.identification.algorithm") {
            f.identification = value;
            f.identification_set = true;
        } else if (key.rfind("ssl.truststore.", 0) == 0 || key.rfind("ssl.keystore.", 0) == 0) {
            return failure{where + key +
                           " is not supported: skiff reads PEM files, not Java key stores; use ssl.ca.location (and "
                           "ssl.certificate.location, ssl.key.location), e.g. from keytool -exportcert -rfc"};
        } else if (key == "ssl.key.password" || key == "ssl.key.location.password" || key == "ssl.key.pem" ||
                   key == "ssl.certificate.pem" || key == "ssl.ca.pem") {
            return failure{where + key + " is not supported: give unencrypted PEM files with ssl.ca.location, "
                                         "ssl.certificate.location and ssl.key.location"};
        } else {
            std::fprintf(stderr, "skiff: ignoring '%s' in --command-config '%s': not a setting skiff uses\n",
                         key.c_str(), path.c_str());
        }
    }
    if (!jaas.empty()) {
        auto e = parse_jaas(jaas);
        sasl::wipe_buffer(jaas.data(), jaas.capacity());
        if (!e) return failure{"--command-config '" + path + "': " + e.error()};
        const bool plain = e->module.find("PlainLoginModule") != std::string::npos;
        const bool scram = e->module.find("ScramLoginModule") != std::string::npos;
        if (!plain && !scram) {
            return failure{"--command-config '" + path + "': sasl.jaas.config's login module " + e->module +
                           " is not supported (PlainLoginModule or ScramLoginModule)"};
        }
        if (f.mechanism.empty() && plain) f.mechanism = "PLAIN";
        for (auto& [name, value] : e->options) {
            if (name == "username") f.username = value;
            if (name == "password") f.password = value;
            sasl::wipe_buffer(value.data(), value.capacity());
        }
    }
    if (f.username.empty()) f.username = rd_user;
    if (f.password.empty()) f.password = rd_password;
    sasl::wipe_buffer(rd_password.data(), rd_password.capacity());
    for (auto& [key, value] : props) sasl::wipe_buffer(value.data(), value.capacity());
    return ok();
}

} // namespace

result<client::security_config, std::string> kafka_options::security() const {
    file_settings f;
    if (!command_config.empty()) {
        auto r = read_command_config(command_config, f);
        if (!r) return failure{r.error()};
    }
    auto pick = [](const std::string& flag, const std::string& file) { return flag.empty() ? file : flag; };
    client::security_config sec;
    const std::string protocol = pick(security_protocol, f.protocol);
    if (!protocol.empty()) {
        auto p = client::security_protocol_from_name(protocol);
        if (!p) {
            return failure{"unknown security protocol '" + protocol +
                           "' (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"};
        }
        sec.protocol = *p;
    }
    sec.ssl_ca_file = pick(ssl_ca_file, f.ca);
    sec.ssl_cert_file = pick(ssl_cert_file, f.cert);
    sec.ssl_key_file = pick(ssl_key_file, f.key);
    if (f.identification_set) {
        const std::string alg = upper(f.identification);
        if (alg.empty() || alg == "NONE") {
            sec.ssl_verify_hostname = false;
        } else if (alg != "HTTPS") {
            return failure{"ssl.endpoint.identification.algorithm '" + f.identification +
                           "' is not supported (https, or empty to skip the host name check)"};
        }
    }
    if (sec.uses_tls() && sec.ssl_cert_file.empty() != sec.ssl_key_file.empty()) {
        return failure{"a client certificate needs both --ssl-cert-file and --ssl-key-file"};
    }
    const std::string mechanism = upper(pick(sasl_mechanism, f.mechanism));
    if (!mechanism.empty() && !client::known_sasl_mechanism(mechanism)) {
        return failure{"unknown SASL mechanism '" + mechanism + "' (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"};
    }
    if (!sec.uses_sasl()) return sec;
    const std::string pname(client::to_string(sec.protocol));
    if (mechanism.empty()) {
        return failure{pname + " needs --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"};
    }
    sec.sasl_mechanism = mechanism;
    sec.sasl_username = pick(sasl_username, f.username);
    if (sec.sasl_username.empty()) {
        return failure{pname + " needs --sasl-username (or username in --command-config's sasl.jaas.config)"};
    }
    if (!sasl_password_file.empty()) {
        auto pw = read_first_line(sasl_password_file, "--sasl-password-file");
        if (!pw) return failure{pw.error()};
        sec.sasl_password = std::move(*pw);
    } else if (const char* env = std::getenv("SKIFF_SASL_PASSWORD"); env != nullptr && *env != '\0') {
        sec.sasl_password = env;
    } else {
        sec.sasl_password = f.password;
    }
    if (sec.sasl_password.empty()) {
        return failure{pname + " needs a password: --sasl-password-file FILE, SKIFF_SASL_PASSWORD, or password in "
                               "--command-config's sasl.jaas.config"};
    }
    return sec;
}

std::optional<int> parse_args(CLI::App& app, const std::vector<std::string>& args) {
    // CLI11 takes a vector in reverse order (it pops from the back).
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
        app.parse(reversed);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "%s: %s\n", app.get_name().c_str(), e.what());
        std::fprintf(stderr, "Run with --help for more information.\n");
        return exit_usage;
    }
    return std::nullopt;
}

namespace {
// Runs the command's task with a connected client; closes the client whatever happened.
runtime::task<int> with_client(client::client* c, const std::string* command,
                               const std::function<runtime::task<int>(client::client&)>* fn) {
    auto ct = c->connect();
    auto connected = co_await std::move(ct);
    int code = exit_ok;
    if (!connected) {
        code = report(*command, connected.error());
    } else {
        std::exception_ptr ex;
        try {
            auto t = (*fn)(*c);
            code = co_await std::move(t);
        } catch (...) {
            ex = std::current_exception();
        }
        if (ex) {
            co_await c->close();
            std::rethrow_exception(ex);
        }
    }
    co_await c->close();
    co_return code;
}
} // namespace

int run_with_client(const kafka_options& o, const std::string& command,
                    const std::function<runtime::task<int>(client::client&)>& fn) {
    auto cfg = o.config();
    if (cfg.bootstrap.empty()) return report(command, "--brokers is empty", exit_usage);
    auto sec = o.security();
    if (!sec) return report(command, sec.error(), exit_usage);
    cfg.security() = std::move(*sec);
    auto r = runtime::reactor::create(0);
    if (!r) return report(command, r.error(), exit_unreachable);
    client::client c(std::move(cfg));
    try {
        return (*r)->run_until_complete(with_client(&c, &command, &fn));
    } catch (const std::exception& e) {
        return report(command, std::string("internal error: ") + e.what(), exit_protocol);
    }
}

int exit_code(const client::error& e) {
    if (e.code == client::errc::broker_error || e.code == client::errc::not_found ||
        e.code == client::errc::authentication_failed) {
        return exit_broker_error;
    }
    if (e.code == client::errc::bad_config) return exit_usage;
    if (e.code == client::errc::protocol_error || e.code == client::errc::unsupported_version) return exit_protocol;
    return exit_unreachable;
}

int report(const std::string& command, const client::error& e) {
    return report(command, e.message, exit_code(e));
}

int report(const std::string& command, const std::string& sentence, int code) {
    std::fprintf(stderr, "%s: %s\n", command.c_str(), sentence.c_str());
    return code;
}

std::string kafka_error_sentence(const std::string& subject, kafka::error_code code,
                                 const std::optional<std::string>& message) {
    const std::string name(kafka::name(code));
    // Codes whose phrase says everything: the broker's own words would only repeat it.
    const char* complete = nullptr;
    // Codes whose phrase names a category: the broker's words say which config, which limit.
    const char* category = nullptr;
    switch (code) {
    case kafka::error_code::topic_already_exists: complete = "already exists"; break;
    case kafka::error_code::unknown_topic_or_partition: complete = "does not exist"; break;
    case kafka::error_code::group_id_not_found: complete = "does not exist"; break;
    case kafka::error_code::non_empty_group: complete = "still has active members"; break;
    case kafka::error_code::topic_deletion_disabled: complete = "cannot be deleted: topic deletion is disabled"; break;
    case kafka::error_code::topic_authorization_failed:
    case kafka::error_code::group_authorization_failed:
    case kafka::error_code::cluster_authorization_failed: complete = "is not accessible: not authorized"; break;
    case kafka::error_code::invalid_partitions: category = "invalid partition count"; break;
    case kafka::error_code::invalid_replication_factor: category = "invalid replication factor"; break;
    case kafka::error_code::invalid_replica_assignment: category = "invalid replica assignment"; break;
    case kafka::error_code::invalid_config: category = "invalid config"; break;
    case kafka::error_code::invalid_topic_exception: category = "invalid topic name"; break;
    case kafka::error_code::invalid_request: category = "invalid request"; break;
    case kafka::error_code::policy_violation: category = "refused by the broker's policy"; break;
    case kafka::error_code::coordinator_not_available: category = "no coordinator available"; break;
    case kafka::error_code::not_controller: category = "the broker is not the controller"; break;
    case kafka::error_code::request_timed_out: category = "the broker timed out"; break;
    case kafka::error_code::unsupported_version: category = "version not supported by the broker"; break;
    default: break;
    }
    if (complete) return subject + " " + complete + " (" + name + ")";
    std::string out = subject + ": ";
    if (category) out += category;
    if (message && !message->empty() && *message != name) {
        if (category) out += ": ";
        out += *message;
    } else if (!category) {
        return out + name;
    }
    return out + " (" + name + ")";
}

void table::print(std::FILE* out) const {
    std::vector<std::size_t> width(_header.size(), 0);
    auto measure = [&](const std::vector<std::string>& row) {
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
    };
    measure(_header);
    for (const auto& r : _rows) measure(r);
    auto line = [&](const std::vector<std::string>& row) {
        std::string s;
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
            s += row[i];
            if (i + 1 < row.size()) s.append(width[i] - row[i].size() + 2, ' ');
        }
        s += '\n';
        std::fputs(s.c_str(), out);
    };
    line(_header);
    for (const auto& r : _rows) line(r);
}

void print_json(const nlohmann::json& j, std::FILE* out) {
    const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fputs(s.c_str(), out);
    std::fputc('\n', out);
}

std::optional<std::pair<std::string, std::string>> split_key_value(const std::string& kv) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    return std::make_pair(kv.substr(0, eq), kv.substr(eq + 1));
}

} // namespace skiff::cli
