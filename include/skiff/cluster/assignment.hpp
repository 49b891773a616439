// Which live broker should own a partition: rendezvous (highest-random-weight) hashing.
//
// Every broker computes the same answer from the same membership without talking to the
// others, and when a broker joins or leaves only the partitions whose top choice changed move
// (about 1/n of them), unlike `hash % n`, which moves almost everything. Pure functions: no
// I/O, any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace skiff::cluster {

// The weight of `broker` for a key; the broker with the largest weight is preferred.
std::uint64_t rendezvous_weight(std::string_view key, std::int32_t broker) noexcept;

// The preferred owner of (topic, partition) among `live` broker ids; -1 when none is live.
std::int32_t preferred_owner(std::string_view topic, std::int32_t partition,
                             std::span<const std::int32_t> live) noexcept;

// The preferred coordinator of a consumer group among `live`; -1 when none is live.
std::int32_t preferred_coordinator(std::string_view group, std::span<const std::int32_t> live) noexcept;

} // namespace skiff::cluster
