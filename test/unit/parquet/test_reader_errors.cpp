// Hostile files: truncations, flipped bytes, page headers that lie, limits. Every case is an
// error with a sentence (or, for a flipped value byte, a successful read), never a crash; the
// sanitizer build runs these too.
#include "sample.hpp"

#include <skiff/parquet/reader.hpp>
#include <skiff/parquet/thrift_compact.hpp>
#include <skiff/parquet/writer.hpp>

#include <skiff/core/varint.hpp>

#include <catch2/catch.hpp>

#include <span>

using namespace skiff::parquet;
using namespace skiff;

namespace {

// Writes rows [0, n) of the sample in one row group.
std::string small_file(codec c, bool dictionary, std::int64_t n = 40) {
    writer_options o;
    o.compression = c;
    o.dictionary = dictionary;
    o.page_size = 128;
    const auto s = sample::make_schema();
    file_writer w(s, o);
    auto cols = sample::shred(s, 0, n);
    if (!w.write_row_group(cols)) FAIL("write");
    auto f = w.finish();
    if (!f) FAIL("finish");
    return std::move(f->bytes);
}

// Opens and reads every row group: the first error, or nullopt when all of it decoded.
std::optional<parquet_error> read_all(std::string_view file, reader_options o = reader_options()) {
    auto r = file_reader::open(file, o);
    if (!r) return std::move(r).error();
    std::vector<column_data> cols;
    for (std::size_t g = 0; g < r->row_groups().size(); ++g) {
        auto rr = r->read_row_group(g, cols);
        if (!rr) return std::move(rr).error();
    }
    return std::nullopt;
}

// Positions of the top-level i32 fields 1..3 of the page header at `at` (type, uncompressed
// size, compressed size) and of field 1 of its nested page header (num_values): the start and
// length of each varint.
struct header_fields {
    std::size_t pos[4] = {};
    std::size_t len[4] = {};
};
header_fields locate(const std::string& f, std::size_t at) {
    header_fields h;
    std::size_t p = at;
    const std::span<const char> in(f.data(), f.size());
    REQUIRE(f.size() > at);
    for (int k = 0; k < 4; ++k) {
        // The field header byte (short form in skiff's writer); num_values also has the nested
        // struct's header before it.
        p += k == 3 ? 2 : 1;
        h.pos[k] = p;
        std::uint64_t v = 0;
        REQUIRE(varint::read_unsigned64(in, p, v) == varint::read_status::ok);
        h.len[k] = p - h.pos[k];
    }
    return h;
}
// Replaces the varint at (pos, len) by zigzag(v), which must take as many bytes.
void patch(std::string& f, std::size_t pos, std::size_t len, std::int32_t v) {
    std::string enc;
    thrift::append_varint(enc, varint::zigzag_encode(v));
    REQUIRE(enc.size() == len);
    f.replace(pos, len, enc);
}
std::int32_t value_at(const std::string& f, std::size_t pos) {
    std::uint64_t z = 0;
    std::size_t p = pos;
    REQUIRE(varint::read_unsigned64(std::span<const char>(f.data(), f.size()), p, z) == varint::read_status::ok);
    return static_cast<std::int32_t>(varint::zigzag_decode(z));
}

// The largest value whose varint takes as many bytes as v's.
std::int32_t largest_like(std::int32_t v) {
    auto size = [](std::int32_t x) {
        std::string a;
        thrift::append_varint(a, varint::zigzag_encode(x));
        return a.size();
    };
    const std::size_t n = size(v);
    while (size(v + 1) == n) ++v;
    return v;
}

} // namespace

TEST_CASE("reader errors: every truncation of a file", "[parquet][reader][errors]") {
    for (const auto c : {codec::zstd, codec::uncompressed}) {
        const std::string f = small_file(c, true, 12);
        REQUIRE_FALSE(read_all(f));
        for (std::size_t n = 0; n < f.size(); ++n) {
            auto e = read_all(std::string_view(f).substr(0, n));
            REQUIRE(e);
            CHECK(e->code == errc::corrupt);
            CHECK_FALSE(e->message.empty());
        }
    }
}

TEST_CASE("reader errors: every flipped byte is an error or a clean read", "[parquet][reader][errors]") {
    for (const auto c : {codec::zstd, codec::uncompressed}) {
        for (const bool dict : {true, false}) {
            const std::string f = small_file(c, dict, 12);
            std::size_t errors = 0;
            for (std::size_t i = 0; i < f.size(); ++i) {
                for (const unsigned char x : {0xffu, 0x01u, 0x80u}) {
                    std::string g = f;
                    g[i] = static_cast<char>(g[i] ^ x);
                    auto e = read_all(g);
                    if (e) {
                        ++errors;
                        CHECK_FALSE(e->message.empty());
                    }
                }
            }
            // Most bytes are headers, levels, lengths or compressed: a flip there must show.
            CHECK(errors > f.size());
        }
    }
}

TEST_CASE("reader errors: page headers that lie", "[parquet][reader][errors]") {
    const std::string zf = small_file(codec::zstd, true);
    auto meta = read_footer(zf);
    REQUIRE(meta);
    // Column "s" (leaf 7) is dictionary-encoded, "offset" (leaf 1) plain.
    const auto& s_chunk = meta->row_groups[0].columns[7];
    REQUIRE(s_chunk.dictionary_page_offset);
    const auto data_at = static_cast<std::size_t>(meta->row_groups[0].columns[1].data_page_offset);

    SECTION("a decompressed size larger than the frame") {
        std::string g = zf;
        const auto h = locate(g, data_at);
        patch(g, h.pos[1], h.len[1], value_at(g, h.pos[1]) + 1);
        auto e = read_all(g);
        REQUIRE(e);
        CHECK(e->code == errc::corrupt);
        CHECK(e->message.find("shorter than its declared size") != std::string::npos);
        CHECK(e->message.find("offset") != std::string::npos);
    }
    SECTION("a decompressed size smaller than the frame") {
        std::string g = zf;
        const auto h = locate(g, data_at);
        patch(g, h.pos[1], h.len[1], value_at(g, h.pos[1]) - 1);
        auto e = read_all(g);
        REQUIRE(e);
        CHECK((e->code == errc::corrupt || e->code == errc::compression_failed));
    }
    SECTION("a compressed size beyond the chunk") {
        std::string g = zf;
        const auto h = locate(g, data_at);
        patch(g, h.pos[2], h.len[2], largest_like(value_at(g, h.pos[2])));
        auto e = read_all(g);
        REQUIRE(e);
        CHECK(e->code == errc::corrupt);
        CHECK(e->message.find("beyond the chunk") != std::string::npos);
    }
    SECTION("negative sizes and value counts") {
        for (int k = 1; k < 4; ++k) {
            std::string g = zf;
            const auto h = locate(g, data_at);
            if (h.len[k] != 1) continue;
            patch(g, h.pos[k], 1, -1);
            auto e = read_all(g);
            REQUIRE(e);
            CHECK(e->code == errc::corrupt);
        }
    }
    SECTION("more values in a page than the chunk has") {
        std::string g = zf;
        const auto h = locate(g, data_at);
        // The first page of several: only a count beyond the whole chunk is sure to be caught here.
        patch(g, h.pos[3], h.len[3], largest_like(value_at(g, h.pos[3])));
        auto e = read_all(g);
        REQUIRE(e);
        CHECK(e->code == errc::corrupt);
        CHECK(e->message.find("more values than the chunk") != std::string::npos);
    }
    SECTION("dictionary indices beyond a dictionary that shrank") {
        std::string g = small_file(codec::uncompressed, true);
        auto m = read_footer(g);
        REQUIRE(m);
        const auto at = static_cast<std::size_t>(*m->row_groups[0].columns[7].dictionary_page_offset);
        const auto h = locate(g, at);
        REQUIRE(value_at(g, h.pos[0]) == 2); // a dictionary page
        REQUIRE(value_at(g, h.pos[3]) > 1);
        patch(g, h.pos[3], h.len[3], 1);
        auto e = read_all(g);
        REQUIRE(e);
        CHECK(e->code == errc::corrupt);
        CHECK(e->message.find("parquet column s:") != std::string::npos);
        CHECK(e->message.find("above the maximum") != std::string::npos);
    }
}

TEST_CASE("reader errors: limits bound what a file can make the reader allocate", "[parquet][reader][errors]") {
    const std::string f = small_file(codec::zstd, true, 400);
    REQUIRE_FALSE(read_all(f));
    reader_options a;
    a.max_page_bytes = 64;
    auto e1 = read_all(f, a);
    REQUIRE(e1);
    CHECK(e1->message.find("max_page_bytes") != std::string::npos);
    reader_options b;
    b.max_page_values = 10;
    auto e2 = read_all(f, b);
    REQUIRE(e2);
    CHECK(e2->message.find("max_page_values") != std::string::npos);
    reader_options d;
    d.max_chunk_values = 300; // pages of fewer values each, 400 in the chunk
    auto e4 = read_all(f, d);
    REQUIRE(e4);
    CHECK(e4->message.find("max_chunk_values") != std::string::npos);
    reader_options c;
    c.max_chunk_bytes = 100;
    auto e3 = read_all(f, c);
    REQUIRE(e3);
    CHECK(e3->message.find("max_chunk_bytes") != std::string::npos);
}

TEST_CASE("reader errors: not a Parquet file", "[parquet][reader][errors]") {
    auto a = file_reader::open("");
    REQUIRE_FALSE(a);
    auto b = file_reader::open("PAR1PAR1PAR1");
    REQUIRE_FALSE(b);
    CHECK(b.error().code == errc::corrupt);
}
