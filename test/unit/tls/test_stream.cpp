#include "run_task.hpp"
#include "test_certs.hpp"

#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/tls/context.hpp>
#include <skiff/tls/errc.hpp>
#include <skiff/tls/stream.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <random>
#include <sys/socket.h>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using skiff::test::test_pki;
using ctx_ptr = std::shared_ptr<const tls::context>;

namespace {

constexpr auto hs_timeout = std::chrono::milliseconds(5000);

tls::server_config server_cfg(tls::client_auth auth = tls::client_auth::none) {
    const auto& p = test_pki::get();
    tls::server_config c;
    c.cert_file = p.server_cert;
    c.key_file = p.server_key;
    c.ca_file = p.ca_cert;
    c.client_auth_mode = auth;
    return c;
}
tls::client_config client_cfg(bool with_cert = false) {
    const auto& p = test_pki::get();
    tls::client_config c;
    c.ca_file = p.ca_cert;
    c.server_name = "127.0.0.1";
    if (with_cert) {
        c.cert_file = p.client_cert;
        c.key_file = p.client_key;
    }
    return c;
}
ctx_ptr make_server(const tls::server_config& c) {
    auto r = tls::context::make_server(c);
    if (!r) FAIL(r.error().message);
    return *r;
}
ctx_ptr make_client(const tls::client_config& c) {
    auto r = tls::context::make_client(c);
    if (!r) FAIL(r.error().message);
    return *r;
}
tcp_listener listen_local() {
    auto l = tcp_listener::listen(*socket_address::parse("127.0.0.1:0"));
    REQUIRE(l.has_value());
    return std::move(*l);
}

task<result<tls::stream>> accept_tls(tcp_listener* l, ctx_ptr ctx, std::chrono::milliseconds timeout,
                                     std::stop_token st) {
    auto c = co_await l->accept();
    if (!c) co_return failure{c.error()};
    auto t = tls::stream::accept(std::move(ctx), std::move(*c), std::move(st), timeout);
    auto s = co_await std::move(t);
    co_return s;
}
task<result<tls::stream>> connect_tls(socket_address addr, ctx_ptr ctx) {
    auto c = co_await tcp_stream::connect(addr);
    if (!c) co_return failure{c.error()};
    auto t = tls::stream::connect(std::move(ctx), std::move(*c), {}, hs_timeout);
    auto s = co_await std::move(t);
    co_return s;
}

// accept_tls, timing the server side alone (the raw peer may linger on after it).
task<result<tls::stream>> timed_accept(tcp_listener* l, ctx_ptr ctx, std::chrono::milliseconds timeout,
                                       std::chrono::steady_clock::duration* took) {
    auto c = co_await l->accept();
    if (!c) co_return failure{c.error()};
    const auto start = std::chrono::steady_clock::now();
    auto t = tls::stream::accept(std::move(ctx), std::move(*c), {}, timeout);
    auto s = co_await std::move(t);
    *took = std::chrono::steady_clock::now() - start;
    co_return s;
}

struct pair_result {
    result<tls::stream> server;
    result<tls::stream> client;
};
task<pair_result> handshake_pair(tcp_listener* l, ctx_ptr server_ctx, ctx_ptr client_ctx) {
    auto a = accept_tls(l, std::move(server_ctx), hs_timeout, {});
    auto b = connect_tls(l->local_address(), std::move(client_ctx));
    auto both = co_await when_all(std::move(a), std::move(b));
    co_return pair_result{std::move(std::get<0>(both)), std::move(std::get<1>(both))};
}

task<result<void>> send(tls::stream* s, const std::string* data) {
    auto r = co_await s->write_all(std::span<const char>(data->data(), data->size()));
    co_return r;
}
task<result<std::string>> recv_n(tls::stream* s, std::size_t n) {
    std::string got;
    got.reserve(n);
    std::vector<char> buf(20000);
    while (got.size() < n) {
        auto r = co_await s->read_some(buf);
        if (!r) co_return failure{r.error()};
        if (*r == 0) break;
        got.append(buf.data(), *r);
    }
    co_return got;
}
// a -> b and back, sequentially.
task<bool> echo(tls::stream* a, tls::stream* b, std::string msg) {
    auto w = co_await send(a, &msg);
    if (!w) co_return false;
    auto got = co_await recv_n(b, msg.size());
    if (!got || *got != msg) co_return false;
    auto w2 = co_await send(b, &*got);
    if (!w2) co_return false;
    auto back = co_await recv_n(a, msg.size());
    co_return back && *back == msg;
}

std::string pattern(std::size_t n, unsigned seed) {
    std::string s(n, '\0');
    std::mt19937 rng(seed);
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

// A plain TCP peer that sends `bytes`, then (optionally) lingers, then closes.
task<void> raw_client(socket_address addr, std::string bytes, std::chrono::milliseconds linger) {
    auto c = co_await tcp_stream::connect(addr);
    REQUIRE(c.has_value());
    if (!bytes.empty()) {
        auto w = co_await c->write_all(bytes);
        (void)w; // the server may already have given up and closed
    }
    if (linger.count() > 0) {
        auto s = co_await sleep(linger);
        (void)s;
    }
    c->close();
}

task<void> stop_after(std::stop_source* src, std::chrono::milliseconds d) {
    auto s = co_await sleep(d);
    (void)s;
    src->request_stop();
}

} // namespace

TEST_CASE("handshake, then 1 MiB each way at once", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        auto hs = co_await handshake_pair(&l, make_server(server_cfg()), make_client(client_cfg()));
        REQUIRE(hs.server.has_value());
        REQUIRE(hs.client.has_value());
        tls::stream server = std::move(*hs.server);
        tls::stream client = std::move(*hs.client);
        CHECK(server.protocol() == "TLSv1.3");
        CHECK(client.protocol() == "TLSv1.3");
        CHECK_FALSE(server.cipher().empty());
        CHECK_FALSE(server.peer_principal().has_value()); // no client certificate
        CHECK(client.peer_principal() == std::optional<std::string>("CN=localhost"));

        // Both sides write 1 MiB while reading the other's: a design where a waiting reader
        // blocks the writer (or the other way round) deadlocks here. Small socket buffers,
        // or loopback's megabytes of buffering would hide such a deadlock.
        for (int fd : {server.fd(), client.fd()}) {
            int small = 16 * 1024;
            CHECK(::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
            CHECK(::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) == 0);
        }
        const std::size_t n = 1 << 20;
        const std::string to_client = pattern(n, 1), to_server = pattern(n, 2);
        auto [w1, r1, w2, r2] = co_await when_all(send(&server, &to_client), recv_n(&server, n),
                                                   send(&client, &to_server), recv_n(&client, n));
        REQUIRE(w1.has_value());
        REQUIRE(w2.has_value());
        REQUIRE(r1.has_value());
        REQUIRE(r2.has_value());
        CHECK(r1->size() == n);
        CHECK(*r1 == to_server);
        CHECK(*r2 == to_client);
    };
    run_task(t());
}

TEST_CASE("TLS 1.2 and TLS 1.3 can be forced", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        {
            auto sc = server_cfg(tls::client_auth::required);
            sc.max_version = "TLSv1.2";
            auto hs = co_await handshake_pair(&l, make_server(sc), make_client(client_cfg(true)));
            REQUIRE(hs.server.has_value());
            REQUIRE(hs.client.has_value());
            CHECK(hs.server->protocol() == "TLSv1.2");
            CHECK(hs.client->protocol() == "TLSv1.2");
            CHECK(hs.server->peer_principal() == std::optional<std::string>("CN=alice,OU=eng,O=acme"));
            auto e = co_await echo(&*hs.client, &*hs.server, pattern(100000, 3));
            CHECK(e);
            // Key updates are TLS 1.3 only.
            auto ku = hs.client->request_key_update();
            CHECK_FALSE(ku.has_value());
        }
        {
            auto sc = server_cfg();
            sc.min_version = "TLSv1.3";
            auto hs = co_await handshake_pair(&l, make_server(sc), make_client(client_cfg()));
            REQUIRE(hs.server.has_value());
            REQUIRE(hs.client.has_value());
            CHECK(hs.server->protocol() == "TLSv1.3");
            auto e = co_await echo(&*hs.client, &*hs.server, "hello");
            CHECK(e);
        }
        {
            // No common version: both sides fail, neither hangs.
            auto sc = server_cfg();
            sc.min_version = "TLSv1.3";
            auto cc = client_cfg();
            cc.max_version = "TLSv1.2";
            auto hs = co_await handshake_pair(&l, make_server(sc), make_client(cc));
            REQUIRE_FALSE(hs.server.has_value());
            REQUIRE_FALSE(hs.client.has_value());
            CHECK(hs.server.error() == tls::errc::handshake_failed);
            CHECK(hs.client.error() == tls::errc::handshake_failed);
        }
    };
    run_task(t());
}

TEST_CASE("mTLS: a required client certificate gives the principal", "[tls][stream][mtls]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        auto hs = co_await handshake_pair(&l, make_server(server_cfg(tls::client_auth::required)),
                                          make_client(client_cfg(true)));
        REQUIRE(hs.server.has_value());
        REQUIRE(hs.client.has_value());
        CHECK(hs.server->peer_principal() == std::optional<std::string>("CN=alice,OU=eng,O=acme"));
        auto e = co_await echo(&*hs.client, &*hs.server, "after mtls");
        CHECK(e);
    };
    run_task(t());
}

TEST_CASE("mTLS: requested but absent is let in without a principal", "[tls][stream][mtls]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        auto hs = co_await handshake_pair(&l, make_server(server_cfg(tls::client_auth::requested)),
                                          make_client(client_cfg(false)));
        REQUIRE(hs.server.has_value());
        REQUIRE(hs.client.has_value());
        CHECK_FALSE(hs.server->peer_principal().has_value());
        auto e = co_await echo(&*hs.client, &*hs.server, "anonymous");
        CHECK(e);
    };
    run_task(t());
}

TEST_CASE("mTLS: a missing required client certificate fails the handshake", "[tls][stream][mtls]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        auto hs = co_await handshake_pair(&l, make_server(server_cfg(tls::client_auth::required)),
                                          make_client(client_cfg(false)));
        REQUIRE_FALSE(hs.server.has_value());
        CHECK(hs.server.error() == tls::errc::certificate_required);
        CHECK(hs.server.error().message() == "a TLS client certificate is required and none was presented");
        // In TLS 1.3 the client finishes first and learns of the refusal on its next read.
        if (hs.client.has_value()) {
            char buf[16];
            auto r = co_await hs.client->read_some(buf);
            REQUIRE_FALSE(r.has_value());
            CHECK(r.error() == tls::errc::certificate_required);
        }
    };
    run_task(t());
}

TEST_CASE("mTLS: a client certificate from another CA fails", "[tls][stream][mtls]") {
    auto t = []() -> task<void> {
        const auto& p = test_pki::get();
        auto l = listen_local();
        auto cc = client_cfg();
        cc.cert_file = p.other_client_cert;
        cc.key_file = p.other_client_key;
        auto hs = co_await handshake_pair(&l, make_server(server_cfg(tls::client_auth::required)), make_client(cc));
        REQUIRE_FALSE(hs.server.has_value());
        CHECK(hs.server.error() == tls::errc::certificate_invalid);
        if (hs.client.has_value()) {
            char buf[16];
            auto r = co_await hs.client->read_some(buf);
            REQUIRE_FALSE(r.has_value());
            CHECK(r.error() == tls::errc::certificate_rejected);
        }
    };
    run_task(t());
}

TEST_CASE("a client refuses a server certificate from an unknown CA or for another name", "[tls][stream]") {
    auto t = []() -> task<void> {
        const auto& p = test_pki::get();
        auto l = listen_local();
        {
            auto cc = client_cfg();
            cc.ca_file = p.other_ca_cert;
            auto hs = co_await handshake_pair(&l, make_server(server_cfg()), make_client(cc));
            REQUIRE_FALSE(hs.client.has_value());
            CHECK(hs.client.error() == tls::errc::certificate_invalid);
            REQUIRE_FALSE(hs.server.has_value());
            CHECK(hs.server.error() == tls::errc::certificate_rejected);
        }
        {
            auto cc = client_cfg();
            cc.server_name = "kafka.example.com";
            auto hs = co_await handshake_pair(&l, make_server(server_cfg()), make_client(cc));
            REQUIRE_FALSE(hs.client.has_value());
            CHECK(hs.client.error() == tls::errc::certificate_invalid);
        }
    };
    run_task(t());
}

TEST_CASE("plaintext Kafka on a TLS port is not_tls at once", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        // ApiVersions v3: size, api_key 18, version 3, correlation id 1, client id "x".
        const std::string frame("\x00\x00\x00\x0e\x00\x12\x00\x03\x00\x00\x00\x01\x00\x01x\x00\x00\x00", 18);
        std::chrono::steady_clock::duration took{};
        // The peer stays connected: only the first byte can tell the server to give up.
        auto [s, _] = co_await when_all(timed_accept(&l, make_server(server_cfg()), 10s, &took),
                                        raw_client(l.local_address(), frame, 1000ms));
        REQUIRE_FALSE(s.has_value());
        CHECK(s.error() == tls::errc::not_tls);
        CHECK(took < 500ms);
    };
    run_task(t());
}

TEST_CASE("garbage is a handshake error, not a hang", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        auto ctx = make_server(server_cfg());
        {
            std::string junk = pattern(65536, 7);
            junk[0] = '\x16';
            std::chrono::steady_clock::duration took{};
            auto [s, _] = co_await when_all(timed_accept(&l, ctx, 10s, &took), raw_client(l.local_address(), junk, 1000ms));
            REQUIRE_FALSE(s.has_value());
            CHECK(s.error().category() == tls::error_category());
            CHECK(took < 500ms);
        }
        {
            // A well-formed record header around a ClientHello that is nonsense.
            std::string junk("\x16\x03\x01\x00\x24\x01\x00\x00\x20", 9);
            junk += pattern(32, 8);
            std::chrono::steady_clock::duration took{};
            auto [s, _] = co_await when_all(timed_accept(&l, ctx, 10s, &took), raw_client(l.local_address(), junk, 1000ms));
            REQUIRE_FALSE(s.has_value());
            CHECK(s.error() == tls::errc::handshake_failed);
            CHECK(took < 500ms);
        }
        {
            std::string junk = pattern(1000, 9);
            junk[0] = 'G'; // an HTTP request on the TLS port
            auto [s, _] = co_await when_all(accept_tls(&l, ctx, 10s, {}), raw_client(l.local_address(), junk, 0ms));
            REQUIRE_FALSE(s.has_value());
            CHECK(s.error() == tls::errc::not_tls);
        }
    };
    run_task(t());
}

TEST_CASE("a peer that leaves mid-handshake is an error", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        // The start of a ClientHello record that announces 512 bytes, then EOF.
        std::string partial("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
        auto [s, _] = co_await when_all(accept_tls(&l, make_server(server_cfg()), 10s, {}),
                                        raw_client(l.local_address(), partial, 20ms));
        REQUIRE_FALSE(s.has_value());
        CHECK(s.error() == tls::errc::closed);
    };
    run_task(t());
}

TEST_CASE("a silent peer hits the handshake timeout", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        std::chrono::steady_clock::duration took{};
        auto [s, _] = co_await when_all(timed_accept(&l, make_server(server_cfg()), 100ms, &took),
                                        raw_client(l.local_address(), "", 400ms));
        REQUIRE_FALSE(s.has_value());
        CHECK(s.error() == make_error_code(runtime::errc::timed_out));
        CHECK(took >= 90ms);
        CHECK(took < 1000ms); // loose: loaded CI machines
    };
    run_task(t());
}

TEST_CASE("cancellation resolves cancelled, never success", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        {
            std::stop_source src;
            auto [s, a, b] = co_await when_all(accept_tls(&l, make_server(server_cfg()), 10s, src.get_token()),
                                               raw_client(l.local_address(), "", 300ms), stop_after(&src, 20ms));
            REQUIRE_FALSE(s.has_value());
            CHECK(s.error() == make_error_code(runtime::errc::cancelled));
        }
        {
            auto hs = co_await handshake_pair(&l, make_server(server_cfg()), make_client(client_cfg()));
            REQUIRE(hs.server.has_value());
            REQUIRE(hs.client.has_value());
            std::stop_source src;
            std::vector<char> buf(100);
            std::span<char> span(buf);
            auto [r, _] = co_await when_all(hs.server->read_some(span, src.get_token()), stop_after(&src, 20ms));
            REQUIRE_FALSE(r.has_value());
            CHECK(r.error() == make_error_code(runtime::errc::cancelled));
            // A token already stopped: cancelled at once, even with data waiting.
            const std::string msg = "still works";
            auto w = co_await send(&*hs.client, &msg);
            REQUIRE(w.has_value());
            auto r2 = co_await hs.server->read_some(span, src.get_token());
            REQUIRE_FALSE(r2.has_value());
            CHECK(r2.error() == make_error_code(runtime::errc::cancelled));
            // The stream survives a cancelled read and loses no data.
            auto got = co_await recv_n(&*hs.server, msg.size());
            REQUIRE(got.has_value());
            CHECK(*got == msg);
        }
    };
    run_task(t());
}

TEST_CASE("close_notify reads as 0, and half-close keeps the other direction", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        auto hs = co_await handshake_pair(&l, make_server(server_cfg()), make_client(client_cfg()));
        REQUIRE(hs.server.has_value());
        REQUIRE(hs.client.has_value());
        const std::string last = "last words";
        auto w = co_await send(&*hs.server, &last);
        REQUIRE(w.has_value());
        co_await hs.server->shutdown();
        auto got = co_await recv_n(&*hs.client, last.size());
        REQUIRE(got.has_value());
        CHECK(*got == last);
        char buf[64];
        auto r = co_await hs.client->read_some(buf);
        REQUIRE(r.has_value());
        CHECK(*r == 0);
        // Writing after our own close_notify is refused.
        auto w2 = co_await send(&*hs.server, &last);
        REQUIRE_FALSE(w2.has_value());
        // The client can still answer; then its close_notify reaches the server.
        const std::string reply = "bye";
        auto w3 = co_await send(&*hs.client, &reply);
        REQUIRE(w3.has_value());
        co_await hs.client->shutdown();
        auto got2 = co_await recv_n(&*hs.server, reply.size());
        REQUIRE(got2.has_value());
        CHECK(*got2 == reply);
        auto r2 = co_await hs.server->read_some(buf);
        REQUIRE(r2.has_value());
        CHECK(*r2 == 0);
    };
    run_task(t());
}

TEST_CASE("TLS 1.3 key updates keep both directions working", "[tls][stream]") {
    auto t = []() -> task<void> {
        auto l = listen_local();
        auto hs = co_await handshake_pair(&l, make_server(server_cfg()), make_client(client_cfg()));
        REQUIRE(hs.server.has_value());
        REQUIRE(hs.client.has_value());
        for (int i = 0; i < 3; ++i) {
            auto ku = hs.client->request_key_update();
            REQUIRE(ku.has_value());
            // The server's reader answers with its own key update while its writer may run.
            auto e = co_await echo(&*hs.client, &*hs.server, pattern(50000, 10 + i));
            CHECK(e);
            auto ku2 = hs.server->request_key_update();
            REQUIRE(ku2.has_value());
            auto e2 = co_await echo(&*hs.server, &*hs.client, pattern(50000, 20 + i));
            CHECK(e2);
        }
    };
    run_task(t());
}

TEST_CASE("reload: new connections get the new certificate, old ones keep working", "[tls][stream][reload]") {
    auto t = []() -> task<void> {
        const auto& p = test_pki::get();
        auto dir = p.dir + "/reload-stream";
        std::filesystem::create_directories(dir);
        auto sc = server_cfg();
        sc.cert_file = dir + "/cert.pem";
        sc.key_file = dir + "/key.pem";
        const auto over = std::filesystem::copy_options::overwrite_existing;
        std::filesystem::copy_file(p.server_cert, sc.cert_file, over);
        std::filesystem::copy_file(p.server_key, sc.key_file, over);
        auto holder = tls::context_holder::create(sc);
        REQUIRE(holder.has_value());
        auto l = listen_local();
        auto client_ctx = make_client(client_cfg());

        auto old_conn = co_await handshake_pair(&l, (*holder)->current(), client_ctx);
        REQUIRE(old_conn.server.has_value());
        REQUIRE(old_conn.client.has_value());
        CHECK(old_conn.client->peer_principal() == std::optional<std::string>("CN=localhost"));

        std::filesystem::copy_file(p.server2_cert, sc.cert_file, over);
        std::filesystem::copy_file(p.server2_key, sc.key_file, over);
        auto rl = (*holder)->reload();
        REQUIRE(rl.has_value());

        auto new_conn = co_await handshake_pair(&l, (*holder)->current(), client_ctx);
        REQUIRE(new_conn.server.has_value());
        REQUIRE(new_conn.client.has_value());
        CHECK(new_conn.client->peer_principal() == std::optional<std::string>("CN=server2"));
        CHECK(new_conn.server->ctx() != old_conn.server->ctx());

        auto e1 = co_await echo(&*old_conn.client, &*old_conn.server, pattern(70000, 30));
        CHECK(e1);
        auto e2 = co_await echo(&*new_conn.client, &*new_conn.server, pattern(70000, 31));
        CHECK(e2);
    };
    run_task(t());
}
