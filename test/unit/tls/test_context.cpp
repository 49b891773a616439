#include "test_certs.hpp"

#include <skiff/tls/context.hpp>
#include <skiff/tls/errc.hpp>

#include <catch2/catch.hpp>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <filesystem>

using namespace skiff;
using skiff::test::test_pki;

namespace {
tls::server_config server_cfg() {
    const auto& p = test_pki::get();
    tls::server_config c;
    c.cert_file = p.server_cert;
    c.key_file = p.server_key;
    c.ca_file = p.ca_cert;
    return c;
}

std::string subject_of(const std::string& cert_file) {
    BIO* b = BIO_new_file(cert_file.c_str(), "r");
    X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    REQUIRE(x != nullptr);
    std::string s = tls::principal_name(X509_get_subject_name(x));
    X509_free(x);
    return s;
}
} // namespace

TEST_CASE("a server context builds from good files", "[tls][context]") {
    auto ctx = tls::context::make_server(server_cfg());
    REQUIRE(ctx.has_value());
    CHECK((*ctx)->is_server());
    CHECK((*ctx)->certificate_subject() == "CN=localhost");
}

TEST_CASE("context errors name the file and the problem", "[tls][context]") {
    const auto& p = test_pki::get();
    SECTION("missing certificate file") {
        auto c = server_cfg();
        c.cert_file = p.dir + "/nope.pem";
        auto ctx = tls::context::make_server(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::file_unreadable);
        CHECK(ctx.error().message == "certificate file '" + c.cert_file + "' cannot be read: No such file or directory");
    }
    SECTION("missing key file") {
        auto c = server_cfg();
        c.key_file = p.dir + "/nope.key";
        auto ctx = tls::context::make_server(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::file_unreadable);
        CHECK(ctx.error().message.find("private key file '" + c.key_file + "'") != std::string::npos);
    }
    SECTION("key of another certificate") {
        auto c = server_cfg();
        c.key_file = p.client_key;
        auto ctx = tls::context::make_server(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::key_mismatch);
        CHECK(ctx.error().message == "private key file '" + p.client_key + "' does not match certificate file '" +
                                         p.server_cert + "'");
    }
    SECTION("unparseable PEM certificate") {
        auto c = server_cfg();
        c.cert_file = p.garbage;
        auto ctx = tls::context::make_server(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::bad_pem);
        CHECK(ctx.error().message.find(p.garbage) != std::string::npos);
    }
    SECTION("unparseable PEM key") {
        auto c = server_cfg();
        c.key_file = p.garbage;
        auto ctx = tls::context::make_server(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::bad_pem);
    }
    SECTION("unparseable CA") {
        auto c = server_cfg();
        c.client_auth_mode = tls::client_auth::required;
        c.ca_file = p.garbage;
        auto ctx = tls::context::make_server(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::bad_pem);
        CHECK(ctx.error().message.find("CA file") != std::string::npos);
    }
    SECTION("minimum version below 1.2 refused") {
        auto c = server_cfg();
        c.min_version = "TLSv1.1";
        auto ctx = tls::context::make_server(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::bad_config);
        CHECK(ctx.error().message == "min_version TLSv1.1 is refused: skiff requires TLSv1.2 or later");
    }
    SECTION("client auth without a CA") {
        auto c = server_cfg();
        c.client_auth_mode = tls::client_auth::required;
        c.ca_file.clear();
        auto ctx = tls::context::make_server(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::bad_config);
    }
    SECTION("client cert without key") {
        tls::client_config c;
        c.ca_file = p.ca_cert;
        c.cert_file = p.client_cert;
        auto ctx = tls::context::make_client(c);
        REQUIRE_FALSE(ctx.has_value());
        CHECK(ctx.error().code == tls::errc::bad_config);
    }
}

TEST_CASE("reload swaps only a context that builds", "[tls][context]") {
    const auto& p = test_pki::get();
    auto dir = p.dir + "/reload-ctx";
    std::filesystem::create_directories(dir);
    auto c = server_cfg();
    c.cert_file = dir + "/cert.pem";
    c.key_file = dir + "/key.pem";
    std::filesystem::copy_file(p.server_cert, c.cert_file, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(p.server_key, c.key_file, std::filesystem::copy_options::overwrite_existing);
    auto h = tls::context_holder::create(c);
    REQUIRE(h.has_value());
    auto first = (*h)->current();
    CHECK(first->certificate_subject() == "CN=localhost");
    CHECK((*h)->generation() == 1);

    // A half-rolled certificate (new cert, old key) is refused and the old context stays.
    std::filesystem::copy_file(p.server2_cert, c.cert_file, std::filesystem::copy_options::overwrite_existing);
    auto bad = (*h)->reload();
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().code == tls::errc::key_mismatch);
    CHECK((*h)->current() == first);
    CHECK((*h)->generation() == 1);

    std::filesystem::copy_file(p.server2_key, c.key_file, std::filesystem::copy_options::overwrite_existing);
    auto good = (*h)->reload();
    REQUIRE(good.has_value());
    CHECK((*h)->generation() == 2);
    CHECK((*h)->current() != first);
    CHECK((*h)->current()->certificate_subject() == "CN=server2");
    CHECK(first->certificate_subject() == "CN=localhost"); // still alive for its holders
}

TEST_CASE("principal names print as Java's X500Principal.getName()", "[tls][principal]") {
    const auto& p = test_pki::get();
    CHECK(subject_of(p.client_cert) == "CN=alice,OU=eng,O=acme");
    CHECK(subject_of(p.ca_cert) == "CN=skiff test CA,O=acme");

    auto special = test::make_client_cert("special", {{"O", "a,b+c"}, {"CN", " lead#=x;\"<>\\ "}});
    CHECK(subject_of(special.first) == "CN=\\ lead\\#\\=x\\;\\\"\\<\\>\\\\\\ ,O=a\\,b\\+c");

    // Outside RFC 2253's keywords Java prints the OID and the DER value in hex.
    auto email = test::make_client_cert("email", {{"emailAddress", "a@b.c"}, {"CN", "bob"}, {"C", "DE"}});
    CHECK(subject_of(email.first) == "C=DE,CN=bob,1.2.840.113549.1.9.1=#16056140622e63");

    auto unicode = test::make_client_cert("unicode", {{"CN", "J\xc3\xbcrgen"}});
    CHECK(subject_of(unicode.first) == "CN=J\xc3\xbcrgen");
}
