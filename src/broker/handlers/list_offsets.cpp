// ListOffsets: the log start, the log end, or the first offset at or after a timestamp, on
// each partition's owning core.
#include "../handlers.hpp"
#include "../idempotence.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/compression.hpp>
#include <skiff/storage/log_walk.hpp>
#include <skiff/storage/record_batch.hpp>

namespace skiff::broker {

namespace {

struct offset_outcome {
    kafka::error_code error = kerr::none;
    std::int64_t offset = -1;
    std::int64_t timestamp = -1;
    std::int32_t leader_epoch = -1;
};

// The earliest offset whose record timestamp is >= ts, as Kafka's FileRecords.searchForTimestamp
// finds it: the first batch whose max timestamp reaches ts, then its first record (in offset
// order) at or after ts, decompressing the batch if it is compressed. There is no time index
// yet, so this walks the log from its start; batches whose max timestamp is below ts are
// skipped whole. In a LogAppendTime batch every record has the batch's max timestamp.
runtime::task<offset_outcome> offset_for_time(storage::partition_log& log, std::int64_t ts) {
    offset_outcome out;
    const std::int64_t start = log.log_start_offset();
    auto walked = co_await storage::walk_committed(log, start, [&out, ts, start](const storage::batch_view& b) {
        if (b.next_offset() <= start || b.max_timestamp < ts) return true;
        out.offset = std::max(b.base_offset, start);
        out.timestamp = b.max_timestamp;
        out.leader_epoch = b.partition_leader_epoch; // Kafka answers the epoch of the batch found
        if (b.log_append_time()) return false;
        // A batch is at most max.message.bytes; the bound only stops a decompression bomb.
        if (auto recs = storage::decode_records(b, std::size_t{64} << 20)) {
            for (auto& rec : recs->records) {
                const std::int64_t t = b.base_timestamp + rec.timestamp_delta;
                const std::int64_t o = b.base_offset + rec.offset_delta;
                if (o >= start && t >= ts) {
                    out.offset = o;
                    out.timestamp = t;
                    break;
                }
            }
        }
        return false;
    });
    if (!walked) out = offset_outcome{kerr::kafka_storage_error, -1, -1};
    co_return out; // none found: offset -1, as Kafka answers
}

runtime::task<offset_outcome> list_offset_on_owner(shard& sh, std::string topic, std::int32_t partition,
                                                   std::int64_t ts, std::int32_t current_leader_epoch,
                                                   bool read_committed) {
    offset_outcome out;
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        out.error = owned.error;
        co_return out;
    }
    if (auto e = leader_epoch_error(*owned.slot, current_leader_epoch); e != kerr::none) {
        out.error = e;
        co_return out;
    }
    out.leader_epoch = owned.slot->epoch;
    auto& log = *owned.slot->log;
    if (ts == -2) {
        out.offset = log.log_start_offset();
    } else if (ts == -1) {
        // read_committed (ListOffsets v2+): the end a read_committed consumer can reach, the LSO.
        if (read_committed) {
            if (!owned.slot->producers_loaded) co_await ensure_producers_loaded(&sh, owned.slot, topic, partition);
            out.offset = owned.slot->txns.last_stable_offset(log.high_watermark());
        } else {
            out.offset = log.high_watermark();
        }
    } else if (ts < 0) {
        out.error = kerr::invalid_request;
    } else {
        co_return co_await offset_for_time(log, ts);
    }
    co_return out;
}

} // namespace

runtime::task<std::string> handle_list_offsets(request_ctx ctx, kafka::ListOffsetsRequest req) {
    kafka::ListOffsetsResponse r;
    struct where {
        std::size_t topic, partition;
    };
    std::vector<where> issued;
    std::vector<runtime::task<offset_outcome>> work;
    for (auto& t : req.topics) {
        kafka::ListOffsetsResponse::ListOffsetsTopicResponse tr;
        tr.name = t.name;
        const topic_info* info = ctx.sh.cat->find(t.name);
        for (auto& p : t.partitions) {
            kafka::ListOffsetsResponse::ListOffsetsPartitionResponse pr;
            pr.partition_index = p.partition_index;
            pr.offset = -1;
            pr.timestamp = -1;
            if (!authorized(ctx, acl::operation::describe, acl::resource_type::topic, t.name)) {
                pr.error_code = kerr::topic_authorization_failed;
            } else if (!info || p.partition_index < 0 || p.partition_index >= info->partitions) {
                pr.error_code = kerr::unknown_topic_or_partition;
            } else {
                issued.push_back(where{r.topics.size(), tr.partitions.size()});
                const std::string* name = &t.name;
                const std::int32_t part = p.partition_index;
                const std::int64_t ts = p.timestamp;
                const std::int32_t current = ctx.version >= 4 ? p.current_leader_epoch : -1;
                const bool committed = ctx.version >= 2 && req.isolation_level == 1;
                work.push_back(on_partition_owner(ctx.sh, t.name, part, [name, part, ts, current, committed](shard& o) {
                    return list_offset_on_owner(o, *name, part, ts, current, committed);
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
        pr.offset = results[i].offset;
        pr.timestamp = results[i].timestamp;
        if (ctx.version >= 4) pr.leader_epoch = results[i].leader_epoch;
    }
    co_return respond(r, ctx);
}

} // namespace skiff::broker
