// Error codes of the cluster module, and `error`: a code plus one sentence for the operator.
#pragma once

#include <string>
#include <system_error>
#include <utility>

namespace skiff::cluster {

enum class errc {
    unavailable = 1, // etcd did not answer (retriable)
    already_live,    // another live broker registered this broker id
    lost,            // a claim lost to another broker, or a release of something no longer ours
    lease_lost,      // this broker's lease expired: it owns nothing until it joins again
    bad_record,      // a value in etcd that is not what skiff writes
    cancelled,
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

struct error {
    error() = default;
    error(errc c, std::string m) : code(c), message(std::move(m)) {}
    errc code = errc::unavailable;
    std::string message;
};

} // namespace skiff::cluster

template <>
struct std::is_error_code_enum<skiff::cluster::errc> : std::true_type {};
