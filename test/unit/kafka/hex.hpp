// Hex helpers for the Kafka codec tests.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace skiff::kafka::test {

// "00 12 ab" or "0012ab" -> bytes (spaces and newlines ignored).
inline std::string unhex(std::string_view text) {
    std::string out;
    int hi = -1;
    for (char c : text) {
        int v = -1;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
        else if (c == ' ' || c == '\n' || c == '\t') continue;
        else throw std::invalid_argument("bad hex");
        if (hi < 0) {
            hi = v;
        } else {
            out.push_back(static_cast<char>(hi * 16 + v));
            hi = -1;
        }
    }
    if (hi >= 0) throw std::invalid_argument("odd hex");
    return out;
}

inline std::string hex(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (char c : bytes) {
        const auto b = static_cast<unsigned char>(c);
        out.push_back(digits[b >> 4]);
        out.push_back(digits[b & 15]);
    }
    return out;
}

inline std::span<const char> sp(const std::string& s) { return {s.data(), s.size()}; }

} // namespace skiff::kafka::test
