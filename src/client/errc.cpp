#include <skiff/client/errc.hpp>

namespace skiff::client {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::connection_refused: return "connection refused";
    case errc::unreachable: return "unreachable";
    case errc::timed_out: return "timed out";
    case errc::disconnected: return "disconnected";
    case errc::protocol_error: return "protocol error";
    case errc::unsupported_version: return "unsupported version";
    case errc::broker_error: return "broker error";
    case errc::not_found: return "not found";
    case errc::bad_address: return "bad address";
    case errc::cancelled: return "cancelled";
    case errc::authentication_failed: return "authentication failed";
    case errc::tls_failed: return "TLS handshake failed";
    case errc::bad_config: return "bad security settings";
    }
    return "unknown";
}

bool error::is_transport() const noexcept {
    switch (code) {
    case errc::connection_refused:
    case errc::unreachable:
    case errc::timed_out:
    case errc::disconnected:
    case errc::bad_address:
        return true;
    default:
        return false;
    }
}

bool error::is_security() const noexcept {
    return code == errc::authentication_failed || code == errc::tls_failed || code == errc::bad_config;
}

error broker_error(kafka::error_code code, std::string what, const std::optional<std::string>& message) {
    std::string m = std::move(what);
    m += ": ";
    m += kafka::name(code);
    if (message && !message->empty()) m += " (" + *message + ")";
    return error(code, std::move(m));
}

namespace {
class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.client"; }
    std::string message(int c) const override { return to_string(static_cast<errc>(c)); }
};
} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::client
