// Kafka request/response framing: the int32 size prefix and the request/response headers.
//
// A request on the wire is: int32 size, request header (v0-v2), body. A response is: int32 size,
// response header (v0-v1), body. The header version follows from the API key and version
// (flexible versions use the newer header), with two exceptions: an ApiVersions response always
// uses header v0 (KIP-511) and ControlledShutdown v0 uses request header v0.
// Plain functions, no I/O, callable on any core.
#pragma once

#include "messages.hpp" // generated into the build directory (src/kafka/meson.build)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace skiff::kafka {

// Bytes of the size prefix in front of every request and response.
inline constexpr std::size_t size_prefix_bytes = 4;

// The request header version for (key, version): 2 if flexible, 1 otherwise, 0 for
// ControlledShutdown v0. An unknown key gets 1 (enough to read its correlation id).
std::int16_t request_header_version(std::int16_t key, std::int16_t version) noexcept;
// The response header version: 1 if flexible, 0 otherwise, and always 0 for ApiVersions.
std::int16_t response_header_version(std::int16_t key, std::int16_t version) noexcept;

// The frame size announced by the first 4 bytes of `buf`: nullopt while fewer than 4 bytes are
// there; an error if it is negative or larger than `max_size` (the caller should then close the
// connection, as Kafka does).
result<std::optional<std::size_t>, decode_error> peek_frame_size(std::span<const char> buf,
                                                                 std::size_t max_size);

// A parsed request frame. `body` views the caller's buffer: it is valid while that is.
struct request_frame {
    RequestHeader header;
    std::int16_t header_version = 1;
    std::span<const char> body;
};

// Parses the request header at the start of `frame` (one request without its size prefix) and
// returns it with the remaining body bytes. The header version comes from the API key and
// version in the first 4 bytes; a key or version the codec does not know still parses (as header
// v1, or v2 above a flexible API's max version), so that the caller can answer with an error
// that carries the correlation id. Fails only if the header itself is malformed.
result<request_frame, decode_error> parse_request_header(std::span<const char> frame);

// A parsed response frame (client side and tests).
struct response_frame {
    ResponseHeader header;
    std::span<const char> body;
};
result<response_frame, decode_error> parse_response_header(std::span<const char> frame,
                                                           std::int16_t header_version);

// Size prefix + response header (correlation id, plus an empty tagged-fields section in v1) +
// `body`.
std::string frame_response(std::int32_t correlation_id, std::int16_t header_version,
                           std::string_view body);

// Encodes `msg` (a *Response type) as a complete framed response for request version `version`.
// Fails on an encode error (see the generated encode()).
template <typename Msg>
result<std::string, encode_error> encode_response(const Msg& msg, std::int16_t version,
                                                  std::int32_t correlation_id) {
    writer w;
    w.write_int32(0); // size, patched below
    ResponseHeader header;
    header.correlation_id = correlation_id;
    header.encode(w, response_header_version(static_cast<std::int16_t>(Msg::api), version));
    msg.encode(w, version);
    if (!w.ok()) return failure{w.error()};
    w.patch_int32(0, static_cast<std::int32_t>(w.size() - size_prefix_bytes));
    return std::move(w).take();
}

// Encodes `msg` (a *Request type) as a complete framed request (client side and tests).
template <typename Msg>
result<std::string, encode_error> encode_request(const Msg& msg, std::int16_t version,
                                                 std::int32_t correlation_id,
                                                 std::optional<std::string> client_id) {
    writer w;
    w.write_int32(0); // size, patched below
    RequestHeader header;
    header.request_api_key = static_cast<std::int16_t>(Msg::api);
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = std::move(client_id);
    header.encode(w, request_header_version(header.request_api_key, version));
    msg.encode(w, version);
    if (!w.ok()) return failure{w.error()};
    w.patch_int32(0, static_cast<std::int32_t>(w.size() - size_prefix_bytes));
    return std::move(w).take();
}

} // namespace skiff::kafka
