// SCRAM server: RFC 7677's example byte for byte, a SCRAM-SHA-512 exchange checked against
// Python's hashlib, unknown user vs wrong password, the state machine's refusals.
#include <skiff/core/base64.hpp>
#include <skiff/sasl/scram.hpp>

#include <catch2/catch.hpp>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <map>

using namespace skiff;
using namespace skiff::sasl;

namespace {

scram_credential rfc7677_credential() {
    // RFC 7677 §3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, i=4096.
    auto salt = base64_decode("W22ZaJ0SNY7soEsUEjb6gQ==").value();
    return make_scram_credential(scram_mechanism::sha_256, "pencil", salt, 4096).value();
}

scram_server::options options_for(scram_mechanism m, std::map<std::string, scram_credential> users,
                                  std::string snonce) {
    scram_server::options o;
    o.mechanism = m;
    o.lookup = [users = std::move(users)](const client_first& f,
                                          scram_mechanism mech) -> std::optional<scram_credential> {
        auto it = users.find(f.username);
        if (it == users.end() || it->second.mechanism != mech) return std::nullopt;
        return it->second;
    };
    o.server_nonce = [snonce] { return snonce; };
    o.fake_credential_key = "test fake key";
    return o;
}

constexpr const char* rfc_snonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";

} // namespace

TEST_CASE("RFC 7677 SCRAM-SHA-256 example, byte for byte", "[sasl][scram]") {
    scram_server s(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
    auto first = s.step("n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    REQUIRE(first);
    CHECK(*first == "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
    auto final_ = s.step("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    REQUIRE(final_);
    CHECK(*final_ == "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    CHECK(s.complete());
    CHECK(s.username() == "user");
    // Nothing after completion.
    auto again = s.step("c=biws,r=x,p=AAAA");
    REQUIRE_FALSE(again);
    CHECK(again.error() == errc::bad_state);
    CHECK(s.complete());
}

TEST_CASE("SCRAM-SHA-512 exchange against Python hashlib", "[sasl][scram]") {
    // Constants computed with Python 3 (hashlib.pbkdf2_hmac("sha512", b"pencil-512",
    // bytes(range(1, 17)), 4096), hmac.new(..., hashlib.sha512)), the RFC 5802 §3 formulas
    // written out by hand; user "al,ice=x" (saslname al=2Cice=3Dx), nonces below.
    const std::string salt = base64_decode("AQIDBAUGBwgJCgsMDQ4PEA==").value();
    auto cred = make_scram_credential(scram_mechanism::sha_512, "pencil-512", salt, 4096).value();
    CHECK(base64_encode(cred.stored_key) ==
          "B6IARCzItYL1T2OFfLx2e4PkbXIxRE2hYV7StFy97wIKb99woc1s3siawxiv1vXTdNjwKX2LKy0FQGwzD1kyYg==");
    CHECK(base64_encode(cred.server_key) ==
          "czLrNZyWg8psYpflrXMkL930CCGQ+kLq6eJ2R0eFgArjpXef+0LOehzbT47IExIdqu4EYHXe6QqlNTwulrHFYg==");

    scram_server s(options_for(scram_mechanism::sha_512, {{"al,ice=x", cred}}, "3rfcNHYJY1ZVvWVs7j"));
    auto first = s.step("n,,n=al=2Cice=3Dx,r=fyko+d2lbbFgONRv9qkxdawL");
    REQUIRE(first);
    CHECK(*first == "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=AQIDBAUGBwgJCgsMDQ4PEA==,i=4096");
    auto fin = s.step("c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,"
                      "p=MGtJlHs3+pK72ch3q8AxnqQP33UDpiavfpXA+KLRAq3+Syvm6O7PvU0wolpP64xu6zV8S2/xh5jteWQPah5sQw==");
    REQUIRE(fin);
    CHECK(*fin == "v=WD/kOneHOf3qNxv7oVYCfZR1hOpRdB+D7ytMJ8p7i9BRDH/j5J0xINxVRyKsI1iE5vgvnPUHVHysgPvJq8cbew==");
    CHECK(s.username() == "al,ice=x");
}

TEST_CASE("default server nonce: client nonce plus at least 32 random bytes", "[sasl][scram]") {
    auto o = options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, "");
    o.server_nonce = nullptr;
    scram_server a(o), b(o);
    auto fa = a.step("n,,n=user,r=abc").value();
    auto fb = b.step("n,,n=user,r=abc").value();
    REQUIRE(fa.rfind("r=abc", 0) == 0);
    auto nonce_a = fa.substr(5, fa.find(',') - 5);
    CHECK(nonce_a.size() >= 43); // base64 of 32 bytes, unpadded
    CHECK(fa != fb);
}

TEST_CASE("unknown user and wrong password look the same to the client", "[sasl][scram]") {
    const std::string cn = "rOprNGfwEbeRWgbNEkqO";
    const std::string final_msg = "c=biws,r=" + cn + rfc_snonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";

    // Wrong password: the credential of "user" is for another password.
    auto other = make_scram_credential(scram_mechanism::sha_256, "not pencil",
                                       base64_decode("W22ZaJ0SNY7soEsUEjb6gQ==").value(), 4096)
                     .value();
    scram_server wrong(options_for(scram_mechanism::sha_256, {{"user", other}}, rfc_snonce));
    auto wf = wrong.step("n,,n=user,r=" + cn);
    REQUIRE(wf);
    auto wr = wrong.step(final_msg);
    REQUIRE_FALSE(wr);
    CHECK(wr.error() == errc::bad_proof);

    // Unknown user: same steps, a fake salt, the same client-visible failure.
    scram_server unknown(options_for(scram_mechanism::sha_256, {}, rfc_snonce));
    auto uf = unknown.step("n,,n=user,r=" + cn);
    REQUIRE(uf);
    CHECK(uf->find(",i=4096") != std::string::npos);
    auto ur = unknown.step(final_msg);
    REQUIRE_FALSE(ur);
    CHECK(ur.error() == errc::unknown_user);

    CHECK(std::string(client_message(wr.error())) == client_message(ur.error()));
    CHECK(wrong.server_error() == unknown.server_error());
    CHECK(wrong.current_state() == scram_server::state::failed);
    CHECK(unknown.current_state() == scram_server::state::failed);

    // The fake salt is stable per user (a changing salt would reveal the user is unknown).
    scram_server again(options_for(scram_mechanism::sha_256, {}, rfc_snonce));
    CHECK(again.step("n,,n=user,r=" + cn).value() == *uf);
    scram_server other_user(options_for(scram_mechanism::sha_256, {}, rfc_snonce));
    CHECK(other_user.step("n,,n=someone,r=" + cn).value() != *uf);
}

TEST_CASE("a credential of the other mechanism is an unknown user", "[sasl][scram]") {
    scram_server s(options_for(scram_mechanism::sha_512, {{"user", rfc7677_credential()}}, rfc_snonce));
    REQUIRE(s.step("n,,n=user,r=abc"));
    auto r = s.step(std::string("c=biws,r=abc") + rfc_snonce + ",p=" + base64_encode(std::string(64, 'x')));
    REQUIRE_FALSE(r);
    CHECK(r.error() == errc::unknown_user);
}

TEST_CASE("authzid, channel binding, tokens and mandatory extensions", "[sasl][scram]") {
    auto run_first = [](std::string_view msg, bool allow_tokens = false) {
        auto o = options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce);
        o.allow_token_auth = allow_tokens;
        scram_server s(o);
        auto r = s.step(msg);
        return r ? std::error_code{} : r.error();
    };
    CHECK(run_first("n,a=user,n=user,r=abc") == std::error_code{});
    CHECK(run_first("n,a=other,n=user,r=abc") == errc::authzid_mismatch);
    CHECK(run_first("p=tls-unique,,n=user,r=abc") == errc::unsupported);
    CHECK(run_first("y,,n=user,r=abc") == errc::unsupported);
    CHECK(run_first("n,,m=ext,n=user,r=abc") == errc::unsupported);
    CHECK(run_first("n,,n=user,r=abc,tokenauth=true") == errc::unsupported);
    CHECK(run_first("n,,n=user,r=abc,tokenauth=TRUE", true) == std::error_code{});
    CHECK(run_first("n,,n=user,r=abc,tokenauth=false") == std::error_code{});

    auto f = parse_client_first("n,,n=user,r=abc,tokenauth=true,foo=b=ar").value();
    CHECK(f.token_auth());
    REQUIRE(f.extensions.size() == 2);
    CHECK(*f.extension("foo") == "b=ar");
    CHECK(f.bare == "n=user,r=abc,tokenauth=true,foo=b=ar");
    CHECK(f.gs2_header == "n,,");
}

TEST_CASE("authzid in the gs2 header: c= must carry that header", "[sasl][scram]") {
    // A client with an authzid: c = base64("n,a=user,"), not "biws".
    auto o = options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce);
    scram_server s(o);
    REQUIRE(s.step("n,a=user,n=user,r=rOprNGfwEbeRWgbNEkqO"));
    auto r = s.step(std::string("c=biws,r=rOprNGfwEbeRWgbNEkqO") + rfc_snonce + ",p=" +
                    base64_encode(std::string(32, 'x')));
    REQUIRE_FALSE(r);
    CHECK(r.error() == errc::malformed);
}

TEST_CASE("malformed client-first messages", "[sasl][scram]") {
    const std::vector<std::string> bad = {
        "",
        "n",
        "n,",
        "n,,",
        "x,,n=user,r=abc",
        "n,,r=abc",                      // missing n=
        "n,,n=user",                     // missing r=
        "n,,r=abc,n=user",               // order
        "n,,n=,r=abc",                   // empty name
        "n,,n=user,r=",                  // empty nonce
        "n,,n=user,r=ab c",              // nonce not printable
        "n,,n=user,r=abc,",              // trailing comma
        "n,,n=user,,r=abc",              // empty field
        "n,,n=us=2Xer,r=abc",            // bad escape
        "n,,n=us=2,r=abc",               // truncated escape
        "n,,n=us=er,r=abc",              // bare '='
        "n,,n=user=,r=abc",              // '=' at the end
        "n,b=user,n=user,r=abc",         // authzid without a=
        "n,a=,n=user,r=abc",             // empty authzid
        "n,a=us=ZZer,n=user,r=abc",      // bad escape in authzid
        "n,,n=us\xff" "er,r=abc",        // not UTF-8
        "n,,n=us\xc0\xaf" "er,r=abc",     // overlong UTF-8
        "n,,n=us\xed\xa0\x80" "er,r=abc", // surrogate
        std::string("n,,n=us\0er,r=abc", 16), // NUL
        "n,,n=user,r=abc,1x=y",          // extension name not alphabetic
        "n,,n=user,r=abc,x=",            // empty extension value
        "n,,n=user,r=abc,=y",            // empty extension name
        "n,,n=user,r=abc,x",             // extension without '='
        "n,,n=user,r=abc,x=1,x=2",       // duplicate extension
        "n,,n=" + std::string(256, 'u') + ",r=abc", // name too long
        "n,,n=user,r=" + std::string(4097, 'a'),    // message > 4 KiB
    };
    for (const auto& m : bad) {
        INFO("message: " << m);
        auto r = parse_client_first(m);
        REQUIRE_FALSE(r);
        CHECK(r.error() == errc::malformed);
        scram_server s(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
        auto st = s.step(m);
        REQUIRE_FALSE(st);
        CHECK(st.error() == errc::malformed);
        CHECK(s.current_state() == scram_server::state::failed);
    }
    // UTF-8 names are fine (RFC 5802 saslname is UTF-8).
    auto u = parse_client_first("n,,n=j\xc3\xbcrgen,r=abc");
    REQUIRE(u);
    CHECK(u->username == "j\xc3\xbcrgen");
}

TEST_CASE("malformed client-final messages", "[sasl][scram]") {
    const std::string nonce = std::string("rOprNGfwEbeRWgbNEkqO") + rfc_snonce;
    const std::string proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const std::vector<std::string> bad = {
        "",
        "c=biws",
        "c=biws,r=" + nonce,                          // no proof
        "r=" + nonce + "," + proof,                   // no channel binding
        proof + ",c=biws,r=" + nonce,                 // p before c
        "c=biws," + proof + ",r=" + nonce,            // p in the middle
        "c=biws,r=" + nonce + "," + proof + "," + proof, // two proofs
        "c=biws,r=" + nonce + ",p=",                  // empty proof
        "c=biws,r=" + nonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ",  // unpadded base64
        "c=biws,r=" + nonce + ",p=dHzb*apWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", // bad base64
        "c=biws,r=" + nonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVR=", // non-canonical
        "c=bi*s,r=" + nonce + "," + proof,            // bad base64 channel binding
        "c=,r=" + nonce + "," + proof,                // empty channel binding
        "c=biws,r=," + proof,                         // empty nonce
        "c=biws,r=" + nonce + ",x=," + proof,         // empty extension value
        "c=biws,r=" + nonce + ",," + proof,           // empty field
        "c=biws,r=" + nonce + "\xff," + proof,        // not UTF-8
        "c=biws,r=" + nonce + ",x=" + std::string(4096, 'y') + "," + proof, // > 4 KiB
    };
    for (const auto& m : bad) {
        INFO("message: " << m);
        auto r = parse_client_final(m);
        REQUIRE_FALSE(r);
        CHECK(r.error() == errc::malformed);
    }
    // Well-formed but wrong for this exchange: channel binding, nonce, proof size.
    const std::vector<std::string> wrong = {
        "c=eSws,r=" + nonce + "," + proof,                        // "y,," is not "n,,"
        "c=biwsYT11c2VyLA==,r=" + nonce + "," + proof,            // "n,,a=user," binding
        "c=biws,r=rOprNGfwEbeRWgbNEkqO," + proof,                 // client nonce only
        "c=biws,r=" + nonce + "x," + proof,                       // nonce with a tail
        "c=biws,r=" + nonce + ",p=" + base64_encode(std::string(31, 'x')), // proof too short
        "c=biws,r=" + nonce + ",p=" + base64_encode(std::string(64, 'x')), // proof too long
    };
    for (const auto& m : wrong) {
        INFO("message: " << m);
        scram_server s(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
        REQUIRE(s.step("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"));
        auto r = s.step(m);
        REQUIRE_FALSE(r);
        CHECK(r.error() == errc::malformed);
        CHECK(s.current_state() == scram_server::state::failed);
    }
    {
        // A head before the nonce passes the nonce check (Kafka's endsWith; librdkafka needs it)
        // and fails on the proof, which then does not match: never an authentication.
        scram_server s(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
        REQUIRE(s.step("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"));
        auto r = s.step("c=biws,r=x" + nonce + "," + proof);
        REQUIRE_FALSE(r);
        CHECK(r.error() == errc::bad_proof);
    }
    for (const auto& m : bad) {
        scram_server s(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
        REQUIRE(s.step("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"));
        auto r = s.step(m);
        REQUIRE_FALSE(r);
        CHECK(r.error() == errc::malformed);
    }
}

TEST_CASE("an extension in client-final is part of the AuthMessage", "[sasl][scram]") {
    // The proof of RFC 7677's exchange covers "c=biws,r=..." only: adding an extension
    // changes the AuthMessage and so the expected proof.
    scram_server s(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
    REQUIRE(s.step("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"));
    auto r = s.step(std::string("c=biws,r=rOprNGfwEbeRWgbNEkqO") + rfc_snonce +
                    ",x=y,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=");
    REQUIRE_FALSE(r);
    CHECK(r.error() == errc::bad_proof);
}

TEST_CASE("saslname escaping", "[sasl][scram]") {
    CHECK(encode_saslname("a,b=c") == "a=2Cb=3Dc");
    CHECK(decode_saslname("a=2Cb=3Dc").value() == "a,b=c");
    CHECK(decode_saslname("=3D=2C").value() == "=,");
    CHECK(decode_saslname("a=2c").error() == errc::malformed); // escapes are upper-case hex
    CHECK(decode_saslname("a,b").error() == errc::malformed);
}

TEST_CASE("authzid equal to the user: c= carries \"n,a=user,\"", "[sasl][scram]") {
    // Expected values from Python's hashlib/hmac (RFC 5802 §3 by hand): password "pencil",
    // RFC 7677's salt, c-nonce "abc", s-nonce of RFC 7677, gs2 header "n,a=user,".
    scram_server s(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
    REQUIRE(s.step("n,a=user,n=user,r=abc"));
    auto fin = s.step("c=bixhPXVzZXIs,r=abc%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                      "p=DEcSh0Xbmn2L4rueq0q6T6DGPRshXkdKn5jy2WtHySk=");
    REQUIRE(fin);
    CHECK(*fin == "v=uAF2QtZDv1xCE7gC0PJi3aKP58v+oOYX5esuhOMV7gE=");
    CHECK(s.username() == "user");
}

namespace {
std::string sha256_hmac(const std::string& key, const std::string& data) {
    unsigned char out[32];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
         data.size(), out, &len);
    return std::string(reinterpret_cast<char*>(out), len);
}
// The client's proof for "pencil" over `auth` (RFC 5802 §3), computed here without the module.
std::string pencil_proof(const std::string& auth) {
    unsigned char salted[32];
    const auto salt = base64_decode("W22ZaJ0SNY7soEsUEjb6gQ==").value();
    PKCS5_PBKDF2_HMAC("pencil", 6, reinterpret_cast<const unsigned char*>(salt.data()), static_cast<int>(salt.size()),
                      4096, EVP_sha256(), 32, salted);
    const std::string client_key = sha256_hmac(std::string(reinterpret_cast<char*>(salted), 32), "Client Key");
    unsigned char stored[32];
    unsigned int len = 0;
    EVP_Digest(client_key.data(), client_key.size(), stored, &len, EVP_sha256(), nullptr);
    const std::string sig = sha256_hmac(std::string(reinterpret_cast<char*>(stored), len), auth);
    std::string proof(32, '\0');
    for (std::size_t i = 0; i < 32; ++i) proof[i] = static_cast<char>(client_key[i] ^ sig[i]);
    return base64_encode(proof);
}
} // namespace

TEST_CASE("a final nonce with the client nonce repeated in front is accepted, as Kafka accepts it", "[sasl][scram]") {
    // librdkafka 2.0.2 sends r=<c-nonce><c-nonce><s-nonce> in its client-final; Kafka's
    // ScramSaslServer checks endsWith(server nonce). Found with kcat against the broker.
    const std::string cn = "rOprNGfwEbeRWgbNEkqO";
    scram_server s(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
    auto first = s.step("n,,n=user,r=" + cn);
    REQUIRE(first);
    const std::string without_proof = "c=biws,r=" + cn + cn + rfc_snonce;
    const std::string auth = "n=user,r=" + cn + "," + *first + "," + without_proof;
    auto fin = s.step(without_proof + ",p=" + pencil_proof(auth));
    REQUIRE(fin);
    CHECK(s.complete());

    // A nonce that does not end with the server's is still refused.
    scram_server t(options_for(scram_mechanism::sha_256, {{"user", rfc7677_credential()}}, rfc_snonce));
    auto tf = t.step("n,,n=user,r=" + cn);
    REQUIRE(tf);
    const std::string bad_wo = "c=biws,r=" + cn + rfc_snonce + "x";
    auto bad = t.step(bad_wo + ",p=" + pencil_proof("n=user,r=" + cn + "," + *tf + "," + bad_wo));
    REQUIRE_FALSE(bad);
    CHECK(bad.error() == errc::malformed);
}
