// Shared plumbing of the Kafka commands: flags, the reactor around a client, errors, output.
#include "kafka_cli.hpp"

#include <skiff/runtime/reactor.hpp>

#include <algorithm>
#include <chrono>
#include <exception>

namespace skiff::cli {

const char* const exit_codes_help =
    "Exit status: 0 ok; 1 the broker answered with an error; 2 bad arguments; 3 cannot connect to a\n"
    "broker, or it did not answer within --timeout-ms; 4 the broker's answer was not understood (or\n"
    "it speaks no version of an API that skiff speaks).";

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
    if (e.code == client::errc::broker_error || e.code == client::errc::not_found) return exit_broker_error;
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
