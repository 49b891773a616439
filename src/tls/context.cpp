// Building SSL_CTX objects from files, with errors that name the file and the problem.
//
// Files are parsed here rather than with SSL_CTX_use_*_file so each failure can be told apart
// (unreadable, not PEM, key of another certificate) and so an encrypted key fails instead of
// OpenSSL prompting for a passphrase on the terminal.
#include <skiff/tls/context.hpp>
#include <skiff/tls/errc.hpp>

#include <fmt/format.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace skiff::tls {

namespace {

struct bio_free {
    void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct x509_free {
    void operator()(X509* x) const noexcept { X509_free(x); }
};
struct pkey_free {
    void operator()(EVP_PKEY* k) const noexcept { EVP_PKEY_free(k); }
};
struct ctx_free {
    void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
using bio_ptr = std::unique_ptr<BIO, bio_free>;
using x509_ptr = std::unique_ptr<X509, x509_free>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;
using ctx_ptr = std::unique_ptr<SSL_CTX, ctx_free>;

failure<config_error> fail(errc code, std::string message) {
    ERR_clear_error();
    return failure{config_error{make_error_code(code), std::move(message)}};
}

// The most useful OpenSSL reason on the queue, for the tail of a message.
std::string openssl_reason() {
    unsigned long e = ERR_peek_last_error();
    if (e == 0) return "no detail from OpenSSL";
    const char* r = ERR_reason_error_string(e);
    return r ? r : fmt::format("OpenSSL error {:#x}", e);
}

// Refuses passphrase prompts: skiff keys are unencrypted files.
int no_password(char*, int, int, void*) { return 0; }

result<bio_ptr, config_error> open_file(const std::string& what, const std::string& path) {
    if (path.empty()) return fail(errc::bad_config, fmt::format("{} file is not set", what));
    errno = 0;
    bio_ptr b(BIO_new_file(path.c_str(), "r"));
    if (!b) {
        int err = errno;
        return fail(errc::file_unreadable, fmt::format("{} file '{}' cannot be read: {}", what, path,
                                                       err ? std::strerror(err) : openssl_reason()));
    }
    return b;
}

result<std::vector<x509_ptr>, config_error> read_certs(const std::string& what, const std::string& path) {
    auto b = open_file(what, path);
    if (!b) return failure{std::move(b).error()};
    std::vector<x509_ptr> certs;
    for (;;) {
        X509* x = PEM_read_bio_X509(b->get(), nullptr, no_password, nullptr);
        if (!x) break;
        certs.emplace_back(x);
    }
    // The loop ends on "no start line" once the file is exhausted; any other error is a broken
    // certificate in the middle of the file.
    unsigned long e = ERR_peek_last_error();
    if (e != 0 && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
        return fail(errc::bad_pem, fmt::format("{} file '{}' holds an unparseable PEM certificate: {}", what,
                                               path, openssl_reason()));
    }
    ERR_clear_error();
    if (certs.empty()) {
        return fail(errc::bad_pem, fmt::format("{} file '{}' holds no PEM certificate", what, path));
    }
    return certs;
}

result<pkey_ptr, config_error> read_key(const std::string& path) {
    auto b = open_file("private key", path);
    if (!b) return failure{std::move(b).error()};
    pkey_ptr k(PEM_read_bio_PrivateKey(b->get(), nullptr, no_password, nullptr));
    if (!k) {
        return fail(errc::bad_pem,
                    fmt::format("private key file '{}' holds no parseable unencrypted PEM private key: {}", path,
                                openssl_reason()));
    }
    return k;
}

result<int, config_error> parse_version(const std::string& field, const std::string& v, bool allow_empty) {
    if (v.empty() && allow_empty) return 0; // 0: no bound
    if (v == "TLSv1.2" || v == "1.2") return TLS1_2_VERSION;
    if (v == "TLSv1.3" || v == "1.3") return TLS1_3_VERSION;
    if (v == "TLSv1" || v == "TLSv1.0" || v == "TLSv1.1" || v == "1.0" || v == "1.1" || v == "SSLv3") {
        return fail(errc::bad_config, fmt::format("{} {} is refused: skiff requires TLSv1.2 or later", field, v));
    }
    return fail(errc::bad_config, fmt::format("{} '{}' is not a TLS version (use TLSv1.2 or TLSv1.3)", field, v));
}

result<void, config_error> set_common(SSL_CTX* ctx, const std::string& min_v, const std::string& max_v,
                                      const std::string& ciphers, const std::string& suites) {
    auto lo = parse_version("min_version", min_v, false);
    if (!lo) return failure{std::move(lo).error()};
    auto hi = parse_version("max_version", max_v, true);
    if (!hi) return failure{std::move(hi).error()};
    if (*hi != 0 && *hi < *lo) {
        return fail(errc::bad_config, fmt::format("max_version {} is below min_version {}", max_v, min_v));
    }
    SSL_CTX_set_min_proto_version(ctx, *lo);
    SSL_CTX_set_max_proto_version(ctx, *hi);
    if (!ciphers.empty() && SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) {
        return fail(errc::bad_config, fmt::format("ciphers '{}' selects no usable TLS 1.2 cipher", ciphers));
    }
    if (!suites.empty() && SSL_CTX_set_ciphersuites(ctx, suites.c_str()) != 1) {
        return fail(errc::bad_config, fmt::format("ciphersuites '{}' is not a valid TLS 1.3 list", suites));
    }
    // Renegotiation would make SSL_write wait for reads mid-stream (and has a history of
    // vulnerabilities); Kafka's own listeners refuse it too.
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    return ok();
}

result<void, config_error> load_identity(SSL_CTX* ctx, const std::string& cert_file, const std::string& key_file,
                                         std::string& subject) {
    auto certs = read_certs("certificate", cert_file);
    if (!certs) return failure{std::move(certs).error()};
    auto key = read_key(key_file);
    if (!key) return failure{std::move(key).error()};
    X509* leaf = (*certs)[0].get();
    if (X509_check_private_key(leaf, key->get()) != 1) {
        return fail(errc::key_mismatch, fmt::format("private key file '{}' does not match certificate file '{}'",
                                                    key_file, cert_file));
    }
    if (SSL_CTX_use_certificate(ctx, leaf) != 1 || SSL_CTX_use_PrivateKey(ctx, key->get()) != 1) {
        return fail(errc::bad_pem, fmt::format("certificate file '{}' cannot be used: {}", cert_file,
                                               openssl_reason()));
    }
    for (std::size_t i = 1; i < certs->size(); ++i) {
        if (SSL_CTX_add1_chain_cert(ctx, (*certs)[i].get()) != 1) {
            return fail(errc::bad_pem, fmt::format("intermediate certificate {} in '{}' cannot be used: {}", i,
                                                   cert_file, openssl_reason()));
        }
    }
    subject = principal_name(X509_get_subject_name(leaf));
    return ok();
}

result<void, config_error> load_ca(SSL_CTX* ctx, const std::string& ca_file, bool send_names) {
    // Parsed once here for the error message; OpenSSL then loads the same file into its store.
    auto certs = read_certs("CA", ca_file);
    if (!certs) return failure{std::move(certs).error()};
    if (SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr) != 1) {
        return fail(errc::bad_pem, fmt::format("CA file '{}' cannot be loaded: {}", ca_file, openssl_reason()));
    }
    if (send_names) {
        // Tells clients which CAs we accept, so one with several certificates picks right.
        STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(ca_file.c_str());
        if (names) SSL_CTX_set_client_CA_list(ctx, names);
    }
    return ok();
}

void append_escaped(std::string& out, std::string_view v) {
    // Java escapes these anywhere in the value (RFC 2253 section 2.4 plus '=' and '#'), and
    // spaces (and CR) only at either end.
    static constexpr std::string_view escapees = ",=+<>#;\"\\";
    std::size_t lead = 0;
    while (lead < v.size() && (v[lead] == ' ' || v[lead] == '\r')) ++lead;
    std::size_t trail = v.size();
    while (trail > lead && (v[trail - 1] == ' ' || v[trail - 1] == '\r')) --trail;
    for (std::size_t i = 0; i < v.size(); ++i) {
        char c = v[i];
        if (i < lead || i >= trail || escapees.find(c) != std::string_view::npos) out.push_back('\\');
        out.push_back(c);
    }
}

const char* rfc2253_keyword(int nid) {
    switch (nid) {
    case NID_commonName: return "CN";
    case NID_countryName: return "C";
    case NID_localityName: return "L";
    case NID_stateOrProvinceName: return "ST";
    case NID_organizationName: return "O";
    case NID_organizationalUnitName: return "OU";
    case NID_streetAddress: return "STREET";
    case NID_domainComponent: return "DC";
    case NID_userId: return "UID";
    default: return nullptr;
    }
}

bool is_string_type(int type) {
    switch (type) {
    case V_ASN1_PRINTABLESTRING:
    case V_ASN1_T61STRING:
    case V_ASN1_IA5STRING:
    case V_ASN1_GENERALSTRING:
    case V_ASN1_UTF8STRING:
    case V_ASN1_BMPSTRING:
    case V_ASN1_UNIVERSALSTRING: return true;
    default: return false;
    }
}

void append_der_hex(std::string& out, const ASN1_STRING* s) {
    // Java prints the value's DER: universal tag, definite length, contents.
    const int type = ASN1_STRING_type(s);
    const auto* data = ASN1_STRING_get0_data(s);
    const auto len = static_cast<std::size_t>(ASN1_STRING_length(s));
    std::vector<unsigned char> der;
    der.push_back(static_cast<unsigned char>(type == V_ASN1_BIT_STRING ? 3 : type & 0x1f));
    if (len < 0x80) {
        der.push_back(static_cast<unsigned char>(len));
    } else {
        unsigned char tmp[sizeof(std::size_t)];
        int n = 0;
        for (std::size_t l = len; l; l >>= 8) tmp[n++] = static_cast<unsigned char>(l & 0xff);
        der.push_back(static_cast<unsigned char>(0x80 | n));
        while (n) der.push_back(tmp[--n]);
    }
    der.insert(der.end(), data, data + len);
    out.push_back('#');
    for (unsigned char c : der) out += fmt::format("{:02x}", c);
}

} // namespace

std::string principal_name(const X509_name_st* name_in) {
    auto* name = const_cast<X509_NAME*>(name_in); // older OpenSSL getters are not const-correct
    std::string out;
    const int count = X509_NAME_entry_count(name);
    int prev_set = -1;
    // The certificate stores the least specific RDN first; RFC 2253 prints the reverse.
    for (int i = count - 1; i >= 0; --i) {
        const X509_NAME_ENTRY* e = X509_NAME_get_entry(name, i);
        const int set = X509_NAME_ENTRY_set(e);
        if (!out.empty()) out.push_back(set == prev_set ? '+' : ',');
        prev_set = set;
        const ASN1_OBJECT* obj = X509_NAME_ENTRY_get_object(e);
        const ASN1_STRING* value = X509_NAME_ENTRY_get_data(e);
        const char* kw = rfc2253_keyword(OBJ_obj2nid(obj));
        if (kw && is_string_type(ASN1_STRING_type(value))) {
            out += kw;
            out.push_back('=');
            unsigned char* utf8 = nullptr;
            int n = ASN1_STRING_to_UTF8(&utf8, value);
            if (n >= 0) {
                append_escaped(out, std::string_view(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n)));
                OPENSSL_free(utf8);
            }
        } else {
            char oid[128];
            OBJ_obj2txt(oid, sizeof(oid), obj, 1);
            out += kw ? kw : oid;
            out.push_back('=');
            append_der_hex(out, value);
        }
    }
    return out;
}

context::~context() { SSL_CTX_free(_ctx); }

result<std::shared_ptr<const context>, config_error> context::make_server(const server_config& cfg) {
    ctx_ptr ctx(SSL_CTX_new(TLS_server_method()));
    if (!ctx) return fail(errc::bad_config, fmt::format("cannot create a TLS context: {}", openssl_reason()));
    auto common = set_common(ctx.get(), cfg.min_version, cfg.max_version, cfg.ciphers, cfg.ciphersuites);
    if (!common) return failure{std::move(common).error()};
    std::string subject;
    auto id = load_identity(ctx.get(), cfg.cert_file, cfg.key_file, subject);
    if (!id) return failure{std::move(id).error()};
    if (cfg.client_auth_mode != client_auth::none) {
        if (cfg.ca_file.empty()) {
            return fail(errc::bad_config, "client_auth requested or required needs ca_file to verify client certificates");
        }
        auto ca = load_ca(ctx.get(), cfg.ca_file, true);
        if (!ca) return failure{std::move(ca).error()};
        int mode = SSL_VERIFY_PEER;
        if (cfg.client_auth_mode == client_auth::required) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        SSL_CTX_set_verify(ctx.get(), mode, nullptr);
    } else {
        SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
    }
    // Resumption is per context: a reload starts a fresh session cache and ticket keys.
    static const unsigned char sid_ctx[] = "skiff";
    SSL_CTX_set_session_id_context(ctx.get(), sid_ctx, sizeof(sid_ctx) - 1);
    std::shared_ptr<context> c(new context(ctx.release(), true));
    c->_subject = std::move(subject);
    return std::shared_ptr<const context>(std::move(c));
}

result<std::shared_ptr<const context>, config_error> context::make_client(const client_config& cfg) {
    ctx_ptr ctx(SSL_CTX_new(TLS_client_method()));
    if (!ctx) return fail(errc::bad_config, fmt::format("cannot create a TLS context: {}", openssl_reason()));
    auto common = set_common(ctx.get(), cfg.min_version, cfg.max_version, cfg.ciphers, cfg.ciphersuites);
    if (!common) return failure{std::move(common).error()};
    std::string subject;
    if (!cfg.cert_file.empty() || !cfg.key_file.empty()) {
        auto id = load_identity(ctx.get(), cfg.cert_file, cfg.key_file, subject);
        if (!id) return failure{std::move(id).error()};
    }
    if (cfg.verify) {
        if (!cfg.ca_file.empty()) {
            auto ca = load_ca(ctx.get(), cfg.ca_file, false);
            if (!ca) return failure{std::move(ca).error()};
        } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
            return fail(errc::bad_config, "no ca_file given and the system's CA store cannot be loaded");
        }
        SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    } else {
        SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
    }
    std::shared_ptr<context> c(new context(ctx.release(), false));
    c->_server_name = cfg.server_name;
    c->_subject = std::move(subject);
    return std::shared_ptr<const context>(std::move(c));
}

result<std::unique_ptr<context_holder>, config_error> context_holder::create(server_config cfg) {
    auto ctx = context::make_server(cfg);
    if (!ctx) return failure{std::move(ctx).error()};
    return std::unique_ptr<context_holder>(new context_holder(std::move(cfg), std::move(*ctx)));
}

std::shared_ptr<const context> context_holder::current() const {
    std::lock_guard lock(_mutex);
    return _current;
}

result<void, config_error> context_holder::reload() {
    // Built outside the lock: reading files must not stall connections taking current().
    auto ctx = context::make_server(_cfg);
    if (!ctx) return failure{std::move(ctx).error()};
    std::shared_ptr<const context> old;
    {
        std::lock_guard lock(_mutex);
        old = std::exchange(_current, std::move(*ctx));
        ++_generation;
    }
    return ok();
}

std::uint64_t context_holder::generation() const {
    std::lock_guard lock(_mutex);
    return _generation;
}

} // namespace skiff::tls
