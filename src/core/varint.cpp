#include <skiff/core/varint.hpp>

namespace skiff::varint {

namespace {

// The last byte may hold only the bits that are left: 32 - 4*7 = 4, 64 - 9*7 = 1. Checking
// that byte alone also rejects a continuation bit on it, so no encoding is longer than the max.
template <typename T, std::size_t MaxBytes, unsigned LastBits>
read_status read_leb(std::span<const char> in, std::size_t& pos, T& out) noexcept {
    T v = 0;
    for (std::size_t i = 0; i < MaxBytes; ++i) {
        if (pos >= in.size()) return read_status::truncated;
        const auto b = static_cast<std::uint8_t>(in[pos++]);
        if (i == MaxBytes - 1 && (b >> LastBits) != 0) return read_status::overflow;
        v |= static_cast<T>(static_cast<T>(b & 0x7fu) << (7 * i));
        if ((b & 0x80u) == 0) {
            out = v;
            return read_status::ok;
        }
    }
    return read_status::overflow; // unreachable: the last byte cannot carry a continuation bit
}

} // namespace

std::size_t encode_unsigned(char* buf, std::uint64_t v) noexcept {
    std::size_t n = 0;
    while (v >= 0x80) {
        buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    return n;
}

void append_unsigned(std::string& out, std::uint64_t v) {
    char buf[max_bytes64];
    out.append(buf, encode_unsigned(buf, v));
}

void append_varint(std::string& out, std::int32_t v) { append_unsigned(out, zigzag_encode(v)); }
void append_varlong(std::string& out, std::int64_t v) { append_unsigned(out, zigzag_encode(v)); }

read_status read_unsigned32(std::span<const char> in, std::size_t& pos, std::uint32_t& out) noexcept {
    return read_leb<std::uint32_t, max_bytes32, 4>(in, pos, out);
}

read_status read_unsigned64(std::span<const char> in, std::size_t& pos, std::uint64_t& out) noexcept {
    return read_leb<std::uint64_t, max_bytes64, 1>(in, pos, out);
}

std::optional<std::int32_t> read_varint(std::span<const char> in, std::size_t& pos) noexcept {
    std::uint32_t z = 0;
    if (read_unsigned32(in, pos, z) != read_status::ok) return std::nullopt;
    return zigzag_decode(z);
}

std::optional<std::int64_t> read_varlong(std::span<const char> in, std::size_t& pos) noexcept {
    std::uint64_t z = 0;
    if (read_unsigned64(in, pos, z) != read_status::ok) return std::nullopt;
    return zigzag_decode(z);
}

} // namespace skiff::varint
