// Stored SCRAM credentials: derivation, bounds, JSON round trip, strict parsing, redaction.
#include <skiff/core/base64.hpp>
#include <skiff/sasl/credential.hpp>
#include <skiff/sasl/errc.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/hmac.h>

using namespace skiff;
using namespace skiff::sasl;

namespace {

// An independent derivation: Hi() written out as RFC 5802 §2.2 does (U1 = HMAC(p, salt ||
// INT(1)), Ui = HMAC(p, Ui-1), XOR of all), not through PKCS5_PBKDF2_HMAC as the module does.
std::string hmac512(const std::string& key, const std::string& data) {
    unsigned char out[64];
    unsigned int len = 0;
    HMAC(EVP_sha512(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
         data.size(), out, &len);
    return std::string(reinterpret_cast<char*>(out), len);
}

std::string hi512(const std::string& pw, const std::string& salt, int iterations) {
    std::string u = hmac512(pw, salt + std::string("\0\0\0\1", 4));
    std::string acc = u;
    for (int i = 1; i < iterations; ++i) {
        u = hmac512(pw, u);
        for (std::size_t k = 0; k < acc.size(); ++k) acc[k] = static_cast<char>(acc[k] ^ u[k]);
    }
    return acc;
}

} // namespace

TEST_CASE("derivation matches RFC 5802 written out by hand (SHA-512)", "[sasl][credential]") {
    const std::string salt = "0123456789abcdef";
    auto c = make_scram_credential(scram_mechanism::sha_512, "hunter2", salt, 4096).value();
    std::string salted = hi512("hunter2", salt, 4096);
    std::string client_key = hmac512(salted, "Client Key");
    unsigned char stored[64];
    unsigned int len = 0;
    EVP_Digest(client_key.data(), client_key.size(), stored, &len, EVP_sha512(), nullptr);
    CHECK(c.stored_key == std::string(reinterpret_cast<char*>(stored), len));
    CHECK(c.server_key == hmac512(salted, "Server Key"));
    CHECK(c.salt == salt);
    CHECK(c.iterations == 4096);
    CHECK(valid(c));
}

TEST_CASE("a credential from a salted password equals the one from the password", "[sasl][credential]") {
    // AlterUserScramCredentials carries Hi(password, salt, i), never the password.
    const std::string salt = "fedcba9876543210";
    const std::string salted = hi512("hunter2", salt, 4096);
    auto from_salted = scram_credential_from_salted(scram_mechanism::sha_512, salted, salt, 4096).value();
    auto from_password = make_scram_credential(scram_mechanism::sha_512, "hunter2", salt, 4096).value();
    CHECK(from_salted == from_password);
    // A SHA-256 credential needs 32 bytes, not 64; bounds as for passwords.
    CHECK(scram_credential_from_salted(scram_mechanism::sha_256, salted, salt, 4096).error() ==
          errc::invalid_credential);
    CHECK(scram_credential_from_salted(scram_mechanism::sha_512, salted, "", 4096).error() == errc::invalid_credential);
    CHECK(scram_credential_from_salted(scram_mechanism::sha_512, salted, salt, 100).error() ==
          errc::invalid_credential);
}

TEST_CASE("iteration bounds are Kafka's", "[sasl][credential]") {
    CHECK(make_scram_credential(scram_mechanism::sha_256, "pw", 4095).error() == errc::invalid_credential);
    CHECK(make_scram_credential(scram_mechanism::sha_256, "pw", 16385).error() == errc::invalid_credential);
    CHECK(make_scram_credential(scram_mechanism::sha_256, "", 4096).error() == errc::invalid_credential);
    CHECK(make_scram_credential(scram_mechanism::sha_256, "pw", 16384));
    auto a = make_scram_credential(scram_mechanism::sha_256, "pw").value();
    auto b = make_scram_credential(scram_mechanism::sha_256, "pw").value();
    CHECK(a.salt.size() == default_salt_bytes);
    CHECK(a.salt != b.salt); // fresh random salt each time
    CHECK(a.stored_key != b.stored_key);
}

TEST_CASE("JSON round trip", "[sasl][credential]") {
    for (auto m : {scram_mechanism::sha_256, scram_mechanism::sha_512}) {
        auto c = make_scram_credential(m, "pw", 8192).value();
        auto text = credential_to_json_text(c);
        auto back = credential_from_json_text(text);
        REQUIRE(back);
        CHECK(*back == c);
        auto j = nlohmann::json::parse(text);
        CHECK(j["mechanism"] == std::string(mechanism_name(m)));
        CHECK(j["iterations"] == 8192);
        CHECK(credential_from_json(credential_to_json(c)).value() == c);
    }
}

TEST_CASE("bad credential JSON is refused with a clear sentence", "[sasl][credential]") {
    auto c = make_scram_credential(scram_mechanism::sha_256, "pw").value();
    const auto good = credential_to_json(c);
    auto err = [](const nlohmann::json& j) {
        auto r = credential_from_json(j);
        REQUIRE_FALSE(r);
        return r.error();
    };
    auto with = [&](const char* key, nlohmann::json v) {
        auto j = good;
        j[key] = std::move(v);
        return j;
    };
    auto without = [&](const char* key) {
        auto j = good;
        j.erase(key);
        return j;
    };
    CHECK_THAT(err(nlohmann::json::array()), Catch::Contains("not a JSON object"));
    CHECK_THAT(err(with("extra", 1)), Catch::Contains("unknown member 'extra'"));
    for (const char* k : {"mechanism", "iterations", "salt", "stored_key", "server_key"})
        CHECK_THAT(err(without(k)), Catch::Contains(std::string("missing member '") + k + "'"));
    CHECK_THAT(err(with("mechanism", "SCRAM-SHA-1")), Catch::Contains("'mechanism'"));
    CHECK_THAT(err(with("mechanism", 1)), Catch::Contains("'mechanism' is not a string"));
    CHECK_THAT(err(with("iterations", "4096")), Catch::Contains("'iterations' is not an integer"));
    CHECK_THAT(err(with("iterations", 4096.5)), Catch::Contains("'iterations' is not an integer"));
    CHECK_THAT(err(with("iterations", 100)), Catch::Contains("outside [4096, 16384]"));
    CHECK_THAT(err(with("iterations", 1 << 30)), Catch::Contains("outside [4096, 16384]"));
    CHECK_THAT(err(with("salt", "")), Catch::Contains("'salt' must be"));
    CHECK_THAT(err(with("salt", "not base64!")), Catch::Contains("'salt' is not canonical padded base64"));
    CHECK_THAT(err(with("salt", "QR==")), Catch::Contains("'salt' is not canonical"));
    CHECK_THAT(err(with("stored_key", base64_encode("short"))), Catch::Contains("must be 32 bytes"));
    CHECK_THAT(err(with("server_key", nullptr)), Catch::Contains("'server_key' is not a string"));
    // SHA-512 keys under a SHA-256 mechanism.
    auto c512 = make_scram_credential(scram_mechanism::sha_512, "pw").value();
    auto mixed = credential_to_json(c512);
    mixed["mechanism"] = "SCRAM-SHA-256";
    CHECK_THAT(err(mixed), Catch::Contains("must be 32 bytes for SCRAM-SHA-256"));

    for (const char* text : {"", "{", "[1,2]", "null", "{\"mechanism\":\"SCRAM-SHA-256\"", "\xff"}) {
        auto r = credential_from_json_text(text);
        REQUIRE_FALSE(r);
    }
    // Duplicate members are refused (nlohmann would keep the last one).
    auto text = credential_to_json_text(c);
    auto dup = text.substr(0, text.size() - 1) + ",\"iterations\":4096}";
    auto rd = credential_from_json_text(dup);
    REQUIRE_FALSE(rd);
    CHECK_THAT(rd.error(), Catch::Contains("appears twice"));
    REQUIRE(credential_from_json_text(text));
    // No error names a key's value.
    auto r = credential_from_json(with("stored_key", base64_encode("short")));
    CHECK(r.error().find(base64_encode("short")) == std::string::npos);
}

TEST_CASE("describe and fmt never print keys", "[sasl][credential]") {
    auto c = make_scram_credential(scram_mechanism::sha_512, "pw", 4096).value();
    auto s = fmt::format("{}", c);
    CHECK(s == "SCRAM-SHA-512, 4096 iterations, salt of 32 bytes, keys <redacted>");
    CHECK(s.find(base64_encode(c.stored_key)) == std::string::npos);
    CHECK(describe(c) == s);
}

TEST_CASE("mechanism names", "[sasl][credential]") {
    CHECK(mechanism_name(scram_mechanism::sha_256) == "SCRAM-SHA-256");
    CHECK(mechanism_from_name("SCRAM-SHA-512") == scram_mechanism::sha_512);
    CHECK_FALSE(mechanism_from_name("scram-sha-512"));
    CHECK(hash_size(scram_mechanism::sha_512) == 64);
}
