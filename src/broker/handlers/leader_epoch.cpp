// OffsetForLeaderEpoch: where a leader epoch's records end, so a consumer (or a follower)
// that saw records of that epoch can check its position after the leader changed.
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>

namespace skiff::broker {

// A partition's epochs here are the owners' claims (docs/cluster.md): the current epoch's
// records start at slot.epoch_start, the log's next offset when this owner opened it, past any
// takeover gap. Earlier epochs are not recorded one by one, so every older epoch is answered
// with that start: an upper bound of its true end. A client compares the answer with its
// position, and its position can only be at or before the current epoch's start when it read
// an older epoch's records, so this never reports a truncation; and skiff never truncates an
// acknowledged record, so there is none to miss. A single broker has one epoch, 0.
namespace {
struct epoch_end {
    kafka::error_code error = kerr::none;
    std::int32_t leader_epoch = -1;
    std::int64_t end_offset = -1;
};

runtime::task<epoch_end> end_of_epoch(shard& sh, std::string topic, std::int32_t partition, std::int32_t current,
                                      std::int32_t requested) {
    epoch_end out;
    auto owned = co_await find_owned(sh, std::move(topic), partition);
    if (!owned.slot) {
        out.error = owned.error;
        co_return out;
    }
    const partition_slot& slot = *owned.slot;
    if (auto e = leader_epoch_error(slot, current); e != kerr::none) {
        out.error = e;
        co_return out;
    }
    if (requested < 0 || requested > slot.epoch) co_return out; // Kafka: UNDEFINED epoch and offset
    out.leader_epoch = requested;
    out.end_offset = requested == slot.epoch ? slot.log->high_watermark() : slot.epoch_start;
    co_return out;
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
            e.leader_epoch = -1;
            e.end_offset = -1;
            const topic_info* info = ctx.sh.cat->find(t.topic);
            if (!authorized(ctx, acl::operation::describe, acl::resource_type::topic, t.topic)) {
                e.error_code = kerr::topic_authorization_failed;
                tr.partitions.push_back(std::move(e));
                continue;
            }
            if (!info || p.partition < 0 || p.partition >= info->partitions) {
                e.error_code = kerr::unknown_topic_or_partition;
                tr.partitions.push_back(std::move(e));
                continue;
            }
            const std::int32_t current = ctx.version >= 2 ? p.current_leader_epoch : -1;
            const std::int32_t requested = p.leader_epoch;
            const std::string* name = &t.topic;
            const std::int32_t part = p.partition;
            auto got = co_await on_partition_owner(ctx.sh, t.topic, part, [name, part, current, requested](shard& o) {
                return end_of_epoch(o, *name, part, current, requested);
            });
            e.error_code = got.error;
            e.leader_epoch = got.leader_epoch;
            e.end_offset = got.end_offset;
            tr.partitions.push_back(std::move(e));
        }
        r.topics.push_back(std::move(tr));
    }
    co_return respond(r, ctx);
}

} // namespace skiff::broker
