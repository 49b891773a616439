// FNV-1a, 64-bit: a stable, seedless hash for placing things (partitions and groups on cores,
// shortened store keys). Not for hash tables facing untrusted input, not cryptographic.
#pragma once

#include <cstdint>
#include <string_view>

namespace skiff {

constexpr std::uint64_t fnv1a64(std::string_view s) noexcept {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ULL;
    }
    return h;
}

} // namespace skiff
