// DescribeProducers (API 61, KIP-664): each partition's idempotent producers, read on the
// partition's owning core from its producer table (rebuilt from the log's tail first if no
// idempotent batch arrived since the partition was opened: the same rebuild a produce does).
// No transactions yet, so CoordinatorEpoch and CurrentTxnStartOffset are always -1.
#include "../handlers.hpp"
#include "../idempotence.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/when_all.hpp>

namespace skiff::broker {

namespace {

struct producers_outcome {
    producers_outcome() = default;
    kafka::error_code error = kerr::none;
    std::string message;
    std::vector<producer_table::producer_info> producers;
};

runtime::task<producers_outcome> describe_on_owner(shard& sh, std::string topic, std::int32_t partition) {
    producers_outcome out;
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        out.error = owned.error;
        out.message = owned.message;
        co_return out;
    }
    partition_slot* slot = owned.slot;
    if (!slot->producers_loaded) co_await ensure_producers_loaded(&sh, slot, topic, partition);
    out.producers = slot->producers.describe();
    co_return out;
}

} // namespace

runtime::task<kafka::DescribeProducersResponse> describe_producers(shard& sh, kafka::DescribeProducersRequest req) {
    kafka::DescribeProducersResponse r;
    struct where {
        std::size_t topic, partition;
    };
    std::vector<where> issued;
    std::vector<runtime::task<producers_outcome>> work;
    for (auto& t : req.topics) {
        kafka::DescribeProducersResponse::TopicResponse tr;
        tr.name = t.name;
        const topic_info* info = sh.cat->find(t.name);
        for (auto p : t.partition_indexes) {
            kafka::DescribeProducersResponse::PartitionResponse pr;
            pr.partition_index = p;
            if (!info || p < 0 || p >= info->partitions) {
                pr.error_code = kerr::unknown_topic_or_partition;
                pr.error_message = "This server does not host this topic-partition.";
            } else {
                issued.push_back(where{r.topics.size(), tr.partitions.size()});
                const std::string* name = &t.name;
                work.push_back(on_partition_owner(sh, t.name, p, [name, p](shard& o) {
                    return describe_on_owner(o, *name, p);
                }));
            }
            tr.partitions.push_back(std::move(pr));
        }
        r.topics.push_back(std::move(tr));
    }
    auto results = co_await runtime::when_all(std::move(work));
    for (std::size_t i = 0; i < issued.size(); ++i) {
        auto& pr = r.topics[issued[i].topic].partitions[issued[i].partition];
        auto& res = results[i];
        pr.error_code = res.error;
        if (res.error != kerr::none) {
            if (!res.message.empty()) pr.error_message = res.message;
            continue;
        }
        for (const auto& info : res.producers) {
            kafka::DescribeProducersResponse::ProducerState ps;
            ps.producer_id = info.producer_id;
            ps.producer_epoch = info.epoch;
            ps.last_sequence = info.last_sequence;
            ps.last_timestamp = info.last_timestamp;
            ps.coordinator_epoch = -1;
            ps.current_txn_start_offset = -1;
            pr.active_producers.push_back(ps);
        }
    }
    co_return r;
}

} // namespace skiff::broker
