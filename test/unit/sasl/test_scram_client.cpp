// SCRAM client: RFC 7677's example byte for byte (client nonce fixed), full exchanges against
// the in-process scram_server for both mechanisms, and the refusals: a wrong server signature
// (mutual authentication), a nonce that does not extend ours, iterations outside Kafka's
// bounds, "e=" answers, calls out of order.
#include <skiff/core/base64.hpp>
#include <skiff/sasl/scram.hpp>
#include <skiff/sasl/scram_client.hpp>

#include <catch2/catch.hpp>

#include <map>

using namespace skiff;
using namespace skiff::sasl;

namespace {

constexpr const char* rfc_cnonce = "rOprNGfwEbeRWgbNEkqO";
constexpr const char* rfc_server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

scram_server::options server_options(scram_mechanism m, std::map<std::string, scram_credential> users) {
    scram_server::options o;
    o.mechanism = m;
    o.lookup = [users = std::move(users)](const client_first& f, scram_mechanism mech) -> std::optional<scram_credential> {
        auto it = users.find(f.username);
        if (it == users.end() || it->second.mechanism != mech) return std::nullopt;
        return it->second;
    };
    o.fake_credential_key = "test fake key";
    return o;
}

} // namespace

TEST_CASE("scram_client: RFC 7677 SCRAM-SHA-256 example, byte for byte", "[sasl][scram_client]") {
    scram_client c(scram_client::options{scram_mechanism::sha_256, "user", "pencil", rfc_cnonce});
    auto first = c.first_message();
    REQUIRE(first);
    CHECK(*first == "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    auto fin = c.final_message(rfc_server_first);
    REQUIRE(fin);
    CHECK(*fin == "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                  "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    auto v = c.verify_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    REQUIRE(v);
    CHECK(c.complete());
    // Nothing after completion.
    auto again = c.verify_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    REQUIRE_FALSE(again);
    CHECK(again.error() == errc::bad_state);
}

TEST_CASE("scram_client: a wrong server signature is refused", "[sasl][scram_client]") {
    scram_client c(scram_client::options{scram_mechanism::sha_256, "user", "pencil", rfc_cnonce});
    REQUIRE(c.first_message());
    REQUIRE(c.final_message(rfc_server_first));
    // A signature of the right size but wrong: the broker does not hold the credential.
    auto v = c.verify_final("v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    REQUIRE_FALSE(v);
    CHECK(v.error() == errc::bad_proof);
    CHECK(c.current_state() == scram_client::state::failed);
    CHECK_FALSE(c.complete());
}

TEST_CASE("scram_client: full exchanges against scram_server", "[sasl][scram_client]") {
    for (auto m : {scram_mechanism::sha_256, scram_mechanism::sha_512}) {
        CAPTURE(mechanism_name(m));
        auto cred = make_scram_credential(m, "s3cr=t,pw", 8192).value();
        const std::string user = "al,ice=x"; // needs saslname escaping
        scram_server s(server_options(m, {{user, cred}}));
        scram_client c(scram_client::options{m, user, "s3cr=t,pw", ""});
        auto first = c.first_message();
        REQUIRE(first);
        CHECK(first->rfind("n,,n=al=2Cice=3Dx,r=", 0) == 0);
        auto sf = s.step(*first);
        REQUIRE(sf);
        auto cf = c.final_message(*sf);
        REQUIRE(cf);
        auto sfin = s.step(*cf);
        REQUIRE(sfin);
        CHECK(s.complete());
        CHECK(s.username() == user);
        auto v = c.verify_final(*sfin);
        REQUIRE(v);
        CHECK(c.complete());
    }
}

TEST_CASE("scram_client: a wrong password is refused by the server", "[sasl][scram_client]") {
    auto cred = make_scram_credential(scram_mechanism::sha_512, "right", 4096).value();
    scram_server s(server_options(scram_mechanism::sha_512, {{"bob", cred}}));
    scram_client c(scram_client::options{scram_mechanism::sha_512, "bob", "wrong", ""});
    auto first = c.first_message();
    REQUIRE(first);
    auto sf = s.step(*first);
    REQUIRE(sf);
    auto cf = c.final_message(*sf);
    REQUIRE(cf);
    auto sfin = s.step(*cf);
    REQUIRE_FALSE(sfin);
    CHECK(sfin.error() == errc::bad_proof);
    // Had the server answered e=invalid-proof, the client would report it.
    auto v = c.verify_final("e=invalid-proof");
    REQUIRE_FALSE(v);
    CHECK(c.server_error() == "invalid-proof");
}

TEST_CASE("scram_client: a server signature for another password is refused", "[sasl][scram_client]") {
    // An impostor broker that holds a credential of another password: it cannot produce v=.
    // (The real server refuses the proof first; here the impostor accepts any proof.)
    auto other = make_scram_credential(scram_mechanism::sha_256, "other", 4096).value();
    scram_server s(server_options(scram_mechanism::sha_256, {{"eve", other}}));
    scram_client c(scram_client::options{scram_mechanism::sha_256, "eve", "mine", ""});
    auto first = c.first_message();
    REQUIRE(first);
    auto sf = s.step(*first);
    REQUIRE(sf);
    auto cf = c.final_message(*sf);
    REQUIRE(cf);
    // The impostor signs with a key it made up.
    auto v = c.verify_final("v=" + base64_encode(std::string(32, 'x')));
    REQUIRE_FALSE(v);
    CHECK(v.error() == errc::bad_proof);
}

TEST_CASE("scram_client: bad server-first messages", "[sasl][scram_client]") {
    auto refused = [](std::string_view server_first) {
        scram_client c(scram_client::options{scram_mechanism::sha_256, "user", "pencil", rfc_cnonce});
        auto first = c.first_message();
        REQUIRE(first);
        auto r = c.final_message(server_first);
        if (!r) CHECK(c.current_state() == scram_client::state::failed);
        return r ? std::error_code() : r.error();
    };
    // The nonce must extend ours.
    CHECK(refused("r=XOprNGfwEbeRWgbNEkqO%hv,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096") == errc::malformed);
    CHECK(refused("r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096") == errc::malformed);
    // Iterations within Kafka's bounds.
    CHECK(refused("r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095") == errc::invalid_credential);
    CHECK(refused("r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=16385") == errc::invalid_credential);
    CHECK(refused("r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999") == errc::malformed);
    CHECK(refused("r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=x") == errc::malformed);
    // Salt.
    CHECK(refused("r=rOprNGfwEbeRWgbNEkqOabc,s=!!!,i=4096") == errc::malformed);
    CHECK(refused("r=rOprNGfwEbeRWgbNEkqOabc,s=,i=4096") == errc::invalid_credential);
    // Order, missing fields, mandatory extension, server error.
    CHECK(refused("s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOabc,i=4096") == errc::malformed);
    CHECK(refused("r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==") == errc::malformed);
    CHECK(refused("m=x,r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096") == errc::unsupported);
    CHECK(refused("e=unknown-user") == errc::bad_proof);
    CHECK(refused("") == errc::malformed);
    CHECK(refused(std::string("r=rOprNGfwEbeRWgbNEkqOa\0c,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", 52)) == errc::malformed);
    // Extensions after i= are allowed.
    CHECK(refused(std::string(rfc_server_first) + ",x=y") == std::error_code());
}

TEST_CASE("scram_client: calls out of order and bad names", "[sasl][scram_client]") {
    {
        scram_client c(scram_client::options{scram_mechanism::sha_256, "user", "pencil", rfc_cnonce});
        auto r = c.final_message(rfc_server_first);
        REQUIRE_FALSE(r);
        CHECK(r.error() == errc::bad_state);
    }
    {
        scram_client c(scram_client::options{scram_mechanism::sha_256, "", "pencil", ""});
        auto r = c.first_message();
        REQUIRE_FALSE(r);
        CHECK(r.error() == errc::malformed);
    }
    {
        scram_client c(scram_client::options{scram_mechanism::sha_256, "user", "pencil", rfc_cnonce});
        REQUIRE(c.first_message());
        auto again = c.first_message();
        REQUIRE_FALSE(again);
        CHECK(again.error() == errc::bad_state);
    }
    {
        scram_client c(scram_client::options{scram_mechanism::sha_256, "user", "pencil", rfc_cnonce});
        REQUIRE(c.first_message());
        REQUIRE(c.final_message(rfc_server_first));
        auto v = c.verify_final("x=whatever");
        REQUIRE_FALSE(v);
        CHECK(v.error() == errc::malformed);
    }
}
