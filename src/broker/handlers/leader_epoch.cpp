// OffsetForLeaderEpoch.
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>

namespace skiff::broker {

// Leader epochs never change here (one broker, leader epoch 0), so the end offset of epoch 0
// is the log end; a consumer validating its position after a metadata change finds it valid.
namespace {
runtime::task<std::int64_t> log_end(shard& sh, std::string topic, std::int32_t partition) {
    auto slot = co_await local_partition(sh, std::move(topic), partition);
    if (!slot || !*slot) co_return -1;
    co_return(*slot)->log->high_watermark();
}
} // namespace

runtime::task<std::string> handle_offset_for_leader_epoch(request_ctx ctx, kafka::OffsetForLeaderEpochRequest req) {
    kafka::OffsetForLeaderEpochResponse r;
    for (auto& t : req.topics) {
        kafka::OffsetForLeaderEpochResponse::OffsetForLeaderTopicResult tr;
        tr.topic = t.topic;
        for (auto& p : t.partitions) {
            kafka::OffsetForLeaderEpochResponse::EpochEndOffset e;
            e.partition = p.partition;
            const topic_info* info = ctx.sh.cat->find(t.topic);
            if (!info || p.partition < 0 || p.partition >= info->partitions) {
                e.error_code = kerr::unknown_topic_or_partition;
                e.leader_epoch = -1;
                e.end_offset = -1;
                tr.partitions.push_back(std::move(e));
                continue;
            }
            auto end = co_await on_partition_owner(ctx.sh, t.topic, p.partition,
                                                   [&](shard& o) { return log_end(o, t.topic, p.partition); });
            if (end < 0) {
                e.error_code = kerr::leader_not_available;
                e.leader_epoch = -1;
                e.end_offset = -1;
            } else {
                e.leader_epoch = 0;
                e.end_offset = end;
            }
            tr.partitions.push_back(std::move(e));
        }
        r.topics.push_back(std::move(tr));
    }
    co_return respond(r, ctx);
}

} // namespace skiff::broker
