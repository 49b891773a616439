// Decodes what a broker handler returns (the size prefix, the response header, the body) into
// the generated response type, for tests that call handlers directly.
#pragma once

#include <skiff/kafka/frame.hpp> // and the generated messages

#include <catch2/catch.hpp>

#include <span>
#include <string>

namespace skiff::test {

template <typename Resp>
Resp decode_answer(const std::string& frame, std::int16_t version) {
    const auto header_version = kafka::response_header_version(static_cast<std::int16_t>(Resp::api), version);
    auto parsed = kafka::parse_response_header(std::span<const char>(frame).subspan(kafka::size_prefix_bytes),
                                               header_version);
    REQUIRE(parsed);
    kafka::reader rd(parsed->body);
    auto r = Resp::decode(rd, version);
    REQUIRE(r);
    return std::move(*r);
}

} // namespace skiff::test
