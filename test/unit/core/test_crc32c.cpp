#include <skiff/core/base64.hpp>
#include <skiff/core/crc32c.hpp>

#include <catch2/catch.hpp>

#include <random>
#include <string>

using namespace skiff;

TEST_CASE("crc32c check value and known vectors", "[core][crc32c]") {
    CHECK(crc32c(std::string_view("123456789")) == 0xE3069283u);
    CHECK(crc32c_portable("123456789", 9) == 0xE3069283u);
    CHECK(crc32c(std::string_view("")) == 0u);
    // RFC 3720 B.4: 32 bytes of zeros and of 0xFF.
    std::string zeros(32, '\0'), ones(32, '\xff');
    CHECK(crc32c(zeros) == 0x8A9136AAu);
    CHECK(crc32c(ones) == 0x62A8AB43u);
}

TEST_CASE("crc32c hardware and portable paths agree and chain", "[core][crc32c]") {
    std::mt19937 rng(7);
    std::string data(100003, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    for (std::size_t len : {0u, 1u, 7u, 8u, 9u, 63u, 4096u, 100003u}) {
        CHECK(crc32c(data.data(), len) == crc32c_portable(data.data(), len));
    }
    auto whole = crc32c(data);
    auto part = crc32c(std::string_view(data).substr(1000), crc32c(std::string_view(data).substr(0, 1000)));
    CHECK(whole == part);
}

TEST_CASE("base64 round trips and rejects garbage", "[core][base64]") {
    CHECK(base64_encode("") == "");
    CHECK(base64_encode("f") == "Zg==");
    CHECK(base64_encode("fo") == "Zm8=");
    CHECK(base64_encode("foo") == "Zm9v");
    CHECK(base64_encode("foobar") == "Zm9vYmFy");
    CHECK(base64_decode("Zm9vYmE=") == std::string("fooba"));
    CHECK_FALSE(base64_decode("Zm9").has_value());
    CHECK_FALSE(base64_decode("Zm=v").has_value());
    CHECK_FALSE(base64_decode("Z!9v").has_value());
    std::string bin("\x00\xff\x10\x80", 4);
    CHECK(base64_decode(base64_encode(bin)) == bin);
}

TEST_CASE("crc32c_combine gives the CRC of the concatenation without reading the second part", "[core][crc32c]") {
    std::string data;
    for (int i = 0; i < 5000; ++i) data.push_back(static_cast<char>((i * 7919 + 13) % 256));
    for (std::size_t split : {std::size_t{0}, std::size_t{1}, std::size_t{21}, std::size_t{61}, std::size_t{4095},
                              std::size_t{4999}, std::size_t{5000}}) {
        const std::string_view a(data.data(), split), b(data.data() + split, data.size() - split);
        INFO("split at " << split);
        CHECK(crc32c_combine(crc32c(a), crc32c(b), b.size()) == crc32c(std::string_view(data)));
        // Continuing a running CRC the same way.
        const auto head = crc32c(std::string_view(data.data(), 7));
        const auto running = crc32c(a, head);
        CHECK(crc32c_combine(running, crc32c(b), b.size()) == crc32c(std::string_view(data), head));
    }
    CHECK(crc32c_combine(0xE3069283u, 0, 0) == 0xE3069283u);
}
