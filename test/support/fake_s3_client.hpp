// An S3 client for tests that talk to the in-process fake_s3: one place for the settings
// every such test shares (path style, millisecond retries, a fixed backoff seed).
#pragma once

#include "fake_s3.hpp"

#include <skiff/s3/client.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>

namespace skiff::test {

// Path-style requests to `srv`, retries from 1 ms capped at 5 ms, six attempts, a 2 s
// attempt timeout in a 10 s deadline, backoff seed 42. Tests change what they measure
// (credentials, attempts, timeouts, seed) on the returned value.
inline s3::client_config fake_s3_client_config(const fake_s3& srv) {
    using namespace std::chrono_literals;
    s3::client_config cfg;
    cfg.endpoint = srv.endpoint();
    cfg.path_style = true;
    cfg.creds = {"AKIDTEST", "secret/for+tests", ""};
    cfg.retry.base = 1ms;
    cfg.retry.cap = 5ms;
    cfg.retry.max_attempts = 6;
    cfg.attempt_timeout = 2s;
    cfg.operation_deadline = 10s;
    cfg.backoff_seed = 42;
    return cfg;
}

// A client the test cannot go on without: fails the test here if `cfg` is refused.
inline std::unique_ptr<s3::client> make_client(s3::client_config cfg) {
    auto c = s3::client::create(std::move(cfg));
    REQUIRE(c.has_value());
    return std::move(*c);
}

} // namespace skiff::test
