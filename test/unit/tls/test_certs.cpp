#include "test_certs.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace skiff::test {

namespace {

struct issued {
    X509* cert = nullptr;
    EVP_PKEY* key = nullptr;
};

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    if (!ext) throw std::runtime_error("test_certs: bad extension");
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
}

// issuer null: self-signed CA.
issued make_cert(const std::vector<std::pair<std::string, std::string>>& subject, const issued* issuer, bool ca,
                 const char* san, const char* eku) {
    static long serial = 1;
    issued out;
    out.key = EVP_EC_gen("P-256");
    out.cert = X509_new();
    X509_set_version(out.cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(out.cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(out.cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(out.cert), 30L * 86400);
    X509_set_pubkey(out.cert, out.key);
    X509_NAME* name = X509_get_subject_name(out.cert);
    for (const auto& kv : subject) {
        X509_NAME_add_entry_by_txt(name, kv.first.c_str(), MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(kv.second.c_str()), -1, -1, 0);
    }
    X509* issuer_cert = issuer ? issuer->cert : out.cert;
    X509_set_issuer_name(out.cert, X509_get_subject_name(issuer_cert));
    add_ext(out.cert, issuer_cert, NID_subject_key_identifier, "hash");
    if (ca) {
        add_ext(out.cert, issuer_cert, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(out.cert, issuer_cert, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(out.cert, issuer_cert, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(out.cert, issuer_cert, NID_authority_key_identifier, "keyid");
        add_ext(out.cert, issuer_cert, NID_key_usage, "critical,digitalSignature");
        if (eku) add_ext(out.cert, issuer_cert, NID_ext_key_usage, eku);
        if (san) add_ext(out.cert, issuer_cert, NID_subject_alt_name, san);
    }
    X509_sign(out.cert, issuer ? issuer->key : out.key, EVP_sha256());
    return out;
}

void write_cert(const issued& c, const std::string& path) {
    BIO* b = BIO_new_file(path.c_str(), "w");
    PEM_write_bio_X509(b, c.cert);
    BIO_free(b);
}
void write_key(const issued& c, const std::string& path) {
    BIO* b = BIO_new_file(path.c_str(), "w");
    PEM_write_bio_PrivateKey(b, c.key, nullptr, nullptr, 0, nullptr, nullptr);
    BIO_free(b);
}

std::string g_dir;
issued g_ca;
int g_counter = 0;

void remove_dir() {
    std::error_code ec;
    if (!g_dir.empty()) std::filesystem::remove_all(g_dir, ec);
}

} // namespace

const test_pki& test_pki::get() {
    static const test_pki pki = [] {
        test_pki p;
        char tmpl[] = "/tmp/skiff-tls-test-XXXXXX";
        if (!::mkdtemp(tmpl)) throw std::runtime_error("test_certs: mkdtemp failed");
        p.dir = tmpl;
        g_dir = p.dir;
        std::atexit(remove_dir);
        auto path = [&p](const char* f) { return p.dir + "/" + f; };

        g_ca = make_cert({{"O", "acme"}, {"CN", "skiff test CA"}}, nullptr, true, nullptr, nullptr);
        p.ca_cert = path("ca.pem");
        write_cert(g_ca, p.ca_cert);

        const char* san = "IP:127.0.0.1,DNS:localhost";
        auto server = make_cert({{"CN", "localhost"}}, &g_ca, false, san, "serverAuth");
        p.server_cert = path("server.pem");
        p.server_key = path("server.key");
        write_cert(server, p.server_cert);
        write_key(server, p.server_key);

        auto server2 = make_cert({{"CN", "server2"}}, &g_ca, false, san, "serverAuth");
        p.server2_cert = path("server2.pem");
        p.server2_key = path("server2.key");
        write_cert(server2, p.server2_cert);
        write_key(server2, p.server2_key);

        // Encoding order is least specific first, as CAs issue them.
        auto client = make_cert({{"O", "acme"}, {"OU", "eng"}, {"CN", "alice"}}, &g_ca, false, nullptr, "clientAuth");
        p.client_cert = path("client.pem");
        p.client_key = path("client.key");
        write_cert(client, p.client_cert);
        write_key(client, p.client_key);

        auto other_ca = make_cert({{"CN", "other CA"}}, nullptr, true, nullptr, nullptr);
        p.other_ca_cert = path("other-ca.pem");
        write_cert(other_ca, p.other_ca_cert);
        auto other = make_cert({{"CN", "mallory"}}, &other_ca, false, nullptr, "clientAuth");
        p.other_client_cert = path("other-client.pem");
        p.other_client_key = path("other-client.key");
        write_cert(other, p.other_client_cert);
        write_key(other, p.other_client_key);

        p.garbage = path("garbage.pem");
        std::ofstream(p.garbage) << "this is not a certificate\n";
        for (auto* c : {&server, &server2, &client, &other_ca, &other}) {
            X509_free(c->cert);
            EVP_PKEY_free(c->key);
        }
        return p;
    }();
    return pki;
}

std::pair<std::string, std::string> make_client_cert(const std::string& name,
                                                     const std::vector<std::pair<std::string, std::string>>& subject) {
    const auto& pki = test_pki::get();
    auto c = make_cert(subject, &g_ca, false, nullptr, "clientAuth");
    std::string base = pki.dir + "/" + name + std::to_string(g_counter++);
    write_cert(c, base + ".pem");
    write_key(c, base + ".key");
    X509_free(c.cert);
    EVP_PKEY_free(c.key);
    return {base + ".pem", base + ".key"};
}

} // namespace skiff::test
