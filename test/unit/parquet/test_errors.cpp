// Bad schemas and bad columns are errors that name the column, never a crash or a bad file.
#include "sample.hpp"

#include <skiff/parquet/footer.hpp>
#include <skiff/parquet/shred.hpp>
#include <skiff/parquet/writer.hpp>

#include <catch2/catch.hpp>

using namespace skiff::parquet;

namespace {

errc schema_error(std::vector<node> f) {
    auto s = schema::make(std::move(f));
    REQUIRE_FALSE(s);
    return s.error().code;
}

struct fixture {
    schema s = sample::make_schema();
    file_writer w{s};
    std::vector<column_data> c = sample::shred(s, 0, 20);

    parquet_error fails() {
        const std::size_t before = w.bytes_written();
        auto r = w.write_row_group(c);
        REQUIRE_FALSE(r);
        CHECK(w.bytes_written() == before); // nothing written
        return r.error();
    }
};

} // namespace

TEST_CASE("errors: schemas Parquet cannot express", "[parquet][errors]") {
    CHECK(schema_error({}) == errc::invalid_schema);
    CHECK(schema_error({group("g", repetition::optional, 1, {})}) == errc::invalid_schema);
    CHECK(schema_error({primitive("", physical_type::int32, repetition::required, 1)}) == errc::invalid_schema);
    CHECK(schema_error({primitive("a", physical_type::int32, repetition::required, 1),
                        primitive("a", physical_type::int64, repetition::required, 2)}) == errc::invalid_schema);
    CHECK(schema_error({primitive("s", physical_type::int32, repetition::required, 1, logical_type::string)}) ==
          errc::invalid_schema);
    CHECK(schema_error({primitive("t", physical_type::int32, repetition::required, 1, logical_type::timestamp_micros_utc)}) ==
          errc::invalid_schema);
    CHECK(schema_error({primitive("f", physical_type::fixed_len_byte_array, repetition::required, 1)}) ==
          errc::invalid_schema);
    node bad_list = group("l", repetition::optional, 1, {primitive("x", physical_type::int32, repetition::optional, 2)});
    bad_list.logical = logical_type::list;
    CHECK(schema_error({bad_list}) == errc::invalid_schema);
    auto ok = schema::make({list("l", repetition::required, 1, primitive("x", physical_type::int32, repetition::optional, 2))});
    REQUIRE(ok);
    CHECK(ok->leaves()[0].max_def == 2);
    CHECK(ok->leaves()[0].max_rep == 1);
    CHECK(ok->leaves()[0].dotted() == "l.list.element");
}

TEST_CASE("errors: column count and shape", "[parquet][errors]") {
    fixture f;
    f.c.pop_back();
    auto e = f.fails();
    CHECK(e.code == errc::column_mismatch);
    CHECK(e.message.find("13 columns for 14 leaves") != std::string::npos);

    fixture g;
    g.c[1].i64.pop_back(); // offset is required: one value per row
    g.c[1].i64.push_back(1);
    g.c[1].i64.push_back(2);
    e = g.fails();
    CHECK(e.code == errc::column_mismatch);
    CHECK(e.message.find("offset") != std::string::npos);

    fixture h;
    h.c[3].bytes += "x"; // bytes past the last value
    CHECK(h.fails().code == errc::value_mismatch);

    fixture k;
    k.c[2].i32.push_back(1); // a value in another type's vector
    CHECK(k.fails().code == errc::value_mismatch);

    fixture m;
    m.c[0] = column_data(m.s.leaves()[3]); // levels of an optional column for a required one
    CHECK(m.fails().code == errc::column_mismatch);

    fixture n;
    n.c[13].bytes.push_back('z'); // fixed_len_byte_array(4) with a 5-byte value
    n.c[13].ends.back() += 1;
    auto e2 = n.fails();
    CHECK(e2.code == errc::value_mismatch);
    CHECK(e2.message.find("fixed") != std::string::npos);

    fixture b;
    b.c[10].bools[0] = 7;
    CHECK(b.fails().code == errc::value_mismatch);
}

TEST_CASE("errors: levels out of range", "[parquet][errors]") {
    fixture f;
    f.c[3].def_levels[1] = 2; // optional top-level: max 1
    auto e = f.fails();
    CHECK(e.code == errc::level_out_of_range);
    CHECK(e.message.find("key") != std::string::npos);

    fixture g;
    g.c[5].rep_levels[0] = 1; // a row cannot start by repeating
    CHECK(g.fails().code == errc::level_out_of_range);

    fixture h;
    h.c[6].rep_levels[3] = 2; // max repetition level 1
    CHECK(h.fails().code == errc::level_out_of_range);

    // An entry that repeats a list whose definition level says the list is missing.
    auto ls = schema::make({list("l", repetition::optional, 1, primitive("x", physical_type::int32, repetition::required, 2))});
    REQUIRE(ls);
    column_data x(ls->leaves()[0]);
    x.push_i32(1);
    x.push_null(0, 1);
    file_writer lw(*ls);
    auto le = lw.write_row_group(std::span(&x, 1));
    REQUIRE_FALSE(le);
    CHECK(le.error().code == errc::level_out_of_range);
    CHECK(le.error().message.find("repeats a list") != std::string::npos);
    x.def_levels[1] = 1; // an empty list cannot repeat either, but an entry with def 2 can
    CHECK(lw.write_row_group(std::span(&x, 1)).error().code == errc::level_out_of_range);
    x.def_levels[1] = 2;
    x.i32.push_back(5);
    CHECK(lw.write_row_group(std::span(&x, 1)));

    fixture v;
    v.c[4].def_levels[0] = v.c[4].def_levels[0] == 1 ? 0 : 1; // values no longer match the levels
    CHECK(v.fails().code == errc::value_mismatch);
}

TEST_CASE("errors: a default-constructed schema has no columns to write", "[parquet][errors]") {
    file_writer w{schema()};
    CHECK(w.write_row_group({}).error().code == errc::invalid_schema);
    CHECK(w.finish().error().code == errc::invalid_schema);
}

TEST_CASE("errors: rows must agree across columns", "[parquet][errors]") {
    fixture f;
    f.c[7].push_null(0);
    auto e = f.fails();
    CHECK(e.code == errc::column_mismatch);
    CHECK(e.message.find("21 rows") != std::string::npos);
}

TEST_CASE("errors: after finish; a good row group after a bad one still works", "[parquet][errors]") {
    fixture f;
    f.c[3].def_levels[0] = 9;
    (void)f.fails();
    auto good = sample::shred(f.s, 0, 20);
    REQUIRE(f.w.write_row_group(good));
    auto r = f.w.finish();
    REQUIRE(r);
    auto m = read_footer(r->bytes);
    REQUIRE(m);
    CHECK(m->num_rows == 20);
    auto again = f.w.write_row_group(good);
    REQUIRE_FALSE(again);
    CHECK(again.error().code == errc::invalid_state);
    auto twice = f.w.finish();
    REQUIRE_FALSE(twice);
    CHECK(twice.error().code == errc::invalid_state);
}

TEST_CASE("errors: the shredder refuses what the schema does not allow", "[parquet][errors]") {
    auto s = schema::make({list("h", repetition::required, 1,
                                group("element", repetition::required, 2,
                                      {primitive("key", physical_type::byte_array, repetition::required, 3),
                                       primitive("value", physical_type::byte_array, repetition::required, 4)}))});
    REQUIRE(s);
    auto sh = kv_list_shredder::make(s->leaves()[0], s->leaves()[1]);
    REQUIRE(sh);
    column_data k(s->leaves()[0]), v(s->leaves()[1]);
    CHECK(sh->null_list(k, v).error().code == errc::value_mismatch);
    const kv_entry null_value{"a", std::nullopt};
    CHECK(sh->add(std::span(&null_value, 1), k, v).error().code == errc::value_mismatch);
    CHECK(k.def_levels.empty());
    const kv_entry e[2] = {{"a", "1"}, {"b", "2"}};
    REQUIRE(sh->add(e, k, v));
    REQUIRE(sh->add({}, k, v));
    CHECK(k.def_levels == std::vector<std::uint8_t>{1, 1, 0});
    CHECK(k.rep_levels == std::vector<std::uint8_t>{0, 1, 0});
    CHECK(v.def_levels == std::vector<std::uint8_t>{1, 1, 0});

    auto flat = schema::make({primitive("a", physical_type::byte_array, repetition::optional, 1),
                              primitive("b", physical_type::byte_array, repetition::optional, 2)});
    REQUIRE(flat);
    CHECK(kv_list_shredder::make(flat->leaves()[0], flat->leaves()[1]).error().code == errc::invalid_schema);
}

TEST_CASE("errors: footers that do not decode", "[parquet][errors]") {
    CHECK(read_footer("").error().code == errc::corrupt);
    CHECK(read_footer("PAR1xxxxPAR1").error().code == errc::corrupt);
    std::string f = sample::write(skiff::parquet::writer_options()).bytes;
    std::string cut = f;
    cut[cut.size() - 5] = '\x7f'; // footer length beyond the file
    CHECK(read_footer(cut).error().code == errc::corrupt);
    std::string garbled = f;
    const std::size_t len = static_cast<unsigned char>(f[f.size() - 8]) | (static_cast<unsigned char>(f[f.size() - 7]) << 8);
    garbled[f.size() - 8 - len] = '\x0d'; // first field header with type 13
    CHECK(read_footer(garbled).error().code == errc::corrupt);
}
