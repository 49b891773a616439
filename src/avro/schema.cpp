// Avro schema JSON -> avro::node. Names follow the spec's namespace rules closely enough for
// the files we read (Iceberg, Java Avro): a name with a dot is a full name, otherwise it takes
// the enclosing namespace.
#include <skiff/avro/schema.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <map>

namespace skiff::avro {

using json = nlohmann::json;

const char* to_string(type t) noexcept {
    switch (t) {
    case type::null: return "null";
    case type::boolean: return "boolean";
    case type::int_: return "int";
    case type::long_: return "long";
    case type::float_: return "float";
    case type::double_: return "double";
    case type::bytes: return "bytes";
    case type::string: return "string";
    case type::record: return "record";
    case type::enum_: return "enum";
    case type::array: return "array";
    case type::map: return "map";
    case type::union_: return "union";
    case type::fixed: return "fixed";
    }
    return "unknown";
}

int node::field_index(std::int32_t id) const noexcept {
    for (std::size_t i = 0; i < fields.size(); ++i)
        if (fields[i].field_id == id) return static_cast<int>(i);
    return -1;
}

int node::field_index(std::string_view n) const noexcept {
    for (std::size_t i = 0; i < fields.size(); ++i)
        if (fields[i].name == n) return static_cast<int>(i);
    return -1;
}

namespace {

constexpr std::size_t max_depth = 64;

// nlohmann's parser recurses once per nesting level: refuse deep input before it runs.
bool nesting_within(std::string_view s, std::size_t limit) {
    std::size_t depth = 0;
    bool in_string = false, escaped = false;
    for (char c : s) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (c == '\\') escaped = true;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limit) return false;
        } else if (c == ']' || c == '}') {
            if (depth > 0) --depth;
        }
    }
    return true;
}

std::optional<type> primitive(std::string_view n) {
    if (n == "null") return type::null;
    if (n == "boolean") return type::boolean;
    if (n == "int") return type::int_;
    if (n == "long") return type::long_;
    if (n == "float") return type::float_;
    if (n == "double") return type::double_;
    if (n == "bytes") return type::bytes;
    if (n == "string") return type::string;
    return std::nullopt;
}

std::size_t primitive_min_size(type t) {
    switch (t) {
    case type::null: return 0;
    case type::float_: return 4;
    case type::double_: return 8;
    default: return 1; // a varint, a length or a boolean byte
    }
}

class parser {
public:
    result<node_ptr> parse(const json& j, const std::string& ns, std::size_t depth) {
        if (depth > max_depth) return bad("schema nested too deeply");
        if (j.is_string()) return named_or_primitive(j.get<std::string>(), ns);
        if (j.is_array()) return parse_union(j, ns, depth);
        if (!j.is_object()) return bad("a schema must be a string, an array or an object");
        auto t = j.find("type");
        if (t == j.end()) return bad("schema object without \"type\"");
        if (t->is_object() || t->is_array()) return parse(*t, ns, depth + 1); // {"type": {...}}
        if (!t->is_string()) return bad("\"type\" must be a string");
        const std::string tn = t->get<std::string>();
        std::string logical;
        if (auto l = j.find("logicalType"); l != j.end() && l->is_string()) logical = l->get<std::string>();
        if (auto p = primitive(tn)) {
            auto n = std::make_shared<node>();
            n->kind = *p;
            n->logical_type = logical;
            n->min_size = primitive_min_size(*p);
            return node_ptr(n);
        }
        if (tn == "array") {
            auto items = j.find("items");
            if (items == j.end()) return bad("array without \"items\"");
            auto it = parse(*items, ns, depth + 1);
            if (!it) return it;
            auto n = std::make_shared<node>();
            n->kind = type::array;
            n->logical_type = logical;
            n->items = *it;
            n->element_id = int_attr(j, "element-id");
            n->min_size = 1;
            return node_ptr(n);
        }
        if (tn == "map") {
            auto values = j.find("values");
            if (values == j.end()) return bad("map without \"values\"");
            auto vt = parse(*values, ns, depth + 1);
            if (!vt) return vt;
            auto n = std::make_shared<node>();
            n->kind = type::map;
            n->logical_type = logical;
            n->items = *vt;
            n->key_id = int_attr(j, "key-id");
            n->value_id = int_attr(j, "value-id");
            n->min_size = 1;
            return node_ptr(n);
        }
        if (tn == "record" || tn == "error" || tn == "enum" || tn == "fixed") return parse_named(j, tn, logical, ns, depth);
        return named_or_primitive(tn, ns);
    }

private:
    static failure<error> bad(std::string m) { return fail(errc::invalid_schema, std::move(m)); }

    static std::optional<std::int32_t> int_attr(const json& j, const char* key) {
        auto a = j.find(key);
        if (a == j.end() || !a->is_number_integer()) return std::nullopt;
        auto v = a->get<std::int64_t>();
        if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max()) return std::nullopt;
        return static_cast<std::int32_t>(v);
    }

    static std::string full_name(const std::string& name, const std::string& ns) {
        if (name.find('.') != std::string::npos || ns.empty()) return name;
        return ns + "." + name;
    }

    result<node_ptr> named_or_primitive(const std::string& n, const std::string& ns) {
        if (auto p = primitive(n)) {
            auto x = std::make_shared<node>();
            x->kind = *p;
            x->min_size = primitive_min_size(*p);
            return node_ptr(x);
        }
        for (const auto& candidate : {full_name(n, ns), n}) {
            auto it = _named.find(candidate);
            if (it == _named.end()) continue;
            if (!it->second) return bad(fmt::format("recursive type \"{}\" is not supported", n));
            return it->second;
        }
        return bad(fmt::format("unknown type \"{}\"", n));
    }

    result<node_ptr> parse_union(const json& j, const std::string& ns, std::size_t depth) {
        if (j.empty()) return bad("empty union");
        auto n = std::make_shared<node>();
        n->kind = type::union_;
        std::size_t min_branch = std::numeric_limits<std::size_t>::max();
        for (const auto& b : j) {
            auto bt = parse(b, ns, depth + 1);
            if (!bt) return bt;
            if ((*bt)->kind == type::union_) return bad("a union directly inside a union");
            min_branch = std::min(min_branch, (*bt)->min_size);
            n->branches.push_back(*bt);
        }
        n->min_size = 1 + min_branch;
        return node_ptr(n);
    }

    result<node_ptr> parse_named(const json& j, const std::string& tn, const std::string& logical,
                                 const std::string& enclosing_ns, std::size_t depth) {
        auto nm = j.find("name");
        if (nm == j.end() || !nm->is_string()) return bad(fmt::format("{} without a \"name\"", tn));
        std::string ns = enclosing_ns;
        if (auto a = j.find("namespace"); a != j.end() && a->is_string()) ns = a->get<std::string>();
        const std::string full = full_name(nm->get<std::string>(), ns);
        if (_named.contains(full)) return bad(fmt::format("type \"{}\" defined twice", full));
        if (auto dot = full.rfind('.'); dot != std::string::npos) ns = full.substr(0, dot);
        auto n = std::make_shared<node>();
        n->name = full;
        n->logical_type = logical;
        if (tn == "fixed") {
            auto sz = j.find("size");
            if (sz == j.end() || !sz->is_number_unsigned()) return bad(fmt::format("fixed \"{}\" without a size", full));
            n->kind = type::fixed;
            n->size = sz->get<std::size_t>();
            if (n->size > (std::size_t{1} << 20)) return bad(fmt::format("fixed \"{}\" too large", full));
            n->min_size = n->size;
            _named[full] = n;
            return node_ptr(n);
        }
        if (tn == "enum") {
            auto syms = j.find("symbols");
            if (syms == j.end() || !syms->is_array() || syms->empty()) return bad(fmt::format("enum \"{}\" without symbols", full));
            for (const auto& s : *syms) {
                if (!s.is_string()) return bad(fmt::format("enum \"{}\" has a non-string symbol", full));
                n->symbols.push_back(s.get<std::string>());
            }
            n->kind = type::enum_;
            n->min_size = 1;
            _named[full] = n;
            return node_ptr(n);
        }
        n->kind = type::record;
        _named[full] = nullptr; // in progress: a reference to it now is recursion
        auto fields = j.find("fields");
        if (fields == j.end() || !fields->is_array()) return bad(fmt::format("record \"{}\" without fields", full));
        for (const auto& f : *fields) {
            if (!f.is_object()) return bad(fmt::format("record \"{}\" has a field that is not an object", full));
            auto fname = f.find("name");
            auto ftype = f.find("type");
            if (fname == f.end() || !fname->is_string() || ftype == f.end())
                return bad(fmt::format("record \"{}\" has a field without a name or type", full));
            auto ft = parse(*ftype, ns, depth + 1);
            if (!ft) return ft;
            n->min_size += (*ft)->min_size;
            n->fields.push_back(field{fname->get<std::string>(), *ft, int_attr(f, "field-id")});
        }
        _named[full] = n;
        return node_ptr(n);
    }

    std::map<std::string, node_ptr, std::less<>> _named;
};

} // namespace

result<node_ptr> parse_schema(std::string_view text) {
    if (!nesting_within(text, 2 * max_depth + 8)) return fail(errc::invalid_schema, "schema nested too deeply");
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return fail(errc::invalid_schema, "schema is not valid JSON");
    parser p;
    return p.parse(j, "", 0);
}

} // namespace skiff::avro
