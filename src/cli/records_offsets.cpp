#include "records_offsets.hpp"

#include <skiff/runtime/timer.hpp>

#include <chrono>

namespace skiff::cli {

runtime::task<result<topic_layout, client::error>> describe_topic(client::client& c, std::string topic,
                                                                  bool auto_create) {
    for (int attempt = 0;; ++attempt) {
        kafka::MetadataRequest req;
        req.topics.emplace();
        kafka::MetadataRequest::MetadataRequestTopic rt;
        rt.name = topic;
        req.topics->push_back(std::move(rt));
        req.allow_auto_topic_creation = auto_create;
        // The client's metadata() never creates topics; a plain send does when asked, and
        // metadata() afterwards refreshes the leaders the client routes by.
        if (auto_create) {
            auto t = c.send(std::move(req), client::target::any());
            auto created = co_await std::move(t);
            if (!created) co_return failure{created.error()};
        }
        std::vector<std::string> names{topic};
        auto mt = c.metadata(std::move(names));
        auto md = co_await std::move(mt);
        if (!md) co_return failure{md.error()};
        const kafka::MetadataResponse::MetadataResponseTopic* found = nullptr;
        for (const auto& t : md->topics)
            if (t.name && *t.name == topic) found = &t;
        kafka::error_code code = found ? found->error_code : kafka::error_code::unknown_topic_or_partition;
        bool leaderless = false;
        if (found && code == kafka::error_code::none) {
            for (const auto& p : found->partitions) leaderless = leaderless || p.leader_id < 0;
            if (found->partitions.empty()) leaderless = true;
        }
        const bool retriable = code == kafka::error_code::leader_not_available ||
                               (auto_create && code == kafka::error_code::unknown_topic_or_partition) || leaderless;
        if ((code == kafka::error_code::none && !leaderless) || !retriable || attempt >= 20) {
            if (code != kafka::error_code::none)
                co_return failure{client::broker_error(code, "topic '" + topic + "'")};
            topic_layout out;
            out.topic = topic;
            for (const auto& p : found->partitions) out.leaders[p.partition_index] = p.leader_id;
            co_return out;
        }
        auto pause = runtime::sleep(std::chrono::milliseconds(100 + 50 * attempt));
        (void)co_await pause;
    }
}

runtime::task<result<std::map<std::int32_t, std::int64_t>, client::error>>
list_offsets(client::client& c, const topic_layout* layout, std::vector<std::int32_t> partitions,
             std::int64_t timestamp) {
    std::map<std::int32_t, std::vector<std::int32_t>> by_leader;
    for (auto p : partitions) {
        auto it = layout->leaders.find(p);
        if (it == layout->leaders.end())
            co_return failure{client::error(client::errc::not_found, "topic '" + layout->topic +
                                                                         "' has no partition " + std::to_string(p))};
        by_leader[it->second].push_back(p);
    }
    std::map<std::int32_t, std::int64_t> out;
    for (const auto& [leader, parts] : by_leader) {
        kafka::ListOffsetsRequest req;
        req.replica_id = -1; // a consumer, not a follower
        req.isolation_level = 0;
        kafka::ListOffsetsRequest::ListOffsetsTopic t;
        t.name = layout->topic;
        for (auto p : parts) {
            kafka::ListOffsetsRequest::ListOffsetsPartition lp;
            lp.partition_index = p;
            lp.timestamp = timestamp;
            lp.max_num_offsets = 1;
            t.partitions.push_back(lp);
        }
        req.topics.push_back(std::move(t));
        auto tgt = leader >= 0 ? client::target::node(leader) : client::target::leader(layout->topic, parts.front());
        auto st = c.send(std::move(req), std::move(tgt));
        auto r = co_await std::move(st);
        if (!r) co_return failure{r.error()};
        for (const auto& rt : r->topics) {
            for (const auto& rp : rt.partitions) {
                if (rp.error_code != kafka::error_code::none)
                    co_return failure{client::broker_error(rp.error_code, "offsets of " + layout->topic + "-" +
                                                                              std::to_string(rp.partition_index))};
                std::int64_t off = rp.offset;
                // ListOffsets v0 answers in old_style_offsets.
                if (off < 0 && !rp.old_style_offsets.empty()) off = rp.old_style_offsets.front();
                out[rp.partition_index] = off;
            }
        }
    }
    for (auto p : partitions)
        if (!out.count(p))
            co_return failure{client::error(client::errc::protocol_error,
                                            "ListOffsets answer lacks " + layout->topic + "-" + std::to_string(p))};
    co_return out;
}

} // namespace skiff::cli
