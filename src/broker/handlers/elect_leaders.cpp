// ElectLeaders (API 43, KIP-183/KIP-460), answered as Kafka's controller answers it
// (ReplicationControlManager.electLeaders): per partition ELECTION_NOT_NEEDED when it already has
// the leader the election type asks for, UNKNOWN_TOPIC_OR_PARTITION for one that does not exist;
// with a null partition list every partition is considered and only those that needed an
// election are listed.
//
// What "preferred" means here: a partition has one replica, its owner, and the placement's first
// choice is the live broker the rendezvous hash prefers (docs/cluster.md). On one broker every
// partition is led by it. In cluster mode the reconcile loop already moves each partition to its
// preferred owner (release by the old owner, then a fenced claim by the new one, like any
// takeover), so an election is a wait for that move: answered NONE once the view shows the
// preferred owner, REQUEST_TIMED_OUT if it did not happen within the request's timeout (as
// Kafka's DelayedElectLeader answers), PREFERRED_LEADER_NOT_AVAILABLE when no live broker can
// take it. An unclean election needs only a live owner.
#include "../handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/cluster/assignment.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace skiff::broker {

namespace {

enum class election { preferred = 0, unclean = 1 };

// Whether (topic, p) has the leader `type` asks for in `v`; the target broker, -1 when none can be.
struct election_state {
    bool satisfied = false;
    std::int32_t target = -1;
};

election_state state_of(const shard& sh, const std::string& topic, std::int32_t p, election type) {
    if (!sh.cfg().clustered()) return {true, sh.cfg().node_id};
    const cluster::view* v = sh.cview.get();
    if (!v) return {};
    const cluster::owner* o = v->owner_of(topic, p);
    const bool live_owner = o && v->find_member(o->broker);
    const auto live = v->live();
    const std::int32_t preferred = v->preferred_owner(topic, p, live); // a reassignment's placement first
    if (type == election::unclean) return {live_owner, live_owner ? o->broker : preferred};
    return {live_owner && o->broker == preferred, preferred};
}

struct pending_partition {
    kafka::ElectLeadersResponse::PartitionResult* result;
    std::string topic;
    std::int32_t partition;
};

} // namespace

runtime::task<kafka::ElectLeadersResponse> elect_leaders(shard& sh, kafka::ElectLeadersRequest req,
                                                          std::int16_t version) {
    kafka::ElectLeadersResponse r;
    const std::int8_t type_code = version >= 1 ? req.election_type : 0;
    if (type_code != 0 && type_code != 1) {
        r.error_code = kerr::invalid_request; // Kafka: "Unknown election type"
        co_return r;
    }
    const auto type = static_cast<election>(type_code);
    const catalog& cat = *sh.cat;
    std::vector<pending_partition> waiting;

    auto consider = [&](kafka::ElectLeadersResponse::ReplicaElectionResult& tr, std::int32_t p, bool list_all) {
        kafka::ElectLeadersResponse::PartitionResult pr;
        pr.partition_id = p;
        const topic_info* t = cat.find(tr.topic);
        if (!t || p < 0 || p >= t->partitions) {
            pr.error_code = kerr::unknown_topic_or_partition;
            pr.error_message = t ? fmt::format("No such partition as {}-{}", tr.topic, p)
                                 : fmt::format("No such topic as {}", tr.topic);
            tr.partition_result.push_back(std::move(pr));
            return;
        }
        const auto st = state_of(sh, tr.topic, p, type);
        if (st.satisfied) {
            if (list_all) return; // Kafka leaves these out of an all-partitions answer
            pr.error_code = kerr::election_not_needed;
            pr.error_message = "Leader election not needed for topic partition.";
        } else if (st.target < 0) {
            pr.error_code = type == election::preferred ? kerr::preferred_leader_not_available
                                                        : kerr::eligible_leaders_not_available;
            pr.error_message = "no live broker can lead the partition";
        }
        tr.partition_result.push_back(std::move(pr));
    };

    if (!req.topic_partitions) {
        for (const auto& [name, t] : cat.topics) {
            kafka::ElectLeadersResponse::ReplicaElectionResult tr;
            tr.topic = name;
            for (std::int32_t p = 0; p < t.partitions; ++p) consider(tr, p, true);
            r.replica_election_results.push_back(std::move(tr));
        }
    } else {
        for (const auto& tp : *req.topic_partitions) {
            kafka::ElectLeadersResponse::ReplicaElectionResult tr;
            tr.topic = tp.topic;
            for (std::int32_t p : tp.partitions) consider(tr, p, false);
            r.replica_election_results.push_back(std::move(tr));
        }
    }
    // The partitions whose move is under way: wait for the view to show it.
    for (auto& tr : r.replica_election_results) {
        for (auto& pr : tr.partition_result) {
            if (pr.error_code == kerr::none) waiting.push_back({&pr, tr.topic, pr.partition_id});
        }
    }
    if (waiting.empty()) co_return r;
    auto& reactor = runtime::reactor::local();
    const auto timeout = std::chrono::milliseconds(std::clamp(req.timeout_ms, 0, 300000));
    const auto deadline = reactor.now() + timeout;
    for (;;) {
        std::erase_if(waiting, [&](const pending_partition& w) {
            return state_of(sh, w.topic, w.partition, type).satisfied;
        });
        if (waiting.empty() || reactor.now() >= deadline || sh.stop.stop_requested()) break;
        // The reconcile loop moves partitions within a pass (every view change, at least every
        // 250 ms); the view reaches every core as it changes.
        const auto next = std::min(deadline, reactor.now() + std::chrono::milliseconds(50));
        auto slept = co_await runtime::sleep_until(next, sh.stop.get_token());
        if (!slept) break;
    }
    for (auto& w : waiting) {
        w.result->error_code = kerr::request_timed_out;
        w.result->error_message = "the partition did not move to its preferred owner within the timeout";
    }
    co_return r;
}

} // namespace skiff::broker
