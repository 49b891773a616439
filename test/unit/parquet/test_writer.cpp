// Whole files: the sample table written, then read back through the footer reader and by
// walking and decoding pages; statistics checked against values computed from the row formula.
#include "sample.hpp"

#include <skiff/parquet/footer.hpp>
#include <skiff/parquet/thrift_compact.hpp>
#include <skiff/parquet/writer.hpp>

#include <catch2/catch.hpp>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace skiff::parquet;

namespace {

template <typename T>
T le(const std::string& s) {
    REQUIRE(s.size() == sizeof(T));
    T v{};
    std::memcpy(&v, s.data(), sizeof(T));
    return v;
}

struct page {
    std::int32_t type = -1;
    std::int32_t uncompressed = 0;
    std::int32_t compressed = 0;
    std::int32_t num_values = 0;
    std::int32_t encoding = -1;
    std::size_t body = 0; // offset of the page body in the file
};

page read_page(const std::string& file, std::size_t at) {
    std::size_t pos = at;
    auto h = thrift::read_struct(std::span<const char>(file.data(), file.size()), pos);
    REQUIRE(h);
    page p;
    p.type = static_cast<std::int32_t>(h->field(1)->i);
    p.uncompressed = static_cast<std::int32_t>(h->field(2)->i);
    p.compressed = static_cast<std::int32_t>(h->field(3)->i);
    const auto* sub = h->field(p.type == 0 ? 5 : 7);
    REQUIRE(sub);
    p.num_values = static_cast<std::int32_t>(sub->field(1)->i);
    p.encoding = static_cast<std::int32_t>(sub->field(2)->i);
    p.body = pos;
    return p;
}

std::int64_t total_rows() {
    std::int64_t n = 0;
    for (auto g : sample::group_sizes()) n += g;
    return n;
}

} // namespace

TEST_CASE("writer: the sample file's footer reads back", "[parquet][writer]") {
    writer_options o;
    o.page_size = 2048;
    o.key_value_metadata = {{"iceberg.schema", "{\"x\":1}"}, {"k2", ""}};
    const file_result f = sample::write(o);
    const std::string& b = f.bytes;
    REQUIRE(b.substr(0, 4) == "PAR1");
    REQUIRE(b.substr(b.size() - 4) == "PAR1");

    auto m = read_footer(b);
    REQUIRE(m);
    CHECK(m->version == 2);
    CHECK(m->num_rows == total_rows());
    CHECK(f.row_count == total_rows());
    CHECK(m->created_by.rfind("skiff version ", 0) == 0);
    CHECK(m->key_value_metadata == o.key_value_metadata);
    CHECK(m->column_orders == 14);

    // Schema: root + 13 top-level fields + headers' list, element, key, value.
    REQUIRE(m->schema.size() == 1 + 13 + 4);
    CHECK(m->schema[0].name == "kafka_record");
    CHECK(m->schema[0].num_children == 13);
    CHECK_FALSE(m->schema[0].field_id);
    const std::vector<std::pair<std::string, std::optional<std::int32_t>>> ids{
        {"partition", 1}, {"offset", 2}, {"timestamp", 3}, {"key", 4}, {"value", 5}, {"headers", 6},
        {"list", std::nullopt}, {"element", 7}, {"key", 8}, {"value", 9}, {"s", 10}, {"l", 11}, {"d", 12},
        {"b", 13}, {"t", 14}, {"day", 15}, {"fixed", 16}};
    for (std::size_t i = 0; i < ids.size(); ++i) {
        CHECK(m->schema[i + 1].name == ids[i].first);
        CHECK(m->schema[i + 1].field_id == ids[i].second);
    }
    const auto& ts = m->schema[3];
    CHECK(ts.type == 2);
    CHECK(ts.repetition == 0);
    CHECK(ts.converted_type == 10);
    CHECK(ts.logical_type == 8);
    const auto& headers = m->schema[6];
    CHECK(headers.num_children == 1);
    CHECK(headers.converted_type == 3);
    CHECK(headers.repetition == 1);
    CHECK(m->schema[7].repetition == 2);
    CHECK(m->schema[9].converted_type == 0); // UTF8
    CHECK(m->schema[17].type == 7);
    CHECK(m->schema[17].type_length == 4);

    REQUIRE(m->row_groups.size() == sample::group_sizes().size());
    REQUIRE(f.split_offsets.size() == m->row_groups.size());
    std::int64_t first = 0;
    for (std::size_t g = 0; g < m->row_groups.size(); ++g) {
        const auto& rg = m->row_groups[g];
        const auto n = sample::group_sizes()[g];
        CHECK(rg.num_rows == n);
        CHECK(rg.file_offset == f.split_offsets[g]);
        REQUIRE(rg.columns.size() == 14);
        CHECK(rg.columns[0].file_offset == f.split_offsets[g]);
        for (const auto& c : rg.columns) CHECK(c.codec == 6);
        CHECK(rg.columns[5].path == std::vector<std::string>{"headers", "list", "element", "key"});

        // Statistics against the formula.
        std::int64_t key_nulls = 0, l_nulls = 0, list_entries = 0, list_missing = 0;
        std::int64_t lmin = std::numeric_limits<std::int64_t>::max(), lmax = std::numeric_limits<std::int64_t>::min();
        double dmin = 1e300, dmax = -1e300;
        for (std::int64_t i = first; i < first + n; ++i) {
            const auto r = sample::make_row(i);
            key_nulls += !r.key;
            l_nulls += !r.l;
            if (r.l) lmin = std::min(lmin, *r.l), lmax = std::max(lmax, *r.l);
            if (r.d) dmin = std::min(dmin, *r.d), dmax = std::max(dmax, *r.d);
            if (!r.headers || r.headers->empty()) {
                ++list_entries;
                ++list_missing;
            } else {
                list_entries += static_cast<std::int64_t>(r.headers->size());
            }
        }
        CHECK(rg.columns[1].num_values == n);
        CHECK(le<std::int64_t>(*rg.columns[1].min_value) == 1000 + first);
        CHECK(le<std::int64_t>(*rg.columns[1].max_value) == 1000 + first + n - 1);
        CHECK(rg.columns[1].null_count == 0);
        CHECK(rg.columns[3].null_count == key_nulls);
        CHECK(rg.columns[5].num_values == list_entries);
        CHECK(rg.columns[5].null_count == list_missing);
        CHECK(rg.columns[8].null_count == l_nulls);
        CHECK(le<std::int64_t>(*rg.columns[8].min_value) == lmin);
        CHECK(le<std::int64_t>(*rg.columns[8].max_value) == lmax);
        CHECK(le<double>(*rg.columns[9].min_value) == dmin);
        CHECK(le<double>(*rg.columns[9].max_value) == dmax);
        first += n;
    }
    // Strings compare as unsigned bytes: "€ uro" (e2 ..) sorts above "déjà vu" and "gamma".
    CHECK(*m->row_groups[0].columns[7].min_value == "alpha");
    CHECK(*m->row_groups[0].columns[7].max_value == "\xe2\x82\xac uro");
    CHECK(*m->row_groups[0].columns[4].min_value == std::string("v0\0\xff", 4));
    CHECK(*m->row_groups[0].columns[4].max_value == "v99c\xff");
    // Few distinct values get a dictionary, unique ones do not.
    CHECK(m->row_groups[1].columns[0].dictionary_page_offset);  // partition
    CHECK(m->row_groups[1].columns[7].dictionary_page_offset);  // s
    CHECK_FALSE(m->row_groups[1].columns[1].dictionary_page_offset); // offset
    CHECK_FALSE(m->row_groups[1].columns[4].dictionary_page_offset); // value
    CHECK(std::count(m->row_groups[1].columns[0].encodings.begin(), m->row_groups[1].columns[0].encodings.end(), 8) == 1);

    // Metrics for Iceberg.
    REQUIRE(f.columns.size() == 14);
    CHECK(f.columns[1].field_id == 2);
    CHECK(f.columns[1].value_count == total_rows());
    CHECK(le<std::int64_t>(*f.columns[1].lower_bound) == 1000);
    CHECK(le<std::int64_t>(*f.columns[1].upper_bound) == 1000 + total_rows() - 1);
    CHECK(f.columns[5].path == "headers.list.element.key");
    CHECK(f.columns[5].field_id == 8);
    std::int64_t disk = 0, key_nulls = 0;
    for (const auto& rg : m->row_groups) disk += rg.columns[3].total_compressed_size, key_nulls += *rg.columns[3].null_count;
    CHECK(f.columns[3].on_disk_size == disk);
    CHECK(f.columns[3].null_count == key_nulls);
    CHECK(f.columns[3].value_count == total_rows());
    CHECK(*f.columns[7].lower_bound == "alpha");
}

TEST_CASE("writer: pages walk end to end and decode", "[parquet][writer]") {
    writer_options o;
    o.page_size = 2048;
    const file_result f = sample::write(o);
    auto m = read_footer(f.bytes);
    REQUIRE(m);
    // The 'value' column of row group 1 spans several pages; their counts add up to the chunk's.
    const auto& c = m->row_groups[1].columns[4];
    std::size_t at = static_cast<std::size_t>(c.data_page_offset);
    std::int64_t values = 0, pages = 0, compressed = 0;
    while (values < c.num_values) {
        const page p = read_page(f.bytes, at);
        CHECK(p.type == 0);
        CHECK(p.encoding == 0);
        compressed += static_cast<std::int64_t>(p.body - at) + p.compressed;
        values += p.num_values;
        ++pages;
        at = p.body + static_cast<std::size_t>(p.compressed);
    }
    CHECK(values == c.num_values);
    CHECK(pages > 3);
    CHECK(compressed == c.total_compressed_size);

    // The first page of 'offset' (required INT64, PLAIN, no levels) decompresses to the values.
    const auto& off = m->row_groups[0].columns[1];
    const page p = read_page(f.bytes, static_cast<std::size_t>(off.data_page_offset));
    std::string body(static_cast<std::size_t>(p.uncompressed), '\0');
    REQUIRE(ZSTD_decompress(body.data(), body.size(), f.bytes.data() + p.body, static_cast<std::size_t>(p.compressed)) ==
            body.size());
    REQUIRE(p.num_values * 8 == p.uncompressed);
    for (std::int32_t k = 0; k < p.num_values; ++k) {
        std::int64_t v = 0;
        std::memcpy(&v, body.data() + 8 * k, 8);
        CHECK(v == 1000 + k);
    }
}

TEST_CASE("writer: small pages split dictionary indices and list levels at row boundaries", "[parquet][writer]") {
    writer_options o;
    o.page_size = 256;
    const file_result f = sample::write(o);
    auto m = read_footer(f.bytes);
    REQUIRE(m);
    for (std::size_t col : {std::size_t{5}, std::size_t{7}}) { // headers...key (a list), s (strings)
        const auto& c = m->row_groups[1].columns[col];
        REQUIRE(c.dictionary_page_offset);
        const page d = read_page(f.bytes, static_cast<std::size_t>(*c.dictionary_page_offset));
        CHECK(d.type == 2);
        CHECK(static_cast<std::int64_t>(d.body) + d.compressed == c.data_page_offset);
        std::size_t at = static_cast<std::size_t>(c.data_page_offset);
        std::int64_t values = 0, pages = 0;
        while (values < c.num_values) {
            const page p = read_page(f.bytes, at);
            CHECK(p.type == 0);
            CHECK(p.encoding == 8);
            if (col == 5) {
                // A page starts a row: its first repetition level is 0. Levels come first: a
                // 4-byte length, then a run header; bit width 1, so the value is the low bit of
                // the next byte (RLE and bit-packed alike).
                std::string body(static_cast<std::size_t>(p.uncompressed), '\0');
                REQUIRE(ZSTD_decompress(body.data(), body.size(), f.bytes.data() + p.body,
                                        static_cast<std::size_t>(p.compressed)) == body.size());
                std::size_t h = 4;
                while (static_cast<unsigned char>(body[h]) & 0x80) ++h; // the varint run header
                CHECK((static_cast<unsigned char>(body[h + 1]) & 1) == 0);
            }
            values += p.num_values;
            ++pages;
            at = p.body + static_cast<std::size_t>(p.compressed);
        }
        CHECK(values == c.num_values);
        CHECK(pages > 1);
        CHECK(static_cast<std::int64_t>(at) == *c.dictionary_page_offset + c.total_compressed_size);
    }
}

TEST_CASE("writer: dictionary page and indices, uncompressed", "[parquet][writer]") {
    writer_options o;
    o.compression = codec::uncompressed;
    const file_result f = sample::write(o);
    auto m = read_footer(f.bytes);
    REQUIRE(m);
    const auto& c = m->row_groups[0].columns[0]; // partition: 0, 1, 2, 0, 1, 2, ...
    CHECK(c.codec == 0);
    REQUIRE(c.dictionary_page_offset);
    const page d = read_page(f.bytes, static_cast<std::size_t>(*c.dictionary_page_offset));
    CHECK(d.type == 2);
    CHECK(d.num_values == 3);
    CHECK(d.encoding == 0);
    CHECK(f.bytes.substr(d.body, 12) == std::string("\0\0\0\0\1\0\0\0\2\0\0\0", 12)); // first-seen order
    const page p = read_page(f.bytes, static_cast<std::size_t>(c.data_page_offset));
    CHECK(p.type == 0);
    CHECK(p.encoding == 8);
    CHECK(p.num_values == 300);
    // Bit width 2, then one bit-packed run of 38 groups (varint 77 = 0x4d): 0,1,2,0 -> 0b00100100.
    CHECK(static_cast<int>(f.bytes[p.body]) == 2);
    CHECK(static_cast<unsigned char>(f.bytes[p.body + 1]) == 0x4d);
    CHECK(static_cast<unsigned char>(f.bytes[p.body + 2]) == 0x24);

    o.dictionary = false;
    auto plain = read_footer(sample::write(o).bytes);
    REQUIRE(plain);
    for (const auto& rg : plain->row_groups)
        for (const auto& col : rg.columns) CHECK_FALSE(col.dictionary_page_offset);
}

TEST_CASE("writer: double statistics skip NaN and order zeros; all-null columns have no bounds", "[parquet][writer]") {
    std::vector<node> f;
    f.push_back(primitive("d", physical_type::double_, repetition::optional, 1));
    f.push_back(primitive("n", physical_type::int32, repetition::optional, 2));
    f.push_back(primitive("big", physical_type::byte_array, repetition::optional, 3));
    f.push_back(primitive("u", physical_type::byte_array, repetition::required, 4));
    auto s = schema::make(std::move(f));
    REQUIRE(s);
    std::vector<column_data> c;
    for (const auto& l : s->leaves()) c.emplace_back(l);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (double v : {nan, 0.0, 3.5, -0.0, nan}) c[0].push_double(v);
    c[0].push_null(0);
    for (int i = 0; i < 6; ++i) c[1].push_null(0);
    for (int i = 0; i < 6; ++i) c[2].push_bytes(std::string(5000, static_cast<char>('a' + i)));
    for (const char* u : {"\x7f", "\x80", "a", "\x80", "\x01\xff", "\x01"}) c[3].push_bytes(u);
    writer_options o;
    file_writer w(*s, o);
    REQUIRE(w.write_row_group(c));
    auto r = w.finish();
    REQUIRE(r);
    auto m = read_footer(r->bytes);
    REQUIRE(m);
    const auto& d = m->row_groups[0].columns[0];
    CHECK(std::signbit(le<double>(*d.min_value)));
    CHECK(le<double>(*d.min_value) == 0.0);
    CHECK(le<double>(*d.max_value) == 3.5);
    CHECK(d.null_count == 1);
    CHECK(r->columns[0].nan_count == 2);
    CHECK(r->columns[0].value_count == 6);
    CHECK_FALSE(m->row_groups[0].columns[1].min_value);
    CHECK_FALSE(r->columns[1].lower_bound);
    CHECK(r->columns[1].null_count == 6);
    // 5000-byte values stay out of the footer, but Iceberg's bounds keep them whole.
    CHECK_FALSE(m->row_groups[0].columns[2].min_value);
    CHECK(r->columns[2].lower_bound == std::string(5000, 'a'));
    CHECK(r->columns[2].upper_bound == std::string(5000, 'f'));
    // Unsigned byte order: 0x80 is above 0x7f and 'a' (signed order would make it the minimum).
    CHECK(*m->row_groups[0].columns[3].min_value == "\x01");
    CHECK(*m->row_groups[0].columns[3].max_value == "\x80");
}

TEST_CASE("writer: an empty file and an empty row group", "[parquet][writer]") {
    auto s = sample::make_schema();
    file_writer w(s);
    std::vector<column_data> c;
    for (const auto& l : s.leaves()) c.emplace_back(l);
    REQUIRE(w.write_row_group(c)); // nothing in it: no row group
    auto r = w.finish();
    REQUIRE(r);
    auto m = read_footer(r->bytes);
    REQUIRE(m);
    CHECK(m->num_rows == 0);
    CHECK(m->row_groups.empty());
    CHECK(r->split_offsets.empty());
}
