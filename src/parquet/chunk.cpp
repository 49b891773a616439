// Encoding one column chunk: statistics, the dictionary decision, data pages v1, compression
// (parquet-format README "Column chunks", Encodings.md, PageHeader in parquet.thrift).
#include "chunk.hpp"

#include <skiff/parquet/encoding.hpp>
#include <skiff/parquet/thrift_compact.hpp>

#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace skiff::parquet::detail {

static_assert(std::endian::native == std::endian::little, "PLAIN values are copied as little-endian memory");

scratch::scratch() : cctx(ZSTD_createCCtx()) {}
scratch::~scratch() { ZSTD_freeCCtx(cctx); }

namespace {

template <typename T>
std::string le_bytes(T v) {
    std::string s(sizeof(T), '\0');
    std::memcpy(s.data(), &v, sizeof(T));
    return s;
}
template <typename T>
T from_le(std::string_view s) noexcept {
    T v{};
    if (s.size() == sizeof(T)) std::memcpy(&v, s.data(), sizeof(T));
    return v;
}

template <typename T>
void min_max(const std::vector<T>& v, chunk_stats& st) {
    if (v.empty()) return;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    st.min = le_bytes(*lo);
    st.max = le_bytes(*hi);
}

chunk_stats compute_stats(const leaf& l, const column_data& c, std::size_t entries) {
    chunk_stats st;
    switch (l.type) {
    case physical_type::boolean: {
        if (c.bools.empty()) break;
        const auto [lo, hi] = std::minmax_element(c.bools.begin(), c.bools.end());
        st.min = std::string(1, static_cast<char>(*lo));
        st.max = std::string(1, static_cast<char>(*hi));
        break;
    }
    case physical_type::int32: min_max(c.i32, st); break;
    case physical_type::int64: min_max(c.i64, st); break;
    case physical_type::double_: {
        // NaN has no place in an order; zeros follow the spec's rule (-0.0 min, +0.0 max) so a
        // reader that compares with either sign still includes every zero.
        double lo = std::numeric_limits<double>::infinity(), hi = -lo;
        bool any = false;
        for (double d : c.f64) {
            if (std::isnan(d)) {
                ++st.nan_count;
                continue;
            }
            any = true;
            lo = std::min(lo, d);
            hi = std::max(hi, d);
        }
        if (!any) break;
        if (lo == 0) lo = -0.0;
        if (hi == 0) hi = 0.0;
        st.min = le_bytes(lo);
        st.max = le_bytes(hi);
        break;
    }
    case physical_type::byte_array:
    case physical_type::fixed_len_byte_array: {
        if (c.ends.empty()) break;
        // std::string_view compares through char_traits<char>, i.e. as unsigned bytes.
        std::string_view lo = c.byte_value(0), hi = lo;
        for (std::size_t k = 1; k < c.ends.size(); ++k) {
            const auto v = c.byte_value(k);
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
        st.min = std::string(lo);
        st.max = std::string(hi);
        break;
    }
    }
    st.null_count = static_cast<std::int64_t>(entries - (c.bools.size() + c.i32.size() + c.i64.size() + c.f64.size() + c.ends.size()));
    return st;
}

std::size_t plain_width(physical_type t) noexcept {
    switch (t) {
    case physical_type::int32: return 4;
    case physical_type::int64:
    case physical_type::double_: return 8;
    default: return 0;
    }
}

void append_plain(std::string& out, const leaf& l, const column_data& c, std::size_t v0, std::size_t v1) {
    switch (l.type) {
    case physical_type::boolean: {
        // Bit-packed, LSB first, padded to a byte.
        const std::size_t at = out.size();
        out.append((v1 - v0 + 7) / 8, '\0');
        for (std::size_t k = v0; k < v1; ++k)
            if (c.bools[k]) out[at + (k - v0) / 8] = static_cast<char>(out[at + (k - v0) / 8] | (1 << ((k - v0) % 8)));
        break;
    }
    case physical_type::int32: out.append(reinterpret_cast<const char*>(c.i32.data() + v0), (v1 - v0) * 4); break;
    case physical_type::int64: out.append(reinterpret_cast<const char*>(c.i64.data() + v0), (v1 - v0) * 8); break;
    case physical_type::double_: out.append(reinterpret_cast<const char*>(c.f64.data() + v0), (v1 - v0) * 8); break;
    case physical_type::byte_array:
        for (std::size_t k = v0; k < v1; ++k) {
            const auto v = c.byte_value(k);
            const auto n = static_cast<std::uint32_t>(v.size());
            char len[4];
            std::memcpy(len, &n, 4);
            out.append(len, 4);
            out.append(v);
        }
        break;
    case physical_type::fixed_len_byte_array: {
        const std::size_t b = v0 == 0 ? 0 : c.ends[v0 - 1];
        const std::size_t e = v1 == 0 ? 0 : c.ends[v1 - 1];
        out.append(c.bytes, b, e - b);
        break;
    }
    }
}

std::uint64_t mix64(std::uint64_t x) noexcept {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

std::uint64_t hash_bytes(std::string_view s) noexcept {
    std::uint64_t h = 0x9e3779b97f4a7c15ULL ^ s.size();
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        std::uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ mix64(w)) * 0x100000001b3ULL;
    }
    std::uint64_t tail = 0;
    if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
    return mix64(h ^ tail);
}

// Builds the dictionary into s.dict_keys / s.dict_views and the indices into s.indices.
// Returns false when it does not fit the bounds or clearly will not pay.
bool build_dictionary(const leaf& l, const column_data& c, const writer_options& o, scratch& s, std::size_t& dict_bytes) {
    const bool bytes = l.type == physical_type::byte_array || l.type == physical_type::fixed_len_byte_array;
    const std::size_t n = bytes ? c.ends.size() : (c.i32.size() + c.i64.size() + c.f64.size());
    s.indices.clear();
    s.dict_keys.clear();
    s.dict_views.clear();
    s.indices.reserve(n);
    std::size_t cap = 1024;
    s.slots.assign(cap, 0);
    dict_bytes = 0;
    std::size_t entries = 0;
    for (std::size_t k = 0; k < n; ++k) {
        std::uint64_t key = 0, h = 0;
        std::string_view view;
        if (bytes) {
            view = c.byte_value(k);
            h = hash_bytes(view);
        } else {
            if (l.type == physical_type::int32) key = static_cast<std::uint32_t>(c.i32[k]);
            else if (l.type == physical_type::int64) key = static_cast<std::uint64_t>(c.i64[k]);
            else std::memcpy(&key, &c.f64[k], 8); // bit patterns: -0.0 and each NaN stay themselves
            h = mix64(key);
        }
        std::size_t slot = h & (cap - 1);
        std::uint32_t found = 0;
        while (s.slots[slot] != 0) {
            const std::uint32_t idx = s.slots[slot] - 1;
            if (bytes ? s.dict_views[idx] == view : s.dict_keys[idx] == key) {
                found = s.slots[slot];
                break;
            }
            slot = (slot + 1) & (cap - 1);
        }
        if (found == 0) {
            if (bytes) {
                s.dict_views.push_back(view);
                dict_bytes += view.size() + (l.type == physical_type::byte_array ? 4 : 0);
            } else {
                s.dict_keys.push_back(key);
                dict_bytes += plain_width(l.type);
            }
            found = static_cast<std::uint32_t>(++entries);
            s.slots[slot] = found;
            if (entries > o.dictionary_max_entries || dict_bytes > o.dictionary_max_bytes) return false;
            // Mostly distinct after a fair sample: a dictionary would only add the indices.
            if (k >= 4096 && entries * 4 > (k + 1) * 3) return false;
            if (entries * 2 > cap) {
                cap *= 2;
                s.slots.assign(cap, 0);
                for (std::uint32_t i = 0; i < entries; ++i) {
                    std::size_t sl = (bytes ? hash_bytes(s.dict_views[i]) : mix64(s.dict_keys[i])) & (cap - 1);
                    while (s.slots[sl] != 0) sl = (sl + 1) & (cap - 1);
                    s.slots[sl] = i + 1;
                }
            }
        }
        s.indices.push_back(found - 1);
    }
    return entries > 0;
}

void append_dictionary_plain(std::string& out, const leaf& l, const scratch& s) {
    if (l.type == physical_type::byte_array || l.type == physical_type::fixed_len_byte_array) {
        for (const auto& v : s.dict_views) {
            if (l.type == physical_type::byte_array) {
                const auto n = static_cast<std::uint32_t>(v.size());
                char len[4];
                std::memcpy(len, &n, 4);
                out.append(len, 4);
            }
            out.append(v);
        }
        return;
    }
    const std::size_t w = plain_width(l.type);
    for (std::uint64_t k : s.dict_keys) out.append(reinterpret_cast<const char*>(&k), w); // low bytes: little-endian
}

// Compresses s.page (if asked) and appends header + body. Returns false on a codec error.
bool emit_page(std::string& out, const writer_options& o, scratch& s, std::int32_t type, std::int32_t num_values,
               std::int32_t encoding, std::int64_t& uncompressed, std::int64_t& compressed) {
    std::string_view body = s.page;
    if (o.compression == codec::zstd) {
        s.compressed.resize(ZSTD_compressBound(s.page.size()));
        const std::size_t n = ZSTD_compressCCtx(s.cctx, s.compressed.data(), s.compressed.size(), s.page.data(),
                                                s.page.size(), o.zstd_level);
        if (ZSTD_isError(n)) return false;
        body = std::string_view(s.compressed.data(), n);
    }
    s.header.clear();
    thrift::compact_writer w(s.header);
    w.field_i32(1, type);
    w.field_i32(2, static_cast<std::int32_t>(s.page.size()));
    w.field_i32(3, static_cast<std::int32_t>(body.size()));
    if (type == 0) {
        w.begin_struct(5); // DataPageHeader
        w.field_i32(1, num_values);
        w.field_i32(2, encoding);
        w.field_i32(3, enc_rle);
        w.field_i32(4, enc_rle);
        w.end_struct();
    } else {
        w.begin_struct(7); // DictionaryPageHeader
        w.field_i32(1, num_values);
        w.field_i32(2, enc_plain);
        w.end_struct();
    }
    w.end_struct();
    out += s.header;
    out.append(body);
    uncompressed += static_cast<std::int64_t>(s.header.size() + s.page.size());
    compressed += static_cast<std::int64_t>(s.header.size() + body.size());
    return true;
}

} // namespace

int compare_plain(physical_type t, std::string_view a, std::string_view b) noexcept {
    auto cmp = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
    switch (t) {
    case physical_type::boolean: return cmp(a.empty() ? 0 : a[0], b.empty() ? 0 : b[0]);
    case physical_type::int32: return cmp(from_le<std::int32_t>(a), from_le<std::int32_t>(b));
    case physical_type::int64: return cmp(from_le<std::int64_t>(a), from_le<std::int64_t>(b));
    case physical_type::double_: return cmp(from_le<double>(a), from_le<double>(b));
    case physical_type::byte_array:
    case physical_type::fixed_len_byte_array: return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
    }
    return 0;
}

result<chunk_meta, parquet_error> write_chunk(const leaf& l, const column_data& c, const writer_options& o, scratch& s,
                                              std::string& out) {
    const bool bytes = l.type == physical_type::byte_array || l.type == physical_type::fixed_len_byte_array;
    const std::size_t nvalues = c.bools.size() + c.i32.size() + c.i64.size() + c.f64.size() + c.ends.size();
    const std::size_t entries = l.max_def > 0 ? c.def_levels.size() : nvalues;

    chunk_meta m;
    m.start = static_cast<std::int64_t>(out.size());
    m.num_values = static_cast<std::int64_t>(entries);
    m.has_levels = l.max_def > 0 || l.max_rep > 0;
    m.stats = compute_stats(l, c, entries);

    // Dictionary when it pays: dictionary page + indices at least 10% smaller than PLAIN (near
    // the break-even point PLAIN compresses as well and costs no hash lookups to read).
    bool use_dict = false;
    std::size_t dict_bytes = 0;
    int index_bw = 0;
    std::size_t n_dict = 0;
    if (o.dictionary && l.type != physical_type::boolean && nvalues > 0 && build_dictionary(l, c, o, s, dict_bytes)) {
        n_dict = bytes ? s.dict_views.size() : s.dict_keys.size();
        // Bit width at least 1: some readers mishandle 0-bit indices of one-entry dictionaries.
        index_bw = std::max(1, bit_width(static_cast<std::uint32_t>(n_dict - 1)));
        const std::size_t plain = bytes ? (c.bytes.size() + (l.type == physical_type::byte_array ? 4 * nvalues : 0))
                                        : nvalues * plain_width(l.type);
        const std::size_t dict_cost = dict_bytes + (nvalues * static_cast<std::size_t>(index_bw) + 7) / 8;
        use_dict = dict_cost * 10 < plain * 9;
    }
    if (use_dict) {
        s.page.clear();
        append_dictionary_plain(s.page, l, s);
        m.dictionary_page_offset = static_cast<std::int64_t>(out.size());
        if (!emit_page(out, o, s, 2, static_cast<std::int32_t>(n_dict), enc_plain, m.total_uncompressed, m.total_compressed))
            return failure{parquet_error(errc::compression_failed, "parquet column " + l.dotted() + ": zstd failed")};
    }
    m.data_page_offset = static_cast<std::int64_t>(out.size());

    const int def_bw = bit_width(l.max_def);
    const int rep_bw = bit_width(l.max_rep);
    const std::uint64_t level_bits = static_cast<std::uint64_t>(def_bw + rep_bw);
    const std::uint64_t fixed_bits = use_dict ? static_cast<std::uint64_t>(index_bw)
                                     : l.type == physical_type::boolean ? 1
                                     : l.type == physical_type::fixed_len_byte_array
                                         ? 8 * static_cast<std::uint64_t>(l.type_length)
                                         : 8 * plain_width(l.type);
    const std::uint64_t page_bits = 8 * static_cast<std::uint64_t>(std::max<std::size_t>(o.page_size, 1));

    std::size_t e = 0, v = 0;
    while (e < entries) {
        const std::size_t e0 = e, v0 = v;
        std::uint64_t bits = 0;
        while (e < entries) {
            const bool present = l.max_def == 0 || c.def_levels[e] == l.max_def;
            bits += level_bits;
            if (present) {
                bits += (l.type == physical_type::byte_array && !use_dict) ? 8 * (4 + c.byte_value(v).size()) : fixed_bits;
                ++v;
            }
            ++e;
            // Pages end at row boundaries (repetition level 0), as page indexes and readers expect.
            if (bits >= page_bits && (l.max_rep == 0 || e == entries || c.rep_levels[e] == 0)) break;
            // num_values is an i32 in the page header.
            if (e - e0 >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() / 2) &&
                (l.max_rep == 0 || e == entries || c.rep_levels[e] == 0))
                break;
        }
        s.page.clear();
        if (l.max_rep > 0) append_levels_v1(s.page, std::span(c.rep_levels.data() + e0, e - e0), rep_bw);
        if (l.max_def > 0) append_levels_v1(s.page, std::span(c.def_levels.data() + e0, e - e0), def_bw);
        if (use_dict) {
            s.page.push_back(static_cast<char>(index_bw));
            rle_hybrid_append(s.page, std::span<const std::uint32_t>(s.indices.data() + v0, v - v0), index_bw);
        } else {
            append_plain(s.page, l, c, v0, v);
        }
        if (!emit_page(out, o, s, 0, static_cast<std::int32_t>(e - e0), use_dict ? enc_rle_dictionary : enc_plain,
                       m.total_uncompressed, m.total_compressed))
            return failure{parquet_error(errc::compression_failed, "parquet column " + l.dotted() + ": zstd failed")};
    }
    m.dictionary = use_dict;
    return m;
}

} // namespace skiff::parquet::detail
