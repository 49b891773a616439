#include <skiff/cluster/assignment.hpp>

#include <skiff/core/hash.hpp>

#include <string>

namespace skiff::cluster {

namespace {
// splitmix64's finalizer: FNV-1a of similar keys differs in few bits, and the weights of two
// brokers for one key must look independent or one broker wins most keys.
std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

std::int32_t best(std::string_view key, std::span<const std::int32_t> live) noexcept {
    std::int32_t winner = -1;
    std::uint64_t top = 0;
    for (std::int32_t b : live) {
        const std::uint64_t w = rendezvous_weight(key, b);
        // Ties (practically never) go to the smaller id so every broker agrees.
        if (winner < 0 || w > top || (w == top && b < winner)) {
            winner = b;
            top = w;
        }
    }
    return winner;
}
} // namespace

std::uint64_t rendezvous_weight(std::string_view key, std::int32_t broker) noexcept {
    return mix(fnv1a64(key) ^ mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(broker)) + 0x9e3779b97f4a7c15ULL));
}

std::int32_t preferred_owner(std::string_view topic, std::int32_t partition,
                             std::span<const std::int32_t> live) noexcept {
    std::string key;
    key.reserve(topic.size() + 12);
    key.append(topic);
    key.push_back('/');
    key.append(std::to_string(partition));
    return best(key, live);
}

std::int32_t preferred_coordinator(std::string_view group, std::span<const std::int32_t> live) noexcept {
    std::string key = "group:";
    key.append(group);
    return best(key, live);
}

} // namespace skiff::cluster
