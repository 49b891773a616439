#include "produce_input.hpp"

namespace skiff::cli {

std::int32_t murmur2(std::string_view data) noexcept {
    // Java's int arithmetic: wrap modulo 2^32, logical shifts (>>>) on the unsigned value.
    const std::uint32_t m = 0x5bd1e995;
    const int r = 24;
    const auto length = static_cast<std::uint32_t>(data.size());
    std::uint32_t h = 0x9747b28cu ^ length;
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    const std::size_t len4 = data.size() / 4;
    for (std::size_t i = 0; i < len4; ++i) {
        const std::size_t i4 = i * 4;
        std::uint32_t k = static_cast<std::uint32_t>(p[i4]) | (static_cast<std::uint32_t>(p[i4 + 1]) << 8) |
                          (static_cast<std::uint32_t>(p[i4 + 2]) << 16) | (static_cast<std::uint32_t>(p[i4 + 3]) << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const std::size_t tail = data.size() & ~std::size_t{3};
    switch (data.size() % 4) {
    case 3: h ^= static_cast<std::uint32_t>(p[tail + 2]) << 16; [[fallthrough]];
    case 2: h ^= static_cast<std::uint32_t>(p[tail + 1]) << 8; [[fallthrough]];
    case 1:
        h ^= static_cast<std::uint32_t>(p[tail]);
        h *= m;
        break;
    default: break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return static_cast<std::int32_t>(h);
}

std::int32_t partition_for_key(std::string_view key, std::int32_t partitions) noexcept {
    if (partitions <= 0) return 0;
    const auto positive = static_cast<std::uint32_t>(murmur2(key)) & 0x7fffffffu;
    return static_cast<std::int32_t>(positive % static_cast<std::uint32_t>(partitions));
}

result<storage::record_header, std::string> parse_header(std::string_view text) {
    auto eq = text.find('=');
    std::string_view name = text.substr(0, eq);
    if (name.empty()) return failure{std::string("header '") + std::string(text) + "' has no name (expected NAME=VALUE)"};
    if (eq == std::string_view::npos) return storage::record_header(std::string(name), std::nullopt);
    return storage::record_header(std::string(name), std::string(text.substr(eq + 1)));
}

result<storage::record, std::string> parse_line(std::string_view line, std::string_view key_separator,
                                                const std::vector<storage::record_header>& headers) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::optional<std::string> key;
    std::string_view value = line;
    if (!key_separator.empty()) {
        auto pos = line.find(key_separator);
        if (pos == std::string_view::npos)
            return failure{std::string("line has no key separator '") + std::string(key_separator) + "'"};
        key.emplace(line.substr(0, pos));
        value = line.substr(pos + key_separator.size());
    }
    return storage::record(std::move(key), std::string(value), headers);
}

} // namespace skiff::cli
