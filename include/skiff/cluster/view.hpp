// What a broker knows about the cluster at one etcd revision: the live members and who owns
// which partition (and group slot) since which epoch. Immutable once published; cores share
// it through shared_ptr<const view> and read it without locks.
#pragma once

#include <skiff/cluster/records.hpp>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace skiff::cluster {

struct view {
    std::map<std::int32_t, member> members;
    std::map<std::pair<std::string, std::int32_t>, owner, std::less<>> owners;
    // Partitions a reassignment placed on a broker (AlterPartitionReassignments).
    std::map<std::pair<std::string, std::int32_t>, std::int32_t, std::less<>> placements;
    std::int64_t revision = 0;         // etcd revision this view reflects
    std::int64_t catalog_revision = 0; // mod_revision of the catalog key (0: never changed)

    std::vector<std::int32_t> live() const;
    const owner* owner_of(std::string_view topic, std::int32_t partition) const;
    const member* find_member(std::int32_t id) const;
    // The broker a reassignment placed the partition on, -1 when none.
    std::int32_t placement_of(std::string_view topic, std::int32_t partition) const;
    // Who should own the partition: its placement while that broker is live, else the live
    // broker the rendezvous hash prefers (assignment.hpp); -1 when none is live.
    std::int32_t preferred_owner(std::string_view topic, std::int32_t partition,
                                 std::span<const std::int32_t> live) const;
};

} // namespace skiff::cluster
