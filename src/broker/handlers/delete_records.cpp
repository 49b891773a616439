// DeleteRecords: each partition's log start moves up on its owning core; the answer is the new
// low watermark, given once a restart would keep it (partition_log::delete_records).
#include "../handlers.hpp"
#include "../ownership.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/when_all.hpp>

namespace skiff::broker {

namespace {

struct delete_outcome {
    kafka::error_code error = kerr::none;
    std::int64_t low_watermark = -1; // Kafka's INVALID_LOW_WATERMARK with an error
};

kafka::error_code delete_error_code(storage::errc c) {
    switch (c) {
    // Past the high watermark, or negative other than -1 (Kafka's Partition.deleteRecordsOnLeader).
    case storage::errc::invalid_argument: return kerr::offset_out_of_range;
    // The start moved here but is not stored yet. Retriable for clients (an InvalidMetadata
    // error: the Java admin client looks the leader up again and retries, librdkafka too); the
    // retry finds the start already moved and waits for it to be stored.
    case storage::errc::transient: return kerr::kafka_storage_error;
    // Fenced (another broker owns the partition now) or closing: the client refreshes metadata.
    case storage::errc::precondition_failed:
    case storage::errc::cancelled: return kerr::not_leader_or_follower;
    default: return kerr::kafka_storage_error;
    }
}

runtime::task<delete_outcome> delete_on_owner(shard& sh, std::string topic, std::int32_t partition,
                                              std::int64_t offset) {
    delete_outcome out;
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        out.error = owned.error;
        co_return out;
    }
    // Cluster mode: without a lease that provably covers this moment, another broker may own the
    // partition already; its log would not see this start.
    if (!may_acknowledge(sh, *owned.slot)) {
        out.error = kerr::not_leader_or_follower;
        co_return out;
    }
    // No deadline of its own: the wait is one manifest PUT, which the store's retries bound.
    auto r = co_await owned.slot->log->delete_records(offset);
    if (!r) {
        if (r.error().code != storage::errc::invalid_argument) {
            log::warn("DeleteRecords {}/{} to {}: {}", topic, partition, offset, r.error().message);
        }
        out.error = delete_error_code(r.error().code);
        co_return out;
    }
    out.low_watermark = *r;
    co_return out;
}

} // namespace

runtime::task<kafka::DeleteRecordsResponse> delete_records(shard& sh, kafka::DeleteRecordsRequest req) {
    kafka::DeleteRecordsResponse r;
    struct where {
        std::size_t topic, partition;
    };
    std::vector<where> issued;
    std::vector<runtime::task<delete_outcome>> work;
    for (auto& t : req.topics) {
        kafka::DeleteRecordsResponse::DeleteRecordsTopicResult tr;
        tr.name = t.name;
        const topic_info* info = sh.cat->find(t.name);
        for (auto& p : t.partitions) {
            kafka::DeleteRecordsResponse::DeleteRecordsPartitionResult pr;
            pr.partition_index = p.partition_index;
            pr.low_watermark = -1;
            if (!info || p.partition_index < 0 || p.partition_index >= info->partitions) {
                pr.error_code = kerr::unknown_topic_or_partition;
            } else if (!policy_of(sh, t.name).deletes) {
                // Kafka deletes records only where cleanup.policy includes "delete"
                // (Partition.deleteRecordsOnLeader): a compacted topic's go by compaction alone.
                pr.error_code = kerr::policy_violation;
            } else {
                issued.push_back(where{r.topics.size(), tr.partitions.size()});
                const std::string* name = &t.name;
                const std::int32_t part = p.partition_index;
                const std::int64_t offset = p.offset;
                work.push_back(on_partition_owner(sh, t.name, part, [name, part, offset](shard& o) {
                    return delete_on_owner(o, *name, part, offset);
                }));
            }
            tr.partitions.push_back(std::move(pr));
        }
        r.topics.push_back(std::move(tr));
    }
    auto results = co_await runtime::when_all(std::move(work));
    for (std::size_t i = 0; i < issued.size(); ++i) {
        auto& pr = r.topics[issued[i].topic].partitions[issued[i].partition];
        pr.error_code = results[i].error;
        pr.low_watermark = results[i].low_watermark;
    }
    co_return r;
}

} // namespace skiff::broker
