#include <skiff/client/security.hpp>
#include <skiff/sasl/plain.hpp>

#include <cctype>

namespace skiff::client {

std::string_view to_string(security_protocol p) noexcept {
    switch (p) {
    case security_protocol::plaintext: return "PLAINTEXT";
    case security_protocol::ssl: return "SSL";
    case security_protocol::sasl_plaintext: return "SASL_PLAINTEXT";
    case security_protocol::sasl_ssl: return "SASL_SSL";
    }
    return "PLAINTEXT";
}

std::optional<security_protocol> security_protocol_from_name(std::string_view name) noexcept {
    std::string up;
    for (char c : name) up.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    for (auto p : {security_protocol::plaintext, security_protocol::ssl, security_protocol::sasl_plaintext,
                   security_protocol::sasl_ssl}) {
        if (up == to_string(p)) return p;
    }
    return std::nullopt;
}

bool known_sasl_mechanism(std::string_view name) noexcept {
    return name == "PLAIN" || name == "SCRAM-SHA-256" || name == "SCRAM-SHA-512";
}

// capacity(), not size(): a moved-from short string keeps its bytes in the inline buffer.
security_config::~security_config() { sasl::wipe_buffer(sasl_password.data(), sasl_password.capacity()); }

} // namespace skiff::client
