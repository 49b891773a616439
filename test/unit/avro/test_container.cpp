// Object container files: byte-for-byte against files avsc wrote, round trips with both
// codecs, and corrupt files giving errors.
#include "avro_test_util.hpp"
#include "avsc_golden.hpp"

#include <skiff/avro/container.hpp>

#include <catch2/catch.hpp>

using namespace skiff::avro;
using avro_test::hex;
using avro_test::unhex;

namespace {

sync_marker test_sync() {
    sync_marker s{};
    const std::string_view text = "0123456789abcdef";
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::uint8_t>(text[i]);
    return s;
}

// The two records avsc wrote into the golden files.
std::vector<value> sample_records() {
    return {
        record{{value(std::int64_t{1}), value(std::string("one")), value(array{value(std::string("x")), value(std::string("y"))}),
                value(), value(1.5), value(map{map_entry{"a", value(std::int32_t{1})}}), value(enum_symbol{0, "A"}),
                value(bytes{1, 2}), value(true), value(0.5f)}},
        record{{value(std::int64_t{-300}), value(std::string()), value(array{}), value(bytes{0, 255}), value(-2.25), value(map{}),
                value(enum_symbol{1, "B"}), value(bytes{0xff, 0}), value(false), value(-1.0f)}},
    };
}

void check_sample(const container& c) {
    REQUIRE(c.records.size() == 2);
    const auto& r0 = c.records[0].get_if<record>()->fields;
    const auto& r1 = c.records[1].get_if<record>()->fields;
    CHECK(*r0[0].get_if<std::int64_t>() == 1);
    CHECK(*r0[1].get_if<std::string>() == "one");
    CHECK(r0[2].get_if<array>()->size() == 2);
    CHECK(r0[3].is_null());
    CHECK(*r0[4].get_if<double>() == 1.5);
    CHECK((*r0[5].get_if<map>())[0].key == "a");
    CHECK(r0[6].get_if<enum_symbol>()->symbol == "A");
    CHECK(*r0[7].get_if<bytes>() == bytes{1, 2});
    CHECK(*r0[8].get_if<bool>());
    CHECK(*r0[9].get_if<float>() == 0.5f);
    CHECK(*r1[0].get_if<std::int64_t>() == -300);
    CHECK(*r1[3].get_if<bytes>() == bytes{0, 255});
    CHECK(r1[6].get_if<enum_symbol>()->index == 1);
    CHECK(*r1[9].get_if<float>() == -1.0f);
}

std::string write_sample(codec cd, std::size_t block_bytes = 64 * 1024) {
    writer_options o;
    o.codec = cd;
    o.sync = test_sync();
    o.block_bytes = block_bytes;
    auto w = container_writer::create(avro_test::avsc_schema, o);
    REQUIRE(w);
    for (const auto& r : sample_records()) REQUIRE(w->append(r));
    auto file = w->finish();
    REQUIRE(file);
    return *file;
}

} // namespace

TEST_CASE("the writer produces avsc's bytes for the null codec", "[avro]") {
    CHECK(hex(write_sample(codec::null)) == avro_test::avsc_null_hex);
}

TEST_CASE("the reader reads avsc's files with both codecs", "[avro]") {
    for (const char* h : {avro_test::avsc_null_hex, avro_test::avsc_deflate_hex}) {
        const std::string file = unhex(h);
        auto c = read_container(file);
        REQUIRE(c);
        CHECK(c->schema_json == avro_test::avsc_schema);
        CHECK(c->sync == test_sync());
        REQUIRE(c->find_metadata("avro.codec"));
        check_sample(*c);
    }
    auto c = read_container(unhex(avro_test::avsc_deflate_hex));
    REQUIRE(c);
    CHECK(c->codec == codec::deflate);
}

TEST_CASE("files round-trip with both codecs, metadata and many blocks", "[avro]") {
    for (codec cd : {codec::null, codec::deflate}) {
        writer_options o;
        o.codec = cd;
        o.metadata = {{"schema-id", "3"}, {"binary", std::string("\0\xff", 2)}};
        o.block_bytes = 100; // forces several blocks
        auto w = container_writer::create(R"({"type":"record","name":"r","fields":[{"name":"n","type":"long"},{"name":"s","type":"string"}]})", o);
        REQUIRE(w);
        for (std::int64_t i = 0; i < 1000; ++i) REQUIRE(w->append(record{{value(i), value(std::string(static_cast<std::size_t>(i % 7), 'x'))}}));
        CHECK(w->records() == 1000);
        auto file = w->finish();
        REQUIRE(file);
        auto c = read_container(*file);
        REQUIRE(c);
        CHECK(c->codec == cd);
        REQUIRE(c->find_metadata("schema-id"));
        CHECK(*c->find_metadata("schema-id") == "3");
        CHECK(*c->find_metadata("binary") == std::string("\0\xff", 2));
        REQUIRE(c->records.size() == 1000);
        for (std::int64_t i = 0; i < 1000; ++i) {
            const auto& f = c->records[static_cast<std::size_t>(i)].get_if<record>()->fields;
            CHECK(*f[0].get_if<std::int64_t>() == i);
            CHECK(f[1].get_if<std::string>()->size() == static_cast<std::size_t>(i % 7));
        }
    }
}

TEST_CASE("an empty file has a header and no blocks", "[avro]") {
    auto w = container_writer::create(R"("int")");
    REQUIRE(w);
    auto file = w->finish();
    REQUIRE(file);
    auto c = read_container(*file);
    REQUIRE(c);
    CHECK(c->records.empty());
}

TEST_CASE("the writer refuses reserved metadata and values that do not fit", "[avro]") {
    writer_options o;
    o.metadata = {{"avro.custom", "x"}};
    auto w = container_writer::create(R"("int")", o);
    REQUIRE(!w);
    CHECK(w.error().code == errc::unsupported);
    auto w2 = container_writer::create(R"("int")");
    REQUIRE(w2);
    auto r = w2->append(value(std::string("no")));
    REQUIRE(!r);
    CHECK(r.error().code == errc::type_mismatch);
    CHECK(w2->records() == 0);
}

TEST_CASE("corrupt files are errors, never crashes", "[avro]") {
    const std::string good = write_sample(codec::null);
    const std::string good_z = unhex(avro_test::avsc_deflate_hex);
    REQUIRE(read_container(good));

    SECTION("every truncation of both codecs") {
        for (const std::string* f : {&good, &good_z}) {
            // Cut right after the header, the file is whole (and empty).
            const std::size_t header = f->find("0123456789abcdef") + 16;
            for (std::size_t n = 0; n < f->size(); ++n) {
                auto c = read_container(std::string_view(*f).substr(0, n));
                INFO(n);
                CHECK(!c == (n != header));
                if (c) CHECK(c->records.empty());
            }
        }
    }
    SECTION("bad magic") {
        std::string f = good;
        f[3] = '\x02';
        auto c = read_container(f);
        REQUIRE(!c);
        CHECK(c.error().code == errc::corrupt);
    }
    SECTION("bad sync marker after a block") {
        std::string f = good;
        f[f.size() - 1] ^= 1;
        auto c = read_container(f);
        REQUIRE(!c);
        CHECK(c.error().code == errc::corrupt);
        CHECK(c.error().message.find("sync") != std::string::npos);
    }
    SECTION("unknown codec") {
        writer_options o;
        auto w = container_writer::create(R"("int")", o);
        REQUIRE(w);
        std::string f = *w->finish();
        const auto at = f.find("null");
        REQUIRE(at != std::string::npos);
        f.replace(at, 4, "lzma");
        auto c = read_container(f);
        REQUIRE(!c);
        CHECK(c.error().code == errc::unsupported);
    }
    SECTION("huge lengths and counts") {
        // A header claiming a 2^62-byte key, then a block claiming 2^62 records or bytes.
        std::string header = "Obj\x01";
        header += unhex("02feffffffffffffff7f");
        auto c = read_container(header);
        REQUIRE(!c);
        CHECK(c.error().code == errc::too_large);

        auto w = container_writer::create(R"({"type":"array","items":"null"})");
        REQUIRE(w);
        const std::string head = *w->finish();
        const std::string sync = head.substr(head.size() - 16);
        // (count, size, data): 2^62 records in 1 byte; a 2^62-byte block.
        for (const char* block : {"feffffffffffffff7f0200", "02feffffffffffff7f00"}) {
            std::string f = head + unhex(block) + sync;
            auto r = read_container(f);
            INFO(block);
            CHECK(!r);
        }
        // An array of nulls: 2^30 items in 5 bytes would be 1 GiB of values.
        std::string f = head + unhex("020a") + unhex("8080808008") + sync;
        auto r = read_container(f);
        REQUIRE(!r);
        CHECK(r.error().code == errc::too_large);
    }
    SECTION("a deflate block that inflates beyond the limit") {
        writer_options o;
        o.codec = codec::deflate;
        auto w = container_writer::create(R"("string")", o);
        REQUIRE(w);
        REQUIRE(w->append(value(std::string(1 << 20, 'a'))));
        const std::string f = *w->finish();
        CHECK(f.size() < 10000);
        reader_options ro;
        ro.max_block_bytes = 1 << 16;
        auto c = read_container(f, ro);
        REQUIRE(!c);
        CHECK(c.error().code == errc::too_large);
        CHECK(read_container(f));
        // Many such blocks: each within the block limit, together beyond the total.
        auto many = container_writer::create(R"("string")", o);
        REQUIRE(many);
        for (int i = 0; i < 8; ++i) REQUIRE(many->append(value(std::string(1 << 20, 'a'))));
        const std::string big = *many->finish();
        CHECK(big.size() < 80000);
        reader_options total;
        total.max_total_bytes = 4 << 20;
        auto t = read_container(big, total);
        REQUIRE(!t);
        CHECK(t.error().code == errc::too_large);
        auto whole = read_container(big);
        REQUIRE(whole);
        CHECK(whole->records.size() == 8);
    }
    SECTION("garbage inside a deflate block") {
        std::string f = good_z;
        f[f.size() - 20] ^= 0x55;
        auto c = read_container(f);
        CHECK(!c);
    }
    SECTION("a block holding more than its count") {
        // The first block starts after the header's sync marker; claim 1 record, not 2.
        std::string f = good;
        const auto at = f.find("0123456789abcdef") + 16;
        REQUIRE(f[at] == '\x04');
        f[at] = '\x02';
        auto c = read_container(f);
        REQUIRE(!c);
        CHECK(c.error().code == errc::corrupt);
    }
}
