// AlterPartitionReassignments / ListPartitionReassignments (APIs 45, 46), answered as Kafka's
// controller answers them (ReplicationControlManager): the same validation, messages and
// error codes.
//
// A partition has one replica, its owner (the store is the replication), so a reassignment
// names the broker that should own it: the first replica of the list (the others must be
// brokers too, as Kafka checks, and are otherwise unused). In cluster mode the target is kept in
// etcd as the partition's placement (`placements/{topic}/{p}`); the reconcile loop prefers a
// live placement over the rendezvous hash, so the move is a graceful hand-over like any other
// (the owner flushes and releases, the target claims it fenced). A reassignment is in progress
// while the partition is not owned by its placement; cancelling one removes the placement, and
// the partition stays where the hash puts it. A placement on the broker the hash prefers anyway
// is not stored. On one broker every partition already lives on the only broker: a
// reassignment to it is a no-op, and none is ever in progress.
#include "../handlers.hpp"
#include "../ownership.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/cluster/assignment.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>

namespace skiff::broker {

namespace {

// One placement change for etcd (core 0): set the partition's placement, or delete it.
struct placement_op {
    std::string topic;
    std::int32_t partition = 0;
    std::optional<std::int32_t> broker; // nullopt: delete
    std::size_t topic_at = 0; // where its answer is in the response
    std::size_t partition_at = 0;
};

bool in_progress(const cluster::view& v, const std::string& topic, std::int32_t p) {
    const std::int32_t placed = v.placement_of(topic, p);
    if (placed < 0) return false;
    const cluster::owner* o = v.owner_of(topic, p);
    return !o || o->broker != placed;
}

// Writes each placement; `*written` becomes the etcd revision of the last write that landed.
runtime::task<void> apply_placements(shard& sh0, const std::vector<placement_op>* ops,
                                     kafka::AlterPartitionReassignmentsResponse* r, std::int64_t* written) {
    auto& cr = *sh0.shared->cluster;
    const cluster::keys names(sh0.cfg().ns);
    for (const auto& op : *ops) {
        const std::string key = names.placement(op.topic, op.partition);
        std::string failure;
        if (op.broker) {
            auto put = co_await cr.kv->put(key, std::to_string(*op.broker));
            if (!put) failure = put.error().message;
            else *written = std::max(*written, *put);
        } else {
            auto del = co_await cr.kv->del(key);
            if (!del) failure = del.error().message;
            else *written = std::max(*written, *del);
        }
        if (!failure.empty()) {
            auto& pr = r->responses[op.topic_at].partitions[op.partition_at];
            pr.error_code = kerr::request_timed_out;
            pr.error_message = "etcd: " + failure;
        } else if (op.broker) {
            log::info("partition {}-{}: reassigned to broker {}", op.topic, op.partition, *op.broker);
        }
    }
}

} // namespace

runtime::task<kafka::AlterPartitionReassignmentsResponse> alter_partition_reassignments(
    shard& sh, kafka::AlterPartitionReassignmentsRequest req) {
    kafka::AlterPartitionReassignmentsResponse r;
    r.error_message = std::nullopt;
    const bool clustered = sh.cfg().clustered();
    const std::shared_ptr<const cluster::view> v = sh.cview;
    std::vector<std::int32_t> live = clustered && v ? v->live() : std::vector<std::int32_t>{sh.cfg().node_id};
    std::vector<placement_op> ops;
    for (const auto& topic : req.topics) {
        kafka::AlterPartitionReassignmentsResponse::ReassignableTopicResponse tr;
        tr.name = topic.name;
        const topic_info* t = sh.cat->find(topic.name);
        for (const auto& part : topic.partitions) {
            kafka::AlterPartitionReassignmentsResponse::ReassignablePartitionResponse pr;
            pr.partition_index = part.partition_index;
            pr.error_message = std::nullopt;
            // A change for etcd, answered by this partition's entry (an etcd failure overwrites it).
            auto place = [&](std::optional<std::int32_t> broker) {
                ops.push_back({topic.name, part.partition_index, broker, r.responses.size(), tr.partitions.size()});
            };
            auto fail = [&](kafka::error_code code, std::string message) {
                pr.error_code = code;
                pr.error_message = std::move(message);
            };
            if (!t) {
                fail(kerr::unknown_topic_or_partition, "Unable to find a topic named " + topic.name + ".");
            } else if (part.partition_index < 0 || part.partition_index >= t->partitions) {
                fail(kerr::unknown_topic_or_partition,
                     fmt::format("Unable to find partition {}:{}.", topic.name, part.partition_index));
            } else if (!part.replicas) {
                if (clustered && v && in_progress(*v, topic.name, part.partition_index)) {
                    place(std::nullopt);
                } else {
                    fail(kerr::no_reassignment_in_progress, "No partition reassignment is in progress.");
                }
            } else if (part.replicas->empty()) {
                fail(kerr::invalid_replica_assignment, "The manual partition assignment includes an empty replica list.");
            } else {
                auto sorted = *part.replicas;
                std::sort(sorted.begin(), sorted.end());
                std::optional<std::string> bad;
                for (std::size_t i = 0; i < sorted.size() && !bad; ++i) {
                    if (std::find(live.begin(), live.end(), sorted[i]) == live.end()) {
                        bad = fmt::format("The manual partition assignment includes broker {}, but no such broker is "
                                          "registered.", sorted[i]);
                    } else if (i > 0 && sorted[i] == sorted[i - 1]) {
                        bad = fmt::format("The manual partition assignment includes the broker {} more than once.",
                                          sorted[i]);
                    }
                }
                if (bad) {
                    fail(kerr::invalid_replica_assignment, *bad);
                } else if (clustered && v) {
                    const std::int32_t target = part.replicas->front();
                    const bool hash_choice = cluster::preferred_owner(topic.name, part.partition_index, live) == target;
                    const std::int32_t placed = v->placement_of(topic.name, part.partition_index);
                    if (hash_choice && placed >= 0) {
                        place(std::nullopt);
                    } else if (!hash_choice && placed != target) {
                        place(target);
                    }
                }
            }
            tr.partitions.push_back(std::move(pr));
        }
        r.responses.push_back(std::move(tr));
    }
    if (ops.empty()) co_return r;
    const std::vector<placement_op>* p = &ops;
    kafka::AlterPartitionReassignmentsResponse* out = &r;
    std::int64_t written = 0;
    std::int64_t* w = &written;
    co_await on_core(sh, 0, [p, out, w](shard& sh0) { return apply_placements(sh0, p, out, w); });
    // Read your writes: answer once this core's view shows the placements, so a
    // ListPartitionReassignments sent to this broker after the answer lists them (the view
    // follows etcd's watch, a moment behind the write). Bounded: a stalled watch delays the
    // answer by at most a second, and the placements are stored either way.
    auto& reactor = runtime::reactor::local();
    const auto deadline = reactor.now() + std::chrono::seconds(1);
    while (written > 0 && (!sh.cview || sh.cview->revision < written) && reactor.now() < deadline &&
           !sh.stop.stop_requested()) {
        auto slept = co_await runtime::sleep_until(std::min(deadline, reactor.now() + std::chrono::milliseconds(5)),
                                                   sh.stop.get_token());
        if (!slept) break;
    }
    co_return r;
}

kafka::ListPartitionReassignmentsResponse list_partition_reassignments(const shard& sh,
                                                                      const kafka::ListPartitionReassignmentsRequest& req) {
    kafka::ListPartitionReassignmentsResponse r;
    r.error_message = std::nullopt;
    const cluster::view* v = sh.cfg().clustered() ? sh.cview.get() : nullptr;
    if (!v) return r; // one broker: nothing ever moves
    auto describe = [&](const std::string& topic, std::int32_t p) {
        kafka::ListPartitionReassignmentsResponse::OngoingPartitionReassignment o;
        o.partition_index = p;
        const std::int32_t target = v->placement_of(topic, p);
        const cluster::owner* cur = v->owner_of(topic, p);
        // Kafka lists the union of target and current replicas, and which are coming and going.
        o.replicas.push_back(target);
        o.adding_replicas.push_back(target);
        if (cur && cur->broker != target) {
            o.replicas.push_back(cur->broker);
            o.removing_replicas.push_back(cur->broker);
        }
        return o;
    };
    std::map<std::string, kafka::ListPartitionReassignmentsResponse::OngoingTopicReassignment> by_topic;
    auto add = [&](const std::string& topic, std::int32_t p) {
        auto& t = by_topic[topic];
        t.name = topic;
        t.partitions.push_back(describe(topic, p));
    };
    if (!req.topics) {
        for (const auto& [key, target] : v->placements) {
            const topic_info* t = sh.cat->find(key.first);
            if (t && key.second < t->partitions && in_progress(*v, key.first, key.second)) add(key.first, key.second);
        }
    } else {
        for (const auto& topic : *req.topics) {
            const topic_info* t = sh.cat->find(topic.name);
            if (!t) continue; // as Kafka: unknown topics are left out
            for (std::int32_t p : topic.partition_indexes) {
                if (p >= 0 && p < t->partitions && in_progress(*v, topic.name, p)) add(topic.name, p);
            }
        }
    }
    for (auto& [_, t] : by_topic) r.topics.push_back(std::move(t));
    return r;
}

} // namespace skiff::broker
