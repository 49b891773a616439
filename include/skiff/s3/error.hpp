// A classified S3 failure: its class (errc.hpp) and what an operator needs to know.
#pragma once

#include <string>

#include <skiff/s3/errc.hpp>

namespace skiff::s3 {

// A classified failure. `message` is a plain sentence for operators; it never contains
// credentials or signatures.
struct error {
    errc code{};
    int http_status = 0;       // 0 when no HTTP response arrived
    std::string s3_code;       // e.g. "SlowDown", "NoSuchKey"; empty when none
    std::string message;       // human-readable cause
    int attempts = 1;          // how many requests were sent for this operation

    bool retryable() const noexcept { return code == errc::retryable; }
};

} // namespace skiff::s3
