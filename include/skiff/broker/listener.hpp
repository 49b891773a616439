// Kafka listeners: where the broker accepts connections and what each connection must do
// before it is served (Kafka's listeners / advertised.listeners / security protocols).
//
//   --listeners "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://0.0.0.0:9093"
//   --advertised-listeners "SASL_PLAINTEXT://broker1.example:9093"
//
// A listener's name is its security protocol (Kafka's default listener.security.protocol.map),
// so each protocol has at most one listener. Pure parsing; any thread.
#pragma once

#include <skiff/core/result.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::broker {

enum class security_protocol { plaintext, ssl, sasl_plaintext, sasl_ssl };

std::string_view protocol_name(security_protocol p) noexcept; // "SASL_PLAINTEXT"
// Case-insensitive, as Kafka's SecurityProtocol.forName.
std::optional<security_protocol> protocol_from_name(std::string_view name) noexcept;
constexpr bool uses_sasl(security_protocol p) noexcept {
    return p == security_protocol::sasl_plaintext || p == security_protocol::sasl_ssl;
}
constexpr bool uses_tls(security_protocol p) noexcept {
    return p == security_protocol::ssl || p == security_protocol::sasl_ssl;
}

struct listener_config {
    security_protocol protocol = security_protocol::plaintext;
    std::string addr;       // host:port to bind
    std::string advertised; // host:port put in Metadata; empty: the address the client connected to
    std::string_view name() const noexcept { return protocol_name(protocol); }
    friend bool operator==(const listener_config&, const listener_config&) = default;
};

// Parses a --listeners value: comma-separated PROTOCOL://HOST:PORT ("[::1]:9092" for IPv6; an
// empty host is 0.0.0.0). Refused, with the entry named: an unknown protocol, a protocol twice,
// a bad address, an empty list.
result<std::vector<listener_config>, std::string> parse_listeners(std::string_view spec);
// Applies an --advertised-listeners value to `ls`: every entry must name a listener of `ls` and
// give a host other than a wildcard.
result<void, std::string> apply_advertised_listeners(std::vector<listener_config>& ls, std::string_view spec);
// "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://0.0.0.0:9093" (the bind addresses).
std::string format_listeners(const std::vector<listener_config>& ls);
// The same with the advertised addresses (listeners without one are left out).
std::string format_advertised_listeners(const std::vector<listener_config>& ls);

} // namespace skiff::broker
