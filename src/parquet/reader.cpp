// The file reader: the schema rebuilt from FileMetaData.schema (a depth-first list of
// SchemaElements, groups followed by their num_children children), then row groups chunk by
// chunk (read_chunk.cpp).
#include <skiff/parquet/reader.hpp>

#include "read_chunk.hpp"

#include <utility>

namespace skiff::parquet {

namespace {

// Deeper than any schema skiff writes; bounds the recursion on hostile footers.
constexpr int max_schema_depth = 128;

parquet_error corrupt(const std::string& what) { return {errc::corrupt, "parquet reader: " + what}; }

std::optional<physical_type> to_physical(std::int32_t t) {
    switch (t) {
    case 0: return physical_type::boolean;
    case 1: return physical_type::int32;
    case 2: return physical_type::int64;
    case 5: return physical_type::double_;
    case 6: return physical_type::byte_array;
    case 7: return physical_type::fixed_len_byte_array;
    default: return std::nullopt;
    }
}

// LogicalType union member ids and ConvertedType ids of parquet.thrift. A logical type skiff
// does not model reads as none: the physical values are still what a rewrite needs.
logical_type leaf_logical(const schema_element_info& e, physical_type t) {
    const auto lt = e.logical_type;
    const auto ct = e.converted_type;
    if (t == physical_type::byte_array && (lt == 1 || (!lt && ct == 0))) return logical_type::string;
    if (t == physical_type::int32 && (lt == 6 || (!lt && ct == 6))) return logical_type::date;
    // The converted TIMESTAMP_MICROS stands for isAdjustedToUTC = true (LogicalTypes.md), which
    // the footer summary does not otherwise keep.
    if (t == physical_type::int64 && ct == 10 && (!lt || lt == 8)) return logical_type::timestamp_micros_utc;
    return logical_type::none;
}

struct schema_builder {
    const std::vector<schema_element_info>& elems;
    std::size_t next = 1;

    result<node, parquet_error> build(int depth) {
        if (depth > max_schema_depth) return failure{corrupt("schema nested too deeply")};
        if (next >= elems.size()) return failure{corrupt("the schema list ends inside a group")};
        const auto& e = elems[next++];
        node n;
        n.name = e.name;
        const std::int32_t rep = e.repetition.value_or(0);
        if (rep < 0 || rep > 2) return failure{corrupt("schema element " + e.name + " has repetition " + std::to_string(rep))};
        n.rep = static_cast<repetition>(rep);
        n.field_id = e.field_id;
        if (e.num_children) {
            const std::int32_t k = *e.num_children;
            if (k < 0 || static_cast<std::size_t>(k) > elems.size() - next)
                return failure{corrupt("schema element " + e.name + " claims more children than the schema has")};
            n.is_group = true;
            n.children.reserve(static_cast<std::size_t>(k));
            for (std::int32_t i = 0; i < k; ++i) {
                auto c = build(depth + 1);
                if (!c) return c;
                n.children.push_back(std::move(*c));
            }
            const bool list_annotated = e.logical_type == 3 || (!e.logical_type && e.converted_type == 3);
            const auto& c = n.children;
            // Older 2-level lists read as plain groups: still columns, just not skiff's LIST.
            if (list_annotated && n.rep != repetition::repeated && c.size() == 1 && c[0].is_group &&
                c[0].rep == repetition::repeated && c[0].children.size() == 1)
                n.logical = logical_type::list;
            return n;
        }
        if (!e.type) return failure{corrupt("schema element " + e.name + " has neither a type nor children")};
        const auto t = to_physical(*e.type);
        if (!t)
            return failure{parquet_error(errc::invalid_schema, "parquet reader: column " + e.name +
                                                                   " has unsupported physical type " + std::to_string(*e.type))};
        n.type = *t;
        if (n.type == physical_type::fixed_len_byte_array) n.type_length = e.type_length.value_or(0);
        n.logical = leaf_logical(e, n.type);
        return n;
    }
};

} // namespace

struct file_reader::impl {
    std::string_view file;
    reader_options o;
    file_metadata meta;
    parquet::schema schema;
    std::vector<row_group_summary> groups;
    detail::read_scratch scratch;
};

file_reader::file_reader(std::unique_ptr<impl> p) noexcept : _impl(std::move(p)) {}
file_reader::file_reader(file_reader&&) noexcept = default;
file_reader& file_reader::operator=(file_reader&&) noexcept = default;
file_reader::~file_reader() = default;

const parquet::schema& file_reader::schema() const noexcept { return _impl->schema; }
std::int64_t file_reader::num_rows() const noexcept { return _impl->meta.num_rows; }
const std::vector<row_group_summary>& file_reader::row_groups() const noexcept { return _impl->groups; }
const std::vector<std::pair<std::string, std::string>>& file_reader::key_value_metadata() const noexcept {
    return _impl->meta.key_value_metadata;
}
const file_metadata& file_reader::metadata() const noexcept { return _impl->meta; }

result<file_reader, parquet_error> file_reader::open(std::string_view file_bytes, reader_options o) {
    auto m = read_footer(file_bytes);
    if (!m) return failure{std::move(m).error()};
    auto im = std::make_unique<impl>();
    im->file = file_bytes;
    im->o = std::move(o);
    im->meta = std::move(*m);
    const auto& elems = im->meta.schema;
    if (elems.empty()) return failure{corrupt("an empty schema")};
    if (!elems[0].num_children || *elems[0].num_children < 0 ||
        static_cast<std::size_t>(*elems[0].num_children) > elems.size() - 1)
        return failure{corrupt("the schema root's child count does not fit the schema")};
    schema_builder b{elems};
    std::vector<node> fields;
    for (std::int32_t i = 0; i < *elems[0].num_children; ++i) {
        auto n = b.build(1);
        if (!n) return failure{std::move(n).error()};
        fields.push_back(std::move(*n));
    }
    if (b.next != elems.size()) return failure{corrupt("schema elements after the root's last child")};
    auto s = parquet::schema::make(std::move(fields), elems[0].name);
    if (!s) return failure{std::move(s).error()};
    im->schema = std::move(*s);

    const auto& leaves = im->schema.leaves();
    if (im->meta.num_rows < 0) return failure{corrupt("a negative row count")};
    for (std::size_t g = 0; g < im->meta.row_groups.size(); ++g) {
        const auto& rg = im->meta.row_groups[g];
        const std::string where = "row group " + std::to_string(g) + ": ";
        if (rg.num_rows < 0) return failure{corrupt(where + "a negative row count")};
        if (rg.columns.size() != leaves.size())
            return failure{corrupt(where + std::to_string(rg.columns.size()) + " column chunks for " +
                                   std::to_string(leaves.size()) + " leaves")};
        for (std::size_t i = 0; i < leaves.size(); ++i) {
            const auto& c = rg.columns[i];
            if (c.type != static_cast<std::int32_t>(leaves[i].type) || c.path != leaves[i].path)
                return failure{corrupt(where + "the chunk of column " + leaves[i].dotted() +
                                       " has another type or path than the schema")};
        }
        im->groups.push_back({rg.num_rows, rg.total_byte_size});
    }
    return file_reader(std::move(im));
}

result<void, parquet_error> file_reader::read_row_group(std::size_t i, std::vector<column_data>& out) {
    auto& im = *_impl;
    if (i >= im.groups.size())
        return failure{parquet_error(errc::invalid_state, "parquet reader: row group " + std::to_string(i) + " of " +
                                                              std::to_string(im.groups.size()))};
    const auto& leaves = im.schema.leaves();
    out.resize(leaves.size());
    const auto& rg = im.meta.row_groups[i];
    for (std::size_t c = 0; c < leaves.size(); ++c) {
        auto r = detail::read_chunk(im.file, leaves[c], rg.columns[c], rg.num_rows, im.o, im.scratch, out[c]);
        if (!r) return r;
    }
    return ok();
}

} // namespace skiff::parquet
