// RLE / bit-packing hybrid encoder.
#include <skiff/parquet/encoding.hpp>

#include <skiff/parquet/thrift_compact.hpp>

#include <algorithm>
#include <bit>

namespace skiff::parquet {

int bit_width(std::uint32_t max_value) noexcept { return static_cast<int>(std::bit_width(max_value)); }

namespace {

template <typename T>
std::size_t run_at(const T* v, std::size_t i, std::size_t n) noexcept {
    std::size_t j = i + 1;
    while (j < n && v[j] == v[i]) ++j;
    return j - i;
}

template <typename T>
void append_rle_run(std::string& out, T value, std::size_t count, int bw) {
    thrift::append_varint(out, std::uint64_t{count} << 1);
    // The repeated value takes ceil(bit_width / 8) bytes, little-endian.
    const auto v = static_cast<std::uint32_t>(value);
    for (int b = 0; b < (bw + 7) / 8; ++b) out.push_back(static_cast<char>((v >> (8 * b)) & 0xff));
}

template <typename T>
void append_packed_run(std::string& out, const T* v, std::size_t count, int bw) {
    const std::size_t groups = (count + 7) / 8;
    thrift::append_varint(out, (std::uint64_t{groups} << 1) | 1);
    const std::size_t start = out.size();
    out.resize(start + groups * static_cast<std::size_t>(bw));
    char* p = out.data() + start;
    std::uint64_t acc = 0;
    int bits = 0;
    for (std::size_t k = 0; k < groups * 8; ++k) {
        // Padding values past the end are zero (the reader knows the count from the page).
        const std::uint64_t x = k < count ? static_cast<std::uint64_t>(v[k]) : 0;
        acc |= x << bits;
        bits += bw;
        while (bits >= 8) {
            *p++ = static_cast<char>(acc & 0xff);
            acc >>= 8;
            bits -= 8;
        }
    }
}

template <typename T>
void encode(std::string& out, std::span<const T> values, int bw) {
    const T* v = values.data();
    const std::size_t n = values.size();
    std::size_t i = 0;
    while (i < n) {
        const std::size_t r = run_at(v, i, n);
        if (r >= 8) {
            append_rle_run(out, v[i], r, bw);
            i += r;
            continue;
        }
        // Bit-pack whole groups of 8 until a run of 8 or more starts at a group boundary; a
        // shorter tail would need padding, which is only allowed at the very end.
        const std::size_t start = i;
        for (;;) {
            i = std::min(i + 8, n);
            if (i >= n) break;
            if (run_at(v, i, std::min(n, i + 8)) >= 8) break;
        }
        append_packed_run(out, v + start, i - start, bw);
    }
}

} // namespace

void rle_hybrid_append(std::string& out, std::span<const std::uint8_t> values, int bw) { encode(out, values, bw); }
void rle_hybrid_append(std::string& out, std::span<const std::uint32_t> values, int bw) { encode(out, values, bw); }

void append_levels_v1(std::string& out, std::span<const std::uint8_t> levels, int bw) {
    const std::size_t at = out.size();
    out.append(4, '\0');
    encode(out, levels, bw);
    const auto len = static_cast<std::uint32_t>(out.size() - at - 4);
    for (int b = 0; b < 4; ++b) out[at + b] = static_cast<char>((len >> (8 * b)) & 0xff);
}

} // namespace skiff::parquet
