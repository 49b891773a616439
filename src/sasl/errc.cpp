// sasl::errc as a std::error_category.
#include <skiff/sasl/errc.hpp>

#include <fmt/format.h>

#include <string>

namespace skiff::sasl {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::malformed: return "malformed";
    case errc::unsupported: return "unsupported";
    case errc::unknown_user: return "unknown_user";
    case errc::bad_proof: return "bad_proof";
    case errc::authzid_mismatch: return "authzid_mismatch";
    case errc::bad_state: return "bad_state";
    case errc::invalid_credential: return "invalid_credential";
    }
    return "unknown";
}

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.sasl"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::malformed: return "malformed SASL message";
        case errc::unsupported: return "unsupported SASL feature";
        case errc::unknown_user: return "unknown SASL user";
        case errc::bad_proof: return "wrong SASL password or proof";
        case errc::authzid_mismatch: return "SASL authorization id differs from the user";
        case errc::bad_state: return "SASL message after the exchange ended";
        case errc::invalid_credential: return "invalid SASL credential";
        }
        return fmt::format("unknown skiff.sasl error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

const char* client_message(std::error_code ec) noexcept {
    if (ec.category() != error_category()) return "Authentication failed";
    switch (static_cast<errc>(ec.value())) {
    case errc::malformed: return "Authentication failed: invalid SASL message";
    case errc::unsupported:
        return "Authentication failed: unsupported SASL feature (channel binding, extension or mechanism)";
    // Kafka's own wording for invalid credentials; the same for both on purpose.
    case errc::unknown_user:
    case errc::bad_proof: return "Authentication failed: Invalid username or password";
    case errc::authzid_mismatch:
        return "Authentication failed: Client requested an authorization id that is different from username";
    case errc::bad_state: return "Authentication failed: unexpected SASL message";
    case errc::invalid_credential: return "Authentication failed: Invalid username or password";
    }
    return "Authentication failed";
}

} // namespace skiff::sasl
