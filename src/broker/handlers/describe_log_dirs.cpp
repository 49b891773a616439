// DescribeLogDirs (API 35): one log dir, the store (the data directory, or s3://bucket/namespace),
// with the size of each partition this broker serves as the store holds it (.kfs and .index of
// its live segments, partition_log::stored_bytes) and offset lag 0 (there are no replicas to lag).
// Every core answers for its own partitions; nothing is read from the store.
#include "../handlers.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/when_all.hpp>

#include <sys/statvfs.h>

#include <filesystem>
#include <map>
#include <set>

namespace skiff::broker {

namespace {

struct dir_entry {
    dir_entry() = default;
    dir_entry(std::string t, std::int32_t p, std::int64_t b) : topic(std::move(t)), partition(p), bytes(b) {}
    std::string topic;
    std::int32_t partition = 0;
    std::int64_t bytes = 0;
};

// The partitions asked for: all (null topics), or topic -> partitions.
using wanted_t = std::optional<std::map<std::string, std::set<std::int32_t>>>;

std::vector<dir_entry> entries_of(const shard& sh, const wanted_t& wanted) {
    std::vector<dir_entry> out;
    for (const auto& [key, slot] : sh.parts) {
        if (!slot || !slot->log || slot->released) continue;
        if (wanted) {
            auto it = wanted->find(key.first);
            if (it == wanted->end() || !it->second.count(key.second)) continue;
        }
        out.emplace_back(key.first, key.second, static_cast<std::int64_t>(slot->log->stored_bytes()));
    }
    return out;
}

std::string log_dir_name(const broker_config& cfg) {
    if (!cfg.s3_bucket.empty()) return "s3://" + cfg.s3_bucket + "/" + cfg.ns;
    std::error_code ec;
    auto abs = std::filesystem::absolute(cfg.data_dir, ec);
    return ec ? cfg.data_dir : abs.lexically_normal().string();
}

} // namespace

runtime::task<kafka::DescribeLogDirsResponse> describe_log_dirs(shard& sh, kafka::DescribeLogDirsRequest req) {
    wanted_t wanted;
    if (req.topics) {
        wanted.emplace();
        for (const auto& t : *req.topics) {
            auto& parts = (*wanted)[t.topic];
            parts.insert(t.partitions.begin(), t.partitions.end());
        }
    }
    const wanted_t* w = &wanted;
    std::vector<runtime::task<std::vector<dir_entry>>> work;
    for (unsigned c = 0; c < sh.shared->cores; ++c) {
        work.push_back(on_core(sh, c, [w](shard& o) { return entries_of(o, *w); }));
    }
    auto per_core = co_await runtime::when_all(std::move(work));
    std::map<std::string, std::map<std::int32_t, std::int64_t>> sizes;
    for (auto& entries : per_core) {
        for (auto& e : entries) sizes[e.topic][e.partition] = e.bytes;
    }
    kafka::DescribeLogDirsResponse r;
    kafka::DescribeLogDirsResponse::DescribeLogDirsResult dir;
    dir.log_dir = log_dir_name(sh.cfg());
    for (auto& [topic, parts] : sizes) {
        kafka::DescribeLogDirsResponse::DescribeLogDirsTopic t;
        t.name = topic;
        for (auto& [p, bytes] : parts) {
            kafka::DescribeLogDirsResponse::DescribeLogDirsPartition dp;
            dp.partition_index = p;
            dp.partition_size = bytes;
            dp.offset_lag = 0;
            dp.is_future_key = false;
            t.partitions.push_back(dp);
        }
        dir.topics.push_back(std::move(t));
    }
    // The volume of a local data directory; a bucket has no size to tell.
    dir.total_bytes = -1;
    dir.usable_bytes = -1;
    if (sh.cfg().s3_bucket.empty()) {
        struct statvfs vfs {};
        if (::statvfs(sh.cfg().data_dir.c_str(), &vfs) == 0) {
            dir.total_bytes = static_cast<std::int64_t>(vfs.f_blocks) * static_cast<std::int64_t>(vfs.f_frsize);
            dir.usable_bytes = static_cast<std::int64_t>(vfs.f_bavail) * static_cast<std::int64_t>(vfs.f_frsize);
        }
    }
    r.results.push_back(std::move(dir));
    co_return r;
}

} // namespace skiff::broker
