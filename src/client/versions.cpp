// Version negotiation (KIP-35): for each API, the highest version inside both the broker's
// advertised range and the range skiff's codec implements.
#include <skiff/client/versions.hpp>

#include <algorithm>
#include <string>

namespace skiff::client {

api_versions api_versions::from(const kafka::ApiVersionsResponse& r) {
    api_versions out;
    for (const auto& k : r.api_keys) out._broker[k.api_key] = range{k.min_version, k.max_version};
    return out;
}

std::optional<api_versions::range> api_versions::broker_range(kafka::api_key key) const {
    auto it = _broker.find(static_cast<std::int16_t>(key));
    if (it == _broker.end()) return std::nullopt;
    return it->second;
}

result<std::int16_t, error> api_versions::pick(kafka::api_key key, std::optional<std::int16_t> cap) const {
    const auto* ours = kafka::find_api(static_cast<std::int16_t>(key));
    const std::string name = ours ? std::string(ours->name) : "API " + std::to_string(static_cast<int>(key));
    if (!ours) return failure{error(errc::unsupported_version, "skiff has no codec for " + name)};
    auto theirs = broker_range(key);
    if (!theirs) return failure{error(errc::unsupported_version, "the broker does not support " + name)};
    std::int16_t hi = std::min(ours->max_version, theirs->max);
    if (cap) hi = std::min(hi, *cap);
    const std::int16_t lo = std::max(ours->min_version, theirs->min);
    if (hi < lo) {
        return failure{error(errc::unsupported_version,
                             name + ": the broker speaks versions " + std::to_string(theirs->min) + "-" +
                                 std::to_string(theirs->max) + ", skiff " + std::to_string(ours->min_version) +
                                 "-" + std::to_string(cap ? std::min(*cap, ours->max_version) : ours->max_version))};
    }
    return hi;
}

} // namespace skiff::client
