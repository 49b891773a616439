// Cluster mode, the broker's side (docs/cluster.md): joining through etcd, claiming and
// releasing partitions as the membership changes, the view every core answers Metadata from,
// and the check before an acknowledgement. Private to the broker module.
//
// Core 0 runs the cluster: its node (lease, member key, watch) and one loop that, after every
// change of the view or of the catalog and at least every 250 ms, claims the partitions
// rendezvous hashing gives this broker and that nobody owns, and releases (flush, close, then
// the etcd key) the ones it should no longer own. Each claimed partition is installed on the
// core that serves it (partition_owner), which opens its log at the claim's leader epoch.
#pragma once

#include "shard.hpp"

#include <skiff/cluster/node.hpp>
#include <skiff/etcd/kv.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/task.hpp>

#include <map>
#include <memory>
#include <set>
#include <string>

namespace skiff::broker {

struct cluster_runtime {
    std::unique_ptr<etcd::kv> kv;
    std::unique_ptr<cluster::node> node;
    runtime::semaphore wake{0, "cluster-wake"};
    bool wake_pending = false;
    // Every partition (and group slot) this broker owns, by the claim that won it.
    std::map<std::pair<std::string, std::int32_t>, cluster::claim, std::less<>> claimed;
    std::set<std::pair<std::string, std::int32_t>, std::less<>> moving; // claims and releases in progress
    std::uint64_t generation = 0;                                        // lease the claims belong to
    std::int64_t catalog_revision = -1;                                  // of the catalog installed
    std::shared_ptr<const cluster::view> published;
    runtime::gate work{"cluster"};
    std::stop_source loop_stop;
    bool loop_running = false;
    runtime::semaphore loop_done{0, "cluster-loop-done"};
    std::vector<metrics::registration> registrations;
};

// Core 0, at start-up: connects to etcd, registers this broker and reads the cluster. An error
// sentence when that fails (the broker does not start).
runtime::task<std::string> cluster_join(shard& sh0);
// Core 0: the loop above, until the shard's stop token fires.
runtime::task<void> cluster_loop(shard* sh0);
// Core 0, at shutdown before the drain: hands every owned partition over (flush, close,
// release its key as clean) and revokes the lease.
runtime::task<void> cluster_leave(shard* sh0);

// Whether this broker may still answer "written" for data of `slot`: its lease is provably
// alive (node.hpp) and it still owns the partition. Always true for a single broker.
bool may_acknowledge(const shard& sh, const partition_slot& slot);
// Whether the partition's background work may change the bucket now (a manifest, deletes, a
// merge, a compaction): one broker always; in cluster mode while the partition is not being
// released and the lease is proven for a quarter of its TTL more, so the request lands well
// before another broker can claim the partition (docs/cluster.md, "Fencing").
bool may_change_bucket(const shard& sh, const partition_slot& slot);

// Cluster mode: the claim under which this core serves (topic, partition), if any.
const cluster::claim* claim_of(const shard& sh, std::string_view topic, std::int32_t partition);

} // namespace skiff::broker
