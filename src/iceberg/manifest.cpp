// Iceberg v2 manifests and manifest lists as Avro object container files.
//
// The Avro schemas follow Java Iceberg's V2Metadata (the reference writer): record names
// manifest_entry, r2, r102, manifest_file, r508; int-keyed maps as arrays of k<id>_v<id>
// records with "logicalType":"map"; every optional field a ["null", T] union with default null.
// Every type is defined inline (never referenced by name): some readers (icebird) cannot
// resolve named references.
#include <skiff/iceberg/manifest.hpp>

#include <skiff/avro/schema.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>

namespace skiff::iceberg {

using ojson = nlohmann::ordered_json;
using avro::errc;
using avro::value;

namespace {

// ---- schemas --------------------------------------------------------------------------------

ojson field(std::string_view name, ojson type, std::int32_t id) {
    return ojson{{"name", name}, {"type", std::move(type)}, {"field-id", id}};
}

ojson optional_field(std::string_view name, ojson type, std::int32_t id) {
    return ojson{{"name", name}, {"type", ojson::array({"null", std::move(type)})}, {"default", nullptr}, {"field-id", id}};
}

ojson int_map(std::int32_t key_id, std::int32_t value_id, std::string_view value_type) {
    ojson kv{{"type", "record"},
             {"name", fmt::format("k{}_v{}", key_id, value_id)},
             {"fields", ojson::array({field("key", "int", key_id), field("value", value_type, value_id)})}};
    return ojson{{"type", "array"}, {"items", std::move(kv)}, {"logicalType", "map"}};
}

ojson list_of(std::string_view item_type, std::int32_t element_id) {
    return ojson{{"type", "array"}, {"items", item_type}, {"element-id", element_id}};
}

avro::result<ojson> partition_avro_type(const partition_field& f) {
    const std::string& t = f.result_type;
    if (t == "int" || t == "long" || t == "string" || t == "boolean") return ojson(t);
    if (t == "binary") return ojson("bytes");
    if (t == "date") return ojson{{"type", "int"}, {"logicalType", "date"}};
    return avro::fail(errc::unsupported, fmt::format("partition field \"{}\" has unsupported type \"{}\"", f.name, t));
}

avro::result<std::string> manifest_entry_schema(const partition_spec& spec) {
    ojson partition_fields = ojson::array();
    for (const auto& f : spec.fields) {
        auto t = partition_avro_type(f);
        if (!t) return failure{std::move(t).error()};
        partition_fields.push_back(optional_field(f.name, std::move(t).value(), f.field_id));
    }
    ojson r102{{"type", "record"}, {"name", "r102"}, {"fields", std::move(partition_fields)}};
    ojson data_file_fields = ojson::array({
        field("content", "int", 134),
        field("file_path", "string", 100),
        field("file_format", "string", 101),
        field("partition", std::move(r102), 102),
        field("record_count", "long", 103),
        field("file_size_in_bytes", "long", 104),
        optional_field("column_sizes", int_map(117, 118, "long"), 108),
        optional_field("value_counts", int_map(119, 120, "long"), 109),
        optional_field("null_value_counts", int_map(121, 122, "long"), 110),
        optional_field("nan_value_counts", int_map(138, 139, "long"), 137),
        optional_field("lower_bounds", int_map(126, 127, "bytes"), 125),
        optional_field("upper_bounds", int_map(129, 130, "bytes"), 128),
        optional_field("key_metadata", "bytes", 131),
        optional_field("split_offsets", list_of("long", 133), 132),
        optional_field("equality_ids", list_of("int", 136), 135),
        optional_field("sort_order_id", "int", 140),
    });
    ojson r2{{"type", "record"}, {"name", "r2"}, {"fields", std::move(data_file_fields)}};
    ojson entry{{"type", "record"},
                {"name", "manifest_entry"},
                {"fields", ojson::array({
                               field("status", "int", 0),
                               optional_field("snapshot_id", "long", 1),
                               optional_field("sequence_number", "long", 3),
                               optional_field("file_sequence_number", "long", 4),
                               field("data_file", std::move(r2), 2),
                           })}};
    return entry.dump();
}

std::string manifest_file_schema() {
    ojson r508{{"type", "record"},
               {"name", "r508"},
               {"fields", ojson::array({
                              field("contains_null", "boolean", 509),
                              optional_field("contains_nan", "boolean", 518),
                              optional_field("lower_bound", "bytes", 510),
                              optional_field("upper_bound", "bytes", 511),
                          })}};
    ojson partitions{{"type", "array"}, {"items", std::move(r508)}, {"element-id", 508}};
    ojson mf{{"type", "record"},
             {"name", "manifest_file"},
             {"fields", ojson::array({
                            field("manifest_path", "string", 500),
                            field("manifest_length", "long", 501),
                            field("partition_spec_id", "int", 502),
                            field("content", "int", 517),
                            field("sequence_number", "long", 515),
                            field("min_sequence_number", "long", 516),
                            field("added_snapshot_id", "long", 503),
                            field("added_files_count", "int", 504),
                            field("existing_files_count", "int", 505),
                            field("deleted_files_count", "int", 506),
                            field("added_rows_count", "long", 512),
                            field("existing_rows_count", "long", 513),
                            field("deleted_rows_count", "long", 514),
                            optional_field("partitions", std::move(partitions), 507),
                            optional_field("key_metadata", "bytes", 519),
                        })}};
    return mf.dump();
}

// ---- values ---------------------------------------------------------------------------------

template <typename T>
value opt(const std::optional<T>& v) {
    return v ? value(*v) : value();
}

value counts_value(const column_counts& c) {
    if (c.empty()) return {};
    avro::array a;
    a.reserve(c.size());
    for (const auto& [id, n] : c) a.push_back(avro::record{{value(id), value(n)}});
    return a;
}

value bounds_value(const column_bounds& c) {
    if (c.empty()) return {};
    avro::array a;
    a.reserve(c.size());
    for (const auto& [id, b] : c) a.push_back(avro::record{{value(id), value(b)}});
    return a;
}

template <typename T>
value list_value(const std::optional<std::vector<T>>& l) {
    if (!l) return {};
    avro::array a(l->begin(), l->end());
    return a;
}

value entry_value(const manifest_entry& e) {
    const data_file& f = e.file;
    avro::record df{{
        value(static_cast<std::int32_t>(f.content)),
        value(f.file_path),
        value(f.file_format),
        value(avro::record{f.partition}),
        value(f.record_count),
        value(f.file_size_in_bytes),
        counts_value(f.column_sizes),
        counts_value(f.value_counts),
        counts_value(f.null_value_counts),
        counts_value(f.nan_value_counts),
        bounds_value(f.lower_bounds),
        bounds_value(f.upper_bounds),
        opt(f.key_metadata),
        list_value(f.split_offsets),
        list_value(f.equality_ids),
        opt(f.sort_order_id),
    }};
    return avro::record{{
        value(static_cast<std::int32_t>(e.status)),
        opt(e.snapshot_id),
        opt(e.sequence_number),
        opt(e.file_sequence_number),
        value(std::move(df)),
    }};
}

value manifest_file_value(const manifest_file& m) {
    value partitions;
    if (m.partitions) {
        avro::array a;
        for (const auto& s : *m.partitions)
            a.push_back(avro::record{{value(s.contains_null), opt(s.contains_nan), opt(s.lower_bound), opt(s.upper_bound)}});
        partitions = std::move(a);
    }
    return avro::record{{
        value(m.manifest_path), value(m.manifest_length), value(m.partition_spec_id), value(m.content),
        value(m.sequence_number), value(m.min_sequence_number), value(m.added_snapshot_id),
        value(m.added_files_count), value(m.existing_files_count), value(m.deleted_files_count),
        value(m.added_rows_count), value(m.existing_rows_count), value(m.deleted_rows_count),
        std::move(partitions), opt(m.key_metadata),
    }};
}

avro::result<std::string> write_file(const std::string& schema_json, avro::metadata meta, std::span<const value> records,
                                     const write_options& options) {
    avro::writer_options wo;
    wo.codec = options.codec;
    wo.sync = options.sync;
    wo.metadata = std::move(meta);
    auto w = avro::container_writer::create(schema_json, std::move(wo));
    if (!w) return failure{std::move(w).error()};
    for (std::size_t i = 0; i < records.size(); ++i) {
        if (auto r = w->append(records[i]); !r) {
            auto err = std::move(r).error();
            err.message = fmt::format("record {}: {}", i, err.message);
            return failure{std::move(err)};
        }
    }
    return w->finish();
}

} // namespace

std::string partition_spec_fields_json(const partition_spec& spec) {
    ojson fields = ojson::array();
    for (const auto& f : spec.fields)
        fields.push_back(ojson{{"name", f.name}, {"transform", f.transform}, {"source-id", f.source_id}, {"field-id", f.field_id}});
    return fields.dump();
}

avro::result<std::string> write_manifest(const manifest_info& info, std::span<const manifest_entry> entries,
                                         const write_options& options) {
    auto schema = manifest_entry_schema(info.spec);
    if (!schema) return failure{std::move(schema).error()};
    std::vector<value> records;
    records.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].file.partition.size() != info.spec.fields.size())
            return avro::fail(errc::type_mismatch, fmt::format("entry {} has {} partition values for a spec of {} fields", i,
                                                               entries[i].file.partition.size(), info.spec.fields.size()));
        records.push_back(entry_value(entries[i]));
    }
    avro::metadata meta{
        {"schema", info.schema_json},
        {"schema-id", std::to_string(info.schema_id)},
        {"partition-spec", partition_spec_fields_json(info.spec)},
        {"partition-spec-id", std::to_string(info.spec.spec_id)},
        {"format-version", "2"},
        {"content", info.content},
    };
    return write_file(*schema, std::move(meta), records, options);
}

avro::result<std::string> write_manifest_list(const manifest_list_info& info, std::span<const manifest_file> manifests,
                                              const write_options& options) {
    std::vector<value> records;
    records.reserve(manifests.size());
    for (const auto& m : manifests) records.push_back(manifest_file_value(m));
    avro::metadata meta{
        {"snapshot-id", std::to_string(info.snapshot_id)},
        {"parent-snapshot-id", info.parent_snapshot_id ? std::to_string(*info.parent_snapshot_id) : "null"},
        {"sequence-number", std::to_string(info.sequence_number)},
        {"format-version", "2"},
    };
    return write_file(manifest_file_schema(), std::move(meta), records, options);
}

// ---- reading --------------------------------------------------------------------------------

namespace {

failure<avro::error> corrupt(std::string m) { return avro::fail(errc::corrupt, std::move(m)); }

// The record schema inside an optional union, or the schema itself.
const avro::node* unwrap(const avro::node* s) {
    if (!s || s->kind != avro::type::union_) return s;
    for (const auto& b : s->branches)
        if (b->kind != avro::type::null) return b.get();
    return nullptr;
}

// A record value seen through its writer schema: fields are found by field id, then by name.
struct record_view {
    const avro::node* schema = nullptr;
    const avro::record* rec = nullptr;

    static std::optional<record_view> of(const avro::node* s, const value* v) {
        s = unwrap(s);
        if (!s || !v || s->kind != avro::type::record) return std::nullopt;
        auto r = v->get_if<avro::record>();
        if (!r || r->fields.size() != s->fields.size()) return std::nullopt;
        return record_view{s, r};
    }

    int index(std::int32_t id, std::string_view name, std::string_view alt) const {
        int i = schema->field_index(id);
        if (i < 0) i = schema->field_index(name);
        if (i < 0 && !alt.empty()) i = schema->field_index(alt);
        return i;
    }
    const value* get(std::int32_t id, std::string_view name, std::string_view alt = {}) const {
        const int i = index(id, name, alt);
        return i < 0 ? nullptr : &rec->fields[static_cast<std::size_t>(i)];
    }
    const avro::node* schema_of(std::int32_t id, std::string_view name) const {
        const int i = index(id, name, {});
        return i < 0 ? nullptr : schema->fields[static_cast<std::size_t>(i)].schema.get();
    }
};

std::optional<std::int64_t> as_long(const value* v) {
    if (!v) return std::nullopt;
    if (auto l = v->get_if<std::int64_t>()) return *l;
    if (auto i = v->get_if<std::int32_t>()) return *i;
    return std::nullopt;
}

std::optional<std::int32_t> as_int(const value* v) {
    auto l = as_long(v);
    if (!l || *l < INT32_MIN || *l > INT32_MAX) return std::nullopt;
    return static_cast<std::int32_t>(*l);
}

std::optional<avro::bytes> as_bytes(const value* v) {
    if (v)
        if (auto b = v->get_if<avro::bytes>()) return *b;
    return std::nullopt;
}

std::optional<std::int64_t> parse_long(std::string_view s) {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

// An int-keyed map: Iceberg's array of key/value records, or an Avro map with decimal keys.
template <typename V, typename F>
avro::result<std::vector<std::pair<std::int32_t, V>>> read_int_map(const value* v, const avro::node* s, F convert,
                                                                  std::string_view what) {
    std::vector<std::pair<std::int32_t, V>> out;
    s = unwrap(s);
    if (!v || v->is_null() || !s) return out;
    if (auto m = v->get_if<avro::map>()) {
        for (const auto& e : *m) {
            auto k = parse_long(e.key);
            auto x = convert(&e.val);
            if (!k || !x || *k < INT32_MIN || *k > INT32_MAX) return corrupt(fmt::format("{} has a bad entry", what));
            out.emplace_back(static_cast<std::int32_t>(*k), std::move(*x));
        }
        return out;
    }
    auto a = v->get_if<avro::array>();
    if (!a || s->kind != avro::type::array) return corrupt(fmt::format("{} is not a map", what));
    for (const auto& item : *a) {
        auto kv = record_view::of(s->items.get(), &item);
        if (!kv) return corrupt(fmt::format("{} has an entry that is not a key/value record", what));
        auto k = as_int(kv->get(-1, "key"));
        auto x = convert(kv->get(-1, "value"));
        if (!k || !x) return corrupt(fmt::format("{} has a bad entry", what));
        out.emplace_back(*k, std::move(*x));
    }
    return out;
}

template <typename T, typename F>
avro::result<std::optional<std::vector<T>>> read_list(const value* v, F convert, std::string_view what) {
    if (!v || v->is_null()) return std::optional<std::vector<T>>{};
    auto a = v->get_if<avro::array>();
    if (!a) return corrupt(fmt::format("{} is not a list", what));
    std::vector<T> out;
    for (const auto& item : *a) {
        auto x = convert(&item);
        if (!x) return corrupt(fmt::format("{} has a bad element", what));
        out.push_back(*x);
    }
    return std::optional<std::vector<T>>(std::move(out));
}

avro::result<data_file> read_data_file(const record_view& r) {
    data_file f;
    f.content = static_cast<file_content>(as_int(r.get(134, "content")).value_or(0));
    auto path = r.get(100, "file_path");
    auto format = r.get(101, "file_format");
    if (!path || !path->get_if<std::string>()) return corrupt("data_file has no file_path");
    f.file_path = *path->get_if<std::string>();
    if (format && format->get_if<std::string>()) f.file_format = *format->get_if<std::string>();
    if (auto part = record_view::of(r.schema_of(102, "partition"), r.get(102, "partition"))) f.partition = part->rec->fields;
    auto rc = as_long(r.get(103, "record_count"));
    auto sz = as_long(r.get(104, "file_size_in_bytes"));
    if (!rc || !sz) return corrupt(fmt::format("data_file {} has no record_count or file_size_in_bytes", f.file_path));
    f.record_count = *rc;
    f.file_size_in_bytes = *sz;
    struct counts_spec { column_counts* out; std::int32_t id; const char* name; };
    for (const auto& c : {counts_spec{&f.column_sizes, 108, "column_sizes"}, counts_spec{&f.value_counts, 109, "value_counts"},
                          counts_spec{&f.null_value_counts, 110, "null_value_counts"},
                          counts_spec{&f.nan_value_counts, 137, "nan_value_counts"}}) {
        auto m = read_int_map<std::int64_t>(r.get(c.id, c.name), r.schema_of(c.id, c.name), as_long, c.name);
        if (!m) return failure{std::move(m).error()};
        *c.out = std::move(m).value();
    }
    struct bounds_spec { column_bounds* out; std::int32_t id; const char* name; };
    for (const auto& b : {bounds_spec{&f.lower_bounds, 125, "lower_bounds"}, bounds_spec{&f.upper_bounds, 128, "upper_bounds"}}) {
        auto m = read_int_map<avro::bytes>(r.get(b.id, b.name), r.schema_of(b.id, b.name), as_bytes, b.name);
        if (!m) return failure{std::move(m).error()};
        *b.out = std::move(m).value();
    }
    f.key_metadata = as_bytes(r.get(131, "key_metadata"));
    auto splits = read_list<std::int64_t>(r.get(132, "split_offsets"), as_long, "split_offsets");
    if (!splits) return failure{std::move(splits).error()};
    f.split_offsets = std::move(splits).value();
    auto eq = read_list<std::int32_t>(r.get(135, "equality_ids"), as_int, "equality_ids");
    if (!eq) return failure{std::move(eq).error()};
    f.equality_ids = std::move(eq).value();
    f.sort_order_id = as_int(r.get(140, "sort_order_id"));
    return f;
}

std::string result_type_of(const avro::node* s) {
    s = unwrap(s);
    if (!s) return "null";
    if (s->logical_type == "date") return "date";
    switch (s->kind) {
    case avro::type::int_: return "int";
    case avro::type::long_: return "long";
    case avro::type::string: return "string";
    case avro::type::boolean: return "boolean";
    case avro::type::bytes:
    case avro::type::fixed: return "binary";
    default: return avro::to_string(s->kind);
    }
}

avro::result<partition_spec> read_spec(const avro::container& c, const avro::node* partition_schema) {
    partition_spec spec;
    if (auto id = c.find_metadata("partition-spec-id")) spec.spec_id = static_cast<std::int32_t>(parse_long(*id).value_or(0));
    const std::string* text = c.find_metadata("partition-spec");
    if (!text) return spec;
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.contains("fields")) j = j["fields"]; // a whole spec rather than its fields
    if (!j.is_array()) return corrupt("partition-spec metadata is not a JSON array");
    partition_schema = unwrap(partition_schema);
    for (const auto& f : j) {
        if (!f.is_object()) return corrupt("partition-spec metadata has a field that is not an object");
        partition_field pf;
        // Another writer's metadata: a field of the wrong JSON type is corrupt input, not an
        // exception escaping into the caller (maintenance reads every manifest).
        auto text_of = [&](const char* k) -> std::optional<std::string> {
            auto it = f.find(k);
            if (it == f.end()) return std::string();
            if (!it->is_string()) return std::nullopt;
            return it->get<std::string>();
        };
        auto int_of = [&](const char* k) -> std::optional<std::int32_t> {
            auto it = f.find(k);
            if (it == f.end()) return 0;
            if (!it->is_number_integer()) return std::nullopt;
            if (it->is_number_unsigned() ? it->get<std::uint64_t>() > 2147483647u
                                         : (it->get<std::int64_t>() > 2147483647 || it->get<std::int64_t>() < -2147483648LL)) {
                return std::nullopt;
            }
            return static_cast<std::int32_t>(it->get<std::int64_t>());
        };
        auto name = text_of("name");
        auto transform = text_of("transform");
        auto source = int_of("source-id");
        auto field = int_of("field-id");
        if (!name || !transform || !source || !field) return corrupt("partition-spec metadata has a field of the wrong type");
        pf.name = std::move(*name);
        pf.transform = std::move(*transform);
        pf.source_id = *source;
        pf.field_id = *field;
        if (partition_schema && partition_schema->kind == avro::type::record) {
            int i = partition_schema->field_index(pf.field_id);
            if (i < 0) i = partition_schema->field_index(pf.name);
            if (i >= 0) pf.result_type = result_type_of(partition_schema->fields[static_cast<std::size_t>(i)].schema.get());
        }
        spec.fields.push_back(std::move(pf));
    }
    return spec;
}

} // namespace

avro::result<manifest> read_manifest(std::string_view file) {
    auto c = avro::read_container(file);
    if (!c) return failure{std::move(c).error()};
    const avro::node* entry_schema = c->schema.get();
    if (entry_schema->kind != avro::type::record) return corrupt("manifest schema is not a record");
    manifest m;
    m.metadata = c->metadata;
    if (auto s = c->find_metadata("schema")) m.info.schema_json = *s;
    if (auto s = c->find_metadata("schema-id")) m.info.schema_id = static_cast<std::int32_t>(parse_long(*s).value_or(0));
    if (auto s = c->find_metadata("content")) m.info.content = *s;
    const int df_index = entry_schema->field_index(2) >= 0 ? entry_schema->field_index(2) : entry_schema->field_index("data_file");
    if (df_index < 0) return corrupt("manifest entries have no data_file");
    const avro::node* df_schema = unwrap(entry_schema->fields[static_cast<std::size_t>(df_index)].schema.get());
    if (!df_schema || df_schema->kind != avro::type::record) return corrupt("data_file is not a record");
    const int part_index = df_schema->field_index(102) >= 0 ? df_schema->field_index(102) : df_schema->field_index("partition");
    auto spec = read_spec(*c, part_index < 0 ? nullptr : df_schema->fields[static_cast<std::size_t>(part_index)].schema.get());
    if (!spec) return failure{std::move(spec).error()};
    m.info.spec = std::move(spec).value();
    m.entries.reserve(c->records.size());
    for (std::size_t i = 0; i < c->records.size(); ++i) {
        auto e = record_view::of(entry_schema, &c->records[i]);
        if (!e) return corrupt(fmt::format("manifest entry {} is not a record", i));
        manifest_entry entry;
        auto status = as_int(e->get(0, "status"));
        if (!status || *status < 0 || *status > 2) return corrupt(fmt::format("manifest entry {} has a bad status", i));
        entry.status = static_cast<entry_status>(*status);
        entry.snapshot_id = as_long(e->get(1, "snapshot_id"));
        entry.sequence_number = as_long(e->get(3, "sequence_number"));
        entry.file_sequence_number = as_long(e->get(4, "file_sequence_number"));
        auto df = record_view::of(df_schema, e->get(2, "data_file"));
        if (!df) return corrupt(fmt::format("manifest entry {} has no data_file", i));
        auto f = read_data_file(*df);
        if (!f) {
            auto err = std::move(f).error();
            err.message = fmt::format("manifest entry {}: {}", i, err.message);
            return failure{std::move(err)};
        }
        entry.file = std::move(f).value();
        m.entries.push_back(std::move(entry));
    }
    return m;
}

avro::result<manifest_list> read_manifest_list(std::string_view file) {
    auto c = avro::read_container(file);
    if (!c) return failure{std::move(c).error()};
    const avro::node* schema = c->schema.get();
    if (schema->kind != avro::type::record) return corrupt("manifest list schema is not a record");
    manifest_list l;
    l.metadata = c->metadata;
    if (auto s = c->find_metadata("snapshot-id")) l.info.snapshot_id = parse_long(*s).value_or(0);
    if (auto s = c->find_metadata("parent-snapshot-id")) l.info.parent_snapshot_id = parse_long(*s);
    if (auto s = c->find_metadata("sequence-number")) l.info.sequence_number = parse_long(*s).value_or(0);
    l.manifests.reserve(c->records.size());
    for (std::size_t i = 0; i < c->records.size(); ++i) {
        auto r = record_view::of(schema, &c->records[i]);
        if (!r) return corrupt(fmt::format("manifest list entry {} is not a record", i));
        manifest_file m;
        auto path = r->get(500, "manifest_path");
        auto length = as_long(r->get(501, "manifest_length"));
        auto spec_id = as_int(r->get(502, "partition_spec_id"));
        auto snapshot = as_long(r->get(503, "added_snapshot_id"));
        if (!path || !path->get_if<std::string>() || !length || !spec_id || !snapshot)
            return corrupt(fmt::format("manifest list entry {} lacks a path, length, spec id or snapshot id", i));
        m.manifest_path = *path->get_if<std::string>();
        m.manifest_length = *length;
        m.partition_spec_id = *spec_id;
        m.added_snapshot_id = *snapshot;
        // v1 lists have no content or sequence numbers: data, sequence number 0 (spec, "Manifest Lists").
        m.content = as_int(r->get(517, "content")).value_or(0);
        m.sequence_number = as_long(r->get(515, "sequence_number")).value_or(0);
        m.min_sequence_number = as_long(r->get(516, "min_sequence_number")).value_or(0);
        // Java Iceberg names these added_data_files_count etc.; the ids are the same.
        m.added_files_count = as_int(r->get(504, "added_files_count", "added_data_files_count")).value_or(0);
        m.existing_files_count = as_int(r->get(505, "existing_files_count", "existing_data_files_count")).value_or(0);
        m.deleted_files_count = as_int(r->get(506, "deleted_files_count", "deleted_data_files_count")).value_or(0);
        m.added_rows_count = as_long(r->get(512, "added_rows_count")).value_or(0);
        m.existing_rows_count = as_long(r->get(513, "existing_rows_count")).value_or(0);
        m.deleted_rows_count = as_long(r->get(514, "deleted_rows_count")).value_or(0);
        m.key_metadata = as_bytes(r->get(519, "key_metadata"));
        if (const value* parts = r->get(507, "partitions"); parts && !parts->is_null()) {
            auto a = parts->get_if<avro::array>();
            const avro::node* ps = unwrap(r->schema_of(507, "partitions"));
            if (!a || !ps || ps->kind != avro::type::array) return corrupt(fmt::format("manifest list entry {}: partitions is not a list", i));
            std::vector<field_summary> summaries;
            for (const auto& item : *a) {
                auto s = record_view::of(ps->items.get(), &item);
                if (!s) return corrupt(fmt::format("manifest list entry {}: a partition summary is not a record", i));
                field_summary fs;
                const value* cn = s->get(509, "contains_null");
                if (!cn || !cn->get_if<bool>()) return corrupt(fmt::format("manifest list entry {}: summary without contains_null", i));
                fs.contains_null = *cn->get_if<bool>();
                if (const value* nan = s->get(518, "contains_nan"); nan && nan->get_if<bool>()) fs.contains_nan = *nan->get_if<bool>();
                fs.lower_bound = as_bytes(s->get(510, "lower_bound"));
                fs.upper_bound = as_bytes(s->get(511, "upper_bound"));
                summaries.push_back(std::move(fs));
            }
            m.partitions = std::move(summaries);
        }
        l.manifests.push_back(std::move(m));
    }
    return l;
}

} // namespace skiff::iceberg
