// FileMetaData from the bytes of a whole file, through the generic compact reader.
#include <skiff/parquet/footer.hpp>

#include <skiff/parquet/thrift_compact.hpp>

#include <cstring>

namespace skiff::parquet {

namespace {

using thrift::value;

parquet_error corrupt(const std::string& what) { return {errc::corrupt, "parquet footer: " + what}; }

template <typename T>
std::optional<T> opt_int(const value& s, std::int16_t id) {
    const value* v = s.field(id);
    if (!v) return std::nullopt;
    return static_cast<T>(v->i);
}
std::optional<std::string> opt_bin(const value& s, std::int16_t id) {
    const value* v = s.field(id);
    if (!v) return std::nullopt;
    return v->bin;
}

} // namespace

result<file_metadata, parquet_error> read_footer(std::string_view file) {
    if (file.size() < 12 || file.substr(0, 4) != "PAR1" || file.substr(file.size() - 4) != "PAR1")
        return failure{corrupt("no PAR1 magic")};
    std::uint32_t len = 0;
    std::memcpy(&len, file.data() + file.size() - 8, 4);
    if (len > file.size() - 12) return failure{corrupt("footer length beyond the file")};
    const std::size_t start = file.size() - 8 - len;
    std::span<const char> in(file.data() + start, len);
    std::size_t pos = 0;
    auto root = thrift::read_struct(in, pos);
    if (!root) return failure{std::move(root).error()};
    const value& fm = *root;

    file_metadata m;
    const value* version = fm.field(1);
    const value* schema = fm.field(2);
    const value* num_rows = fm.field(3);
    const value* groups = fm.field(4);
    if (!version || !schema || !num_rows || !groups) return failure{corrupt("a required FileMetaData field is missing")};
    m.version = static_cast<std::int32_t>(version->i);
    m.num_rows = num_rows->i;
    for (const auto& e : schema->elems) {
        schema_element_info s;
        s.name = opt_bin(e, 4).value_or("");
        s.type = opt_int<std::int32_t>(e, 1);
        s.type_length = opt_int<std::int32_t>(e, 2);
        s.repetition = opt_int<std::int32_t>(e, 3);
        s.num_children = opt_int<std::int32_t>(e, 5);
        s.converted_type = opt_int<std::int32_t>(e, 6);
        s.field_id = opt_int<std::int32_t>(e, 9);
        if (const value* lt = e.field(10); lt && !lt->ids.empty()) s.logical_type = lt->ids.front();
        m.schema.push_back(std::move(s));
    }
    for (const auto& g : groups->elems) {
        row_group_info rg;
        rg.total_byte_size = opt_int<std::int64_t>(g, 2).value_or(0);
        rg.num_rows = opt_int<std::int64_t>(g, 3).value_or(0);
        rg.file_offset = opt_int<std::int64_t>(g, 5);
        const value* cols = g.field(1);
        if (!cols) return failure{corrupt("a row group without columns")};
        for (const auto& c : cols->elems) {
            column_chunk_info ci;
            ci.file_offset = opt_int<std::int64_t>(c, 2).value_or(0);
            const value* md = c.field(3);
            if (!md) return failure{corrupt("a column chunk without metadata")};
            ci.type = opt_int<std::int32_t>(*md, 1).value_or(-1);
            if (const value* enc = md->field(2))
                for (const auto& x : enc->elems) ci.encodings.push_back(static_cast<std::int32_t>(x.i));
            if (const value* p = md->field(3))
                for (const auto& x : p->elems) ci.path.push_back(x.bin);
            ci.codec = opt_int<std::int32_t>(*md, 4).value_or(-1);
            ci.num_values = opt_int<std::int64_t>(*md, 5).value_or(0);
            ci.total_uncompressed_size = opt_int<std::int64_t>(*md, 6).value_or(0);
            ci.total_compressed_size = opt_int<std::int64_t>(*md, 7).value_or(0);
            ci.data_page_offset = opt_int<std::int64_t>(*md, 9).value_or(0);
            ci.dictionary_page_offset = opt_int<std::int64_t>(*md, 11);
            if (const value* st = md->field(12)) {
                ci.max_value = opt_bin(*st, 5);
                ci.min_value = opt_bin(*st, 6);
                ci.null_count = opt_int<std::int64_t>(*st, 3);
            }
            rg.columns.push_back(std::move(ci));
        }
        m.row_groups.push_back(std::move(rg));
    }
    if (const value* kv = fm.field(5))
        for (const auto& e : kv->elems) m.key_value_metadata.emplace_back(opt_bin(e, 1).value_or(""), opt_bin(e, 2).value_or(""));
    m.created_by = opt_bin(fm, 6).value_or("");
    if (const value* co = fm.field(7)) m.column_orders = co->elems.size();
    return m;
}

} // namespace skiff::parquet
