// A one-core broker shard over an in-memory store, for calling request handlers directly
// (no sockets, no smp group: on_partition_owner runs the work on this core). Construct it
// inside the test's coroutine (it needs the reactor) and co_await close() before it goes.
#pragma once

#include "../../../src/broker/handlers.hpp"

#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/record_batch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace skiff::test {

struct fake_shard {
    broker::broker_shared shared;
    broker::shard sh;
    std::shared_ptr<storage::memory_bucket> bucket = std::make_shared<storage::memory_bucket>();
    storage::memory_store* store = nullptr; // sh.store, for latency and faults

    // `data`: the bucket of an earlier fake_shard, to "restart" on its data.
    explicit fake_shard(const std::map<std::string, std::int32_t>& topics,
                        std::shared_ptr<storage::memory_bucket> data = nullptr) {
        if (data) bucket = std::move(data);
        using namespace std::chrono_literals;
        shared.cores = 1;
        shared.shards = {&sh};
        shared.cfg.log.linger = 1ms;
        shared.cfg.log.max_age = 5ms;
        shared.cfg.log.append_timeout = 5s;
        shared.cfg.log.close_timeout = 2s;
        // Test records carry timestamp 0 (1970): under Kafka's 7-day default the lifecycle
        // would delete them at its first tick. Tests of retention set it themselves.
        shared.cfg.retention_ms = -1;
        sh.core = 0;
        sh.shared = &shared;
        auto s = std::make_unique<storage::memory_store>(bucket);
        store = s.get();
        sh.store = std::move(s);
        sh.budget = std::make_unique<storage::io_budget>(8, nullptr);
        auto cat = std::make_shared<broker::catalog>();
        for (auto& [name, parts] : topics) {
            broker::topic_info t;
            t.name = name;
            t.partitions = parts;
            cat->topics.emplace(name, std::move(t));
        }
        sh.cat = cat;
    }

    runtime::task<void> close() {
        co_await sh.background.close();
        for (auto& [_, slot] : sh.parts) co_await slot->log->close();
    }
};

// A Produce request part: `records` for (topic, partition).
struct produce_part {
    std::string topic;
    std::int32_t partition = 0;
    std::string records;
};

inline kafka::ProduceRequest produce_request(const std::vector<produce_part>& parts, std::int16_t acks = -1) {
    kafka::ProduceRequest req;
    req.acks = acks;
    req.timeout_ms = 5000;
    for (auto& p : parts) {
        if (req.topic_data.empty() || req.topic_data.back().name != p.topic) {
            kafka::ProduceRequest::TopicProduceData td;
            td.name = p.topic;
            req.topic_data.push_back(std::move(td));
        }
        kafka::ProduceRequest::PartitionProduceData pd;
        pd.index = p.partition;
        pd.records = p.records;
        req.topic_data.back().partition_data.push_back(std::move(pd));
    }
    return req;
}

// One batch of `n` records with values "v<first>".."v<first+n-1>".
inline std::string records_of(int first, int n, std::int64_t producer_id = -1, std::int32_t base_sequence = -1,
                              bool transactional = false) {
    std::vector<storage::record> recs;
    for (int i = 0; i < n; ++i) recs.emplace_back(std::string("k"), "v" + std::to_string(first + i));
    storage::batch_options o;
    if (transactional) o.attributes = storage::attr_transactional;
    if (producer_id >= 0) {
        o.producer_id = producer_id;
        o.producer_epoch = 0;
        o.base_sequence = base_sequence;
    }
    return storage::build_batch(0, recs, o);
}

} // namespace skiff::test
