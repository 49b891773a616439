// Comparing schemas and columns in the reader tests (node and column_data have no operator==).
#pragma once

#include <skiff/parquet/column.hpp>
#include <skiff/parquet/schema.hpp>

#include <cstring>

namespace reader_support {

inline bool same_node(const skiff::parquet::node& a, const skiff::parquet::node& b) {
    if (a.name != b.name || a.rep != b.rep || a.field_id != b.field_id || a.is_group != b.is_group ||
        a.logical != b.logical || a.children.size() != b.children.size())
        return false;
    if (!a.is_group && (a.type != b.type || a.type_length != b.type_length)) return false;
    for (std::size_t i = 0; i < a.children.size(); ++i)
        if (!same_node(a.children[i], b.children[i])) return false;
    return true;
}

inline bool same_schema(const skiff::parquet::schema& a, const skiff::parquet::schema& b) {
    if (a.root_name() != b.root_name() || a.fields().size() != b.fields().size() || a.leaves().size() != b.leaves().size())
        return false;
    for (std::size_t i = 0; i < a.fields().size(); ++i)
        if (!same_node(a.fields()[i], b.fields()[i])) return false;
    for (std::size_t i = 0; i < a.leaves().size(); ++i) {
        const auto &x = a.leaves()[i], &y = b.leaves()[i];
        if (x.path != y.path || x.max_def != y.max_def || x.max_rep != y.max_rep || x.path_def != y.path_def ||
            x.path_rep != y.path_rep)
            return false;
    }
    return true;
}

// Doubles compare by bit pattern: NaN and -0.0 must come back as themselves.
inline bool same_column(const skiff::parquet::column_data& a, const skiff::parquet::column_data& b) {
    return a.max_def == b.max_def && a.max_rep == b.max_rep && a.def_levels == b.def_levels &&
           a.rep_levels == b.rep_levels && a.bools == b.bools && a.i32 == b.i32 && a.i64 == b.i64 &&
           a.f64.size() == b.f64.size() &&
           (a.f64.empty() || std::memcmp(a.f64.data(), b.f64.data(), a.f64.size() * sizeof(double)) == 0) &&
           a.bytes == b.bytes && a.ends == b.ends;
}

} // namespace reader_support
