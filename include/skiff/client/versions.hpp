// The API versions a broker and skiff's codecs both speak, from the broker's ApiVersions
// answer. Plain data, no I/O, any core.
#pragma once

#include <skiff/client/errc.hpp>
#include <skiff/core/result.hpp>
#include <skiff/kafka/frame.hpp>

#include <cstdint>
#include <map>
#include <optional>

namespace skiff::client {

class api_versions {
public:
    api_versions() = default;
    // The broker's advertised ranges; APIs without a codec in skiff are kept too (for display).
    static api_versions from(const kafka::ApiVersionsResponse& r);

    // The highest version of `key` that both sides support, at most `cap` when given.
    // errc::unsupported_version (one sentence naming the API and both ranges) when there is
    // none: the broker lacks the API, skiff has no codec for it, or the ranges do not meet.
    result<std::int16_t, error> pick(kafka::api_key key, std::optional<std::int16_t> cap = {}) const;

    // The broker's range for `key`, if it advertised one.
    struct range {
        std::int16_t min = 0;
        std::int16_t max = 0;
    };
    std::optional<range> broker_range(kafka::api_key key) const;
    const std::map<std::int16_t, range>& all() const noexcept { return _broker; }

private:
    std::map<std::int16_t, range> _broker;
};

} // namespace skiff::client
