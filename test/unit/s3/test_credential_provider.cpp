// Temporary credentials (credential_provider.hpp) against fake endpoints on 127.0.0.1: IMDSv2,
// the container endpoint, STS web identity, credential_process; refresh on a manual wall clock,
// failures while the old credentials are valid, expiry, ExpiredToken from S3; the chain's
// choice; and no secret in any error message.
#include <skiff/core/iso_time.hpp>
#include "credential_fakes.hpp"
#include "run_task.hpp"

#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/s3/credential_provider.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using skiff::test::fake_endpoint;
using skiff::test::fake_route;
using resp = http::server::response;
using req = http::server::request;

namespace {

// Every secret the fakes hand out or check: none may appear in an error message.
const std::vector<std::string> secrets = {"SECRETKEY-abc123", "SESSIONTOKEN-xyz789", "IMDSTOKEN-qqq111",
                                          "AUTHTOKEN-file-555", "WEBIDTOKEN-jwt-777", "SECRETKEY-2-def456",
                                          "SESSIONTOKEN-2-uvw000"};

void check_no_secret(const std::string& message) {
    for (const auto& s : secrets) {
        INFO(message);
        CHECK(message.find(s) == std::string::npos);
    }
}

std::string iso(std::chrono::system_clock::time_point t) { return skiff::iso8601_utc(t); }

std::string creds_json(const std::string& id, const std::string& secret, const std::string& token,
                       std::chrono::system_clock::time_point expires) {
    return fmt::format(R"({{"Code":"Success","AccessKeyId":"{}","SecretAccessKey":"{}","Token":"{}","Expiration":"{}"}})",
                       id, secret, token, iso(expires));
}

// A wall clock the test moves; read from the provider's thread.
struct manual_wall {
    std::atomic<std::int64_t> offset_s{0};
    std::chrono::system_clock::time_point base = std::chrono::system_clock::now();
    std::chrono::system_clock::time_point now() const { return base + std::chrono::seconds(offset_s.load()); }
    void advance(std::chrono::seconds s) { offset_s += s.count(); }
};

struct temp_dir {
    std::filesystem::path path;
    temp_dir() {
        char tmpl[] = "/tmp/skiff-creds-XXXXXX";
        path = mkdtemp(tmpl);
    }
    ~temp_dir() { std::filesystem::remove_all(path); }
    std::string write(const std::string& name, const std::string& text, bool exec = false) {
        auto p = path / name;
        std::ofstream(p) << text;
        if (exec) std::filesystem::permissions(p, std::filesystem::perms::owner_all);
        return p.string();
    }
};

s3::env_lookup env_of(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
        auto it = vars.find(std::string(name));
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

std::shared_ptr<s3::credential_provider> start(std::unique_ptr<s3::credential_source> src, s3::provider_options o = {}) {
    auto p = s3::credential_provider::start(std::move(src), std::move(o));
    REQUIRE(p.has_value());
    return std::move(*p);
}

// Waits (really) until `pred` holds, at most 5 s.
template <typename Pred>
bool eventually(Pred pred) {
    for (int i = 0; i < 500; ++i) {
        if (pred()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return pred();
}

task<result<std::shared_ptr<const s3::credential_snapshot>, std::string>> get_once(s3::credential_provider* p) {
    auto r = co_await p->get();
    co_return r;
}

result<std::shared_ptr<const s3::credential_snapshot>, std::string> get_blocking(s3::credential_provider& p) {
    return run_task(get_once(&p));
}

// --- a fake IMDS ---------------------------------------------------------------------------

struct imds_state {
    std::mutex mu;
    int token_puts = 0;
    int unauthorized = 0;
};

std::vector<fake_route> imds_routes(imds_state& st, std::chrono::system_clock::time_point expires) {
    std::vector<fake_route> r;
    r.emplace_back("PUT", "/latest/api/token", [&st](const req& q) {
        std::lock_guard lk(st.mu);
        if (q.header("x-aws-ec2-metadata-token-ttl-seconds") == nullptr) return resp(400, "text/plain", "ttl missing");
        ++st.token_puts;
        return resp(200, "text/plain", "IMDSTOKEN-qqq111");
    });
    auto authorized = [&st](const req& q) {
        const std::string* t = q.header("x-aws-ec2-metadata-token");
        if (t != nullptr && *t == "IMDSTOKEN-qqq111") return true;
        std::lock_guard lk(st.mu);
        ++st.unauthorized;
        return false;
    };
    r.emplace_back("GET", "/latest/meta-data/iam/security-credentials/", [authorized](const req& q) {
        if (!authorized(q)) return resp(401, "text/plain", "");
        return resp(200, "text/plain", "skiff-role\n");
    });
    r.emplace_back("GET", "/latest/meta-data/iam/security-credentials/skiff-role", [authorized, expires](const req& q) {
        if (!authorized(q)) return resp(401, "text/plain", "");
        return resp(200, "application/json", creds_json("ASIAIMDSROLE0001", "SECRETKEY-abc123", "SESSIONTOKEN-xyz789", expires));
    });
    return r;
}

task<int> raw_get_status(std::string url) {
    http::client c;
    http::request rq;
    rq.url = std::move(url);
    auto r = co_await c.send(std::move(rq));
    co_return r ? r->status : -1;
}

} // namespace

TEST_CASE("AWS times and answer parsers; broken answers give one sentence without secrets", "[s3][credentials]") {
    auto t = s3::parse_aws_time("2026-12-06T23:10:00Z");
    REQUIRE(t.has_value());
    CHECK(std::chrono::system_clock::to_time_t(*t) == 1796598600);
    CHECK(s3::parse_aws_time("2026-12-06T23:10:00.123Z") == t);
    CHECK(s3::parse_aws_time("2026-12-07T00:10:00+01:00") == t);
    CHECK_FALSE(s3::parse_aws_time("yesterday").has_value());
    CHECK_FALSE(s3::parse_aws_time("2026-12-06T23:10:00Zjunk").has_value());

    auto ok = s3::parse_credentials_json(
        R"({"AccessKeyId":"ASIA1","SecretAccessKey":"SECRETKEY-abc123","Token":"SESSIONTOKEN-xyz789","Expiration":"2026-12-06T23:10:00Z"})",
        "container endpoint x");
    REQUIRE(ok.has_value());
    CHECK(ok->creds.session_token == "SESSIONTOKEN-xyz789");
    CHECK(ok->expires == t);

    const std::vector<std::string> bad_json = {
        "not json SECRETKEY-abc123",
        R"({"AccessKeyId":"ASIA1","Token":"SESSIONTOKEN-xyz789","Expiration":"2026-12-06T23:10:00Z"})",
        R"({"SecretAccessKey":"SECRETKEY-abc123","Token":"SESSIONTOKEN-xyz789"})",
        R"({"AccessKeyId":"A","SecretAccessKey":"SECRETKEY-abc123","Token":"SESSIONTOKEN-xyz789","Expiration":"SESSIONTOKEN-xyz789"})",
        R"({"AccessKeyId":"A","SecretAccessKey":"SECRETKEY-abc123","Token":"SESSIONTOKEN-xyz789"})",
        R"({"Code":"Failed","AccessKeyId":"A","SecretAccessKey":"SECRETKEY-abc123"})",
        "[1,2]",
    };
    for (const auto& b : bad_json) {
        auto r = s3::parse_credentials_json(b, "container endpoint x");
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().rfind("container endpoint x: ", 0) == 0);
        check_no_secret(r.error());
    }

    auto p = s3::parse_process_output(
        R"({"Version":1,"AccessKeyId":"AKIA1","SecretAccessKey":"SECRETKEY-abc123"})", "credential_process 'x'");
    REQUIRE(p.has_value());
    CHECK_FALSE(p->expires.has_value()); // long-term keys: never refreshed
    auto v2 = s3::parse_process_output(R"({"Version":2,"AccessKeyId":"A","SecretAccessKey":"SECRETKEY-abc123"})", "cp");
    REQUIRE_FALSE(v2.has_value());
    CHECK(v2.error().find("Version") != std::string::npos);

    const std::string sts_ok =
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
        "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAWEB</AccessKeyId>"
        "<SecretAccessKey>SECRETKEY-abc123</SecretAccessKey><SessionToken>SESSIONTOKEN-xyz789</SessionToken>"
        "<Expiration>2026-12-06T23:10:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
        "</AssumeRoleWithWebIdentityResponse>";
    auto w = s3::parse_assume_role_with_web_identity(200, sts_ok);
    REQUIRE(w.has_value());
    CHECK(w->creds.access_key_id == "ASIAWEB");
    CHECK(w->expires == t);
    auto err = s3::parse_assume_role_with_web_identity(
        400, "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>bad jwt</Message>"
             "</Error></ErrorResponse>");
    REQUIRE_FALSE(err.has_value());
    CHECK(err.error().find("InvalidIdentityToken") != std::string::npos);
    for (const std::string b : {"<<garbage SESSIONTOKEN-xyz789", "<Other/>",
                                "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
                                "<AccessKeyId>A</AccessKeyId><SecretAccessKey>SECRETKEY-abc123</SecretAccessKey>"
                                "</Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"}) {
        auto r = s3::parse_assume_role_with_web_identity(200, b);
        REQUIRE_FALSE(r.has_value());
        check_no_secret(r.error());
    }
}

TEST_CASE("IMDSv2: token first, then the role and its credentials; no token, 401", "[s3][credentials][imds]") {
    imds_state st;
    fake_endpoint ep(imds_routes(st, std::chrono::system_clock::now() + 6h));
    auto p = start(s3::make_imds_source(ep.url(), 1s));
    REQUIRE(p->wait_ready(5s).has_value());
    auto snap = p->current();
    REQUIRE(snap);
    CHECK(snap->creds.access_key_id == "ASIAIMDSROLE0001");
    CHECK(snap->creds.secret_access_key == "SECRETKEY-abc123");
    CHECK(snap->creds.session_token == "SESSIONTOKEN-xyz789");
    CHECK(snap->expires.has_value());
    CHECK(snap->generation == 1);
    {
        std::lock_guard lk(st.mu);
        CHECK(st.token_puts == 1);
        CHECK(st.unauthorized == 0);
    }
    CHECK(p->describe().find("IMDSv2") != std::string::npos);
    // The fake is strict: without the token the metadata answers 401.
    CHECK(run_task(raw_get_status(ep.url() + "/latest/meta-data/iam/security-credentials/")) == 401);
}

TEST_CASE("IMDS that does not answer fails fast with one clear sentence", "[s3][credentials][imds]") {
    // 127.0.0.1:1 refuses at once; the sentence says what to do.
    auto p = start(s3::make_imds_source("http://127.0.0.1:1", 1s));
    const auto t0 = std::chrono::steady_clock::now();
    auto r = p->wait_ready(5s);
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("AWS_EC2_METADATA_DISABLED") != std::string::npos);
    CHECK(r.error().find("instance metadata") != std::string::npos);
}

TEST_CASE("container endpoint (full URI) with an authorization token file", "[s3][credentials][container]") {
    temp_dir dir;
    const std::string token_file = dir.write("token", "AUTHTOKEN-file-555\n");
    std::atomic<int> calls{0};
    std::vector<fake_route> routes;
    routes.emplace_back("GET", "/v2/credentials", [&calls](const req& q) {
        ++calls;
        const std::string* a = q.header("authorization");
        if (a == nullptr || *a != "AUTHTOKEN-file-555") return resp(401, "text/plain", "no");
        return resp(200, "application/json",
                    creds_json("ASIACONTAINER001", "SECRETKEY-abc123", "SESSIONTOKEN-xyz789",
                               std::chrono::system_clock::now() + 1h));
    });
    fake_endpoint ep(std::move(routes));

    auto chain = s3::resolve_credential_chain(env_of({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", ep.url() + "/v2/credentials"},
                                                      {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", token_file},
                                                      {"HOME", dir.path.string()}}));
    REQUIRE(chain.has_value());
    REQUIRE(chain->source);
    CHECK(chain->source_name == "container endpoint " + ep.url() + "/v2/credentials");
    auto p = start(std::move(chain->source));
    REQUIRE(p->wait_ready(5s).has_value());
    CHECK(p->current()->creds.access_key_id == "ASIACONTAINER001");
    CHECK(calls.load() == 1);

    // A wrong token: 401, one sentence, no token in it.
    auto bad = start(s3::make_container_source(ep.url() + "/v2/credentials", "AUTHTOKEN-wrong-SECRETKEY-abc123", ""));
    auto r = bad->wait_ready(5s);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("HTTP 401") != std::string::npos);
    CHECK(r.error().find("AUTHTOKEN") == std::string::npos);
    check_no_secret(r.error());

    // Plain http to another host is refused by the chain.
    auto far = s3::resolve_credential_chain(env_of({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.1.2.3/creds"},
                                                    {"HOME", dir.path.string()}}));
    CHECK_FALSE(far.has_value());
}

TEST_CASE("web identity: AssumeRoleWithWebIdentity with the role, session name and token", "[s3][credentials][sts]") {
    temp_dir dir;
    const std::string token_file = dir.write("jwt", "WEBIDTOKEN-jwt-777");
    std::mutex mu;
    std::map<std::string, std::string> seen;
    std::vector<fake_route> routes;
    routes.emplace_back("POST", "/", [&](const req& q) {
        // The form body, decoded the simple way (the values here need no decoding but ':' '/').
        std::map<std::string, std::string> form;
        std::string_view b = q.body;
        while (!b.empty()) {
            auto amp = b.find('&');
            auto pair = b.substr(0, amp);
            auto eq = pair.find('=');
            std::string v(pair.substr(eq + 1));
            for (std::size_t i; (i = v.find("%3A")) != std::string::npos;) v.replace(i, 3, ":");
            for (std::size_t i; (i = v.find("%2F")) != std::string::npos;) v.replace(i, 3, "/");
            form[std::string(pair.substr(0, eq))] = v;
            if (amp == std::string_view::npos) break;
            b.remove_prefix(amp + 1);
        }
        {
            std::lock_guard lk(mu);
            seen = form;
        }
        if (form["Action"] != "AssumeRoleWithWebIdentity" || form["RoleArn"] != "arn:aws:iam::123456789012:role/skiff" ||
            form["RoleSessionName"] != "skiff-test" || form["WebIdentityToken"] != "WEBIDTOKEN-jwt-777") {
            // Echoes the token it got: skiff must not repeat it.
            return resp(400, "text/xml",
                        "<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>rejected " +
                            form["WebIdentityToken"] + "</Message></Error></ErrorResponse>");
        }
        return resp(200, "text/xml",
                    "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
                    "<AccessKeyId>ASIAWEBIDENTITY1</AccessKeyId><SecretAccessKey>SECRETKEY-abc123</SecretAccessKey>"
                    "<SessionToken>SESSIONTOKEN-xyz789</SessionToken><Expiration>" +
                        iso(std::chrono::system_clock::now() + 1h) +
                        "</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
                        "</AssumeRoleWithWebIdentityResponse>");
    });
    fake_endpoint ep(std::move(routes));

    auto chain = s3::resolve_credential_chain(env_of({{"AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/skiff"},
                                                      {"AWS_WEB_IDENTITY_TOKEN_FILE", token_file},
                                                      {"AWS_ROLE_SESSION_NAME", "skiff-test"},
                                                      {"AWS_ENDPOINT_URL_STS", ep.url()},
                                                      {"AWS_REGION", "eu-west-1"},
                                                      {"HOME", dir.path.string()}}));
    REQUIRE(chain.has_value());
    REQUIRE(chain->source);
    CHECK(chain->region == "eu-west-1");
    auto p = start(std::move(chain->source));
    REQUIRE(p->wait_ready(5s).has_value());
    CHECK(p->current()->creds.access_key_id == "ASIAWEBIDENTITY1");
    {
        std::lock_guard lk(mu);
        CHECK(seen["Version"] == "2011-06-15");
    }

    // A token STS refuses: its code, no token (even though the fake echoes it).
    dir.write("jwt", "WEBIDTOKEN-jwt-777-but-wrong");
    {
        s3::web_identity_settings s;
        s.role_arn = "arn:aws:iam::123456789012:role/skiff";
        s.token_file = token_file;
        s.session_name = "skiff-test";
        s.sts_endpoint = ep.url();
        auto bad = start(s3::make_web_identity_source(s));
        auto r = bad->wait_ready(5s);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().find("InvalidIdentityToken") != std::string::npos);
        check_no_secret(r.error());
    }
    // Half a configuration is refused by the chain.
    CHECK_FALSE(s3::resolve_credential_chain(env_of({{"AWS_ROLE_ARN", "arn:aws:iam::1:role/x"}})).has_value());
}

TEST_CASE("credential_process in a profile: Version 1 JSON on stdout; failures say which program", "[s3][credentials][process]") {
    temp_dir dir;
    const std::string script = dir.write("creds.sh",
                                         "#!/bin/sh\n"
                                         "echo '{\"Version\": 1, \"AccessKeyId\": \"ASIAPROCESS00001\", "
                                         "\"SecretAccessKey\": \"SECRETKEY-abc123\", \"SessionToken\": "
                                         "\"SESSIONTOKEN-xyz789\", \"Expiration\": \"" +
                                             iso(std::chrono::system_clock::now() + 1h) + "\"}'\n",
                                         true);
    dir.write("config", "[default]\nregion = us-west-2\ncredential_process = " + script + " --flag SECRETKEY-abc123\n");
    auto chain = s3::resolve_credential_chain(
        env_of({{"HOME", dir.path.string()}, {"AWS_CONFIG_FILE", (dir.path / "config").string()}}));
    REQUIRE(chain.has_value());
    REQUIRE(chain->source);
    CHECK(chain->region == "us-west-2");
    CHECK(chain->source_name.find("credential_process") != std::string::npos);
    check_no_secret(chain->source_name); // only the program is shown, never its arguments
    auto p = start(std::move(chain->source));
    REQUIRE(p->wait_ready(10s).has_value());
    CHECK(p->current()->creds.access_key_id == "ASIAPROCESS00001");
    CHECK(p->current()->creds.session_token == "SESSIONTOKEN-xyz789");

    const std::string failing = dir.write("fail.sh", "#!/bin/sh\necho SECRETKEY-abc123\nexit 3\n", true);
    auto f = start(s3::make_process_source(failing, "default"));
    auto r = f->wait_ready(10s);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().find("exited with status 3") != std::string::npos);
    check_no_secret(r.error());

    const std::string garbage = dir.write("garbage.sh", "#!/bin/sh\necho 'SESSIONTOKEN-xyz789 not json'\n", true);
    auto g = start(s3::make_process_source(garbage, "default"));
    auto gr = g->wait_ready(10s);
    REQUIRE_FALSE(gr.has_value());
    CHECK(gr.error().find("not a JSON object") != std::string::npos);
    check_no_secret(gr.error());
}

TEST_CASE("a credential_process that hangs is killed when the provider stops", "[s3][credentials][process]") {
    temp_dir dir;
    const std::string hang = dir.write("hang.sh", "#!/bin/sh\nexec sleep 30\n", true);
    auto p = start(s3::make_process_source(hang, "default"));
    std::this_thread::sleep_for(200ms);
    CHECK(p->fetch_attempts() == 1);
    const auto t0 = std::chrono::steady_clock::now();
    p.reset();
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
}

namespace {

// A container endpoint that hands out numbered credentials valid for `ttl` on the test's wall
// clock, and fails while `failing` is set.
struct numbered_endpoint {
    manual_wall* wall;
    std::chrono::seconds ttl{3600};
    std::atomic<int> served{0};
    std::atomic<int> requests{0};
    std::atomic<bool> failing{false};
    std::atomic<int> delay_ms{0};
    std::unique_ptr<fake_endpoint> ep;

    explicit numbered_endpoint(manual_wall* w) : wall(w) {
        std::vector<fake_route> routes;
        routes.emplace_back("GET", "/creds", [this](const req&) {
            ++requests;
            if (delay_ms.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
            if (failing.load()) return resp(500, "text/plain", "SECRETKEY-abc123 internal");
            const int n = ++served;
            return resp(200, "application/json",
                        creds_json(fmt::format("ASIANUMBERED{:04}", n), fmt::format("SECRETKEY-abc123-{}", n),
                                   fmt::format("SESSIONTOKEN-xyz789-{}", n), wall->now() + ttl));
        });
        ep = std::make_unique<fake_endpoint>(std::move(routes));
    }
    std::string url() const { return ep->url() + "/creds"; }
};

s3::provider_options manual_options(manual_wall& wall) {
    s3::provider_options o;
    o.wall_clock = [&wall] { return wall.now(); };
    o.retry_base = 1000ms;
    o.retry_cap = 1000ms;
    o.backoff_seed = 7;
    o.wait_timeout = 5s;
    return o;
}

// Eight signers at once on this reactor: each returns at once (no suspension: the snapshot is
// there) with the generation it saw.
task<std::vector<std::uint64_t>> eight_signers(s3::credential_provider* p) {
    std::vector<std::uint64_t> gens;
    for (int i = 0; i < 8; ++i) {
        auto r = co_await p->get();
        gens.push_back(r ? (*r)->generation : 0);
    }
    co_return gens;
}

} // namespace

TEST_CASE("refresh before expiry on a manual clock: two refreshes, signers never wait, one fetch at a time",
          "[s3][credentials][refresh]") {
    manual_wall wall;
    numbered_endpoint ep(&wall);
    ep.delay_ms = 200; // a slow endpoint: a signer that waited for it would show
    auto p = start(s3::make_container_source(ep.url(), "", ""), manual_options(wall));
    REQUIRE(p->wait_ready(5s).has_value());
    CHECK(p->current()->generation == 1);

    auto r = make_test_reactor();
    // Not yet in the window (expiry in 1 h, window 5 min): no fetch.
    auto g0 = r->run_until_complete(eight_signers(p.get()));
    CHECK(g0 == std::vector<std::uint64_t>(8, 1));
    std::this_thread::sleep_for(50ms);
    CHECK(ep.requests.load() == 1);

    for (std::uint64_t round = 1; round <= 2; ++round) {
        wall.advance(56min); // inside the 5-minute window of the current credentials
        const auto t0 = std::chrono::steady_clock::now();
        auto g = r->run_until_complete(eight_signers(p.get()));
        const auto took = std::chrono::steady_clock::now() - t0;
        CHECK(took < 150ms); // the 200 ms fetch runs beside them
        CHECK(g == std::vector<std::uint64_t>(8, round));
        // A second thread signs too (another core): it neither waits nor starts a second fetch.
        std::uint64_t other = 0;
        std::thread t([&] {
            auto rr = make_test_reactor();
            auto gg = rr->run_until_complete(eight_signers(p.get()));
            other = gg.front();
        });
        t.join();
        CHECK(other >= round);
        REQUIRE(eventually([&] { return p->fetch_successes() == round + 1; }));
        std::this_thread::sleep_for(300ms);
        CHECK(ep.requests.load() == static_cast<int>(round + 1)); // single flight
        CHECK(p->fetch_attempts() == round + 1);
        auto after = r->run_until_complete(get_once(p.get()));
        REQUIRE(after.has_value());
        CHECK((*after)->generation == round + 1);
        CHECK((*after)->creds.access_key_id == fmt::format("ASIANUMBERED{:04}", round + 1));
    }
}

TEST_CASE("a short lifetime refreshes at 80%", "[s3][credentials][refresh]") {
    manual_wall wall;
    numbered_endpoint ep(&wall);
    ep.ttl = 600s; // 10 minutes: the window is 2 minutes, not 5
    auto p = start(s3::make_container_source(ep.url(), "", ""), manual_options(wall));
    REQUIRE(p->wait_ready(5s).has_value());
    wall.advance(7min); // 70%: not yet
    (void)get_blocking(*p);
    std::this_thread::sleep_for(100ms);
    CHECK(p->fetch_attempts() == 1);
    wall.advance(70s); // 81%
    (void)get_blocking(*p);
    REQUIRE(eventually([&] { return p->fetch_successes() == 2; }));
}

TEST_CASE("a failing refresh keeps the valid credentials and retries; after expiry a clear error, no hang",
          "[s3][credentials][refresh]") {
    manual_wall wall;
    numbered_endpoint ep(&wall);
    auto p = start(s3::make_container_source(ep.url(), "", ""), manual_options(wall));
    REQUIRE(p->wait_ready(5s).has_value());
    ep.failing = true;
    wall.advance(56min);
    auto g = get_blocking(*p);
    REQUIRE(g.has_value());
    CHECK((*g)->generation == 1); // still signing with the valid ones
    REQUIRE(eventually([&] { return p->fetch_failures() == 1; }));
    // Retried with backoff (1 s on the manual clock), still the old credentials meanwhile.
    for (int i = 0; i < 3; ++i) {
        wall.advance(2s);
        auto again = get_blocking(*p);
        REQUIRE(again.has_value());
        CHECK((*again)->generation == 1);
        REQUIRE(eventually([&, i] { return p->fetch_failures() >= static_cast<std::uint64_t>(2 + i); }));
    }
    CHECK(p->last_error().find("HTTP 500") != std::string::npos);
    check_no_secret(p->last_error());

    // Past expiry with the endpoint still failing: an error within the wait, naming the expiry.
    wall.advance(10min);
    const auto t0 = std::chrono::steady_clock::now();
    auto expired = get_blocking(*p);
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);
    REQUIRE_FALSE(expired.has_value());
    CHECK(expired.error().find("expired at") != std::string::npos);
    check_no_secret(expired.error());

    // The endpoint recovers: the next signer gets new credentials.
    ep.failing = false;
    wall.advance(2s);
    auto back = get_blocking(*p);
    REQUIRE(back.has_value());
    CHECK((*back)->creds.access_key_id == "ASIANUMBERED0002");
}

namespace {

// A minimal S3 for ListObjectsV2 on /bkt: the first session token is answered ExpiredToken.
std::vector<fake_route> expiring_s3(std::atomic<int>& expired_answers, std::atomic<int>& ok_answers) {
    std::vector<fake_route> r;
    r.emplace_back("GET", "/bkt", [&](const req& q) {
        const std::string* tok = q.header("x-amz-security-token");
        if (tok == nullptr || *tok == "SESSIONTOKEN-xyz789-1") {
            ++expired_answers;
            return resp(400, "application/xml",
                        "<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>");
        }
        ++ok_answers;
        return resp(200, "application/xml",
                    "<ListBucketResult><Name>bkt</Name><KeyCount>1</KeyCount><IsTruncated>false</IsTruncated>"
                    "<Contents><Key>a</Key><Size>1</Size><ETag>\"x\"</ETag></Contents></ListBucketResult>");
    });
    return r;
}

task<result<s3::list_page, s3::error>> list_once(s3::client_config cfg) {
    auto c = s3::client::create(std::move(cfg));
    if (!c) co_return failure{s3::error{}};
    s3::list_request lr;
    auto page = co_await (*c)->list_objects_v2("bkt", lr);
    co_return page;
}

} // namespace

TEST_CASE("S3 answers ExpiredToken: one refresh and one retry of the request", "[s3][credentials][client]") {
    manual_wall wall;
    numbered_endpoint ep(&wall);
    std::atomic<int> expired{0}, ok{0};
    fake_endpoint s3ep(expiring_s3(expired, ok));
    auto p = start(s3::make_container_source(ep.url(), "", ""), manual_options(wall));
    REQUIRE(p->wait_ready(5s).has_value());

    s3::client_config cfg;
    cfg.endpoint = s3ep.url();
    cfg.path_style = true;
    cfg.provider = p;
    cfg.retry.max_attempts = 1; // the renewal retry is not a policy retry
    auto page = run_task(list_once(cfg));
    INFO((page ? std::string() : page.error().message));
    REQUIRE(page.has_value());
    CHECK(page->objects.size() == 1);
    CHECK(expired.load() == 1);
    CHECK(ok.load() == 1);
    CHECK(p->fetch_successes() == 2);
    CHECK(s3::describe_credentials(cfg).find("container endpoint") != std::string::npos);
    check_no_secret(s3::describe_credentials(cfg));
}

TEST_CASE("the chain: environment keys first, then files; IMDS only when nothing is configured", "[s3][credentials][chain]") {
    temp_dir dir;
    auto envk = s3::resolve_credential_chain(env_of({{"AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT1"},
                                                     {"AWS_SECRET_ACCESS_KEY", "SECRETKEY-abc123"},
                                                     {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/x"}}));
    REQUIRE(envk.has_value());
    REQUIRE(envk->static_creds.has_value());
    CHECK(envk->source_name == "environment");

    dir.write("credentials", "[default]\naws_access_key_id = AKIAFILE00000001\naws_secret_access_key = SECRETKEY-abc123\n");
    auto file = s3::resolve_credential_chain(env_of({{"HOME", dir.path.string()},
                                                    {"AWS_SHARED_CREDENTIALS_FILE", (dir.path / "credentials").string()},
                                                    {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:1/x"}}));
    REQUIRE(file.has_value());
    REQUIRE(file->static_creds.has_value());
    CHECK(file->static_creds->access_key_id == "AKIAFILE00000001");

    // A profile with role_arn + web_identity_token_file: web identity, region from the profile.
    dir.write("config", "[profile eks]\nregion = ap-south-1\nrole_arn = arn:aws:iam::1:role/r\n"
                        "web_identity_token_file = /var/run/token\ncredential_process = /bin/false\n");
    auto eks = s3::resolve_credential_chain(env_of({{"HOME", dir.path.string()},
                                                   {"AWS_PROFILE", "eks"},
                                                   {"AWS_CONFIG_FILE", (dir.path / "config").string()},
                                                   {"AWS_SHARED_CREDENTIALS_FILE", (dir.path / "none").string()}}));
    REQUIRE(eks.has_value());
    REQUIRE(eks->source);
    CHECK(eks->region == "ap-south-1");
    CHECK(eks->source_name ==
          "web identity (role arn:aws:iam::1:role/r, token file /var/run/token, STS https://sts.ap-south-1.amazonaws.com)");

    auto imds = s3::resolve_credential_chain(env_of({{"HOME", (dir.path / "none").string()},
                                                    {"AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1"}}));
    REQUIRE(imds.has_value());
    REQUIRE(imds->source);
    CHECK(imds->source_name == "EC2 instance metadata (IMDSv2) at http://127.0.0.1:1");

    auto none = s3::resolve_credential_chain(env_of({{"HOME", (dir.path / "none").string()},
                                                    {"AWS_EC2_METADATA_DISABLED", "true"}}));
    REQUIRE_FALSE(none.has_value());
    CHECK(none.error().find("no AWS credentials found") != std::string::npos);
}
