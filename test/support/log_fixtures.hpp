// The partition-log tests' common setup (unit and integration): the namespace their keys
// are in, a config with fast timings, and opening a log that must open.
#pragma once

#include <skiff/runtime/task.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/object_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

namespace skiff::test {

// The bucket namespace of every test log; tests name its keys ("default/orders/3/...").
inline const std::string test_ns = "default";

// Timings short enough that failure scenarios finish in milliseconds, and a fixed wall clock
// so a segment's bytes are the same on every run. Tests adjust what their scenario needs.
inline storage::log_config fast_log_config() {
    using namespace std::chrono_literals;
    storage::log_config c;
    c.linger = 1ms;
    c.max_age = 50ms;
    c.retry_base = 1ms;
    c.retry_cap = 5ms;
    c.append_timeout = 5s;
    c.close_timeout = 2s;
    c.wall_ms = [] { return std::int64_t{1700000000000}; };
    return c;
}

// Opens (restores) `pid` in test_ns; the test fails here, with the store's message, if it
// cannot. `store` and `budget` must outlive the log.
inline runtime::task<std::unique_ptr<storage::partition_log>> open_log(storage::object_store& store,
                                                                       storage::io_budget& budget,
                                                                       storage::partition_id pid,
                                                                       storage::log_config cfg = fast_log_config()) {
    auto l = co_await storage::partition_log::open(store, budget, test_ns, std::move(pid), std::move(cfg));
    INFO((l ? std::string() : l.error().message));
    REQUIRE(l.has_value());
    co_return std::move(*l);
}

// Writes `count` segments of `pid` straight into the bucket, segment i at base offset i holding
// batch_for(i) (one record), with their indexes: a long-lived partition without producing it.
inline void write_segments(storage::memory_bucket& bucket, const storage::partition_id& pid, int count,
                           const std::function<std::string(int)>& batch_for) {
    for (int i = 0; i < count; ++i) {
        storage::segment_builder sb(i);
        auto batch = batch_for(i);
        REQUIRE(sb.append(std::span<const char>(batch.data(), batch.size())).has_value());
        auto built = std::move(sb).finish(1700000000000);
        bucket.objects[storage::segment_key(test_ns, pid, i)] = std::move(built.kfs);
        bucket.objects[storage::index_key(test_ns, pid, i)] = std::move(built.index);
    }
}

} // namespace skiff::test
