// The partition manifest's bytes: round trips, compactness, and refusal of every kind of
// damage (a manifest is read from the bucket, so it is untrusted input).
#include <skiff/core/crc32c.hpp>
#include <skiff/core/endian.hpp>
#include <skiff/storage/manifest_format.hpp>

#include <catch2/catch.hpp>

using namespace skiff;
using namespace skiff::storage;

namespace {

manifest sample(std::size_t n) {
    manifest m;
    m.epoch = 7;
    m.seq = 42;
    m.partition = partition_id("orders.v2", 3);
    m.written_ms = 1'760'000'000'000;
    std::int64_t base = 100;
    m.log_start = 150; // inside the first segment, as after DeleteRecords
    for (std::size_t i = 0; i < n; ++i) {
        manifest_segment s;
        s.base = base;
        s.last = base + 99;
        s.kfs_size = 10'000 + i;
        s.index_size = i % 5 == 0 ? 0 : 28;
        s.max_timestamp = i % 7 == 0 ? -1 : 1'760'000'000'000 + static_cast<std::int64_t>(i) * 100;
        s.created_ms = 1'760'000'000'050 + static_cast<std::int64_t>(i) * 100;
        m.segments.push_back(s);
        base += 100 + (i % 11 == 0 ? 5 : 0); // a few gaps
    }
    m.covered_end = base + 3;
    return m;
}

// Re-seals bytes after a deliberate edit, so the decoder's field checks (not the CRC) are hit.
std::string reseal(std::string b) {
    const std::size_t at = b.size() - 8;
    be::write_u32(b.data() + at, crc32c(b.data(), at));
    return b;
}

} // namespace

TEST_CASE("manifest: encode and decode round-trip", "[storage][manifest]") {
    for (std::size_t n : {0, 1, 2, 1000}) {
        auto m = sample(n);
        if (n == 0) m.log_start = m.covered_end;
        auto bytes = encode_manifest(m);
        auto back = decode_manifest(bytes);
        REQUIRE(back.has_value());
        CHECK(*back == m);
    }
}

TEST_CASE("manifest: about 12 bytes per ordinary segment", "[storage][manifest]") {
    const auto bytes = encode_manifest(sample(10'000));
    CHECK(bytes.size() < 10'000 * 14);
    CHECK(bytes.size() > 10'000 * 6);
}

TEST_CASE("manifest: every truncation and every flipped byte is refused", "[storage][manifest]") {
    const auto good = encode_manifest(sample(20));
    for (std::size_t cut = 0; cut < good.size(); ++cut) {
        CHECK_FALSE(decode_manifest(std::string_view(good).substr(0, cut)).has_value());
    }
    for (std::size_t i = 0; i < good.size(); ++i) {
        auto bad = good;
        bad[i] = static_cast<char>(bad[i] ^ 0x5a);
        CHECK_FALSE(decode_manifest(bad).has_value());
    }
    CHECK_FALSE(decode_manifest(good + "x").has_value());
}

TEST_CASE("manifest: inconsistent fields are refused even with a valid CRC", "[storage][manifest]") {
    auto m = sample(3);
    SECTION("a segment at or past covered_end") {
        m.covered_end = m.segments.back().last;
        auto r = decode_manifest(encode_manifest(m));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == format_errc::invalid);
    }
    SECTION("segments out of order") {
        std::swap(m.segments[0], m.segments[1]);
        CHECK_FALSE(decode_manifest(encode_manifest(m)).has_value());
    }
    SECTION("log start past covered end") {
        m.log_start = m.covered_end + 1;
        CHECK_FALSE(decode_manifest(encode_manifest(m)).has_value());
    }
    SECTION("another version") {
        auto b = encode_manifest(m);
        be::write_u16(b.data() + 4, 2);
        auto r = decode_manifest(reseal(b));
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().code == format_errc::unsupported_version);
    }
    SECTION("a count larger than the bytes can hold") {
        auto b = encode_manifest(m);
        be::write_u32(b.data() + 44, 0xffffffffu);
        auto r = decode_manifest(reseal(b));
        REQUIRE_FALSE(r.has_value());
    }
}

TEST_CASE("manifest: keys sort by epoch then sequence and parse back", "[storage][manifest]") {
    const partition_id p("t", 0);
    CHECK(manifest_prefix("ns", p) == "ns/skiff~meta/t/0/");
    const auto k = manifest_key("ns", p, 3, 17);
    CHECK(k == "ns/skiff~meta/t/0/manifest-0000000003-00000000000000000017");
    CHECK(manifest_key("ns", p, 2, 999) < manifest_key("ns", p, 3, 0));
    CHECK(manifest_key("ns", p, 3, 9) < manifest_key("ns", p, 3, 10));
    auto n = parse_manifest_name(std::string_view(k).substr(manifest_prefix("ns", p).size()));
    REQUIRE(n.has_value());
    CHECK(n->epoch == 3);
    CHECK(n->seq == 17);
    CHECK_FALSE(parse_manifest_name("manifest-0000000003-0000000000000000001"));
    CHECK_FALSE(parse_manifest_name("manifest-000000000a-00000000000000000017"));
    CHECK_FALSE(parse_manifest_name("manifest-0000000003_00000000000000000017"));
    CHECK_FALSE(parse_manifest_name("producer-ids.json"));
}
