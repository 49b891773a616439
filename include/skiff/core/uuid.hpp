// Random version-4 UUIDs (RFC 9562, section 5.4) as 16 bytes, for ids that only need to be
// unique (topic ids, group member ids), not secret: the caller's 64-bit engine supplies the
// bits, so each caller decides how it is seeded. Pure; any core.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <random>

namespace skiff {

// Bytes 0..7 are the first draw, low byte first, 8..15 the second; then the version (4) and
// variant (10xx) bits are set as Kafka's Uuid.randomUuid does.
template <std::uniform_random_bit_generator Rng>
    requires std::same_as<typename Rng::result_type, std::uint64_t>
std::array<std::uint8_t, 16> random_uuid_v4(Rng& rng) {
    std::array<std::uint8_t, 16> b{};
    for (std::size_t i = 0; i < b.size(); i += 8) {
        const std::uint64_t r = rng();
        for (std::size_t k = 0; k < 8; ++k) b[i + k] = static_cast<std::uint8_t>(r >> (8 * k));
    }
    b[6] = static_cast<std::uint8_t>((b[6] & 0x0f) | 0x40);
    b[8] = static_cast<std::uint8_t>((b[8] & 0x3f) | 0x80);
    return b;
}

} // namespace skiff
