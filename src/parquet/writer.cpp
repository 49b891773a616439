// The file around the column chunks: magic, row groups, and the FileMetaData footer
// (parquet-format README "File format"; parquet.thrift for every field id used below).
#include <skiff/parquet/writer.hpp>

#include "chunk.hpp"

#include <skiff/parquet/thrift_compact.hpp>

#include <cstring>

namespace skiff::parquet {

namespace {

struct row_group_meta {
    std::int64_t num_rows = 0;
    std::int64_t start = 0;
    std::vector<detail::chunk_meta> chunks;
};

// ConvertedType ids of parquet.thrift, for readers that predate LogicalType.
std::optional<std::int32_t> converted(logical_type lt) {
    switch (lt) {
    case logical_type::string: return 0;               // UTF8
    case logical_type::list: return 3;                 // LIST
    case logical_type::date: return 6;                 // DATE
    case logical_type::timestamp_micros_utc: return 10; // TIMESTAMP_MICROS
    case logical_type::none: break;
    }
    return std::nullopt;
}

void write_logical(thrift::compact_writer& w, logical_type lt) {
    if (lt == logical_type::none) return;
    w.begin_struct(10); // SchemaElement.logicalType, a union
    switch (lt) {
    case logical_type::string:
        w.begin_struct(1);
        w.end_struct();
        break;
    case logical_type::list:
        w.begin_struct(3);
        w.end_struct();
        break;
    case logical_type::date:
        w.begin_struct(6);
        w.end_struct();
        break;
    case logical_type::timestamp_micros_utc:
        w.begin_struct(8); // TimestampType
        w.field_bool(1, true);
        w.begin_struct(2); // TimeUnit
        w.begin_struct(2); // MICROS
        w.end_struct();
        w.end_struct();
        w.end_struct();
        break;
    case logical_type::none: break;
    }
    w.end_struct();
}

std::size_t count_nodes(const node& n) {
    std::size_t k = 1;
    for (const auto& c : n.children) k += count_nodes(c);
    return k;
}

void write_schema_node(thrift::compact_writer& w, const node& n) {
    w.begin_element();
    if (!n.is_group) {
        w.field_i32(1, static_cast<std::int32_t>(n.type));
        if (n.type == physical_type::fixed_len_byte_array) w.field_i32(2, n.type_length);
    }
    w.field_i32(3, static_cast<std::int32_t>(n.rep));
    w.field_binary(4, n.name);
    if (n.is_group) w.field_i32(5, static_cast<std::int32_t>(n.children.size()));
    if (auto ct = converted(n.logical)) w.field_i32(6, *ct);
    if (n.field_id) w.field_i32(9, *n.field_id);
    write_logical(w, n.logical);
    w.end_struct();
    for (const auto& c : n.children) write_schema_node(w, c);
}

void write_statistics(thrift::compact_writer& w, const leaf& l, const detail::chunk_stats& st, const writer_options& o) {
    w.begin_struct(12); // ColumnMetaData.statistics
    const bool bytes = l.type == physical_type::byte_array || l.type == physical_type::fixed_len_byte_array;
    const bool bounds = st.min && st.max &&
                        (!bytes || (st.min->size() <= o.max_statistics_bytes && st.max->size() <= o.max_statistics_bytes));
    // The legacy min/max (fields 1, 2) sort byte arrays signed in old writers; only numbers
    // and booleans, whose order never changed, repeat them there.
    if (bounds && !bytes) {
        w.field_binary(1, *st.max);
        w.field_binary(2, *st.min);
    }
    w.field_i64(3, st.null_count);
    if (bounds) {
        w.field_binary(5, *st.max);
        w.field_binary(6, *st.min);
    }
    if (l.type == physical_type::double_) w.field_i64(9, st.nan_count);
    w.end_struct();
}

void write_column_chunk(thrift::compact_writer& w, const leaf& l, const detail::chunk_meta& m, const writer_options& o) {
    w.begin_element();
    w.field_i64(2, m.start); // file_offset: where the chunk starts
    w.begin_struct(3);       // ColumnMetaData
    w.field_i32(1, static_cast<std::int32_t>(l.type));
    std::int32_t enc[3];
    std::size_t ne = 0;
    enc[ne++] = detail::enc_plain; // the dictionary page, or the values
    if (m.has_levels || m.dictionary) enc[ne++] = detail::enc_rle;
    if (m.dictionary) enc[ne++] = detail::enc_rle_dictionary;
    w.begin_list(2, thrift::ctype::i32, ne);
    for (std::size_t i = 0; i < ne; ++i) w.elem_i32(enc[i]);
    w.begin_list(3, thrift::ctype::binary, l.path.size());
    for (const auto& p : l.path) w.elem_binary(p);
    w.field_i32(4, static_cast<std::int32_t>(o.compression));
    w.field_i64(5, m.num_values);
    w.field_i64(6, m.total_uncompressed);
    w.field_i64(7, m.total_compressed);
    w.field_i64(9, m.data_page_offset);
    if (m.dictionary_page_offset) w.field_i64(11, *m.dictionary_page_offset);
    write_statistics(w, l, m.stats, o);
    w.end_struct();
    w.end_struct();
}

} // namespace

struct file_writer::impl {
    schema s;
    writer_options o;
    std::string out;
    std::vector<row_group_meta> groups;
    std::vector<column_metrics> metrics;
    std::int64_t rows = 0;
    bool finished = false;
    detail::scratch scratch;
};

file_writer::file_writer(schema s, writer_options o) : _impl(std::make_unique<impl>()) {
    _impl->s = std::move(s);
    _impl->o = std::move(o);
    _impl->out.reserve(1 << 20);
    _impl->out = "PAR1";
    for (const auto& l : _impl->s.leaves()) {
        column_metrics m;
        m.field_id = l.field_id;
        m.path = l.dotted();
        _impl->metrics.push_back(std::move(m));
    }
}

file_writer::~file_writer() = default;
file_writer::file_writer(file_writer&&) noexcept = default;
file_writer& file_writer::operator=(file_writer&&) noexcept = default;

std::size_t file_writer::bytes_written() const noexcept { return _impl ? _impl->out.size() : 0; }
std::int64_t file_writer::rows_written() const noexcept { return _impl ? _impl->rows : 0; }

result<void, parquet_error> file_writer::write_row_group(std::span<const column_data> columns) {
    if (!_impl || _impl->finished)
        return failure{parquet_error(errc::invalid_state, "parquet writer: write_row_group after finish")};
    auto& im = *_impl;
    const auto& leaves = im.s.leaves();
    if (leaves.empty()) return failure{parquet_error(errc::invalid_schema, "parquet writer: a schema without columns")};
    if (columns.size() != leaves.size())
        return failure{parquet_error(errc::column_mismatch, "parquet writer: " + std::to_string(columns.size()) +
                                                                " columns for " + std::to_string(leaves.size()) + " leaves")};
    std::int64_t rows = -1;
    for (std::size_t i = 0; i < leaves.size(); ++i) {
        auto r = detail::validate(leaves[i], columns[i]);
        if (!r) return failure{std::move(r).error()};
        if (rows >= 0 && *r != rows)
            return failure{parquet_error(errc::column_mismatch, "parquet column " + leaves[i].dotted() + ": " +
                                                                    std::to_string(*r) + " rows, the first column has " +
                                                                    std::to_string(rows))};
        rows = *r;
    }
    if (rows == 0) return ok(); // an empty row group says nothing

    row_group_meta g;
    g.num_rows = rows;
    g.start = static_cast<std::int64_t>(im.out.size());
    g.chunks.reserve(leaves.size());
    for (std::size_t i = 0; i < leaves.size(); ++i) {
        auto m = detail::write_chunk(leaves[i], columns[i], im.o, im.scratch, im.out);
        if (!m) {
            im.out.resize(static_cast<std::size_t>(g.start)); // the file stays as it was
            return failure{std::move(m).error()};
        }
        g.chunks.push_back(std::move(*m));
    }
    for (std::size_t i = 0; i < leaves.size(); ++i) {
        const auto& c = g.chunks[i];
        auto& mt = im.metrics[i];
        mt.on_disk_size += c.total_compressed;
        mt.value_count += c.num_values;
        mt.null_count += c.stats.null_count;
        mt.nan_count += c.stats.nan_count;
        if (c.stats.min && (!mt.lower_bound || detail::compare_plain(leaves[i].type, *c.stats.min, *mt.lower_bound) < 0))
            mt.lower_bound = c.stats.min;
        if (c.stats.max && (!mt.upper_bound || detail::compare_plain(leaves[i].type, *c.stats.max, *mt.upper_bound) > 0))
            mt.upper_bound = c.stats.max;
    }
    im.rows += rows;
    im.groups.push_back(std::move(g));
    return ok();
}

result<file_result, parquet_error> file_writer::finish() {
    if (!_impl || _impl->finished) return failure{parquet_error(errc::invalid_state, "parquet writer: finish twice")};
    auto& im = *_impl;
    if (im.s.leaves().empty()) return failure{parquet_error(errc::invalid_schema, "parquet writer: a schema without columns")};
    im.finished = true;
    const auto& leaves = im.s.leaves();

    std::string footer;
    footer.reserve(1024 + im.groups.size() * leaves.size() * 128);
    thrift::compact_writer w(footer);
    w.field_i32(1, 2); // version: LogicalType annotations are a format 2 feature
    std::size_t nodes = 1;
    for (const auto& f : im.s.fields()) nodes += count_nodes(f);
    w.begin_list(2, thrift::ctype::struct_, nodes);
    w.begin_element(); // the root
    w.field_binary(4, im.s.root_name());
    w.field_i32(5, static_cast<std::int32_t>(im.s.fields().size()));
    w.end_struct();
    for (const auto& f : im.s.fields()) write_schema_node(w, f);
    w.field_i64(3, im.rows);
    w.begin_list(4, thrift::ctype::struct_, im.groups.size());
    for (std::size_t gi = 0; gi < im.groups.size(); ++gi) {
        const auto& g = im.groups[gi];
        w.begin_element();
        w.begin_list(1, thrift::ctype::struct_, g.chunks.size());
        std::int64_t total_uncompressed = 0, total_compressed = 0;
        for (std::size_t i = 0; i < g.chunks.size(); ++i) {
            write_column_chunk(w, leaves[i], g.chunks[i], im.o);
            total_uncompressed += g.chunks[i].total_uncompressed;
            total_compressed += g.chunks[i].total_compressed;
        }
        w.field_i64(2, total_uncompressed);
        w.field_i64(3, g.num_rows);
        w.field_i64(5, g.start);
        w.field_i64(6, total_compressed);
        w.field_i16(7, static_cast<std::int16_t>(gi));
        w.end_struct();
    }
    if (!im.o.key_value_metadata.empty()) {
        w.begin_list(5, thrift::ctype::struct_, im.o.key_value_metadata.size());
        for (const auto& [k, v] : im.o.key_value_metadata) {
            w.begin_element();
            w.field_binary(1, k);
            w.field_binary(2, v);
            w.end_struct();
        }
    }
    w.field_binary(6, im.o.created_by);
    // TypeDefinedOrder for every leaf: without it readers must ignore min_value / max_value.
    w.begin_list(7, thrift::ctype::struct_, leaves.size());
    for (std::size_t i = 0; i < leaves.size(); ++i) {
        w.begin_element();
        w.begin_struct(1);
        w.end_struct();
        w.end_struct();
    }
    w.end_struct();

    file_result r;
    r.split_offsets.reserve(im.groups.size());
    for (const auto& g : im.groups) r.split_offsets.push_back(g.start);
    im.out += footer;
    const auto len = static_cast<std::uint32_t>(footer.size());
    char b[4];
    std::memcpy(b, &len, 4); // little-endian (static_assert in chunk.cpp)
    im.out.append(b, 4);
    im.out += "PAR1";
    r.bytes = std::move(im.out);
    r.row_count = im.rows;
    r.columns = std::move(im.metrics);
    return r;
}

} // namespace skiff::parquet
