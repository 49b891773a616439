// The file reader: the sample table (every column kind, nulls, lists, dictionary and PLAIN
// chunks, zstd and uncompressed, several row groups and pages) read back equal to what was
// shredded, and written again byte for byte; small list shapes; the hybrid decoder.
#include "reader_support.hpp"
#include "sample.hpp"

#include <skiff/parquet/decoding.hpp>
#include <skiff/parquet/encoding.hpp>
#include <skiff/parquet/reader.hpp>
#include <skiff/parquet/thrift_compact.hpp>
#include <skiff/parquet/writer.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

using namespace skiff::parquet;

TEST_CASE("reader: the sample file reads back as it was shredded, and rewrites to the same bytes", "[parquet][reader]") {
    struct variant {
        codec compression;
        bool dictionary;
        std::size_t page_size;
    };
    const std::vector<variant> variants{{codec::zstd, true, 1 << 20},        {codec::zstd, false, 1 << 20},
                                        {codec::uncompressed, true, 1 << 20}, {codec::uncompressed, false, 1 << 20},
                                        {codec::zstd, true, 512},             {codec::uncompressed, false, 300}};
    for (const auto& v : variants) {
        writer_options o;
        o.compression = v.compression;
        o.dictionary = v.dictionary;
        o.page_size = v.page_size;
        o.key_value_metadata = {{"iceberg.schema", "{\"x\":1}"}, {"k2", ""}};
        const file_result f = sample::write(o);
        INFO("codec " << static_cast<int>(v.compression) << " dictionary " << v.dictionary << " page " << v.page_size);

        auto r = file_reader::open(f.bytes);
        REQUIRE(r);
        const schema expected = sample::make_schema();
        CHECK(reader_support::same_schema(r->schema(), expected));
        CHECK(r->num_rows() == f.row_count);
        CHECK(r->key_value_metadata() == o.key_value_metadata);
        REQUIRE(r->row_groups().size() == sample::group_sizes().size());

        // The variant really exercises what it names: dictionary pages and several pages.
        const auto& chunks = r->metadata().row_groups[1].columns;
        const bool any_dict = std::any_of(chunks.begin(), chunks.end(), [](const auto& c) { return c.dictionary_page_offset.has_value(); });
        CHECK(any_dict == v.dictionary);

        file_writer again(r->schema(), o);
        std::vector<column_data> got;
        std::int64_t first = 0;
        for (std::size_t g = 0; g < sample::group_sizes().size(); ++g) {
            const std::int64_t n = sample::group_sizes()[g];
            CHECK(r->row_groups()[g].num_rows == n);
            CHECK(r->row_groups()[g].total_byte_size > 0);
            auto rr = r->read_row_group(g, got);
            if (!rr) FAIL(rr.error().message);
            const auto want = sample::shred(expected, first, n);
            REQUIRE(got.size() == want.size());
            for (std::size_t c = 0; c < want.size(); ++c) {
                INFO("group " << g << " column " << expected.leaves()[c].dotted());
                CHECK(reader_support::same_column(got[c], want[c]));
            }
            auto w = again.write_row_group(got);
            if (!w) FAIL(w.error().message);
            first += n;
        }
        auto f2 = again.finish();
        REQUIRE(f2);
        CHECK(f2->bytes == f.bytes);
    }
}

TEST_CASE("reader: lists that are null, empty, hold nulls or several elements; required columns", "[parquet][reader]") {
    std::vector<node> f;
    f.push_back(primitive("id", physical_type::int64, repetition::required, 1));
    f.push_back(list("xs", repetition::optional, 2, primitive("e", physical_type::int32, repetition::optional, 3)));
    f.push_back(list("ys", repetition::required, 4, primitive("e", physical_type::byte_array, repetition::required, 5,
                                                              logical_type::string)));
    f.push_back(primitive("flag", physical_type::boolean, repetition::required, 6));
    auto s = schema::make(std::move(f));
    REQUIRE(s);
    const auto& lv = s->leaves();
    REQUIRE(lv.size() == 4);
    REQUIRE(lv[1].max_def == 3);
    REQUIRE(lv[2].max_def == 1);

    for (const auto c : {codec::zstd, codec::uncompressed}) {
        std::vector<column_data> cols;
        for (const auto& l : lv) cols.emplace_back(l);
        for (int row = 0; row < 1000; ++row) {
            cols[0].push_i64(row * 7);
            cols[3].push_bool(row % 3 == 0);
            switch (row % 5) {
            case 0: cols[1].push_null(0); break; // null list
            case 1: cols[1].push_null(1); break; // empty list
            case 2: cols[1].push_i32(row); break;
            case 3:
                cols[1].push_null(2, 0); // [null, row, -row]
                cols[1].push_i32(row, 1);
                cols[1].push_i32(-row, 1);
                break;
            default:
                cols[1].push_i32(1, 0);
                cols[1].push_null(2, 1);
                break;
            }
            if (row % 4 == 0) {
                cols[2].push_null(0); // empty (the list itself is required)
            } else {
                for (int k = 0; k < row % 4; ++k) cols[2].push_bytes("v" + std::to_string(row % 9), k == 0 ? 0 : 1);
            }
        }
        writer_options o;
        o.compression = c;
        o.page_size = 256;
        file_writer w(*s, o);
        auto wr = w.write_row_group(cols);
        REQUIRE(wr);
        auto wr2 = w.write_row_group(cols);
        REQUIRE(wr2);
        auto file = w.finish();
        REQUIRE(file);

        auto r = file_reader::open(file->bytes);
        REQUIRE(r);
        CHECK(reader_support::same_schema(r->schema(), *s));
        CHECK(r->num_rows() == 2000);
        std::vector<column_data> got;
        for (std::size_t g = 0; g < 2; ++g) {
            auto rr = r->read_row_group(g, got);
            if (!rr) FAIL(rr.error().message);
            for (std::size_t k = 0; k < cols.size(); ++k) {
                INFO("column " << lv[k].dotted());
                CHECK(reader_support::same_column(got[k], cols[k]));
            }
        }
        auto bad = r->read_row_group(2, got);
        REQUIRE_FALSE(bad);
        CHECK(bad.error().code == errc::invalid_state);
    }
}

TEST_CASE("reader: a file without row groups", "[parquet][reader]") {
    file_writer w(sample::make_schema());
    auto f = w.finish();
    REQUIRE(f);
    auto r = file_reader::open(f->bytes);
    REQUIRE(r);
    CHECK(r->num_rows() == 0);
    CHECK(r->row_groups().empty());
    CHECK(reader_support::same_schema(r->schema(), sample::make_schema()));
}

TEST_CASE("rle decode: inverse of the encoder at every bit width", "[parquet][rle]") {
    std::mt19937 rng(7);
    for (int bw = 1; bw <= 32; ++bw) {
        const std::uint32_t max = bw == 32 ? 0xffffffffu : (1u << bw) - 1;
        std::vector<std::uint32_t> v;
        for (int i = 0; i < 1000; ++i) {
            // Runs and noise, so both run kinds appear.
            const std::uint32_t x = static_cast<std::uint32_t>(rng()) & max;
            const int reps = (i % 7 == 0) ? 20 : 1;
            for (int k = 0; k < reps; ++k) v.push_back(x);
        }
        std::string enc;
        rle_hybrid_append(enc, std::span<const std::uint32_t>(v), bw);
        enc += "trailing";
        std::vector<std::uint32_t> out{42};
        auto r = rle_hybrid_decode(enc, bw, v.size(), max, out);
        REQUIRE(r);
        CHECK(*r == enc.size() - 8);
        REQUIRE(out.size() == v.size() + 1);
        CHECK(std::equal(v.begin(), v.end(), out.begin() + 1));
    }
}

TEST_CASE("rle decode: values above the maximum, short and lying runs", "[parquet][rle]") {
    std::vector<std::uint8_t> lv{0, 1, 2, 3, 2, 1, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3};
    std::string enc;
    rle_hybrid_append(enc, std::span<const std::uint8_t>(lv), 2);
    std::vector<std::uint8_t> out;
    auto high = rle_hybrid_decode(enc, 2, lv.size(), 2, out);
    REQUIRE_FALSE(high);
    CHECK(high.error().code == errc::level_out_of_range);
    CHECK(out.empty());

    auto good = rle_hybrid_decode(enc, 2, lv.size(), 3, out);
    REQUIRE(good);
    CHECK(out == lv);

    for (std::size_t cut = 0; cut < enc.size(); ++cut) {
        out.clear();
        auto r = rle_hybrid_decode(std::string_view(enc).substr(0, cut), 2, lv.size(), 3, out);
        CHECK_FALSE(r);
        CHECK(out.empty());
    }
    // A bit-packed run claiming 2^40 groups in 3 bytes; an RLE run of 2^40 values is fine when
    // only a few are asked for.
    std::string lie;
    thrift::append_varint(lie, (std::uint64_t{1} << 41) | 1);
    lie += "\x01\x02\x03";
    auto r1 = rle_hybrid_decode(lie, 3, 5, 7, out);
    REQUIRE_FALSE(r1);
    CHECK(r1.error().code == errc::corrupt);
    std::string big;
    thrift::append_varint(big, std::uint64_t{1} << 41);
    big.push_back(1);
    out.clear();
    auto r2 = rle_hybrid_decode(big, 1, 5, 1, out);
    REQUIRE(r2);
    CHECK(out == std::vector<std::uint8_t>(5, 1));
    // A zero-length run would loop forever.
    out.clear();
    auto r3 = rle_hybrid_decode(std::string_view("\x00\x01", 2), 1, 5, 1, out);
    CHECK_FALSE(r3);
}
