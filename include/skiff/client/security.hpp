// How a client secures its broker connections, with Kafka's names (security.protocol,
// sasl.mechanism, ...): plain data, any core or thread.
//
//   PLAINTEXT       TCP
//   SSL             TLS (server verified against ssl_ca_file; optional client certificate)
//   SASL_PLAINTEXT  TCP, then SaslHandshake v1 + SaslAuthenticate (PLAIN or SCRAM-SHA-256/512)
//   SASL_SSL        TLS, then SASL
//
// The password is wiped (OPENSSL_cleanse) when a security_config dies; copies made for each
// connection are wiped the same way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace skiff::client {

enum class security_protocol { plaintext, ssl, sasl_plaintext, sasl_ssl };

// "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL".
std::string_view to_string(security_protocol p) noexcept;
// Case-insensitive, as Kafka's SecurityProtocol.forName; nullopt for anything else.
std::optional<security_protocol> security_protocol_from_name(std::string_view name) noexcept;

// The SASL mechanisms the client speaks: "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"
// (upper-case, as Kafka spells them).
bool known_sasl_mechanism(std::string_view name) noexcept;

struct security_config {
    security_config() = default;
    security_config(const security_config&) = default;
    security_config(security_config&&) noexcept = default;
    security_config& operator=(const security_config&) = default;
    security_config& operator=(security_config&&) noexcept = default;
    ~security_config(); // wipes sasl_password

    security_protocol protocol = security_protocol::plaintext;

    // TLS (SSL, SASL_SSL). PEM files.
    std::string ssl_ca_file;   // trust anchors; empty: the system's default store
    std::string ssl_cert_file; // client certificate for mTLS (with ssl_key_file), optional
    std::string ssl_key_file;
    // Check the broker's certificate names the host it was reached at (Kafka's
    // ssl.endpoint.identification.algorithm=https, the default). The chain is verified anyway.
    bool ssl_verify_hostname = true;

    // SASL (SASL_PLAINTEXT, SASL_SSL).
    std::string sasl_mechanism = "PLAIN";
    std::string sasl_username;
    std::string sasl_password;

    bool uses_tls() const noexcept {
        return protocol == security_protocol::ssl || protocol == security_protocol::sasl_ssl;
    }
    bool uses_sasl() const noexcept {
        return protocol == security_protocol::sasl_plaintext || protocol == security_protocol::sasl_ssl;
    }
};

} // namespace skiff::client
