#include <skiff/s3/errc.hpp>

#include <fmt/format.h>

#include <string>

namespace skiff::s3 {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::retryable: return "retryable";
    case errc::not_found: return "not_found";
    case errc::precondition_failed: return "precondition_failed";
    case errc::access_denied: return "access_denied";
    case errc::signature_mismatch: return "signature_mismatch";
    case errc::invalid_request: return "invalid_request";
    case errc::cancelled: return "cancelled";
    case errc::deadline_exceeded: return "deadline_exceeded";
    case errc::bad_response: return "bad_response";
    case errc::config: return "config";
    }
    return "unknown";
}

namespace {

class s3_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.s3"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::retryable: return "transient S3 failure";
        case errc::not_found: return "S3 object or bucket not found";
        case errc::precondition_failed: return "S3 precondition failed";
        case errc::access_denied: return "S3 access denied";
        case errc::signature_mismatch: return "S3 rejected the request signature or payload hash";
        case errc::invalid_request: return "S3 rejected the request as invalid";
        case errc::cancelled: return "S3 request cancelled";
        case errc::deadline_exceeded: return "S3 operation deadline exceeded";
        case errc::bad_response: return "S3 response could not be understood";
        case errc::config: return "S3 configuration error";
        }
        return fmt::format("unknown skiff.s3 error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const s3_category category;
    return category;
}

} // namespace skiff::s3
