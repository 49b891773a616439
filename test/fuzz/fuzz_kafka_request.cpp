// libFuzzer target for the Kafka codec: arbitrary bytes are parsed as a request frame (size
// prefix removed) the way the broker does: request header, then the body of whatever API key
// and version the header names. The body is also decoded as that API's response. Whatever
// decodes must re-encode without error and decode back to an equal message (a violation aborts,
// so the fuzzer reports it like a crash).
//
//   CXX=clang++-14 meson setup build-fuzz -Dfuzzers=true -Db_lundef=false
//   ninja -C build-fuzz test/fuzz/kafka/fuzz_kafka_request
//   build-fuzz/test/fuzz/kafka/fuzz_kafka_request -max_total_time=60 <scratch dir> test/fuzz/corpus/kafka
#include <skiff/kafka/frame.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <variant>

using namespace skiff::kafka;

namespace {

#define FUZZ_CHECK(cond)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            std::abort();                                                                 \
        }                                                                                 \
    } while (0)

// Whether an encoding may hold a float64 NaN: some 8 bytes with all exponent bits set. A
// superset of the real NaN fields, which is all the fallback above needs.
bool has_nan_bytes(const std::string& bytes) {
    for (std::size_t i = 0; i + 8 <= bytes.size(); ++i) {
        const auto hi = static_cast<unsigned char>(bytes[i]);
        const auto next = static_cast<unsigned char>(bytes[i + 1]);
        if ((hi & 0x7f) == 0x7f && (next & 0xf0) == 0xf0) return true;
    }
    return false;
}

// decode(encode(m)) == m for a message that decoded from the fuzzer's bytes.
template <typename Variant>
void check_round_trip(const Variant& any, std::int16_t version) {
    std::visit(
        [&](const auto& m) {
            using Msg = std::decay_t<decltype(m)>;
            auto enc = encode_message(m, version);
            if (!enc) {
                std::fprintf(stderr, "re-encode failed: %s\n", enc.error().message.c_str());
                std::abort();
            }
            auto dec = decode_message<Msg>(std::span<const char>(enc->data(), enc->size()), version);
            if (!dec) {
                std::fprintf(stderr, "re-decode failed: %s\n", dec.error().message.c_str());
                std::abort();
            }
            // A float64 NaN (DescribeClientQuotas, AlterClientQuotas) never equals itself, so a
            // message holding one is compared by its bytes: encoding what was decoded gives the
            // same bytes again.
            auto again = encode_message(*dec, version);
            FUZZ_CHECK(again && *again == *enc);
            FUZZ_CHECK(*dec == m || has_nan_bytes(*enc));
        },
        any);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const char> in(reinterpret_cast<const char*>(data), size);
    auto frame = parse_request_header(in);
    if (!frame) return 0;
    const auto key = frame->header.request_api_key;
    const auto version = frame->header.request_api_version;

    // The header itself round-trips (unknown tagged fields are dropped, so compare values).
    {
        auto enc = encode_message(frame->header, frame->header_version);
        FUZZ_CHECK(enc);
        auto dec = decode_message<RequestHeader>(std::span<const char>(enc->data(), enc->size()),
                                                 frame->header_version);
        FUZZ_CHECK(dec && *dec == frame->header);
    }

    reader rd(frame->body);
    auto req = decode_request(key, version, rd);
    if (req) {
        FUZZ_CHECK(rd.position() <= frame->body.size());
        check_round_trip(*req, version);
    } else {
        FUZZ_CHECK(!req.error().message.empty());
    }

    reader rd2(frame->body);
    auto resp = decode_response(key, version, rd2);
    if (resp) check_round_trip(*resp, version);
    return 0;
}
