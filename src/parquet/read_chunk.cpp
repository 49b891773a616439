// Decoding one column chunk: page headers, decompression, levels, PLAIN and dictionary values
// (parquet-format README "Column chunks", Encodings.md, PageHeader in parquet.thrift).
#include "read_chunk.hpp"

#include <skiff/parquet/decoding.hpp>
#include <skiff/parquet/encoding.hpp>
#include <skiff/parquet/thrift_compact.hpp>

#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <span>

namespace skiff::parquet::detail {

static_assert(std::endian::native == std::endian::little, "PLAIN values are copied as little-endian memory");

read_scratch::read_scratch() : dctx(ZSTD_createDCtx()) {}
read_scratch::~read_scratch() { ZSTD_freeDCtx(dctx); }

namespace {

// Page types and codecs of parquet.thrift.
constexpr std::int64_t page_data = 0;
constexpr std::int64_t page_dictionary = 2;
constexpr std::int64_t page_data_v2 = 3;
constexpr std::int32_t codec_uncompressed = 0;
constexpr std::int32_t codec_snappy = 1;
constexpr std::int32_t codec_gzip = 2;
constexpr std::int32_t codec_zstd = 6;
constexpr std::int64_t enc_plain_dictionary = 2;
constexpr std::int64_t enc_rle_dictionary = 8;

struct ctx {
    const leaf& l;
    const reader_options& o;
    read_scratch& s;
    column_data& out;

    parquet_error err(errc c, const std::string& what) const { return {c, "parquet column " + l.dotted() + ": " + what}; }
    parquet_error corrupt(const std::string& what) const { return err(errc::corrupt, what); }
    parquet_error prefixed(parquet_error e) const {
        e.message = "parquet column " + l.dotted() + ": " + e.message;
        return e;
    }
};

std::size_t fixed_width(const leaf& l) noexcept {
    switch (l.type) {
    case physical_type::int32: return 4;
    case physical_type::int64:
    case physical_type::double_: return 8;
    case physical_type::fixed_len_byte_array: return static_cast<std::size_t>(l.type_length);
    default: return 0;
    }
}

// The bytes of a page body after decompression: `in` itself, or s.page. The declared size
// was checked against the limits; a codec that yields another size makes the page corrupt.
result<std::string_view, parquet_error> decompress(const ctx& c, std::int32_t codec, std::string_view in,
                                                   std::size_t size) {
    auto& buf = c.s.page;
    switch (codec) {
    case codec_uncompressed:
        if (in.size() != size) return failure{c.corrupt("an uncompressed page whose two sizes differ")};
        return in;
    case codec_zstd: {
        buf.resize(size);
        const std::size_t n = ZSTD_decompressDCtx(c.s.dctx, buf.data(), size, in.data(), in.size());
        if (ZSTD_isError(n)) return failure{c.err(errc::compression_failed, std::string("zstd: ") + ZSTD_getErrorName(n))};
        if (n != size) return failure{c.corrupt("a zstd page shorter than its declared size")};
        return std::string_view(buf.data(), size);
    }
    case codec_snappy: {
        std::size_t n = 0;
        if (snappy_uncompressed_length(in.data(), in.size(), &n) != SNAPPY_OK || n != size)
            return failure{c.corrupt("a snappy page whose size is not the declared one")};
        buf.resize(size);
        if (snappy_uncompress(in.data(), in.size(), buf.data(), &n) != SNAPPY_OK || n != size)
            return failure{c.err(errc::compression_failed, "snappy cannot decompress a page")};
        return std::string_view(buf.data(), size);
    }
    case codec_gzip: {
        buf.resize(size);
        z_stream z{};
        // 15 + 32: a zlib or gzip header, detected.
        if (inflateInit2(&z, 15 + 32) != Z_OK) return failure{c.err(errc::compression_failed, "zlib init failed")};
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
        z.avail_in = static_cast<uInt>(in.size());
        z.next_out = reinterpret_cast<Bytef*>(buf.data());
        z.avail_out = static_cast<uInt>(size);
        const int r = inflate(&z, Z_FINISH);
        const bool whole = r == Z_STREAM_END && z.avail_out == 0;
        inflateEnd(&z);
        if (!whole) return failure{c.corrupt("a gzip page that does not inflate to its declared size")};
        return std::string_view(buf.data(), size);
    }
    default: break;
    }
    return failure{c.err(errc::compression_failed, "unsupported codec " + std::to_string(codec))};
}

result<void, parquet_error> load_dictionary(const ctx& c, std::string_view data, std::int64_t n) {
    auto& s = c.s;
    s.dict_ends.clear();
    if (n < 0) return failure{c.corrupt("a negative dictionary size")};
    const auto count = static_cast<std::uint64_t>(n);
    if (c.l.type == physical_type::boolean) return failure{c.corrupt("a dictionary for a boolean column")};
    if (c.l.type == physical_type::byte_array) {
        if (count > data.size() / 4) return failure{c.corrupt("more dictionary entries than the page holds")};
        s.dict_ends.reserve(count);
        std::size_t pos = 0;
        s.dict.clear();
        for (std::uint64_t k = 0; k < count; ++k) {
            if (data.size() - pos < 4) return failure{c.corrupt("a dictionary entry beyond the page")};
            std::uint32_t len = 0;
            std::memcpy(&len, data.data() + pos, 4);
            pos += 4;
            if (len > data.size() - pos) return failure{c.corrupt("a dictionary entry beyond the page")};
            s.dict.append(data.data() + pos, len);
            pos += len;
            s.dict_ends.push_back(s.dict.size());
        }
    } else {
        const std::size_t w = fixed_width(c.l);
        if (w == 0 || count > data.size() / w || count * w != data.size())
            return failure{c.corrupt("a dictionary page whose size is not its entries'")};
        s.dict.assign(data);
    }
    s.dict_count = static_cast<std::size_t>(count);
    return ok();
}

result<void, parquet_error> add_bytes(const ctx& c, const char* p, std::size_t len) {
    auto& out = c.out;
    if (len > c.o.max_chunk_bytes - out.bytes.size())
        return failure{c.corrupt("decoded values beyond max_chunk_bytes")};
    out.bytes.append(p, len);
    out.ends.push_back(out.bytes.size());
    return ok();
}

template <typename T>
result<void, parquet_error> plain_fixed(const ctx& c, std::vector<T>& v, std::string_view data, std::size_t n) {
    if (n > data.size() / sizeof(T)) return failure{c.corrupt("fewer PLAIN values than the levels say")};
    const std::size_t at = v.size();
    v.resize(at + n);
    std::memcpy(v.data() + at, data.data(), n * sizeof(T));
    return ok();
}

result<void, parquet_error> plain(const ctx& c, std::string_view data, std::size_t n) {
    auto& out = c.out;
    switch (c.l.type) {
    case physical_type::boolean: {
        if ((n + 7) / 8 > data.size()) return failure{c.corrupt("fewer PLAIN booleans than the levels say")};
        const std::size_t at = out.bools.size();
        out.bools.resize(at + n);
        for (std::size_t k = 0; k < n; ++k) out.bools[at + k] = (static_cast<std::uint8_t>(data[k / 8]) >> (k % 8)) & 1;
        return ok();
    }
    case physical_type::int32: return plain_fixed(c, out.i32, data, n);
    case physical_type::int64: return plain_fixed(c, out.i64, data, n);
    case physical_type::double_: return plain_fixed(c, out.f64, data, n);
    case physical_type::byte_array: {
        std::size_t pos = 0;
        for (std::size_t k = 0; k < n; ++k) {
            if (data.size() - pos < 4) return failure{c.corrupt("a PLAIN value beyond the page")};
            std::uint32_t len = 0;
            std::memcpy(&len, data.data() + pos, 4);
            pos += 4;
            if (len > data.size() - pos) return failure{c.corrupt("a PLAIN value beyond the page")};
            auto r = add_bytes(c, data.data() + pos, len);
            if (!r) return r;
            pos += len;
        }
        return ok();
    }
    case physical_type::fixed_len_byte_array: {
        const std::size_t w = fixed_width(c.l);
        if (w == 0 || n > data.size() / w) return failure{c.corrupt("fewer PLAIN values than the levels say")};
        for (std::size_t k = 0; k < n; ++k) {
            auto r = add_bytes(c, data.data() + k * w, w);
            if (!r) return r;
        }
        return ok();
    }
    }
    return failure{c.corrupt("unsupported physical type")};
}

template <typename T>
void gather_fixed(const read_scratch& s, std::vector<T>& v) {
    const std::size_t at = v.size();
    v.resize(at + s.indices.size());
    for (std::size_t k = 0; k < s.indices.size(); ++k)
        std::memcpy(&v[at + k], s.dict.data() + std::size_t{s.indices[k]} * sizeof(T), sizeof(T));
}

result<void, parquet_error> dictionary_values(const ctx& c, std::string_view data, std::size_t n) {
    auto& s = c.s;
    if (n == 0) return ok();
    if (s.dict_count == 0) return failure{c.corrupt("dictionary-encoded values without a dictionary page")};
    if (data.empty()) return failure{c.corrupt("dictionary indices without a bit width")};
    const int bw = static_cast<std::uint8_t>(data[0]);
    s.indices.clear();
    auto r = rle_hybrid_decode(data.substr(1), bw, n, static_cast<std::uint32_t>(s.dict_count - 1), s.indices);
    if (!r) {
        auto e = std::move(r).error();
        if (e.code == errc::level_out_of_range) e.code = errc::corrupt; // an index, not a level
        return failure{c.prefixed(std::move(e))};
    }
    auto& out = c.out;
    switch (c.l.type) {
    case physical_type::int32: gather_fixed(s, out.i32); return ok();
    case physical_type::int64: gather_fixed(s, out.i64); return ok();
    case physical_type::double_: gather_fixed(s, out.f64); return ok();
    case physical_type::byte_array:
        for (auto i : s.indices) {
            const std::size_t b = i == 0 ? 0 : s.dict_ends[i - 1];
            auto a = add_bytes(c, s.dict.data() + b, s.dict_ends[i] - b);
            if (!a) return a;
        }
        return ok();
    case physical_type::fixed_len_byte_array: {
        const std::size_t w = fixed_width(c.l);
        for (auto i : s.indices) {
            auto a = add_bytes(c, s.dict.data() + std::size_t{i} * w, w);
            if (!a) return a;
        }
        return ok();
    }
    case physical_type::boolean: break;
    }
    return failure{c.corrupt("dictionary-encoded booleans")};
}

// Levels of one page: appends n entries to `levels`; returns the bytes they took.
result<std::size_t, parquet_error> levels(const ctx& c, std::string_view data, std::size_t n, std::uint8_t max,
                                          std::vector<std::uint8_t>& into) {
    auto r = rle_hybrid_decode(data, bit_width(max), n, max, into);
    if (!r) return failure{c.prefixed(std::move(r).error())};
    return *r;
}

// The values part of a data page (v1 or v2), after its levels.
result<void, parquet_error> values(const ctx& c, std::int64_t encoding, std::string_view data, std::size_t first_entry,
                                   std::size_t n_entries) {
    std::size_t present = n_entries;
    if (c.l.max_def > 0) {
        present = static_cast<std::size_t>(std::count(c.out.def_levels.begin() + static_cast<std::ptrdiff_t>(first_entry),
                                                      c.out.def_levels.end(), c.l.max_def));
    }
    if (encoding == 0) return plain(c, data, present);
    if (encoding == enc_plain_dictionary || encoding == enc_rle_dictionary) return dictionary_values(c, data, present);
    return failure{c.corrupt("unsupported value encoding " + std::to_string(encoding))};
}

std::int64_t int_field(const thrift::value& v, std::int16_t id, std::int64_t fallback) {
    const thrift::value* f = v.field(id);
    return f ? f->i : fallback;
}

} // namespace

result<void, parquet_error> read_chunk(std::string_view file, const leaf& l, const column_chunk_info& ci,
                                       std::int64_t rows, const reader_options& o, read_scratch& s, column_data& out) {
    out.clear();
    out.max_def = l.max_def;
    out.max_rep = l.max_rep;
    s.dict_count = 0;
    const ctx c{l, o, s, out};

    // The chunk starts at its dictionary page when there is one (some writers put 0 there).
    std::int64_t start = ci.data_page_offset;
    if (ci.dictionary_page_offset && *ci.dictionary_page_offset > 0 && *ci.dictionary_page_offset < start)
        start = *ci.dictionary_page_offset;
    const auto fsize = static_cast<std::int64_t>(file.size());
    if (start < 4 || ci.total_compressed_size < 0 || start > fsize - 8 || ci.total_compressed_size > fsize - 8 - start)
        return failure{c.corrupt("the chunk's offsets are outside the file")};
    if (ci.num_values < 0) return failure{c.corrupt("a negative value count")};
    const std::string_view chunk = file.substr(static_cast<std::size_t>(start), static_cast<std::size_t>(ci.total_compressed_size));
    const std::span<const char> span(chunk.data(), chunk.size());
    const auto total = static_cast<std::uint64_t>(ci.num_values);

    std::uint64_t entries = 0;
    std::size_t pos = 0;
    while (entries < total) {
        if (pos >= chunk.size()) return failure{c.corrupt("the pages end before the chunk's values")};
        auto h = thrift::read_struct(span, pos);
        if (!h) return failure{c.prefixed(std::move(h).error())};
        const std::int64_t type = int_field(*h, 1, -1);
        const std::int64_t usize = int_field(*h, 2, -1);
        const std::int64_t csize = int_field(*h, 3, -1);
        if (usize < 0 || csize < 0 || static_cast<std::uint64_t>(csize) > chunk.size() - pos)
            return failure{c.corrupt("a page size that is missing, negative or beyond the chunk")};
        if (static_cast<std::uint64_t>(usize) > o.max_page_bytes)
            return failure{c.corrupt("a page of " + std::to_string(usize) + " bytes, above max_page_bytes")};
        const std::string_view body = chunk.substr(pos, static_cast<std::size_t>(csize));
        pos += static_cast<std::size_t>(csize);
        const auto size = static_cast<std::size_t>(usize);

        if (type == page_dictionary) {
            const thrift::value* d = h->field(7);
            if (!d || !d->field(1)) return failure{c.corrupt("a dictionary page without its header")};
            if (s.dict_count > 0 || entries > 0) return failure{c.corrupt("a dictionary page after the first page")};
            const std::int64_t enc = int_field(*d, 2, 0);
            if (enc != 0 && enc != enc_plain_dictionary)
                return failure{c.corrupt("a dictionary page encoded " + std::to_string(enc))};
            auto data = decompress(c, ci.codec, body, size);
            if (!data) return failure{std::move(data).error()};
            auto r = load_dictionary(c, *data, d->field(1)->i);
            if (!r) return r;
            continue;
        }
        if (type != page_data && type != page_data_v2) continue; // index pages and the like carry no values

        const bool v2 = type == page_data_v2;
        const thrift::value* d = h->field(v2 ? 8 : 5);
        if (!d || !d->field(1)) return failure{c.corrupt("a data page without its header")};
        const std::int64_t nv = d->field(1)->i;
        if (nv < 0 || static_cast<std::uint64_t>(nv) > total - entries)
            return failure{c.corrupt("a page with more values than the chunk")};
        if (static_cast<std::uint64_t>(nv) > o.max_page_values)
            return failure{c.corrupt("a page of " + std::to_string(nv) + " values, above max_page_values")};
        if (entries + static_cast<std::uint64_t>(nv) > o.max_chunk_values)
            return failure{c.corrupt("more than max_chunk_values values in the chunk")};
        const auto n = static_cast<std::size_t>(nv);
        const std::int64_t encoding = int_field(*d, v2 ? 4 : 2, -1);
        const std::size_t first = out.max_def > 0 ? out.def_levels.size() : 0;

        std::string_view rep_bytes, def_bytes, value_bytes;
        if (v2) {
            const std::int64_t dlen = int_field(*d, 5, -1), rlen = int_field(*d, 6, -1);
            const thrift::value* compressed = d->field(7);
            const bool is_compressed = compressed == nullptr || compressed->b;
            if (dlen < 0 || rlen < 0 || static_cast<std::uint64_t>(dlen) + static_cast<std::uint64_t>(rlen) > body.size() ||
                dlen + rlen > usize)
                return failure{c.corrupt("v2 level lengths beyond the page")};
            // v2 levels are never compressed; only the values after them are.
            rep_bytes = body.substr(0, static_cast<std::size_t>(rlen));
            def_bytes = body.substr(static_cast<std::size_t>(rlen), static_cast<std::size_t>(dlen));
            const std::string_view rest = body.substr(static_cast<std::size_t>(rlen + dlen));
            const auto rest_size = static_cast<std::size_t>(usize - rlen - dlen);
            if (is_compressed) {
                auto data = decompress(c, ci.codec, rest, rest_size);
                if (!data) return failure{std::move(data).error()};
                value_bytes = *data;
            } else {
                if (rest.size() != rest_size) return failure{c.corrupt("an uncompressed v2 page whose sizes differ")};
                value_bytes = rest;
            }
        } else {
            auto data = decompress(c, ci.codec, body, size);
            if (!data) return failure{std::move(data).error()};
            std::string_view rest = *data;
            // v1: each level block is prefixed by its 4-byte little-endian length.
            auto take = [&](std::uint8_t max, std::string_view& into) -> bool {
                if (max == 0) return true;
                if (rest.size() < 4) return false;
                std::uint32_t len = 0;
                std::memcpy(&len, rest.data(), 4);
                if (len > rest.size() - 4) return false;
                into = rest.substr(4, len);
                rest.remove_prefix(4 + std::size_t{len});
                return true;
            };
            if (!take(l.max_rep, rep_bytes) || !take(l.max_def, def_bytes))
                return failure{c.corrupt("a level block beyond the page")};
            value_bytes = rest;
        }
        if (l.max_rep > 0) {
            const bool chunk_start = out.rep_levels.empty();
            auto r = levels(c, rep_bytes, n, l.max_rep, out.rep_levels);
            if (!r) return failure{std::move(r).error()};
            if (chunk_start && n > 0 && out.rep_levels.front() != 0)
                return failure{c.corrupt("the first repetition level is not 0")};
        }
        if (l.max_def > 0) {
            auto r = levels(c, def_bytes, n, l.max_def, out.def_levels);
            if (!r) return failure{std::move(r).error()};
        }
        auto v = values(c, encoding, value_bytes, first, n);
        if (!v) return v;
        entries += static_cast<std::uint64_t>(nv);
    }

    const std::int64_t got_rows = l.max_rep > 0
                                      ? static_cast<std::int64_t>(std::count(out.rep_levels.begin(), out.rep_levels.end(), 0))
                                      : static_cast<std::int64_t>(entries);
    if (got_rows != rows)
        return failure{c.corrupt(std::to_string(got_rows) + " rows in a row group of " + std::to_string(rows))};
    return ok();
}

} // namespace skiff::parquet::detail
