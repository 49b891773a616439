// Buckets for the reader tests, built with the storage engine's own builders, and a helper
// that runs a whole scan.
#pragma once

#include <skiff/reader/segment_reader.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace skiff::test {

inline const std::string reader_ns = "default";

// `n` records "v{first}".."v{first+n-1}" with key "k{i}", timestamps ts, ts+1, ...
inline std::string value_batch(int first, int n, std::int64_t ts = 1700000000000,
                               storage::compression_codec codec = storage::compression_codec::none) {
    std::vector<storage::record> recs;
    for (int i = 0; i < n; ++i) {
        std::vector<storage::record_header> h;
        h.emplace_back("h", fmt::format("{}", first + i));
        recs.emplace_back(fmt::format("k{}", first + i), fmt::format("v{}", first + i), std::move(h), i);
    }
    storage::batch_options o;
    o.base_timestamp = ts;
    o.compress = codec;
    return storage::build_batch(0, recs, o);
}

struct seg_opts {
    seg_opts() = default;
    bool index = true;
    bool kfst = false;
};

// Builds one segment from `batches` at `base` and stores its objects in `bucket`.
inline storage::built_segment put_segment(storage::memory_bucket& bucket, const std::string& topic, std::int32_t p,
                                          std::int64_t base, const std::vector<std::string>& batches,
                                          seg_opts o = seg_opts()) {
    storage::segment_builder sb(base, 1); // an index entry per batch: ranged reads can start anywhere
    for (auto& b : batches) REQUIRE(sb.append(std::span<const char>(b.data(), b.size())).has_value());
    auto built = std::move(sb).finish(1700000000000);
    storage::partition_id pid(topic, p);
    bucket.objects[storage::segment_key(reader_ns, pid, base)] = built.kfs;
    if (o.index) bucket.objects[storage::index_key(reader_ns, pid, base)] = built.index;
    if (o.kfst)
        bucket.objects[storage::time_index_key(reader_ns, pid, base)] =
            storage::encode_time_index(storage::time_index_of(built.meta));
    return built;
}

struct row {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int64_t timestamp = 0;
    std::string key, value, header;
};

struct scan_outcome {
    std::vector<row> rows;
    std::optional<reader::reader_error> error;
    reader::scan_stats stats;
    std::vector<reader::finding> findings;
};

inline runtime::task<scan_outcome> scan_all(storage::object_store& store, std::vector<reader::segment_ref> plan,
                                            reader::scan_bounds b, reader::scan_config cfg, std::stop_token st = {}) {
    scan_outcome out;
    reader::segment_scan scan(store, reader_ns, std::move(plan), b, cfg);
    for (;;) {
        auto c = co_await scan.next(st);
        if (!c) {
            out.error = c.error();
            break;
        }
        if (*c == nullptr) break;
        for (auto& r : (*c)->rows) {
            row x;
            x.partition = r.partition;
            x.offset = r.offset;
            x.timestamp = r.timestamp;
            x.key = r.key ? std::string(*r.key) : "<null>";
            x.value = r.value ? std::string(*r.value) : "<null>";
            if (r.headers && !r.headers->empty() && (*r.headers)[0].value) x.header = std::string(*(*r.headers)[0].value);
            out.rows.push_back(std::move(x));
        }
    }
    co_await scan.close(); // waits for the read-ahead still in flight (after an error)
    out.stats = scan.stats();
    out.findings = scan.findings();
    co_return out;
}

inline std::vector<std::int64_t> offsets_of(const std::vector<row>& rows) {
    std::vector<std::int64_t> v;
    for (auto& r : rows) v.push_back(r.offset);
    return v;
}

inline std::vector<std::int64_t> range_of(std::int64_t a, std::int64_t b) { // [a, b)
    std::vector<std::int64_t> v;
    for (auto i = a; i < b; ++i) v.push_back(i);
    return v;
}

} // namespace skiff::test
