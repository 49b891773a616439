// One leaf column of one row group, already shredded: definition levels, repetition levels and
// the non-null values, in the form the writer encodes without copying. The caller (the Iceberg
// sink) fills one per leaf, in schema leaf order, and may clear() and reuse them (capacity stays).
// Levels are stored only when the leaf's maximum is above 0 (Parquet writes none otherwise).
// Pure; any core or thread.
#pragma once

#include <skiff/parquet/schema.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::parquet {

struct column_data {
    column_data() {}
    explicit column_data(const leaf& l) : max_def(l.max_def), max_rep(l.max_rep) {}

    std::uint8_t max_def = 0;
    std::uint8_t max_rep = 0;
    std::vector<std::uint8_t> def_levels; // one per entry when max_def > 0, else empty
    std::vector<std::uint8_t> rep_levels; // one per entry when max_rep > 0, else empty

    // The non-null values, in the vector of the leaf's physical type (the others stay empty).
    std::vector<std::uint8_t> bools; // 0 or 1
    std::vector<std::int32_t> i32;
    std::vector<std::int64_t> i64;
    std::vector<double> f64;
    // byte_array and fixed_len_byte_array: values concatenated; value k is
    // bytes[k == 0 ? 0 : ends[k-1], ends[k]).
    std::string bytes;
    std::vector<std::size_t> ends;

    // An entry with no value at this leaf: def < max_def says at which level the path stops.
    // On a required leaf (max_def 0) there is no such entry and nothing is stored; the writer
    // then reports the column's row count as different from the others'.
    void push_null(std::uint8_t def, std::uint8_t rep = 0) { levels(def, rep); }
    void push_bool(bool v, std::uint8_t rep = 0) {
        levels(max_def, rep);
        bools.push_back(v ? 1 : 0);
    }
    void push_i32(std::int32_t v, std::uint8_t rep = 0) {
        levels(max_def, rep);
        i32.push_back(v);
    }
    void push_i64(std::int64_t v, std::uint8_t rep = 0) {
        levels(max_def, rep);
        i64.push_back(v);
    }
    void push_double(double v, std::uint8_t rep = 0) {
        levels(max_def, rep);
        f64.push_back(v);
    }
    void push_bytes(std::string_view v, std::uint8_t rep = 0) {
        levels(max_def, rep);
        bytes.append(v);
        ends.push_back(bytes.size());
    }

    std::string_view byte_value(std::size_t k) const noexcept {
        const std::size_t b = k == 0 ? 0 : ends[k - 1];
        return std::string_view(bytes).substr(b, ends[k] - b);
    }

    // Keeps the capacity, so a sink reuses one set of buffers for every row group.
    void clear() noexcept {
        def_levels.clear();
        rep_levels.clear();
        bools.clear();
        i32.clear();
        i64.clear();
        f64.clear();
        bytes.clear();
        ends.clear();
    }

private:
    void levels(std::uint8_t def, std::uint8_t rep) {
        if (max_def > 0) def_levels.push_back(def);
        if (max_rep > 0) rep_levels.push_back(rep);
    }
};

} // namespace skiff::parquet
