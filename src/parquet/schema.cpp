// Schema checks and leaf flattening (LogicalTypes.md for the LIST form).
#include <skiff/parquet/schema.hpp>

#include <set>
#include <string_view>
#include <utility>

namespace skiff::parquet {

node primitive(std::string name, physical_type t, repetition r, std::optional<std::int32_t> field_id, logical_type lt) {
    node n;
    n.name = std::move(name);
    n.type = t;
    n.rep = r;
    n.field_id = field_id;
    n.logical = lt;
    return n;
}

node group(std::string name, repetition r, std::optional<std::int32_t> field_id, std::vector<node> children) {
    node n;
    n.name = std::move(name);
    n.is_group = true;
    n.rep = r;
    n.field_id = field_id;
    n.children = std::move(children);
    return n;
}

node list(std::string name, repetition r, std::optional<std::int32_t> field_id, node element) {
    element.name = "element";
    node repeated = group("list", repetition::repeated, std::nullopt, {});
    repeated.children.push_back(std::move(element));
    node outer = group(std::move(name), r, field_id, {});
    outer.logical = logical_type::list;
    outer.children.push_back(std::move(repeated));
    return outer;
}

std::string leaf::dotted() const {
    std::string s;
    for (const auto& p : path) {
        if (!s.empty()) s.push_back('.');
        s += p;
    }
    return s;
}

std::optional<std::size_t> schema::find_leaf(std::string_view dotted) const {
    for (std::size_t i = 0; i < _leaves.size(); ++i)
        if (_leaves[i].dotted() == dotted) return i;
    return std::nullopt;
}

namespace {

parquet_error bad(const std::string& path, const char* what) {
    return {errc::invalid_schema, "parquet schema: " + (path.empty() ? std::string("<root>") : path) + ": " + what};
}

struct flattener {
    std::vector<leaf>& leaves;
    std::vector<std::string> path;
    std::vector<std::uint8_t> defs;
    std::vector<std::uint8_t> reps;
    std::size_t top = 0;

    std::string where() const {
        std::string s;
        for (const auto& p : path) s += (s.empty() ? "" : ".") + p;
        return s;
    }

    result<void, parquet_error> visit(const node& n, std::uint8_t def, std::uint8_t rep) {
        path.push_back(n.name);
        if (n.name.empty()) return failure{bad(where(), "empty name")};
        unsigned d = def, r = rep;
        if (n.rep != repetition::required) ++d;
        if (n.rep == repetition::repeated) ++r;
        if (d > 255 || r > 255) return failure{bad(where(), "nesting deeper than 255 levels")};
        defs.push_back(static_cast<std::uint8_t>(d));
        reps.push_back(static_cast<std::uint8_t>(r));
        if (n.is_group) {
            if (n.children.empty()) return failure{bad(where(), "group without children")};
            if (n.logical != logical_type::none && n.logical != logical_type::list)
                return failure{bad(where(), "group with a primitive logical type")};
            if (n.logical == logical_type::list) {
                if (n.rep == repetition::repeated) return failure{bad(where(), "a LIST group cannot be repeated")};
                const auto& c = n.children;
                if (c.size() != 1 || c[0].rep != repetition::repeated || !c[0].is_group || c[0].children.size() != 1)
                    return failure{bad(where(), "LIST group not in the 3-level form")};
            }
            std::set<std::string_view> names;
            for (const auto& c : n.children)
                if (!names.insert(c.name).second) return failure{bad(where(), "duplicate child name")};
            for (const auto& c : n.children) {
                auto v = visit(c, static_cast<std::uint8_t>(d), static_cast<std::uint8_t>(r));
                if (!v) return v;
            }
        } else {
            if (!n.children.empty()) return failure{bad(where(), "a primitive node has children")};
            const bool ok_type = [&] {
                switch (n.logical) {
                case logical_type::none: return true;
                case logical_type::string: return n.type == physical_type::byte_array;
                case logical_type::date: return n.type == physical_type::int32;
                case logical_type::timestamp_micros_utc: return n.type == physical_type::int64;
                case logical_type::list: return false;
                }
                return false;
            }();
            if (!ok_type) return failure{bad(where(), "logical type not allowed on this physical type")};
            if (n.type == physical_type::fixed_len_byte_array && n.type_length <= 0)
                return failure{bad(where(), "fixed_len_byte_array without a positive length")};
            switch (n.type) {
            case physical_type::boolean:
            case physical_type::int32:
            case physical_type::int64:
            case physical_type::double_:
            case physical_type::byte_array:
            case physical_type::fixed_len_byte_array: break;
            default: return failure{bad(where(), "unsupported physical type")};
            }
            leaf l;
            l.path = path;
            l.type = n.type;
            l.type_length = n.type_length;
            l.logical = n.logical;
            l.field_id = n.field_id;
            l.max_def = static_cast<std::uint8_t>(d);
            l.max_rep = static_cast<std::uint8_t>(r);
            l.path_def = defs;
            l.path_rep = reps;
            l.top_field = top;
            leaves.push_back(std::move(l));
        }
        path.pop_back();
        defs.pop_back();
        reps.pop_back();
        return ok();
    }
};

} // namespace

result<schema, parquet_error> schema::make(std::vector<node> fields, std::string root_name) {
    if (fields.empty()) return failure{bad("", "no fields")};
    schema s;
    s._root = std::move(root_name);
    flattener f{s._leaves, {}, {}, {}, 0};
    std::set<std::string_view> names;
    for (const auto& n : fields)
        if (!names.insert(n.name).second) return failure{bad(n.name, "duplicate top-level name")};
    for (std::size_t i = 0; i < fields.size(); ++i) {
        f.top = i;
        auto v = f.visit(fields[i], 0, 0);
        if (!v) return failure{std::move(v).error()};
    }
    s._fields = std::move(fields);
    return s;
}

} // namespace skiff::parquet
