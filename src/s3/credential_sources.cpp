// The temporary credential sources: container endpoint, IMDSv2, STS web identity,
// credential_process; and the parsers of their answers. Every error names the source and the
// failure, never a secret or a token (the messages quote no answer body except S3/STS error
// codes, which hold none).
#include <skiff/core/printable.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/s3/credential_provider.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace skiff::s3 {

namespace {

std::string form_encode(std::string_view s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out += ch;
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

// Removes any occurrence of `secret` from `text` (belt and braces: a server that echoes a
// token in its error message must not put it in ours).
std::string scrub(std::string text, std::string_view secret) {
    if (secret.size() < 4) return text;
    for (auto pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos)) {
        text.replace(pos, secret.size(), "<redacted>");
    }
    return text;
}

result<std::string, std::string> read_small_file(const std::string& path, std::string_view what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return failure{fmt::format("cannot read the {} file {}: {}", what, path, std::strerror(errno))};
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string s = std::move(ss).str();
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    if (s.empty()) return failure{fmt::format("the {} file {} is empty", what, path)};
    return s;
}

std::string json_string(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return {};
    return it->get<std::string>();
}

std::string transport_text(const http::transport_error& e) {
    if (e.timed_out) return "no answer in time";
    return e.message.empty() ? std::string("transport error") : e.message;
}

// Fills `out` from JSON keys; `token_key` is "Token" (container, IMDS) or "SessionToken".
result<fetched_credentials, std::string> from_json(std::string_view body, std::string_view what,
                                                   const char* token_key, bool process) {
    nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return failure{fmt::format("{}: the answer is not a JSON object", what)};
    if (process) {
        auto v = j.find("Version");
        if (v == j.end() || !v->is_number_integer() || v->get<long long>() != 1) {
            return failure{fmt::format("{}: the output's Version is not 1", what)};
        }
    } else if (auto code = json_string(j, "Code"); !code.empty() && code != "Success") {
        return failure{fmt::format("{}: the answer's Code is '{}', not Success", what, printable(code, 64))};
    }
    fetched_credentials out;
    out.creds.access_key_id = json_string(j, "AccessKeyId");
    out.creds.secret_access_key = json_string(j, "SecretAccessKey");
    out.creds.session_token = json_string(j, token_key);
    if (out.creds.access_key_id.empty()) return failure{fmt::format("{}: the answer has no AccessKeyId", what)};
    if (out.creds.secret_access_key.empty()) return failure{fmt::format("{}: the answer has no SecretAccessKey", what)};
    const std::string exp = json_string(j, "Expiration");
    if (!exp.empty()) {
        out.expires = parse_aws_time(exp);
        if (!out.expires) return failure{fmt::format("{}: the answer's Expiration is not a date", what)};
    } else if (j.contains("Expiration")) {
        return failure{fmt::format("{}: the answer's Expiration is not a date", what)};
    }
    if (!process && !out.creds.session_token.empty() && !out.expires) {
        return failure{fmt::format("{}: temporary credentials without an Expiration", what)};
    }
    return out;
}

} // namespace

std::optional<wall_time> parse_aws_time(std::string_view text) {
    std::string s(text);
    std::tm tm{};
    const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (end == nullptr) return std::nullopt;
    if (*end == '.') {
        ++end;
        while (*end >= '0' && *end <= '9') ++end;
    }
    long offset = 0;
    if (*end == 'Z') {
        ++end;
    } else if (*end == '+' || *end == '-') {
        const int sign = *end == '-' ? -1 : 1;
        int hh = 0, mm = 0;
        if (std::sscanf(end + 1, "%2d:%2d", &hh, &mm) != 2) return std::nullopt;
        offset = sign * (hh * 3600L + mm * 60L);
        end += 6;
    } else if (*end != '\0') {
        return std::nullopt;
    }
    if (*end != '\0') return std::nullopt;
    return std::chrono::system_clock::from_time_t(timegm(&tm) - offset);
}

result<fetched_credentials, std::string> parse_credentials_json(std::string_view body, std::string_view what) {
    return from_json(body, what, "Token", false);
}

result<fetched_credentials, std::string> parse_process_output(std::string_view out, std::string_view what) {
    return from_json(out, what, "SessionToken", true);
}

result<fetched_credentials, std::string> parse_assume_role_with_web_identity(int status, std::string_view body) {
    constexpr std::string_view what = "STS AssumeRoleWithWebIdentity";
    pugi::xml_document doc;
    const auto loaded = doc.load_buffer(body.data(), body.size(), pugi::parse_default, pugi::encoding_utf8);
    const pugi::xml_node root = doc.document_element();
    if (!loaded || !root) {
        if (status < 200 || status >= 300) return failure{fmt::format("{}: HTTP {}", what, status)};
        return failure{fmt::format("{}: the answer is not XML", what)};
    }
    const std::string_view root_name = root.name();
    if (root_name == "ErrorResponse" || root_name == "Error") {
        const pugi::xml_node e = root_name == "Error" ? root : root.child("Error");
        return failure{fmt::format("{}: HTTP {} {}: {}", what, status, printable(e.child_value("Code"), 64),
                                   printable(e.child_value("Message"), 200))};
    }
    if (status < 200 || status >= 300) return failure{fmt::format("{}: HTTP {}", what, status)};
    if (root_name != "AssumeRoleWithWebIdentityResponse") {
        return failure{fmt::format("{}: the answer's root is <{}>", what, printable(root_name, 64))};
    }
    const pugi::xml_node c = root.child("AssumeRoleWithWebIdentityResult").child("Credentials");
    if (!c) return failure{fmt::format("{}: the answer has no Credentials", what)};
    fetched_credentials out;
    out.creds.access_key_id = c.child_value("AccessKeyId");
    out.creds.secret_access_key = c.child_value("SecretAccessKey");
    out.creds.session_token = c.child_value("SessionToken");
    if (out.creds.access_key_id.empty() || out.creds.secret_access_key.empty() || out.creds.session_token.empty()) {
        return failure{fmt::format("{}: the answer lacks AccessKeyId, SecretAccessKey or SessionToken", what)};
    }
    out.expires = parse_aws_time(c.child_value("Expiration"));
    if (!out.expires) return failure{fmt::format("{}: the answer's Expiration is not a date", what)};
    return out;
}

namespace {

// --- container -------------------------------------------------------------------------------

class container_source final : public credential_source {
public:
    container_source(std::string url, std::string token, std::string token_file)
        : _url(std::move(url)), _token(std::move(token)), _token_file(std::move(token_file)) {}

    std::string describe() const override {
        // The URL may carry a query; show scheme://host/path only.
        std::string shown = _url.substr(0, _url.find('?'));
        return "container endpoint " + shown;
    }

    runtime::task<result<fetched_credentials, std::string>> fetch(http::client& http, std::stop_token st) override {
        const std::string what = describe();
        std::string token = _token;
        if (!_token_file.empty()) {
            auto t = read_small_file(_token_file, "container authorization token");
            if (!t) co_return failure{what + ": " + t.error()};
            token = std::move(t).value();
        }
        http::request req;
        req.method = "GET";
        req.url = _url;
        req.timeout = std::chrono::seconds(5);
        req.connect_timeout = std::chrono::seconds(2);
        if (!token.empty()) req.headers.emplace_back("Authorization", token);
        auto resp = co_await http.send(std::move(req), st);
        if (!resp) co_return failure{scrub(fmt::format("{}: {}", what, transport_text(resp.error())), token)};
        if (resp->status != 200) {
            co_return failure{fmt::format("{}: HTTP {}{}", what, resp->status,
                                          resp->status == 401 || resp->status == 403
                                              ? " (check AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE))"
                                              : "")};
        }
        co_return parse_credentials_json(resp->body, what);
    }

private:
    std::string _url, _token, _token_file;
};

// --- IMDSv2 ----------------------------------------------------------------------------------

class imds_source final : public credential_source {
public:
    imds_source(std::string endpoint, std::chrono::milliseconds timeout) : _ep(std::move(endpoint)), _timeout(timeout) {
        while (!_ep.empty() && _ep.back() == '/') _ep.pop_back();
    }
    std::string describe() const override { return "EC2 instance metadata (IMDSv2) at " + _ep; }

    runtime::task<result<fetched_credentials, std::string>> fetch(http::client& http, std::stop_token st) override {
        const std::string what = describe();
        auto no_answer = [&](const http::transport_error& e) {
            return fmt::format("{}: {} (not on EC2? set AWS_EC2_METADATA_DISABLED=true to skip it, or configure "
                               "another credential source)",
                               what, e.timed_out ? fmt::format("no answer within {} ms", _timeout.count())
                                                 : transport_text(e));
        };
        http::request treq;
        treq.method = "PUT";
        treq.url = _ep + "/latest/api/token";
        treq.timeout = _timeout;
        treq.connect_timeout = _timeout;
        treq.headers.emplace_back("X-aws-ec2-metadata-token-ttl-seconds", "21600");
        auto tok = co_await http.send(std::move(treq), st);
        if (!tok) co_return failure{no_answer(tok.error())};
        if (tok->status != 200 || tok->body.empty()) {
            co_return failure{fmt::format("{}: the token request (PUT /latest/api/token) got HTTP {}", what, tok->status)};
        }
        const std::string token = tok->body;

        http::request rreq;
        rreq.url = _ep + "/latest/meta-data/iam/security-credentials/";
        rreq.timeout = _timeout;
        rreq.connect_timeout = _timeout;
        rreq.headers.emplace_back("X-aws-ec2-metadata-token", token);
        auto role = co_await http.send(std::move(rreq), st);
        if (!role) co_return failure{scrub(no_answer(role.error()), token)};
        if (role->status == 404) co_return failure{what + ": this instance has no IAM role (instance profile)"};
        if (role->status != 200) co_return failure{fmt::format("{}: the role name request got HTTP {}", what, role->status)};
        std::string name = role->body.substr(0, role->body.find('\n'));
        while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
        if (name.empty() || name.find('/') != std::string::npos) {
            co_return failure{what + ": the role name answer is empty or not a name"};
        }

        http::request creq;
        creq.url = _ep + "/latest/meta-data/iam/security-credentials/" + name;
        creq.timeout = _timeout;
        creq.connect_timeout = _timeout;
        creq.headers.emplace_back("X-aws-ec2-metadata-token", token);
        auto creds = co_await http.send(std::move(creq), st);
        if (!creds) co_return failure{scrub(no_answer(creds.error()), token)};
        if (creds->status != 200) {
            co_return failure{fmt::format("{}: the credentials of role '{}' got HTTP {}", what, printable(name, 128),
                                          creds->status)};
        }
        co_return parse_credentials_json(creds->body, what);
    }

private:
    std::string _ep;
    std::chrono::milliseconds _timeout;
};

// --- web identity ----------------------------------------------------------------------------

class web_identity_source final : public credential_source {
public:
    explicit web_identity_source(web_identity_settings s) : _s(std::move(s)) {
        while (!_s.sts_endpoint.empty() && _s.sts_endpoint.back() == '/') _s.sts_endpoint.pop_back();
    }
    std::string describe() const override {
        return fmt::format("web identity (role {}, token file {}, STS {})", _s.role_arn, _s.token_file,
                           _s.sts_endpoint);
    }

    runtime::task<result<fetched_credentials, std::string>> fetch(http::client& http, std::stop_token st) override {
        constexpr std::string_view what = "STS AssumeRoleWithWebIdentity";
        auto token = read_small_file(_s.token_file, "web identity token");
        if (!token) co_return failure{std::string(what) + ": " + token.error()};
        std::string session = _s.session_name;
        if (session.empty()) session = fmt::format("skiff-{}", std::time(nullptr));
        std::string body = "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + form_encode(_s.role_arn) +
                           "&RoleSessionName=" + form_encode(session) +
                           "&WebIdentityToken=" + form_encode(token.value());
        http::request req;
        req.method = "POST";
        req.url = _s.sts_endpoint + "/";
        req.timeout = _s.timeout;
        req.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
        req.headers.emplace_back("Accept", "application/xml");
        req.body = std::span<const char>(body.data(), body.size());
        auto resp = co_await http.send(std::move(req), st);
        if (!resp) {
            co_return failure{scrub(fmt::format("{} at {}: {}", what, _s.sts_endpoint, transport_text(resp.error())),
                                    token.value())};
        }
        auto parsed = parse_assume_role_with_web_identity(resp->status, resp->body);
        if (!parsed) co_return failure{scrub(parsed.error() + " (role " + _s.role_arn + ")", token.value())};
        co_return std::move(parsed).value();
    }

private:
    web_identity_settings _s;
};

// --- credential_process ----------------------------------------------------------------------

struct process_outcome {
    process_outcome() = default;
    process_outcome(bool o, std::string t) : ok(o), text(std::move(t)) {}
    bool ok = false;
    std::string text; // stdout when ok, else the error sentence
};

struct process_control {
    std::atomic<bool> cancel{false};
};

// Runs `command` through /bin/sh -c on the calling thread (a helper thread, never a core).
process_outcome run_process(const std::string& command, const std::string& name, std::chrono::milliseconds timeout,
                            process_control& ctl) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return {false, fmt::format("{}: pipe: {}", name, std::strerror(errno))};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
    char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
    // The child gets an empty signal mask and default SIGPIPE: this thread blocks every signal
    // and `skiff serve` ignores SIGPIPE, and both would be inherited across exec.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none, pipe_only;
    sigemptyset(&none);
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &pipe_only);
    // Its own process group, so that a timeout or a stop kills what the shell started too.
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    if (rc != 0) {
        ::close(fds[0]);
        return {false, fmt::format("{}: cannot start /bin/sh: {}", name, std::strerror(rc))};
    }
    std::string out;
    std::string problem;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
        if (ctl.cancel.load()) {
            problem = name + ": cancelled";
            break;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            problem = fmt::format("{}: no answer within {} s", name,
                                  std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        const int n = ::poll(&p, 1, 100);
        if (n < 0 && errno != EINTR) {
            problem = fmt::format("{}: poll: {}", name, std::strerror(errno));
            break;
        }
        if (n <= 0) continue;
        const ssize_t got = ::read(fds[0], buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break; // EOF (or an error: the exit status tells)
        out.append(buf, static_cast<std::size_t>(got));
        if (out.size() > 64 * 1024) {
            problem = name + ": more than 64 KiB on stdout";
            break;
        }
    }
    ::close(fds[0]);
    if (!problem.empty()) ::kill(-pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!problem.empty()) return {false, problem};
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        return {false, fmt::format("{} exited with status {}", name, WEXITSTATUS(status))};
    }
    if (WIFSIGNALED(status)) return {false, fmt::format("{} was killed by signal {}", name, WTERMSIG(status))};
    return {true, std::move(out)};
}

class process_source final : public credential_source {
public:
    process_source(std::string command, std::string profile, std::chrono::milliseconds timeout)
        : _command(std::move(command)), _profile(std::move(profile)), _timeout(timeout) {
        // Only the program is ever shown: arguments may carry secrets.
        std::string_view c = _command;
        while (!c.empty() && c.front() == ' ') c.remove_prefix(1);
        _program = std::string(c.substr(0, c.find_first_of(" \t")));
    }
    std::string describe() const override {
        return fmt::format("credential_process '{}' of profile '{}'", _program, _profile);
    }

    runtime::task<result<fetched_credentials, std::string>> fetch(http::client&, std::stop_token st) override {
        const std::string what = describe();
        auto latch = std::make_shared<runtime::oneshot<process_outcome>>();
        auto ctl = std::make_shared<process_control>();
        runtime::reactor* home = &runtime::reactor::local();
        // The child is waited for on a helper thread; its outcome comes back through the reactor.
        std::thread helper([cmd = _command, what, timeout = _timeout, latch, ctl, home] {
            process_outcome o = run_process(cmd, what, timeout, *ctl);
            home->post([latch, o = std::move(o)]() mutable { latch->set(std::move(o)); });
        });
        auto got = co_await latch->wait(st);
        if (!got) ctl->cancel.store(true);
        helper.join();
        if (!got) co_return failure{what + ": cancelled"};
        process_outcome o = std::move(got).value();
        if (!o.ok) co_return failure{std::move(o.text)};
        co_return parse_process_output(o.text, what);
    }

private:
    std::string _command, _profile, _program;
    std::chrono::milliseconds _timeout;
};

} // namespace

std::unique_ptr<credential_source> make_imds_source(std::string endpoint, std::chrono::milliseconds timeout) {
    return std::make_unique<imds_source>(std::move(endpoint), timeout);
}

std::unique_ptr<credential_source> make_container_source(std::string url, std::string auth_token,
                                                         std::string auth_token_file) {
    return std::make_unique<container_source>(std::move(url), std::move(auth_token), std::move(auth_token_file));
}

std::unique_ptr<credential_source> make_web_identity_source(web_identity_settings s) {
    return std::make_unique<web_identity_source>(std::move(s));
}

std::unique_ptr<credential_source> make_process_source(std::string command, std::string profile,
                                                       std::chrono::milliseconds timeout) {
    return std::make_unique<process_source>(std::move(command), std::move(profile), timeout);
}

} // namespace skiff::s3
