// `skiff user add|rm|list`: SASL/SCRAM users through the Kafka API (AlterUserScramCredentials,
// DescribeUserScramCredentials; KIP-554), so it works against any broker that serves them.
//
// The password is never a command-line argument (other users of the machine read those in
// /proc): it comes from --password-file, the SKIFF_USER_PASSWORD variable, or one line of
// standard input. It is salted and iterated here (Hi() of RFC 5802) and only that crosses the
// wire, as Kafka's own tools do; every copy is wiped once sent.
#include "commands.hpp"
#include "kafka_cli.hpp"

#include <skiff/sasl/credential.hpp>
#include <skiff/sasl/plain.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace skiff::cli {

namespace {

using nlohmann::json;

struct user_options {
    std::vector<std::string> names;
    std::vector<std::string> mechanisms{"SCRAM-SHA-512", "SCRAM-SHA-256"};
    int iterations = sasl::default_iterations;
    std::string password_file;
};

std::int8_t mechanism_code(sasl::scram_mechanism m) { return m == sasl::scram_mechanism::sha_256 ? 1 : 2; }
std::string mechanism_label(std::int8_t code) {
    if (code == 1) return "SCRAM-SHA-256";
    if (code == 2) return "SCRAM-SHA-512";
    return "UNKNOWN(" + std::to_string(code) + ")";
}

// The password, from the file, the variable or stdin (one line, its newline dropped).
result<std::string, std::string> read_password(const user_options& o) {
    std::string pw;
    if (!o.password_file.empty()) {
        std::ifstream in(o.password_file);
        if (!in) return failure{"cannot read the password file " + o.password_file};
        std::getline(in, pw);
    } else if (const char* env = std::getenv("SKIFF_USER_PASSWORD")) {
        pw = env;
    } else {
        std::getline(std::cin, pw);
    }
    if (!pw.empty() && pw.back() == '\r') pw.pop_back();
    if (pw.empty()) {
        return failure{std::string("no password: give --password-file, SKIFF_USER_PASSWORD or a line on standard input")};
    }
    return pw;
}

result<std::vector<sasl::scram_mechanism>, std::string> mechanisms_of(const user_options& o) {
    std::vector<sasl::scram_mechanism> out;
    for (const auto& name : o.mechanisms) {
        auto m = sasl::mechanism_from_name(name);
        if (!m) return failure{"unknown SCRAM mechanism '" + name + "' (SCRAM-SHA-256 or SCRAM-SHA-512)"};
        out.push_back(*m);
    }
    return out;
}

// Prints one line per user result; the exit code of the worst.
// The answers of one request per credential: the user is reported once, failed if any of its
// credentials failed.
int report_results(const std::string& cmd, const kafka::AlterUserScramCredentialsResponse& r, const char* done,
                   bool as_json) {
    int code = exit_ok;
    json out = json::array();
    kafka::AlterUserScramCredentialsResponse merged;
    for (const auto& res : r.results) {
        auto it = std::find_if(merged.results.begin(), merged.results.end(),
                               [&](const auto& m) { return m.user == res.user; });
        if (it == merged.results.end()) {
            merged.results.push_back(res);
        } else if (res.error_code != kafka::error_code::none && it->error_code == kafka::error_code::none) {
            *it = res;
        }
    }
    for (const auto& res : merged.results) {
        const bool ok = res.error_code == kafka::error_code::none;
        if (!ok) {
            code = exit_broker_error;
            report(cmd, kafka_error_sentence("user '" + res.user + "'", res.error_code, res.error_message),
                   exit_broker_error);
        } else if (!as_json) {
            std::printf("%s user '%s'\n", done, res.user.c_str());
        }
        out.push_back({{"user", res.user}, {"ok", ok},
                       {"error", ok ? json(nullptr) : json(std::string(kafka::name(res.error_code)))}});
    }
    if (as_json) print_json(out);
    return code;
}

// Kafka refuses a user named twice in one AlterUserScramCredentials (ScramControlManager), so
// each mechanism's credential goes in a request of its own.
runtime::task<int> add_user(client::client& c, const kafka_options* ko, const user_options* o, std::string password) {
    const std::string cmd = "skiff user add";
    auto mechs = mechanisms_of(*o);
    if (!mechs) co_return report(cmd, mechs.error(), exit_usage);
    std::vector<kafka::AlterUserScramCredentialsRequest> requests;
    for (auto m : *mechs) {
        kafka::AlterUserScramCredentialsRequest::ScramCredentialUpsertion u;
        u.name = o->names.front();
        u.mechanism = mechanism_code(m);
        u.iterations = o->iterations;
        u.salt = sasl::random_salt();
        auto salted = sasl::salt_password(m, password, u.salt, o->iterations);
        if (!salted) {
            sasl::wipe_buffer(password.data(), password.size());
            co_return report(cmd, "iterations must be from 4096 to 16384", exit_usage);
        }
        u.salted_password = std::move(*salted);
        kafka::AlterUserScramCredentialsRequest req;
        req.upsertions.push_back(std::move(u));
        requests.push_back(std::move(req));
    }
    sasl::wipe_buffer(password.data(), password.size());
    kafka::AlterUserScramCredentialsResponse all;
    for (auto& req : requests) {
        auto st = c.send(std::move(req), client::target::controller());
        auto r = co_await std::move(st);
        if (!r) co_return report(cmd, r.error());
        for (auto& res : r->results) all.results.push_back(std::move(res));
    }
    co_return report_results(cmd, all, "added", ko->json);
}

runtime::task<int> remove_user(client::client& c, const kafka_options* ko, const user_options* o) {
    const std::string cmd = "skiff user rm";
    auto mechs = mechanisms_of(*o);
    if (!mechs) co_return report(cmd, mechs.error(), exit_usage);
    // Only the credentials the user has: Kafka refuses the deletion of one that does not exist.
    kafka::DescribeUserScramCredentialsRequest dreq;
    dreq.users.emplace();
    kafka::DescribeUserScramCredentialsRequest::UserName un;
    un.name = o->names.front();
    dreq.users->push_back(un);
    auto dt = c.send(std::move(dreq), client::target::controller());
    auto d = co_await std::move(dt);
    if (!d) co_return report(cmd, d.error());
    if (d->results.empty() || d->results.front().error_code != kafka::error_code::none) {
        const auto code = d->results.empty() ? kafka::error_code::resource_not_found : d->results.front().error_code;
        co_return report(cmd, kafka_error_sentence("user '" + o->names.front() + "'", code,
                                                   d->results.empty() ? std::nullopt : d->results.front().error_message),
                         exit_broker_error);
    }
    kafka::AlterUserScramCredentialsRequest req;
    for (const auto& info : d->results.front().credential_infos) {
        for (auto m : *mechs) {
            if (info.mechanism != mechanism_code(m)) continue;
            kafka::AlterUserScramCredentialsRequest::ScramCredentialDeletion del;
            del.name = o->names.front();
            del.mechanism = info.mechanism;
            req.deletions.push_back(del);
        }
    }
    if (req.deletions.empty()) {
        co_return report(cmd, "user '" + o->names.front() + "' has none of the named mechanisms' credentials",
                         exit_broker_error);
    }
    kafka::AlterUserScramCredentialsResponse all;
    for (auto& del : req.deletions) {
        kafka::AlterUserScramCredentialsRequest one;
        one.deletions.push_back(del);
        auto st = c.send(std::move(one), client::target::controller());
        auto r = co_await std::move(st);
        if (!r) co_return report(cmd, r.error());
        for (auto& res : r->results) all.results.push_back(std::move(res));
    }
    co_return report_results(cmd, all, "removed", ko->json);
}

runtime::task<int> list_users(client::client& c, const kafka_options* ko, const user_options* o) {
    const std::string cmd = "skiff user list";
    kafka::DescribeUserScramCredentialsRequest req;
    req.users.emplace();
    for (const auto& n : o->names) {
        kafka::DescribeUserScramCredentialsRequest::UserName un;
        un.name = n;
        req.users->push_back(un);
    }
    auto st = c.send(std::move(req), client::target::controller());
    auto r = co_await std::move(st);
    if (!r) co_return report(cmd, r.error());
    if (r->error_code != kafka::error_code::none) {
        co_return report(cmd, kafka_error_sentence("users", r->error_code, r->error_message), exit_broker_error);
    }
    int code = exit_ok;
    json out = json::array();
    table t({"USER", "MECHANISM", "ITERATIONS"});
    for (const auto& res : r->results) {
        if (res.error_code != kafka::error_code::none) {
            code = exit_broker_error;
            report(cmd, kafka_error_sentence("user '" + res.user + "'", res.error_code, res.error_message),
                   exit_broker_error);
            continue;
        }
        json creds = json::array();
        for (const auto& info : res.credential_infos) {
            t.add({res.user, mechanism_label(info.mechanism), std::to_string(info.iterations)});
            creds.push_back({{"mechanism", mechanism_label(info.mechanism)}, {"iterations", info.iterations}});
        }
        out.push_back({{"user", res.user}, {"credentials", creds}});
    }
    if (ko->json) {
        print_json(out);
    } else if (!t.empty()) {
        t.print();
    }
    co_return code;
}

} // namespace

int user_command(const std::vector<std::string>& args) {
    CLI::App app("SASL/SCRAM users of the brokers (stored salted and hashed, never in clear).", "skiff user");
    app.footer(std::string(exit_codes_help) +
               "\nPasswords: --password-file FILE, else SKIFF_USER_PASSWORD, else one line of standard input.");
    app.require_subcommand(1);
    kafka_options ko;
    user_options uo;
    auto* add = app.add_subcommand("add", "add a user, or change its password (one credential per mechanism)");
    add->add_option("name", uo.names, "user name")->required()->expected(1);
    add->add_option("--mechanism", uo.mechanisms, "SCRAM-SHA-512 and/or SCRAM-SHA-256 (default: both)")
        ->delimiter(',');
    add->add_option("--iterations", uo.iterations, "PBKDF2 iterations, 4096 to 16384")->capture_default_str();
    add->add_option("--password-file", uo.password_file, "read the password from the first line of this file");
    add_kafka_options(*add, ko);
    auto* rm = app.add_subcommand("rm", "remove a user's credentials");
    rm->add_option("name", uo.names, "user name")->required()->expected(1);
    rm->add_option("--mechanism", uo.mechanisms, "only this mechanism's credential (default: all)")->delimiter(',');
    add_kafka_options(*rm, ko);
    auto* list = app.add_subcommand("list", "users with their mechanisms and iterations (never a key)");
    list->add_option("names", uo.names, "only these users");
    add_kafka_options(*list, ko);
    if (auto code = parse_args(app, args)) return *code;
    if (*add) {
        auto pw = read_password(uo);
        if (!pw) return report("skiff user add", pw.error(), exit_usage);
        std::string password = std::move(*pw);
        std::string* pp = &password;
        const int code = run_with_client(ko, "skiff user add", [&](client::client& c) {
            return add_user(c, &ko, &uo, std::move(*pp));
        });
        sasl::wipe_buffer(password.data(), password.size());
        return code;
    }
    if (*rm) return run_with_client(ko, "skiff user rm", [&](client::client& c) { return remove_user(c, &ko, &uo); });
    if (*list) return run_with_client(ko, "skiff user list", [&](client::client& c) { return list_users(c, &ko, &uo); });
    return exit_usage;
}

} // namespace skiff::cli
