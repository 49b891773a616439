#include <skiff/core/base64.hpp>

#include <array>
#include <cstdint>

namespace skiff {

namespace {
constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::array<int, 256> make_reverse() {
    std::array<int, 256> r{};
    for (auto& v : r) v = -1;
    for (int i = 0; i < 64; ++i) r[static_cast<unsigned char>(alphabet[i])] = i;
    return r;
}
constexpr auto reverse = make_reverse();
} // namespace

std::string base64_encode(std::string_view in) {
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= in.size(); i += 3) {
        std::uint32_t v = (std::uint32_t(static_cast<unsigned char>(in[i])) << 16) |
                          (std::uint32_t(static_cast<unsigned char>(in[i + 1])) << 8) |
                          std::uint32_t(static_cast<unsigned char>(in[i + 2]));
        out += alphabet[(v >> 18) & 63];
        out += alphabet[(v >> 12) & 63];
        out += alphabet[(v >> 6) & 63];
        out += alphabet[v & 63];
    }
    std::size_t rest = in.size() - i;
    if (rest == 1) {
        std::uint32_t v = std::uint32_t(static_cast<unsigned char>(in[i])) << 16;
        out += alphabet[(v >> 18) & 63];
        out += alphabet[(v >> 12) & 63];
        out += "==";
    } else if (rest == 2) {
        std::uint32_t v = (std::uint32_t(static_cast<unsigned char>(in[i])) << 16) |
                          (std::uint32_t(static_cast<unsigned char>(in[i + 1])) << 8);
        out += alphabet[(v >> 18) & 63];
        out += alphabet[(v >> 12) & 63];
        out += alphabet[(v >> 6) & 63];
        out += '=';
    }
    return out;
}

std::optional<std::string> base64_decode(std::string_view in) {
    if (in.size() % 4 != 0) return std::nullopt;
    std::string out;
    out.reserve(in.size() / 4 * 3);
    for (std::size_t i = 0; i < in.size(); i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; ++k) {
            char c = in[i + static_cast<std::size_t>(k)];
            if (c == '=') {
                // Padding only in the last group's last two places.
                if (i + 4 != in.size() || k < 2) return std::nullopt;
                v[k] = 0;
                ++pad;
            } else {
                if (pad) return std::nullopt;
                v[k] = reverse[static_cast<unsigned char>(c)];
                if (v[k] < 0) return std::nullopt;
            }
        }
        std::uint32_t w = (std::uint32_t(v[0]) << 18) | (std::uint32_t(v[1]) << 12) | (std::uint32_t(v[2]) << 6) |
                          std::uint32_t(v[3]);
        out += static_cast<char>((w >> 16) & 0xFF);
        if (pad < 2) out += static_cast<char>((w >> 8) & 0xFF);
        if (pad < 1) out += static_cast<char>(w & 0xFF);
    }
    return out;
}

} // namespace skiff
