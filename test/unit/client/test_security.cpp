// The client's SASL against a real in-process broker with a PLAINTEXT and a SASL_PLAINTEXT
// listener: every mechanism connects, a wrong password is authentication_failed with the
// broker's message and is not retried on the next bootstrap address, SASL against the
// PLAINTEXT listener and TLS against a plaintext port fail with their own sentences, bad
// settings are bad_config. (TLS against a TLS listener: test/clients/test_cli_security.py.)
#include "run_task.hpp"

#include <skiff/broker/broker.hpp>
#include <skiff/client/client.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/sasl/credential.hpp>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace skiff;
using namespace std::chrono_literals;

namespace {

// A port nobody listens on right now (bound to 0, read, closed).
int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

struct temp_dir {
    temp_dir() {
        char tmpl[] = "/tmp/skiff-client-sec-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string path;
};

// A broker with PLAINTEXT (plain) and SASL_PLAINTEXT (sasl) listeners on its own thread.
class sasl_broker {
public:
    explicit sasl_broker(std::string dir) {
        if (const auto& why = test::reactor_unavailable()) test::reactor_refused("broker", *why);
        plain = "127.0.0.1:" + std::to_string(free_port());
        sasl = "127.0.0.1:" + std::to_string(free_port());
        broker::broker_config cfg;
        auto ls = broker::parse_listeners("PLAINTEXT://" + plain + ",SASL_PLAINTEXT://" + sasl);
        REQUIRE(ls);
        cfg.listeners = std::move(*ls);
        cfg.http_addr = "";
        cfg.cores = 1;
        cfg.data_dir = std::move(dir);
        cfg.failed_auth_delay = 10ms;
        cfg.sasl_mechanisms = {"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"};
        std::promise<bool> ready;
        auto started = ready.get_future();
        broker::serve_hooks hooks;
        hooks.on_ready = [p = &ready](const std::string&, const std::string&) { p->set_value(true); };
        _thread = std::thread([this, cfg = std::move(cfg), hooks = std::move(hooks), p = &ready]() mutable {
            auto r = broker::serve(std::move(cfg), _stop.get_token(), std::move(hooks));
            if (!r) {
                _error = r.error();
                try {
                    p->set_value(false);
                } catch (...) {
                }
            }
        });
        if (started.wait_for(30s) != std::future_status::ready || !started.get()) {
            stop();
            FAIL("broker did not start: " << _error);
        }
    }
    ~sasl_broker() { stop(); }
    void stop() {
        _stop.request_stop();
        if (_thread.joinable()) _thread.join();
    }
    std::string plain;
    std::string sasl;

private:
    std::stop_source _stop;
    std::thread _thread;
    std::string _error;
};

constexpr const char* password = "Secret-pw-1";

client::client_config sasl_config(std::vector<std::string> bootstrap, std::string mechanism, std::string pw) {
    client::client_config c(std::move(bootstrap));
    c.conn.connect_timeout = 5s;
    c.conn.request_timeout = 5s;
    c.security().protocol = client::security_protocol::sasl_plaintext;
    c.security().sasl_mechanism = std::move(mechanism);
    c.security().sasl_username = "alice";
    c.security().sasl_password = std::move(pw);
    return c;
}

// Connects with `cfg`, reads Metadata and closes: the error, if any.
runtime::task<std::optional<client::error>> try_connect(client::client_config cfg) {
    client::client c(std::move(cfg));
    auto ct = c.connect();
    auto r = co_await std::move(ct);
    std::optional<client::error> out;
    if (!r) out = r.error();
    co_await c.close();
    co_return out;
}

struct outcome {
    outcome() = default;
    std::optional<client::error> add_user;
    std::vector<std::pair<std::string, std::optional<client::error>>> mechanisms;
    std::optional<client::error> wrong_password;
    std::optional<client::error> wrong_then_good; // bootstrap: a refused one, then a good address
    std::optional<client::error> sasl_on_plaintext;
    std::optional<client::error> plaintext_on_sasl;
    std::optional<client::error> tls_on_plaintext;
    std::optional<client::error> missing_ca;
    std::optional<client::error> unknown_mechanism;
    std::int32_t routed_leader = -2;
};

runtime::task<outcome> scenario(std::string plain, std::string sasl) {
    outcome out;
    {
        client::client admin(client::client_config({plain}));
        auto ct = admin.connect();
        auto connected = co_await std::move(ct);
        if (!connected) {
            out.add_user = connected.error();
            co_await admin.close();
            co_return out;
        }
        for (auto m : {sasl::scram_mechanism::sha_256, sasl::scram_mechanism::sha_512}) {
            kafka::AlterUserScramCredentialsRequest req;
            kafka::AlterUserScramCredentialsRequest::ScramCredentialUpsertion u;
            u.name = "alice";
            u.mechanism = m == sasl::scram_mechanism::sha_256 ? 1 : 2;
            u.iterations = 4096;
            u.salt = sasl::random_salt();
            u.salted_password = sasl::salt_password(m, password, u.salt, 4096).value();
            req.upsertions.push_back(std::move(u));
            auto st = admin.send(std::move(req), client::target::controller());
            auto r = co_await std::move(st);
            if (!r) out.add_user = r.error();
        }
        co_await admin.close();
    }
    // The users reach the listener's snapshot shortly after the answer.
    for (const char* m : {"SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"}) {
        std::optional<client::error> e;
        for (int attempt = 0; attempt < 30; ++attempt) {
            auto t = try_connect(sasl_config({sasl}, m, password));
            e = co_await std::move(t);
            if (!e || e->code != client::errc::authentication_failed) break;
            auto slept = co_await runtime::sleep(100ms);
            (void)slept;
        }
        out.mechanisms.emplace_back(m, e);
    }
    {
        // Routing to a partition's leader opens connections with the same security.
        client::client c(sasl_config({sasl}, "SCRAM-SHA-256", password));
        auto ct = c.connect();
        auto connected = co_await std::move(ct);
        if (connected) {
            kafka::CreateTopicsRequest req;
            kafka::CreateTopicsRequest::CreatableTopic t;
            t.name = "secured";
            t.num_partitions = 1;
            t.replication_factor = 1;
            req.topics.push_back(std::move(t));
            req.timeout_ms = 10000;
            auto st = c.send(std::move(req), client::target::controller());
            auto created = co_await std::move(st);
            if (created) {
                auto lt = c.connection_for(client::target::leader("secured", 0));
                auto l = co_await std::move(lt);
                out.routed_leader = l ? 0 : -1;
            }
        }
        co_await c.close();
    }
    auto t1 = try_connect(sasl_config({sasl}, "SCRAM-SHA-512", "wrong"));
    out.wrong_password = co_await std::move(t1);
    auto t2 = try_connect(sasl_config({sasl, plain}, "PLAIN", "wrong"));
    out.wrong_then_good = co_await std::move(t2);
    auto t3 = try_connect(sasl_config({plain}, "PLAIN", password));
    out.sasl_on_plaintext = co_await std::move(t3);
    client::client_config none({sasl});
    auto t4 = try_connect(none);
    out.plaintext_on_sasl = co_await std::move(t4);
    client::client_config tls({plain});
    tls.security().protocol = client::security_protocol::ssl;
    tls.security().ssl_verify_hostname = false;
    tls.conn.connect_timeout = 5s;
    auto t5 = try_connect(tls);
    out.tls_on_plaintext = co_await std::move(t5);
    tls.security().ssl_ca_file = "/nonexistent/ca.pem";
    auto t6 = try_connect(tls);
    out.missing_ca = co_await std::move(t6);
    auto t7 = try_connect(sasl_config({sasl}, "GSSAPI", password));
    out.unknown_mechanism = co_await std::move(t7);
    co_return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

} // namespace

TEST_CASE("security: security protocol names", "[client][security]") {
    CHECK(client::security_protocol_from_name("sasl_ssl") == client::security_protocol::sasl_ssl);
    CHECK(client::security_protocol_from_name("PLAINTEXT") == client::security_protocol::plaintext);
    CHECK_FALSE(client::security_protocol_from_name("TLS"));
    CHECK(client::to_string(client::security_protocol::sasl_plaintext) == "SASL_PLAINTEXT");
    CHECK(client::known_sasl_mechanism("SCRAM-SHA-256"));
    CHECK_FALSE(client::known_sasl_mechanism("GSSAPI"));
    client::security_config s;
    s.protocol = client::security_protocol::sasl_ssl;
    CHECK(s.uses_tls());
    CHECK(s.uses_sasl());
}

TEST_CASE("security: SASL against an in-process broker", "[client][security]") {
    temp_dir dir;
    sasl_broker b(dir.path);
    auto out = runtime::run_task(scenario(b.plain, b.sasl));
    REQUIRE_FALSE(out.add_user);
    REQUIRE(out.mechanisms.size() == 3);
    for (const auto& [m, e] : out.mechanisms) {
        INFO(m << ": " << (e ? e->message : std::string("ok")));
        CHECK_FALSE(e);
    }
    CHECK(out.routed_leader == 0);

    REQUIRE(out.wrong_password);
    CHECK(out.wrong_password->code == client::errc::authentication_failed);
    CHECK(out.wrong_password->is_security());
    CHECK(contains(out.wrong_password->message, "authentication failed: "));
    CHECK(contains(out.wrong_password->message, "Invalid username or password"));
    CHECK_FALSE(contains(out.wrong_password->message, "wrong"));

    // Not retried on the next bootstrap address (which would have let it in without SASL).
    REQUIRE(out.wrong_then_good);
    CHECK(out.wrong_then_good->code == client::errc::authentication_failed);

    REQUIRE(out.sasl_on_plaintext);
    CHECK(out.sasl_on_plaintext->code == client::errc::authentication_failed);
    CHECK(contains(out.sasl_on_plaintext->message, "does not use SASL"));

    REQUIRE(out.plaintext_on_sasl);
    CHECK(out.plaintext_on_sasl->code == client::errc::disconnected);
    CHECK(contains(out.plaintext_on_sasl->message, "require SASL"));

    REQUIRE(out.tls_on_plaintext);
    CHECK(out.tls_on_plaintext->code == client::errc::tls_failed);
    CHECK(contains(out.tls_on_plaintext->message, "TLS handshake with " + b.plain + " failed: "));

    REQUIRE(out.missing_ca);
    CHECK(out.missing_ca->code == client::errc::bad_config);
    CHECK(contains(out.missing_ca->message, "/nonexistent/ca.pem"));

    REQUIRE(out.unknown_mechanism);
    CHECK(out.unknown_mechanism->code == client::errc::bad_config);
}
