// SASL PLAIN: strict parsing and verification against stored SCRAM credentials.
#include <skiff/sasl/plain.hpp>

#include <catch2/catch.hpp>

#include <map>

using namespace skiff;
using namespace skiff::sasl;

namespace {

std::string msg(std::string_view authzid, std::string_view user, std::string_view pw) {
    std::string m(authzid);
    m.push_back('\0');
    m += user;
    m.push_back('\0');
    m += pw;
    return m;
}

struct users {
    std::map<std::string, scram_credential> by_name;
    plain_lookup lookup() const {
        return [this](std::string_view u) -> std::optional<scram_credential> {
            auto it = by_name.find(std::string(u));
            if (it == by_name.end()) return std::nullopt;
            return it->second;
        };
    }
};

} // namespace

TEST_CASE("PLAIN accepts the right password against SHA-256 and SHA-512 credentials", "[sasl][plain]") {
    users u;
    u.by_name.emplace("alice", make_scram_credential(scram_mechanism::sha_512, "wonderland").value());
    u.by_name.emplace("bob", make_scram_credential(scram_mechanism::sha_256, "b\xc3\xb6" "b-pw", 8192).value());
    CHECK(plain_authenticate(msg("", "alice", "wonderland"), u.lookup()).value() == "alice");
    CHECK(plain_authenticate(msg("alice", "alice", "wonderland"), u.lookup()).value() == "alice");
    CHECK(plain_authenticate(msg("", "bob", "b\xc3\xb6" "b-pw"), u.lookup()).value() == "bob");
}

TEST_CASE("PLAIN refusals", "[sasl][plain]") {
    users u;
    u.by_name.emplace("alice", make_scram_credential(scram_mechanism::sha_512, "wonderland").value());
    auto err = [&](const std::string& m) {
        auto r = plain_authenticate(m, u.lookup());
        return r ? std::error_code{} : r.error();
    };
    auto wrong = err(msg("", "alice", "wonderlanD"));
    auto unknown = err(msg("", "mallory", "wonderland"));
    CHECK(wrong == errc::bad_proof);
    CHECK(unknown == errc::unknown_user);
    CHECK(std::string(client_message(wrong)) == client_message(unknown));
    CHECK(err(msg("bob", "alice", "wonderland")) == errc::authzid_mismatch);

    // Malformed: NUL count, empty fields, sizes, UTF-8.
    CHECK(err("") == errc::malformed);
    CHECK(err("alice") == errc::malformed);
    CHECK(err(std::string("\0alice", 6)) == errc::malformed);
    CHECK(err(msg("", "", "pw")) == errc::malformed);
    CHECK(err(msg("", "alice", "")) == errc::malformed);
    CHECK(err(msg("", "alice", "won") + std::string(1, '\0') + "x") == errc::malformed);
    CHECK(err(msg("", std::string(256, 'a'), "pw")) == errc::malformed);
    CHECK(err(msg(std::string(256, 'a'), "alice", "pw")) == errc::malformed);
    CHECK(err(msg("", "alice", std::string(1025, 'p'))) == errc::malformed);
    CHECK(err(msg("", "al\xff" "ice", "pw")) == errc::malformed);
    CHECK(err(msg("", "alice", "p\xc3")) == errc::malformed);
    CHECK(err(msg("", "alice", std::string(5000, 'p'))) == errc::malformed);
}

TEST_CASE("PLAIN parse keeps fields apart", "[sasl][plain]") {
    auto p = parse_plain(msg("", "alice", "pw with spaces")).value();
    CHECK(p.authzid.empty());
    CHECK(p.authcid == "alice");
    CHECK(p.password == "pw with spaces");
}

TEST_CASE("verify_password refuses a credential out of bounds or tampered", "[sasl][plain]") {
    auto c = make_scram_credential(scram_mechanism::sha_256, "pw").value();
    CHECK(verify_password(c, "pw"));
    auto tampered = c;
    tampered.server_key[0] = static_cast<char>(tampered.server_key[0] ^ 1);
    CHECK_FALSE(verify_password(tampered, "pw"));
    auto weak = c;
    weak.iterations = 1000;
    CHECK_FALSE(verify_password(weak, "pw"));
}

TEST_CASE("wipe_buffer zeroes a caller's buffer", "[sasl][plain]") {
    std::string b = "secret";
    wipe_buffer(b.data(), b.size());
    CHECK(b == std::string(6, '\0'));
}
