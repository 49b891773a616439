// Kafka's compression codecs: round trips, known answers made by the reference tools (gzip,
// lz4 and zstd command-line programs; snappy by hand from its format description), malformed
// input, decompression limits, and the compressed-batch helpers.
#include <skiff/storage/compression.hpp>

#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

using namespace skiff::storage;

namespace {

std::span<const char> span_of(const std::string& s) { return {s.data(), s.size()}; }
template <std::size_t N>
std::string bytes(const unsigned char (&a)[N]) {
    return std::string(reinterpret_cast<const char*>(a), N);
}

const std::string hello = "hello hello hello";

// `printf 'hello hello hello' | gzip -n -9`
const unsigned char gzip_hello[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48,
                                    0xcd, 0xc9, 0xc9, 0x57, 0xc8, 0x40, 0x90, 0x00, 0x80, 0x88, 0xf9, 0xe5,
                                    0x11, 0x00, 0x00, 0x00};
// `printf 'hello hello hello' | zstd -c`
const unsigned char zstd_hello[] = {0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58, 0x65, 0x00, 0x00, 0x30, 0x68, 0x65, 0x6c,
                                    0x6c, 0x6f, 0x20, 0x01, 0x00, 0x31, 0x4a, 0x11, 0xa2, 0xed, 0x1e, 0x0c};
// `printf 'hello hello hello' | lz4 -c` (an LZ4 frame, KIP-57)
const unsigned char lz4_hello[] = {0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7, 0x11, 0x00, 0x00, 0x80, 0x68,
                                   0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x20, 0x68,
                                   0x65, 0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00, 0x00, 0xb1, 0xcd, 0x9b, 0x87};
// A raw snappy block (as librdkafka writes): varint length 17, one literal of 17 bytes
// (tag (17-1) << 2).
std::string snappy_raw_hello() { return std::string("\x11\x40", 2) + hello; }
// The same in the xerial framing Kafka's Java client and broker write.
std::string snappy_xerial_hello() {
    std::string s("\x82SNAPPY\0", 8);
    s += std::string("\0\0\0\1\0\0\0\1", 8);
    s += std::string("\0\0\0\x13", 4);
    return s + snappy_raw_hello();
}

std::string random_text(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::string s;
    const char* words[] = {"kafka ", "skiff ", "record ", "batch ", "offset ", "partition "};
    while (s.size() < n) s += words[rng() % 6];
    s.resize(n);
    return s;
}

const std::vector<compression_codec> codecs{compression_codec::gzip, compression_codec::snappy,
                                            compression_codec::lz4, compression_codec::zstd};

} // namespace

TEST_CASE("known answers from the reference tools decode", "[storage][compression]") {
    auto g = decompress(compression_codec::gzip, span_of(bytes(gzip_hello)), 1000);
    REQUIRE(g);
    CHECK(*g == hello);
    auto z = decompress(compression_codec::zstd, span_of(bytes(zstd_hello)), 1000);
    INFO((z ? std::string() : z.error().message));
    REQUIRE(z);
    CHECK(*z == hello);
    auto l = decompress(compression_codec::lz4, span_of(bytes(lz4_hello)), 1000);
    REQUIRE(l);
    CHECK(*l == hello);
    auto raw = snappy_raw_hello();
    auto s1 = decompress(compression_codec::snappy, span_of(raw), 1000);
    REQUIRE(s1);
    CHECK(*s1 == hello);
    auto framed = snappy_xerial_hello();
    auto s2 = decompress(compression_codec::snappy, span_of(framed), 1000);
    REQUIRE(s2);
    CHECK(*s2 == hello);
}

TEST_CASE("snappy is written in the xerial framing Kafka's broker writes", "[storage][compression]") {
    auto c = compress(compression_codec::snappy, span_of(hello));
    REQUIRE(c);
    REQUIRE(c->size() > 20);
    CHECK(c->substr(0, 8) == std::string("\x82SNAPPY\0", 8));
    CHECK(c->substr(8, 8) == std::string("\0\0\0\1\0\0\0\1", 8));
}

TEST_CASE("gzip reads concatenated members", "[storage][compression]") {
    const std::string two = bytes(gzip_hello) + bytes(gzip_hello);
    auto g = decompress(compression_codec::gzip, span_of(two), 1000);
    REQUIRE(g);
    CHECK(*g == hello + hello);
}

TEST_CASE("every codec round-trips small, empty and multi-block inputs", "[storage][compression]") {
    const std::vector<std::string> inputs{std::string(), "x", hello, random_text(300000, 7)};
    for (auto c : codecs) {
        for (const auto& in : inputs) {
            INFO(to_string(c) << " " << in.size() << " bytes");
            auto packed = compress(c, span_of(in));
            REQUIRE(packed);
            auto back = decompress(c, span_of(*packed), in.size() + 1);
            REQUIRE(back);
            CHECK(*back == in);
        }
    }
    auto none = compress(compression_codec::none, span_of(hello));
    REQUIRE(none);
    CHECK(*none == hello);
}

TEST_CASE("decompression stops at the limit: a bomb fails cleanly", "[storage][compression]") {
    const std::string zeros(8u << 20, '\0');
    for (auto c : codecs) {
        INFO(to_string(c));
        auto packed = compress(c, span_of(zeros));
        REQUIRE(packed);
        CHECK(packed->size() < (1u << 20));
        auto r = decompress(c, span_of(*packed), 1u << 20);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == format_errc::too_large);
        auto exact = decompress(c, span_of(*packed), zeros.size());
        REQUIRE(exact);
        CHECK(exact->size() == zeros.size());
    }
    auto none = decompress(compression_codec::none, span_of(hello), 3);
    REQUIRE_FALSE(none);
    CHECK(none.error().code == format_errc::too_large);
}

TEST_CASE("a snappy block claiming a huge length is refused before allocating", "[storage][compression]") {
    // varint 0xFFFFFFFF (4 GiB - 1) then garbage.
    const std::string bomb("\xff\xff\xff\xff\x0f\x00\x01\x02", 8);
    auto r = decompress(compression_codec::snappy, span_of(bomb), 1u << 20);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == format_errc::too_large);
}

TEST_CASE("malformed and truncated input is an error, never a crash", "[storage][compression]") {
    const std::string big = random_text(100000, 3);
    for (auto c : codecs) {
        auto packed = compress(c, span_of(big));
        REQUIRE(packed);
        INFO(to_string(c));
        // Cut off at several points.
        for (std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{5}, packed->size() / 2,
                                packed->size() - 1}) {
            INFO("cut at " << cut);
            auto r = decompress(c, std::span<const char>(packed->data(), cut), 1u << 20);
            CHECK_FALSE(r);
        }
        // Garbage, and flipped bytes in the middle (a result or an error; must not crash).
        const std::string garbage(64, '\x5a');
        CHECK_FALSE(decompress(c, span_of(garbage), 1u << 20));
        std::mt19937 rng(11);
        for (int i = 0; i < 50; ++i) {
            std::string bad = *packed;
            bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
            auto r = decompress(c, span_of(bad), 1u << 20);
            if (r) CHECK(r->size() <= (1u << 20));
        }
    }
    CHECK_FALSE(decompress(static_cast<compression_codec>(6), span_of(hello), 100));
    CHECK_FALSE(compress(static_cast<compression_codec>(5), span_of(hello)));
}

TEST_CASE("xerial snappy with a negative or cut-off block length fails", "[storage][compression]") {
    auto framed = snappy_xerial_hello();
    auto cut = framed.substr(0, 18);
    CHECK_FALSE(decompress(compression_codec::snappy, span_of(cut), 1000));
    auto neg = framed;
    neg[16] = '\x80';
    CHECK_FALSE(decompress(compression_codec::snappy, span_of(neg), 1000));
}

TEST_CASE("decode_records reads compressed batches; rebuild_batch recompresses", "[storage][compression]") {
    std::vector<record> recs{record(std::string("k1"), std::string("v1")), record(std::nullopt, std::string("v2")),
                             record(std::string("k3"), std::nullopt, {record_header("h", std::string("x"))}, 5)};
    batch_options plain_opts;
    plain_opts.base_timestamp = 1000;
    const std::string plain = build_batch(0, recs, plain_opts);
    auto pv = parse_batch(span_of(plain));
    REQUIRE(pv);
    for (auto c : codecs) {
        INFO(to_string(c));
        batch_options o = plain_opts;
        o.compress = c;
        const std::string packed = build_batch(0, recs, o);
        auto v = parse_batch(span_of(packed));
        REQUIRE(v);
        CHECK(v->compression() == c);
        CHECK_FALSE(parse_records(*v)); // the uncompressed-only decoder still refuses
        auto d = decode_records(*v, 1u << 20);
        REQUIRE(d);
        REQUIRE(d->records.size() == 3);
        CHECK(d->records[0].key == std::optional<std::string_view>("k1"));
        CHECK_FALSE(d->records[1].key);
        CHECK(d->records[2].timestamp_delta == 5);
        CHECK(d->records[2].headers.size() == 1);
        // The decompressed section is exactly the uncompressed batch's records section.
        CHECK(std::string(d->section.data(), d->section.size()) ==
              std::string(pv->records().data(), pv->records().size()));
        // Moving keeps the views valid.
        decoded_records moved = std::move(*d);
        CHECK(moved.records[0].value == std::optional<std::string_view>("v1"));

        // Back to uncompressed: byte-identical to the batch built uncompressed, but for the
        // attributes we pass and the max timestamp.
        auto re = rebuild_batch(*v, moved.section, compression_codec::none, v->attributes, v->max_timestamp);
        REQUIRE(re);
        CHECK(*re == plain);
        // To another codec, with LogAppendTime.
        auto re2 = rebuild_batch(*pv, pv->records(), c, attr_log_append_time, 4242);
        REQUIRE(re2);
        auto v2 = parse_batch(span_of(*re2)); // CRC verified
        REQUIRE(v2);
        CHECK(v2->compression() == c);
        CHECK(v2->log_append_time());
        CHECK(v2->max_timestamp == 4242);
        CHECK(v2->record_count == 3);
        auto d2 = decode_records(*v2, 1u << 20);
        REQUIRE(d2);
        CHECK(d2->records.size() == 3);
    }
}

TEST_CASE("decode_records: a count that disagrees with the records fails", "[storage][compression]") {
    std::vector<record> recs{"a", "b"};
    batch_options o;
    o.compress = compression_codec::lz4;
    o.record_count = 3;
    o.last_offset_delta = 2;
    const std::string packed = build_batch(0, recs, o);
    auto v = parse_batch(span_of(packed));
    REQUIRE(v);
    auto d = decode_records(*v, 1u << 20);
    REQUIRE_FALSE(d);
    o.record_count = 1;
    o.last_offset_delta = 0;
    const std::string fewer = build_batch(0, recs, o);
    auto v2 = parse_batch(span_of(fewer));
    REQUIRE(v2);
    CHECK_FALSE(decode_records(*v2, 1u << 20)); // bytes left over
    // A decompression limit below the records section's size.
    o.record_count = std::nullopt;
    o.last_offset_delta = std::nullopt;
    const std::string ok = build_batch(0, recs, o);
    auto v3 = parse_batch(span_of(ok));
    REQUIRE(v3);
    auto small = decode_records(*v3, 4);
    REQUIRE_FALSE(small);
    CHECK(small.error().code == format_errc::too_large);
}
