// tls::errc as a std::error_category.
#include <skiff/tls/errc.hpp>

#include <fmt/format.h>

#include <string>

namespace skiff::tls {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::handshake_failed: return "handshake_failed";
    case errc::certificate_invalid: return "certificate_invalid";
    case errc::certificate_required: return "certificate_required";
    case errc::certificate_rejected: return "certificate_rejected";
    case errc::not_tls: return "not_tls";
    case errc::protocol_error: return "protocol_error";
    case errc::closed: return "closed";
    case errc::bad_config: return "bad_config";
    case errc::file_unreadable: return "file_unreadable";
    case errc::bad_pem: return "bad_pem";
    case errc::key_mismatch: return "key_mismatch";
    }
    return "unknown";
}

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.tls"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::handshake_failed: return "TLS handshake failed (no common protocol version or cipher)";
        case errc::certificate_invalid: return "the peer's TLS certificate failed verification";
        case errc::certificate_required: return "a TLS client certificate is required and none was presented";
        case errc::certificate_rejected: return "the peer rejected our TLS certificate";
        case errc::not_tls: return "the peer did not start a TLS handshake (plaintext on a TLS port?)";
        case errc::protocol_error: return "TLS protocol error (malformed or unexpected record)";
        case errc::closed: return "TLS connection closed";
        case errc::bad_config: return "invalid TLS configuration";
        case errc::file_unreadable: return "TLS file cannot be read";
        case errc::bad_pem: return "TLS file is not valid PEM";
        case errc::key_mismatch: return "TLS private key does not match the certificate";
        }
        return fmt::format("unknown skiff.tls error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::tls
