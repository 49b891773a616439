// Error codes of the acl module (Kafka's ACL model and authorizer decision).
//
// Both are refusals of a client's request: the broker answers them with INVALID_REQUEST (42)
// and the acl_error's message, as Kafka's AclControlManager / AclApis do. Pure; any core.
#pragma once

#include <cstdint>
#include <string>
#include <system_error>

namespace skiff::acl {

enum class errc {
    invalid_binding = 1, // CreateAcls: a binding that cannot be stored (validate_new_binding)
    invalid_filter,      // DescribeAcls / DeleteAcls: a filter with UNKNOWN parts
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }
const char* to_string(errc e) noexcept;

// Kafka's INVALID_REQUEST, the code Kafka answers both with (kafka::error_code::invalid_request;
// repeated here so this pure module does not depend on the protocol module).
inline constexpr std::int16_t invalid_request_code = 42;

// The Kafka error code a response carries for e.
std::int16_t kafka_error_code(errc e) noexcept;

// A refusal with the sentence Kafka puts in the response's error_message.
struct acl_error {
    errc code = errc::invalid_binding;
    std::string message;

    std::int16_t kafka_code() const noexcept { return kafka_error_code(code); }
};

} // namespace skiff::acl

template <>
struct std::is_error_code_enum<skiff::acl::errc> : std::true_type {};
