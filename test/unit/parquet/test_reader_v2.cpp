// Data pages v2 (skiff's writer makes v1 only, and DuckDB's v2 files use DELTA encodings), in
// a file built by hand here: levels outside the compressed part, no length prefixes.
#include "reader_support.hpp"

#include <skiff/parquet/encoding.hpp>
#include <skiff/parquet/reader.hpp>
#include <skiff/parquet/thrift_compact.hpp>

#include <catch2/catch.hpp>
#include <zstd.h>

#include <cstring>

using namespace skiff::parquet;

namespace {

struct chunk_pos {
    std::int64_t start = 0;
    std::int64_t size = 0;
    std::int64_t values = 0;
};

// Appends one v2 page per call: levels, then PLAIN int32 values, compressed with zstd when asked.
void v2_page(std::string& out, const column_data& c, std::size_t e0, std::size_t e1, std::size_t v0, std::size_t v1,
             bool zstd, bool is_compressed_flag) {
    std::string rep, def;
    if (c.max_rep > 0)
        rle_hybrid_append(rep, std::span<const std::uint8_t>(c.rep_levels.data() + e0, e1 - e0), bit_width(c.max_rep));
    if (c.max_def > 0)
        rle_hybrid_append(def, std::span<const std::uint8_t>(c.def_levels.data() + e0, e1 - e0), bit_width(c.max_def));
    std::string values(reinterpret_cast<const char*>(c.i32.data() + v0), (v1 - v0) * 4);
    std::string body = values;
    if (zstd && is_compressed_flag) {
        body.resize(ZSTD_compressBound(values.size()));
        body.resize(ZSTD_compress(body.data(), body.size(), values.data(), values.size(), 1));
    }
    std::size_t rows = 0;
    for (std::size_t e = e0; e < e1; ++e) rows += c.max_rep == 0 || c.rep_levels[e] == 0;
    std::string h;
    thrift::compact_writer w(h);
    w.field_i32(1, 3); // DATA_PAGE_V2
    w.field_i32(2, static_cast<std::int32_t>(rep.size() + def.size() + values.size()));
    w.field_i32(3, static_cast<std::int32_t>(rep.size() + def.size() + body.size()));
    w.begin_struct(8);
    w.field_i32(1, static_cast<std::int32_t>(e1 - e0));
    w.field_i32(2, static_cast<std::int32_t>((e1 - e0) - (v1 - v0)));
    w.field_i32(3, static_cast<std::int32_t>(rows));
    w.field_i32(4, 0);
    w.field_i32(5, static_cast<std::int32_t>(def.size()));
    w.field_i32(6, static_cast<std::int32_t>(rep.size()));
    if (!is_compressed_flag) w.field_bool(7, false);
    w.end_struct();
    w.end_struct();
    out += h;
    out += rep;
    out += def;
    out += body;
}

// Two pages, split at the first row boundary after half the entries.
chunk_pos v2_chunk(std::string& out, const column_data& c, bool zstd, bool is_compressed_flag) {
    chunk_pos p;
    p.start = static_cast<std::int64_t>(out.size());
    const std::size_t n = c.def_levels.size();
    std::size_t half = n / 2;
    while (c.max_rep > 0 && half < n && c.rep_levels[half] != 0) ++half;
    std::size_t v_half = 0;
    for (std::size_t e = 0; e < half; ++e) v_half += c.def_levels[e] == c.max_def;
    v2_page(out, c, 0, half, 0, v_half, zstd, is_compressed_flag);
    v2_page(out, c, half, n, v_half, c.i32.size(), zstd, is_compressed_flag);
    p.size = static_cast<std::int64_t>(out.size()) - p.start;
    p.values = static_cast<std::int64_t>(n);
    return p;
}

void schema_element(thrift::compact_writer& w, const char* name, int rep, int type, int children, int converted, int logical) {
    w.begin_element();
    if (type >= 0) w.field_i32(1, type);
    if (rep >= 0) w.field_i32(3, rep);
    w.field_binary(4, name);
    if (children >= 0) w.field_i32(5, children);
    if (converted >= 0) w.field_i32(6, converted);
    if (logical >= 0) {
        w.begin_struct(10);
        w.begin_struct(static_cast<std::int16_t>(logical));
        w.end_struct();
        w.end_struct();
    }
    w.end_struct();
}

void chunk_meta(thrift::compact_writer& w, const chunk_pos& p, std::vector<std::string> path, int codec) {
    w.begin_element();
    w.field_i64(2, p.start);
    w.begin_struct(3);
    w.field_i32(1, 1); // INT32
    w.begin_list(2, thrift::ctype::i32, 2);
    w.elem_i32(0);
    w.elem_i32(3);
    w.begin_list(3, thrift::ctype::binary, path.size());
    for (const auto& s : path) w.elem_binary(s);
    w.field_i32(4, codec);
    w.field_i64(5, p.values);
    w.field_i64(6, p.size);
    w.field_i64(7, p.size);
    w.field_i64(9, p.start);
    w.end_struct();
    w.end_struct();
}

} // namespace

TEST_CASE("reader: data pages v2, compressed and not", "[parquet][reader]") {
    std::vector<node> f;
    f.push_back(primitive("n", physical_type::int32, repetition::optional, std::nullopt));
    f.push_back(list("xs", repetition::optional, std::nullopt, primitive("e", physical_type::int32, repetition::optional, std::nullopt)));
    auto s = schema::make(std::move(f));
    REQUIRE(s);
    std::vector<column_data> cols;
    for (const auto& l : s->leaves()) cols.emplace_back(l);
    const int rows = 300;
    for (int i = 0; i < rows; ++i) {
        i % 4 == 0 ? cols[0].push_null(0) : cols[0].push_i32(i * 3);
        if (i % 6 == 0) {
            cols[1].push_null(0);
        } else if (i % 6 == 1) {
            cols[1].push_null(1);
        } else {
            cols[1].push_i32(i, 0);
            cols[1].push_null(2, 1);
            cols[1].push_i32(-i, 1);
        }
    }

    struct variant {
        bool zstd;
        bool flag;
    };
    for (const auto v : {variant{true, true}, variant{true, false}, variant{false, false}, variant{false, true}}) {
        INFO("zstd " << v.zstd << " is_compressed " << v.flag);
        std::string file = "PAR1";
        const auto c0 = v2_chunk(file, cols[0], v.zstd, v.flag);
        const auto c1 = v2_chunk(file, cols[1], v.zstd, v.flag);
        std::string footer;
        thrift::compact_writer w(footer);
        w.field_i32(1, 2);
        w.begin_list(2, thrift::ctype::struct_, 5);
        schema_element(w, "schema", -1, -1, 2, -1, -1);
        schema_element(w, "n", 1, 1, -1, -1, -1);
        schema_element(w, "xs", 1, -1, 1, 3, 3);
        schema_element(w, "list", 2, -1, 1, -1, -1);
        schema_element(w, "element", 1, 1, -1, -1, -1);
        w.field_i64(3, rows);
        w.begin_list(4, thrift::ctype::struct_, 1);
        w.begin_element();
        w.begin_list(1, thrift::ctype::struct_, 2);
        chunk_meta(w, c0, {"n"}, v.zstd ? 6 : 0);
        chunk_meta(w, c1, {"xs", "list", "element"}, v.zstd ? 6 : 0);
        w.field_i64(2, c0.size + c1.size);
        w.field_i64(3, rows);
        w.end_struct();
        w.end_struct();
        file += footer;
        const auto len = static_cast<std::uint32_t>(footer.size());
        char b[4];
        std::memcpy(b, &len, 4);
        file.append(b, 4);
        file += "PAR1";

        auto r = file_reader::open(file);
        if (!r) FAIL(r.error().message);
        CHECK(reader_support::same_schema(r->schema(), *s));
        std::vector<column_data> got;
        auto rr = r->read_row_group(0, got);
        if (!rr) FAIL(rr.error().message);
        CHECK(reader_support::same_column(got[0], cols[0]));
        CHECK(reader_support::same_column(got[1], cols[1]));
    }
}
