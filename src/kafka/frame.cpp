// Kafka request/response framing (https://kafka.apache.org/protocol.html#protocol_messages).
#include "skiff/kafka/frame.hpp"


namespace skiff::kafka {

namespace {
constexpr std::int16_t controlled_shutdown_key = 7; // not in our schemas; v0 has header v0
} // namespace

std::int16_t request_header_version(std::int16_t key, std::int16_t version) noexcept {
    if (key == controlled_shutdown_key && version == 0) return 0;
    return is_flexible(key, version) ? 2 : 1;
}

std::int16_t response_header_version(std::int16_t key, std::int16_t version) noexcept {
    // KIP-511: the client must be able to read an ApiVersions response whatever version it
    // asked for, so its header never carries tagged fields.
    if (key == static_cast<std::int16_t>(api_key::api_versions)) return 0;
    return is_flexible(key, version) ? 1 : 0;
}

result<std::optional<std::size_t>, decode_error> peek_frame_size(std::span<const char> buf,
                                                                 std::size_t max_size) {
    if (buf.size() < size_prefix_bytes) return std::optional<std::size_t>{};
    reader rd(buf.first(size_prefix_bytes));
    std::int32_t n = 0;
    if (!rd.read_int32(n)) return failure{rd.error()};
    if (n < 0) return failure{decode_error{"negative frame size " + std::to_string(n)}};
    if (static_cast<std::size_t>(n) > max_size) {
        return failure{decode_error{"frame size " + std::to_string(n) + " exceeds the limit of " +
                                    std::to_string(max_size)}};
    }
    return std::optional<std::size_t>{static_cast<std::size_t>(n)};
}

result<request_frame, decode_error> parse_request_header(std::span<const char> frame) {
    reader peek(frame);
    std::int16_t key = 0;
    std::int16_t version = 0;
    if (!peek.read_int16(key) || !peek.read_int16(version)) {
        peek.context("RequestHeader");
        return failure{peek.error()};
    }
    request_frame out;
    out.header_version = request_header_version(key, version);
    reader rd(frame);
    if (!RequestHeader::read(out.header, rd, out.header_version)) return failure{rd.error()};
    out.body = rd.rest();
    return out;
}

result<response_frame, decode_error> parse_response_header(std::span<const char> frame,
                                                           std::int16_t header_version) {
    response_frame out;
    reader rd(frame);
    if (!ResponseHeader::read(out.header, rd, header_version)) return failure{rd.error()};
    out.body = rd.rest();
    return out;
}

std::string frame_response(std::int32_t correlation_id, std::int16_t header_version,
                           std::string_view body) {
    writer w;
    w.write_int32(0);
    w.write_int32(correlation_id);
    if (header_version >= 1) w.write_unsigned_varint(0); // empty tagged-fields section
    w.write_raw(body);
    w.patch_int32(0, static_cast<std::int32_t>(w.size() - size_prefix_bytes));
    return std::move(w).take();
}

} // namespace skiff::kafka
