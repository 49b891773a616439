// What a TLS listener or client is built from: file paths and policy, no OpenSSL types.
// Plain data; any core or thread.
#pragma once

#include <system_error>
#include <string>

namespace skiff::tls {

// Whether a server asks for a client certificate (Kafka's ssl.client.auth).
enum class client_auth {
    none,      // do not ask
    requested, // ask; a client without one is let in (no principal), a bad one is refused
    required,  // ask and refuse clients without a valid certificate
};

struct server_config {
    std::string cert_file; // PEM: the server certificate first, then its intermediates
    std::string key_file;  // PEM private key, unencrypted
    std::string ca_file;   // PEM trust anchors for client certificates (needed unless none)
    client_auth client_auth_mode = client_auth::none;
    std::string min_version = "TLSv1.2"; // "TLSv1.2" or "TLSv1.3"; anything older is refused
    std::string max_version;             // empty: the highest OpenSSL supports
    std::string ciphers;                 // TLS 1.2 cipher list; empty: OpenSSL's default
    std::string ciphersuites;            // TLS 1.3 suites; empty: OpenSSL's default
};

struct client_config {
    std::string ca_file;     // PEM trust anchors; empty: the system's default store
    std::string cert_file;   // optional client certificate for mTLS (with key_file)
    std::string key_file;
    std::string server_name; // DNS name (also sent as SNI) or IP checked against the certificate;
                             // empty: the chain is verified but no name is checked
    bool verify = true;      // false: accept any server certificate (tests only)
    std::string min_version = "TLSv1.2";
    std::string max_version;
    std::string ciphers;
    std::string ciphersuites;
};

// A context that could not be built: a tls::errc code and one sentence naming the file and
// the problem, e.g. "private key file 'k.pem' does not match certificate file 'c.pem'".
struct config_error {
    std::error_code code;
    std::string message;
};

} // namespace skiff::tls
