// What the cluster keeps in etcd, and under which keys. Everything lives under
// `/skiff/{ns}/`, so clusters of several namespaces share one etcd:
//
//   members/{id}            member      bound to the broker's lease: gone when it dies
//   owners/{topic}/{p}      owner       bound to the owner's lease; created only if absent
//   state/{topic}/{p}       takeover    not leased: survives owners; its epoch only grows
//   groups/{slot}           owner       group coordination, claimed like a partition
//   placements/{topic}/{p}  decimal     the broker a reassignment placed the partition on (not
//                                       leased: kept until reassigned or cancelled)
//   catalog                 decimal     bumped after every topic change (brokers watch it)
//   locks/catalog           broker id   bound to the holder's lease: catalog changes and
//                                       producer-id blocks are serialized across brokers
//
// Values are small JSON objects. Topic names cannot contain '/', so the keys parse back.
#pragma once

#include <skiff/core/result.hpp>

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <string_view>

namespace skiff::cluster {

struct member {
    std::int32_t id = -1;
    std::string host;
    std::int32_t port = 0;
    std::string rack; // empty: none
    // Every listener's advertised host:port by name ("SASL_PLAINTEXT"), so a client is sent to
    // the same kind of listener it came in on; host/port are the first listener's. Empty for
    // brokers of before listeners (then host/port serve every listener).
    std::map<std::string, std::string> listeners;
};

// Who owns a partition (or a group slot), since which leader epoch.
struct owner {
    std::int32_t broker = -1;
    std::int32_t epoch = 0;
};

// How the last owner left a partition. `clean` is true only when it flushed and closed the log
// before releasing (graceful leave or rebalance): then nothing of it can still be in flight
// and the next owner continues at next_offset. Otherwise the next owner skips a gap of offsets
// (docs/cluster.md, "Fencing").
struct takeover {
    std::int32_t epoch = 0;
    bool clean = false;
    std::int64_t next_offset = -1;
};

std::string encode(const member& m);
std::string encode(const owner& o);
std::string encode(const takeover& t);
result<member, std::string> decode_member(std::string_view json);
result<owner, std::string> decode_owner(std::string_view json);
result<takeover, std::string> decode_takeover(std::string_view json);

// Group slots: groups are coordinated in this many slots (hash of the group id).
inline constexpr std::int32_t group_slots = 32;
std::int32_t group_slot(std::string_view group) noexcept;
// The pseudo-topic name group slots are claimed under (not a valid Kafka topic name).
inline constexpr std::string_view groups_topic = "~groups";

struct keys {
    std::string root; // "/skiff/{ns}/"
    explicit keys(std::string_view ns);

    std::string members() const { return root + "members/"; }
    std::string member(std::int32_t id) const { return members() + std::to_string(id); }
    std::string owners() const { return root + "owners/"; }
    std::string owner(std::string_view topic, std::int32_t p) const;
    std::string state(std::string_view topic, std::int32_t p) const;
    std::string placements() const { return root + "placements/"; }
    std::string placement(std::string_view topic, std::int32_t p) const;
    std::string catalog() const { return root + "catalog"; }
    std::string catalog_lock() const { return root + "locks/catalog"; }

    // The member id of a key under members(), the (topic, partition) of one under owners().
    std::optional<std::int32_t> parse_member(std::string_view key) const;
    std::optional<std::pair<std::string, std::int32_t>> parse_owner(std::string_view key) const;
    std::optional<std::pair<std::string, std::int32_t>> parse_placement(std::string_view key) const;
};

} // namespace skiff::cluster
