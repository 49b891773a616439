#include <skiff/core/crc32c.hpp>

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#endif

namespace skiff {

namespace {

constexpr std::uint32_t poly = 0x82F63B78u; // reflected Castagnoli polynomial

constexpr std::array<std::array<std::uint32_t, 256>, 8> make_tables() {
    std::array<std::array<std::uint32_t, 256>, 8> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i) {
        for (std::size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
    return t;
}
constexpr auto tables = make_tables();

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t crc32c_hw(const unsigned char* p, std::size_t n, std::uint32_t crc) {
    std::uint64_t c = ~crc;
    while (n >= 8) {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    auto c32 = static_cast<std::uint32_t>(c);
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}

bool have_sse42() {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    return (c & bit_SSE4_2) != 0;
}
const bool g_hw = have_sse42();
#endif

} // namespace

std::uint32_t crc32c_portable(const void* data, std::size_t len, std::uint32_t crc) noexcept {
    auto* p = static_cast<const unsigned char*>(data);
    std::uint32_t c = ~crc;
    while (len >= 8) {
        std::uint32_t lo, hi;
        std::memcpy(&lo, p, 4);
        std::memcpy(&hi, p + 4, 4);
        lo ^= c; // little-endian hosts only (x86_64, aarch64)
        c = tables[7][lo & 0xFF] ^ tables[6][(lo >> 8) & 0xFF] ^ tables[5][(lo >> 16) & 0xFF] ^
            tables[4][lo >> 24] ^ tables[3][hi & 0xFF] ^ tables[2][(hi >> 8) & 0xFF] ^
            tables[1][(hi >> 16) & 0xFF] ^ tables[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--) c = (c >> 8) ^ tables[0][(c ^ *p++) & 0xFF];
    return ~c;
}

std::uint32_t crc32c(const void* data, std::size_t len, std::uint32_t crc) noexcept {
#if defined(__x86_64__)
    if (g_hw) return crc32c_hw(static_cast<const unsigned char*>(data), len, crc);
#endif
    return crc32c_portable(data, len, crc);
}

// Combining, as zlib's crc32_combine does for its polynomial: appending len_b bytes to a
// multiplies a's CRC register by x^(8·len_b) modulo the polynomial; b's CRC is added on top
// (the pre- and post-conditioning of both cancel out). Bit-reflected arithmetic throughout.
namespace {

constexpr std::uint32_t poly_reflected = 0x82F63B78u;

// a·b modulo the polynomial, both reflected.
constexpr std::uint32_t mult_mod_p(std::uint32_t a, std::uint32_t b) noexcept {
    std::uint32_t m = 1u << 31;
    std::uint32_t p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ poly_reflected : b >> 1;
    }
    return p;
}

// x^(2^k) modulo the polynomial, k = 0..31.
struct x2n_table {
    std::uint32_t v[32];
    constexpr x2n_table() : v{} {
        std::uint32_t p = 1u << 30; // x^1
        v[0] = p;
        for (int n = 1; n < 32; ++n) v[n] = p = mult_mod_p(p, p);
    }
};
constexpr x2n_table x2n{};

// x^(n·2^k) modulo the polynomial.
std::uint32_t x2n_mod_p(std::size_t n, unsigned k) noexcept {
    std::uint32_t p = 1u << 31; // x^0
    while (n) {
        if (n & 1) p = mult_mod_p(x2n.v[k & 31], p);
        n >>= 1;
        ++k;
    }
    return p;
}

} // namespace

std::uint32_t crc32c_combine(std::uint32_t crc_a, std::uint32_t crc_b, std::size_t len_b) noexcept {
    return mult_mod_p(x2n_mod_p(len_b, 3), crc_a) ^ crc_b;
}

} // namespace skiff
