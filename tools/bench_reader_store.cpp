// The segment reader alone against a store with a fixed round trip: N segments in the
// in-memory store, every request (LIST, GET) held `--rtt-ms` on the reactor's timer, read by
// topic_discovery + plan + segment_scan with one GET at a time and with a window of parallel
// GETs, rounds alternating. It measures the reader's parallelism without the S3 test server's
// own CPU per request (tools/bench_reader.py measures `skiff cat` end to end through it).
//
//   build/tools/skiff-bench-reader [--segments 100] [--rtt-ms 40] [--rounds 3] [--parallel 16]
//                                  [--segment-kib 256]
#include <skiff/reader/segment_reader.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

using namespace skiff;

namespace {

const std::string bench_ns = "bench";
const std::string bench_topic = "t";

// `segments` segments of about `kib` KiB each (records of 1 KiB), partition 0.
std::shared_ptr<storage::memory_bucket> make_bucket(int segments, int kib) {
    auto bucket = std::make_shared<storage::memory_bucket>();
    const std::string value(1000, 'x');
    std::int64_t base = 0;
    for (int s = 0; s < segments; ++s) {
        storage::segment_builder sb(base, 100);
        const int records = std::max(1, kib);
        for (int done = 0; done < records;) {
            const int n = std::min(64, records - done);
            std::vector<storage::record> recs;
            for (int i = 0; i < n; ++i) recs.emplace_back(fmt::format("k{}", base + done + i), value, std::vector<storage::record_header>{}, i);
            storage::batch_options o;
            o.base_timestamp = 1700000000000 + base + done;
            auto batch = storage::build_batch(base + done, recs, o);
            if (!sb.append(std::span<const char>(batch.data(), batch.size()))) std::abort();
            done += n;
        }
        auto built = std::move(sb).finish(1700000000000);
        storage::partition_id pid(bench_topic, 0);
        bucket->objects[storage::segment_key(bench_ns, pid, base)] = built.kfs;
        bucket->objects[storage::index_key(bench_ns, pid, base)] = built.index;
        base += records;
    }
    return bucket;
}

struct outcome {
    double seconds = 0;
    std::uint64_t records = 0;
    reader::scan_stats stats;
    bool ok = false;
};

runtime::task<outcome> read_all(std::shared_ptr<storage::memory_bucket> bucket, int rtt_ms, std::size_t parallel) {
    outcome out;
    storage::memory_store store(bucket);
    store.set_latency(std::chrono::milliseconds(rtt_ms));
    const auto t0 = std::chrono::steady_clock::now();
    reader::topic_discovery d(store, bench_ns, bench_topic);
    auto r = co_await d.refresh({});
    if (!r) {
        std::fprintf(stderr, "refresh: %s\n", r.error().message.c_str());
        co_return out;
    }
    reader::scan_config cfg;
    cfg.parallel_gets = parallel;
    cfg.read_ahead_bytes = 256u << 20;
    reader::segment_scan scan(store, bench_ns, reader::plan(d.partitions(), reader::scan_bounds()),
                              reader::scan_bounds(), cfg);
    bool ok = true;
    for (;;) {
        auto c = co_await scan.next({});
        if (!c) {
            std::fprintf(stderr, "scan: %s\n", c.error().message.c_str());
            ok = false;
            break;
        }
        if (*c == nullptr) break;
        out.records += (*c)->rows.size();
    }
    co_await scan.close();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.stats = scan.stats();
    out.ok = ok;
    co_return out;
}

int arg_int(int argc, char** argv, std::string_view name, int dflt) {
    for (int i = 1; i + 1 < argc; ++i)
        if (argv[i] == name) return std::atoi(argv[i + 1]);
    return dflt;
}

} // namespace

int main(int argc, char** argv) {
    const int segments = arg_int(argc, argv, "--segments", 100);
    const int rtt = arg_int(argc, argv, "--rtt-ms", 40);
    const int rounds = arg_int(argc, argv, "--rounds", 3);
    const int parallel = arg_int(argc, argv, "--parallel", 16);
    const int kib = arg_int(argc, argv, "--segment-kib", 256);
    auto r = runtime::reactor::create(0);
    if (!r) {
        std::fprintf(stderr, "%s\n", r.error().c_str());
        return 1;
    }
    auto bucket = make_bucket(segments, kib);
    fmt::print("{} segments of ~{} KiB, {} ms per request, {} rounds alternating\n", segments, kib, rtt, rounds);
    fmt::print("| round | one at a time s | {} in parallel s | ratio | GETs | max in flight | read-ahead hits |\n", parallel);
    fmt::print("|---|---:|---:|---:|---:|---:|---:|\n");
    std::vector<double> ratios;
    for (int i = 0; i < rounds; ++i) {
        auto one = (*r)->run_until_complete(read_all(bucket, rtt, 1));
        auto many = (*r)->run_until_complete(read_all(bucket, rtt, static_cast<std::size_t>(parallel)));
        if (!one.ok || !many.ok || one.records != many.records) {
            std::fprintf(stderr, "round %d: the two reads disagree (%llu vs %llu records)\n", i + 1,
                         static_cast<unsigned long long>(one.records), static_cast<unsigned long long>(many.records));
            return 1;
        }
        const double ratio = one.seconds / many.seconds;
        ratios.push_back(ratio);
        fmt::print("| {} | {:.2f} | {:.3f} | {:.1f} | {} | {} | {} |\n", i + 1, one.seconds, many.seconds, ratio,
                   many.stats.gets, many.stats.max_gets_in_flight, many.stats.read_ahead_hits);
    }
    std::sort(ratios.begin(), ratios.end());
    fmt::print("median ratio {:.1f}\n", ratios[ratios.size() / 2]);
    return 0;
}
