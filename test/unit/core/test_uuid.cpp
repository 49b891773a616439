#include <skiff/core/uuid.hpp>

#include <catch2/catch.hpp>

#include <random>

using namespace skiff;

TEST_CASE("random_uuid_v4: the engine's bits with version 4 and variant 1 set", "[core][uuid]") {
    std::mt19937_64 rng(12345);
    std::mt19937_64 same(12345);
    const std::uint64_t first = same(), second = same();
    const auto u = random_uuid_v4(rng);
    CHECK(u[0] == static_cast<std::uint8_t>(first));
    CHECK(u[5] == static_cast<std::uint8_t>(first >> 40));
    CHECK(u[7] == static_cast<std::uint8_t>(first >> 56));
    CHECK(u[9] == static_cast<std::uint8_t>(second >> 8));
    CHECK(u[6] >> 4 == 4);
    CHECK((u[6] & 0x0f) == ((first >> 48) & 0x0f));
    CHECK(u[8] >> 6 == 2);
    CHECK((u[8] & 0x3f) == (second & 0x3f));
    CHECK(random_uuid_v4(rng) != u); // the engine moved on
}
