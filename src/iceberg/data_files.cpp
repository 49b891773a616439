// Records to Parquet data files (data_files.hpp).
#include "data_files.hpp"

#include <skiff/parquet/shred.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace skiff::iceberg {

namespace {

using json = nlohmann::json;
namespace pq = parquet;

// Iceberg lets writers truncate bounds. Bounds of keys and values would otherwise put whole
// records (up to megabytes) into every manifest: byte strings longer than this keep a lower
// bound cut to a prefix (still a lower bound) and no upper bound (unknown is always correct).
constexpr std::size_t max_bound_bytes = 16;

iceberg_error from_parquet(const pq::parquet_error& e) { return iceberg_error(errc::invalid_argument, "parquet: " + e.message); }

result<pq::node, iceberg_error> column_of(const json& f) {
    const int id = f.value("id", 0);
    const std::string name = f.value("name", "");
    const auto rep = f.value("required", false) ? pq::repetition::required : pq::repetition::optional;
    const auto& type = f["type"];
    if (id == field_ids::headers) {
        pq::node element = pq::group("element", pq::repetition::required, field_ids::header_element,
                                     {pq::primitive("key", pq::physical_type::byte_array, pq::repetition::required,
                                                    field_ids::header_key, pq::logical_type::string),
                                      pq::primitive("value", pq::physical_type::byte_array, pq::repetition::optional,
                                                    field_ids::header_value)});
        return pq::list(name, rep, id, std::move(element));
    }
    if (!type.is_string()) return iceberg_error(errc::invalid_metadata, fmt::format("column '{}' has a type skiff does not write: {}", name, type.dump()));
    const std::string t = type.get<std::string>();
    if (t == "int") return pq::primitive(name, pq::physical_type::int32, rep, id);
    if (t == "long") return pq::primitive(name, pq::physical_type::int64, rep, id);
    if (t == "double") return pq::primitive(name, pq::physical_type::double_, rep, id);
    if (t == "boolean") return pq::primitive(name, pq::physical_type::boolean, rep, id);
    if (t == "string") return pq::primitive(name, pq::physical_type::byte_array, rep, id, pq::logical_type::string);
    if (t == "binary") return pq::primitive(name, pq::physical_type::byte_array, rep, id);
    if (t == "timestamptz") return pq::primitive(name, pq::physical_type::int64, rep, id, pq::logical_type::timestamp_micros_utc);
    return iceberg_error(errc::invalid_metadata, fmt::format("column '{}' has a type skiff does not write: {}", name, t));
}

avro::bytes to_bytes(std::string_view s) { return avro::bytes(s.begin(), s.end()); }

// Cuts a UTF-8 or binary lower bound to at most max_bound_bytes without splitting a code point
// (for binary columns a cut inside a would-be code point is harmless: it is still a prefix).
std::string_view cut_lower(std::string_view s) {
    if (s.size() <= max_bound_bytes) return s;
    std::size_t n = max_bound_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n);
}

} // namespace

data_file describe_file(const pq::schema& schema, const pq::file_result& fin, std::vector<avro::value> partition) {
    data_file e;
    e.record_count = fin.row_count;
    e.file_size_in_bytes = fin.file_size();
    e.partition = std::move(partition);
    const auto& leaves = schema.leaves();
    for (std::size_t k = 0; k < fin.columns.size() && k < leaves.size(); ++k) {
        const auto& m = fin.columns[k];
        if (!m.field_id) continue;
        const std::int32_t id = *m.field_id;
        const bool bytes = leaves[k].type == pq::physical_type::byte_array;
        e.column_sizes.emplace_back(id, m.on_disk_size);
        e.value_counts.emplace_back(id, m.value_count);
        e.null_value_counts.emplace_back(id, m.null_count);
        if (leaves[k].type == pq::physical_type::double_) e.nan_value_counts.emplace_back(id, m.nan_count);
        // Bounds of fields inside the headers list are not kept, as Iceberg's own writers do
        // not keep them for repeated fields.
        if (leaves[k].max_rep > 0) continue;
        if (m.lower_bound) {
            const std::string_view lo = bytes ? cut_lower(*m.lower_bound) : std::string_view(*m.lower_bound);
            e.lower_bounds.emplace_back(id, to_bytes(lo));
        }
        if (m.upper_bound && (!bytes || m.upper_bound->size() <= max_bound_bytes)) e.upper_bounds.emplace_back(id, to_bytes(*m.upper_bound));
    }
    e.split_offsets = fin.split_offsets;
    return e;
}

result<pq::schema, iceberg_error> parquet_schema_of(const json& iceberg_schema) {
    const auto it = iceberg_schema.find("fields");
    if (it == iceberg_schema.end() || !it->is_array()) return iceberg_error(errc::invalid_metadata, "the schema has no fields");
    std::vector<pq::node> nodes;
    for (const auto& f : *it) {
        auto n = column_of(f);
        if (!n) return n.error();
        nodes.push_back(std::move(*n));
    }
    auto s = pq::schema::make(std::move(nodes), "table");
    if (!s) return from_parquet(s.error());
    return std::move(*s);
}

struct data_file_builder::impl {
    struct open_file {
        explicit open_file(pq::file_writer w) : writer(std::move(w)) {}
        pq::file_writer writer;
        std::vector<pq::column_data> cols;
        std::size_t group_bytes = 0;
        std::int64_t group_rows = 0;
    };

    pq::schema schema;
    partitioning part = partitioning::day;
    partition_spec spec;
    data_file_options opts;
    pq::writer_options wopts;
    pq::kv_list_shredder headers;
    std::vector<projection> projections;
    std::unique_ptr<projector> proj;
    std::vector<std::size_t> proj_leaf;  // leaf index of projection i
    std::vector<std::size_t> extra_leaf; // leaves of columns past the fixed ones, not projected now
    std::map<std::int32_t, open_file> files;
    std::vector<projected_value> pv;
    std::vector<pq::kv_entry> kv;
    std::size_t pending = 0;
    std::uint64_t dead = 0;

    open_file& file_for(std::int32_t value) {
        auto it = files.find(value);
        if (it == files.end()) {
            it = files.emplace(value, open_file(pq::file_writer(schema, wopts))).first;
            for (const auto& l : schema.leaves()) it->second.cols.emplace_back(l);
        }
        return it->second;
    }

    result<void, iceberg_error> close_group(open_file& f) {
        if (f.group_rows == 0) return ok();
        auto r = f.writer.write_row_group(f.cols);
        if (!r) return from_parquet(r.error());
        for (auto& c : f.cols) c.clear();
        f.group_bytes = 0;
        f.group_rows = 0;
        return ok();
    }
};

data_file_builder::data_file_builder(std::unique_ptr<impl> i) : _impl(std::move(i)) {}
data_file_builder::data_file_builder(data_file_builder&&) noexcept = default;
data_file_builder& data_file_builder::operator=(data_file_builder&&) noexcept = default;
data_file_builder::~data_file_builder() = default;

result<data_file_builder, iceberg_error> data_file_builder::make(const json& schema, partitioning p,
                                                                 std::vector<projection> projections, data_file_options o) {
    auto i = std::make_unique<impl>();
    auto ps = parquet_schema_of(schema);
    if (!ps) return ps.error();
    i->schema = std::move(*ps);
    i->part = p;
    i->opts = o;
    i->wopts.compression = o.zstd ? pq::codec::zstd : pq::codec::uncompressed;
    const auto& leaves = i->schema.leaves();
    // The fixed columns come first, in this order (schema.hpp): a table whose first seven
    // leaves are anything else was not made by skiff and is not appended to.
    const std::vector<std::string> fixed = {"partition", "offset", "timestamp", "key", "value",
                                            "headers.list.element.key", "headers.list.element.value"};
    for (std::size_t k = 0; k < fixed.size(); ++k) {
        if (k >= leaves.size() || leaves[k].dotted() != fixed[k]) {
            return iceberg_error(errc::invalid_metadata,
                                 fmt::format("the table's columns do not start with skiff's fixed columns (expected '{}' at {})", fixed[k], k));
        }
    }
    auto h = pq::kv_list_shredder::make(leaves[5], leaves[6]);
    if (!h) return from_parquet(h.error());
    i->headers = std::move(*h);
    for (const auto& pr : projections) {
        auto at = i->schema.find_leaf(pr.name);
        if (!at || *at < fixed.size()) {
            return iceberg_error(errc::invalid_metadata, fmt::format("projected column '{}' is not in the table's schema", pr.name));
        }
        i->proj_leaf.push_back(*at);
    }
    for (std::size_t k = fixed.size(); k < leaves.size(); ++k) {
        if (std::find(i->proj_leaf.begin(), i->proj_leaf.end(), k) == i->proj_leaf.end()) i->extra_leaf.push_back(k);
    }
    i->projections = std::move(projections);
    i->proj = std::make_unique<projector>(i->projections);
    if (p == partitioning::day) {
        i->spec.fields.push_back({"timestamp_day", field_ids::first_partition_field, field_ids::timestamp, "day", "date"});
    } else if (p == partitioning::identity_partition) {
        i->spec.fields.push_back({"partition", field_ids::first_partition_field, field_ids::partition, "identity", "int"});
    }
    return data_file_builder(std::move(i));
}

const partition_spec& data_file_builder::spec() const noexcept { return _impl->spec; }
std::size_t data_file_builder::pending_bytes() const noexcept { return _impl->pending; }
std::uint64_t data_file_builder::dead_letters() const noexcept { return _impl->dead; }

result<void, iceberg_error> data_file_builder::add(const reader::record_row& r) {
    auto& i = *_impl;
    const std::int32_t pvalue = i.part == partitioning::day                  ? day_of(r.timestamp)
                                : i.part == partitioning::identity_partition ? r.partition
                                                                             : 0;
    auto& f = i.file_for(pvalue);
    auto& c = f.cols;
    std::size_t bytes = 24;
    c[0].push_i32(r.partition);
    c[1].push_i64(r.offset);
    // Kafka's -1 ("no timestamp") and anything else fit: ms * 1000 overflows only past
    // ±292,000 years, which the reader's int64 ms cannot reach from a real clock.
    const std::int64_t ms = std::clamp<std::int64_t>(r.timestamp, -9'223'372'036'854'775LL, 9'223'372'036'854'775LL);
    c[2].push_i64(ms * 1000);
    if (r.key) {
        c[3].push_bytes(*r.key);
        bytes += r.key->size();
    } else {
        c[3].push_null(0);
    }
    if (r.value) {
        c[4].push_bytes(*r.value);
        bytes += r.value->size();
    } else {
        c[4].push_null(0);
    }
    i.kv.clear();
    if (r.headers) {
        for (const auto& hv : *r.headers) {
            i.kv.push_back(pq::kv_entry{hv.key, hv.value});
            bytes += hv.key.size() + (hv.value ? hv.value->size() : 0);
        }
    }
    if (auto hr = i.headers.add(i.kv, c[5], c[6]); !hr) return from_parquet(hr.error());
    if (!i.proj->empty()) {
        if (!i.proj->project(r.value, i.pv)) ++i.dead;
        for (std::size_t k = 0; k < i.pv.size(); ++k) {
            auto& col = c[i.proj_leaf[k]];
            std::visit(
                [&](const auto& v) {
                    using T = std::decay_t<decltype(v)>;
                    if constexpr (std::is_same_v<T, std::monostate>) col.push_null(0);
                    else if constexpr (std::is_same_v<T, std::string>) col.push_bytes(v), bytes += v.size();
                    else if constexpr (std::is_same_v<T, std::int64_t>) col.push_i64(v);
                    else if constexpr (std::is_same_v<T, double>) col.push_double(v);
                    else col.push_bool(v);
                },
                i.pv[k]);
            bytes += 8;
        }
    }
    for (auto k : i.extra_leaf) c[k].push_null(0);
    f.group_bytes += bytes;
    ++f.group_rows;
    i.pending += bytes;
    if (f.group_bytes >= i.opts.row_group_bytes) return i.close_group(f);
    return ok();
}

result<std::vector<built_file>, iceberg_error> data_file_builder::take_files() {
    auto& i = *_impl;
    std::vector<built_file> out;
    for (auto& [value, f] : i.files) {
        if (auto r = i.close_group(f); !r) return r.error();
        auto fin = f.writer.finish();
        if (!fin) return from_parquet(fin.error());
        built_file b;
        b.partition_value = value;
        std::vector<avro::value> partition;
        if (!i.spec.fields.empty()) partition.push_back(avro::value(value));
        b.entry = describe_file(i.schema, *fin, std::move(partition));
        b.bytes = std::move(fin->bytes);
        out.push_back(std::move(b));
    }
    i.files.clear();
    i.pending = 0;
    return out;
}

} // namespace skiff::iceberg
