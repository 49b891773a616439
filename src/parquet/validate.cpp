// Checking a shredded column against its leaf before a byte of it is written, so a bad row
// group is an error and never a corrupt file.
#include "chunk.hpp"

#include <cstdint>
#include <limits>
#include <string>

namespace skiff::parquet::detail {

namespace {

parquet_error err(errc c, const leaf& l, const std::string& what) {
    return {c, "parquet column " + l.dotted() + ": " + what};
}

std::size_t values_of(const leaf& l, const column_data& c) {
    switch (l.type) {
    case physical_type::boolean: return c.bools.size();
    case physical_type::int32: return c.i32.size();
    case physical_type::int64: return c.i64.size();
    case physical_type::double_: return c.f64.size();
    case physical_type::byte_array:
    case physical_type::fixed_len_byte_array: return c.ends.size();
    }
    return 0;
}

} // namespace

result<std::int64_t, parquet_error> validate(const leaf& l, const column_data& c) {
    if (c.max_def != l.max_def || c.max_rep != l.max_rep)
        return failure{err(errc::column_mismatch, l,
                           "built for max levels def " + std::to_string(c.max_def) + " rep " + std::to_string(c.max_rep) +
                               ", the schema has def " + std::to_string(l.max_def) + " rep " + std::to_string(l.max_rep))};
    const std::size_t nvalues = values_of(l, c);
    // Values in a vector of another type are a caller bug that would otherwise vanish silently.
    const std::size_t all = c.bools.size() + c.i32.size() + c.i64.size() + c.f64.size() + c.ends.size();
    if (all != nvalues || (l.type != physical_type::byte_array && l.type != physical_type::fixed_len_byte_array && !c.bytes.empty()))
        return failure{err(errc::value_mismatch, l, "values given for another physical type")};

    std::size_t entries = nvalues;
    if (l.max_def == 0 && !c.def_levels.empty())
        return failure{err(errc::column_mismatch, l, "definition levels given for a required column")};
    if (l.max_rep == 0 && !c.rep_levels.empty())
        return failure{err(errc::column_mismatch, l, "repetition levels given for a non-repeated column")};
    if (l.max_def > 0) entries = c.def_levels.size();
    if (l.max_rep > 0 && c.rep_levels.size() != entries)
        return failure{err(errc::column_mismatch, l,
                           std::to_string(c.rep_levels.size()) + " repetition levels for " + std::to_string(entries) +
                               " definition levels")};

    // The definition level of the repeated node at each repetition level: an entry that repeats
    // at level r continues a list that exists, so its path reaches at least that node.
    std::uint8_t rep_def[256] = {};
    for (std::size_t i = 0; i < l.path_rep.size(); ++i)
        if (i == 0 ? l.path_rep[0] > 0 : l.path_rep[i] > l.path_rep[i - 1]) rep_def[l.path_rep[i]] = l.path_def[i];

    std::size_t present = 0;
    std::int64_t rows = 0;
    for (std::size_t e = 0; e < entries; ++e) {
        const std::uint8_t d = l.max_def > 0 ? c.def_levels[e] : 0;
        if (d > l.max_def)
            return failure{err(errc::level_out_of_range, l,
                               "definition level " + std::to_string(d) + " above " + std::to_string(l.max_def) +
                                   " at entry " + std::to_string(e))};
        if (d == l.max_def) ++present;
        if (l.max_rep > 0) {
            const std::uint8_t r = c.rep_levels[e];
            if (r > l.max_rep)
                return failure{err(errc::level_out_of_range, l,
                                   "repetition level " + std::to_string(r) + " above " + std::to_string(l.max_rep) +
                                       " at entry " + std::to_string(e))};
            if (e == 0 && r != 0)
                return failure{err(errc::level_out_of_range, l, "the first repetition level is not 0")};
            if (r > 0 && d < rep_def[r])
                return failure{err(errc::level_out_of_range, l,
                                   "entry " + std::to_string(e) + " repeats a list its definition level says is missing")};
            if (r == 0) ++rows;
        }
    }
    if (l.max_rep == 0) rows = static_cast<std::int64_t>(entries);
    if (present != nvalues)
        return failure{err(errc::value_mismatch, l,
                           std::to_string(nvalues) + " values for " + std::to_string(present) + " non-null entries")};

    if (l.type == physical_type::boolean) {
        for (auto b : c.bools)
            if (b > 1) return failure{err(errc::value_mismatch, l, "a boolean value other than 0 or 1")};
    }
    if (l.type == physical_type::byte_array || l.type == physical_type::fixed_len_byte_array) {
        std::size_t prev = 0;
        for (std::size_t k = 0; k < c.ends.size(); ++k) {
            const std::size_t end = c.ends[k];
            if (end < prev || end > c.bytes.size())
                return failure{err(errc::value_mismatch, l, "byte offsets out of order or beyond the bytes")};
            const std::size_t len = end - prev;
            if (l.type == physical_type::fixed_len_byte_array && len != static_cast<std::size_t>(l.type_length))
                return failure{err(errc::value_mismatch, l,
                                   "a value of " + std::to_string(len) + " bytes for fixed length " +
                                       std::to_string(l.type_length))};
            if (len > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() / 2))
                return failure{err(errc::value_mismatch, l, "a value beyond 1 GiB")};
            prev = end;
        }
        if (prev != c.bytes.size()) return failure{err(errc::value_mismatch, l, "bytes beyond the last value")};
    }
    return rows;
}

} // namespace skiff::parquet::detail
