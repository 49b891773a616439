// RLE / bit-packing hybrid decoder (Encodings.md, "Run Length Encoding / Bit-Packing Hybrid").
#include <skiff/parquet/decoding.hpp>

#include <skiff/core/varint.hpp>

#include <algorithm>
#include <span>
#include <string>

namespace skiff::parquet {

namespace {

parquet_error corrupt(const char* what) { return {errc::corrupt, std::string("parquet levels/indices: ") + what}; }

template <typename T>
result<std::size_t, parquet_error> decode(std::string_view in, int bw, std::size_t n, std::uint32_t max_value,
                                          std::vector<T>& out) {
    if (bw < 0 || bw > 32) return failure{corrupt("bit width above 32")};
    const std::size_t base = out.size();
    // n was bounded by the caller (page value counts are capped), so this cannot run away.
    out.resize(base + n);
    T* dst = out.data() + base;
    std::size_t got = 0, pos = 0;
    const std::span<const char> bytes(in.data(), in.size());
    const std::size_t value_bytes = (static_cast<std::size_t>(bw) + 7) / 8;
    auto fail = [&](parquet_error e) {
        out.resize(base);
        return failure{std::move(e)};
    };
    while (got < n) {
        std::uint64_t h = 0;
        if (pos >= in.size() || varint::read_unsigned64(bytes, pos, h) != varint::read_status::ok)
            return fail(corrupt("the runs end before the page's values"));
        if ((h & 1) == 0) {
            const std::uint64_t count = h >> 1;
            if (count == 0) return fail(corrupt("an empty RLE run"));
            if (in.size() - pos < value_bytes) return fail(corrupt("an RLE run beyond the data"));
            std::uint32_t v = 0;
            for (std::size_t b = 0; b < value_bytes; ++b)
                v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(in[pos + b])) << (8 * b);
            pos += value_bytes;
            if (v > max_value) {
                return fail({errc::level_out_of_range, "parquet levels/indices: value " + std::to_string(v) +
                                                           " above the maximum " + std::to_string(max_value)});
            }
            const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(count, n - got));
            std::fill(dst + got, dst + got + take, static_cast<T>(v));
            got += take;
        } else {
            const std::uint64_t groups = h >> 1;
            if (groups == 0) return fail(corrupt("an empty bit-packed run"));
            // Check the run's size before multiplying a hostile count.
            const std::size_t avail = in.size() - pos;
            if (bw > 0 && groups > avail / static_cast<std::size_t>(bw))
                return fail(corrupt("a bit-packed run beyond the data"));
            const std::size_t run_bytes = static_cast<std::size_t>(groups) * static_cast<std::size_t>(bw);
            const std::uint64_t run_values = groups > (std::uint64_t{1} << 60) ? (std::uint64_t{1} << 63) : groups * 8;
            const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(run_values, n - got));
            const auto* p = reinterpret_cast<const std::uint8_t*>(in.data() + pos);
            const std::uint64_t mask = bw == 32 ? 0xffffffffULL : ((std::uint64_t{1} << bw) - 1);
            std::uint64_t acc = 0;
            int bits = 0;
            std::size_t at = 0;
            for (std::size_t k = 0; k < take; ++k) {
                while (bits < bw) {
                    acc |= std::uint64_t{p[at++]} << bits;
                    bits += 8;
                }
                const auto v = static_cast<std::uint32_t>(acc & mask);
                acc = bw == 0 ? acc : acc >> bw;
                bits -= bw;
                if (v > max_value) {
                    return fail({errc::level_out_of_range, "parquet levels/indices: value " + std::to_string(v) +
                                                               " above the maximum " + std::to_string(max_value)});
                }
                dst[got + k] = static_cast<T>(v);
            }
            got += take;
            pos += run_bytes;
        }
    }
    return pos;
}

} // namespace

result<std::size_t, parquet_error> rle_hybrid_decode(std::string_view in, int bit_width, std::size_t n,
                                                     std::uint32_t max_value, std::vector<std::uint8_t>& out) {
    return decode(in, bit_width, n, std::min<std::uint32_t>(max_value, 255), out);
}

result<std::size_t, parquet_error> rle_hybrid_decode(std::string_view in, int bit_width, std::size_t n,
                                                     std::uint32_t max_value, std::vector<std::uint32_t>& out) {
    return decode(in, bit_width, n, max_value, out);
}

} // namespace skiff::parquet
