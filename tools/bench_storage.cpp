// skiff-bench-storage: append-to-acknowledge latency of the partition log, side by side in one
// run, for upload_mode sequential vs parallel, pipelining off (1 flush in flight) vs on (4),
// one partition vs many, with the store's per-request latency at 0, 10 and 50 ms; and the
// time to restore a partition of 10,000 segments.
//
// --metrics-cost runs only the cost of metrics and tracing on the produce path: the same
// closed-loop append workload with metrics + tracing on and off, alternating cell by cell in
// one run (on/off, then off/on, ...), and the on/off ratios of throughput and CPU per ack.
//
// The store is the in-memory store with a simulated round trip per request (a timer on the
// reactor), so the numbers isolate the log's own protocol: how many round trips an
// acknowledgement costs. Closed-loop producers: each appends one batch with acks=-1, waits
// for the acknowledgement, and repeats.
//
//   build/tools/skiff-bench-storage [--seconds S] [--producers N] [--partitions-many P]
//   build/tools/skiff-bench-storage --metrics-cost [--rounds R] [--seconds S] [--producers N]
//   build/tools/skiff-bench-storage --schedule [--rounds R] [--seconds S] [--producers N] [--store-ms MS]
//   build/tools/skiff-bench-storage --restore [--store-ms MS]   (default 40 ms)
//   build/tools/skiff-bench-storage --compaction [--rounds R]
//   build/tools/skiff-bench-storage --compaction-pass [--store-ms MS]   (default 40 ms)
//
// --compaction-pass times one whole compaction pass of a partition log (64 segments of 1 MiB)
// against the in-memory store at 0 and MS per request, its GETs one after another vs 8 ahead.
//
// --compaction measures compaction's CPU work per core (compaction.hpp: both passes over the
// records, the rebuilt batches and the new segment), uncompressed and zstd batches side by
// side: 64 MiB of 100-byte records over 10,000 keys, in batches of 100 records.
//
// --schedule runs the flush scheduler's comparison (docs/flush-scheduling.md): 16 partitions x
// 4 closed-loop producers whose next append follows a 50-400 µs client delay, adaptive vs a
// fixed 2 ms linger vs linger 0, cells rotating round by round.
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/compaction.hpp>
#include <skiff/storage/compression.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>
#include <skiff/core/allocator.hpp>
#include <skiff/core/log.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/metrics/trace.hpp>

#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::runtime;
using namespace skiff::storage;
using namespace std::chrono_literals;

namespace {

struct cell {
    int store_ms;
    upload_mode mode;
    int inflight;
    int partitions;
    int open_rate = 0; // appends per second per partition; 0: closed-loop producers
    bool leader = false; // closed loop with acks=1: each producer appends without waiting for S3
};

struct cell_result {
    std::vector<double> lat_ms;
    std::uint64_t acks = 0;
    std::uint64_t flushes = 0;
    double seconds = 0;
};

double pct(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
    return v[i];
}

task<void> producer(partition_log* log, std::string batch, time_point until, cell_result* out) {
    auto& r = reactor::local();
    while (r.now() < until) {
        auto start = std::chrono::steady_clock::now();
        auto res = co_await log->append(std::span<const char>(batch.data(), batch.size()), ack_mode::durable);
        auto end = std::chrono::steady_clock::now();
        if (!res) {
            std::fprintf(stderr, "append failed: %s\n", res.error().message.c_str());
            continue;
        }
        out->lat_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
        ++out->acks;
    }
}

// acks=1: the append path alone (flushes run behind it). Yields to the reactor every 16
// appends so flushes, timers and the other producers get their turns.
task<void> leader_producer(partition_log* log, const std::string* batch, time_point until, cell_result* out) {
    auto& r = reactor::local();
    std::uint64_t n = 0;
    while (r.now() < until) {
        auto start = std::chrono::steady_clock::now();
        auto res = co_await log->append(std::span<const char>(batch->data(), batch->size()), ack_mode::leader);
        auto end = std::chrono::steady_clock::now();
        if (res) {
            out->lat_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
            ++out->acks;
        }
        if (++n % 16 == 0) (void)co_await sleep(std::chrono::nanoseconds(0));
    }
}

task<void> timed_append(partition_log* log, const std::string* batch, cell_result* out) {
    auto start = std::chrono::steady_clock::now();
    auto res = co_await log->append(std::span<const char>(batch->data(), batch->size()), ack_mode::durable);
    auto end = std::chrono::steady_clock::now();
    if (!res) co_return;
    out->lat_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    ++out->acks;
}

// Open loop: appends arrive at a fixed rate whether or not earlier ones were acknowledged,
// as from many independent producers. This is where pipelining matters: without it, a
// partition completes at most one segment per store round trip.
task<void> open_loop(partition_log* log, const std::string* batch, time_point until, duration interval,
                     cell_result* out) {
    gate g("bench-open-loop");
    auto& r = reactor::local();
    auto next = r.now();
    while (r.now() < until) {
        (void)g.spawn(timed_append(log, batch, out));
        next += interval;
        (void)co_await sleep_until(next);
    }
    co_await g.close();
}

task<cell_result> run_cell(cell c, int producers, double seconds) {
    memory_store store;
    store.set_latency(std::chrono::milliseconds(c.store_ms));
    io_budget budget(256, nullptr);
    log_config cfg;
    cfg.mode = c.mode;
    cfg.max_inflight_flushes = c.inflight;
    cfg.linger = 1ms;
    cfg.append_timeout = 60s;
    std::vector<std::unique_ptr<partition_log>> logs;
    for (int p = 0; p < c.partitions; ++p) {
        auto l = co_await partition_log::open(store, budget, "default", partition_id("bench", p), cfg);
        if (!l) throw std::runtime_error(l.error().message);
        logs.push_back(std::move(*l));
    }
    std::vector<record> recs;
    for (int i = 0; i < 10; ++i) recs.emplace_back(std::string("key"), std::string(90, 'v'));
    const std::string batch = build_batch(0, recs); // ~1 KiB, 10 records
    cell_result out;
    auto start = reactor::local().now();
    auto until = start + std::chrono::duration_cast<duration>(std::chrono::duration<double>(seconds));
    std::vector<task<void>> ps;
    for (auto& l : logs) {
        if (c.leader) {
            for (int i = 0; i < producers; ++i) ps.push_back(leader_producer(l.get(), &batch, until, &out));
        } else if (c.open_rate > 0) {
            ps.push_back(open_loop(l.get(), &batch, until, std::chrono::nanoseconds(1'000'000'000LL / c.open_rate), &out));
        } else {
            for (int i = 0; i < producers; ++i) ps.push_back(producer(l.get(), batch, until, &out));
        }
    }
    co_await when_all(std::move(ps));
    out.seconds = std::chrono::duration<double>(reactor::local().now() - start).count();
    for (auto& l : logs) {
        out.flushes += l->stats().flushes;
        co_await l->close();
    }
    co_return out;
}

double cpu_seconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Metrics and tracing on vs off, interleaved. Each cell opens fresh partition logs (and the
// log's io_budget and store), so the switch, read when they register, applies to all of it.
void run_metrics_cost(reactor& r, int rounds, int producers, double seconds, int many) {
    std::printf("cost of metrics + tracing: %d closed-loop producers per partition, ~1 KiB batches "
                "(10 records), %.1f s per cell, %d rounds, on/off alternating\n\n",
                producers, seconds, rounds);
    std::printf("| acks | store RTT ms | partitions | round | off acks/s | on acks/s | throughput on/off | off CPU µs/ack | "
                "on CPU µs/ack | CPU on/off | off p50/p99 ms | on p50/p99 ms |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    struct summary {
        bool leader;
        int store_ms, parts;
        std::vector<double> tput_ratio, cpu_ratio;
    };
    struct config {
        bool leader;
        int store_ms, parts;
    };
    // Warm-up, not reported: first use of the trace rings, the registry, the allocator.
    for (bool on : {false, true}) {
        metrics::set_metrics_enabled(on);
        metrics::set_tracing_enabled(on);
        cell c{0, upload_mode::parallel, 4, many};
        (void)r.run_until_complete(run_cell(c, producers, std::min(seconds, 0.5)));
    }
    std::vector<summary> sums;
    for (config cf : {config{true, 0, 1}, config{false, 0, 1}, config{false, 0, many}, config{false, 10, many}}) {
        const bool leader = cf.leader;
        const int ms = cf.store_ms;
        const int parts = cf.parts;
        {
            summary sum{leader, ms, parts, {}, {}};
            for (int round = 0; round < rounds; ++round) {
                cell_result res[2];
                double cpu[2] = {0, 0};
                // Alternate which mode goes first, so a drift in machine load hits both alike.
                const bool on_first = round % 2 == 1;
                for (int k = 0; k < 2; ++k) {
                    const bool on = (k == 0) == on_first;
                    metrics::set_metrics_enabled(on);
                    metrics::set_tracing_enabled(on);
                    cell c{ms, upload_mode::parallel, 4, parts, 0, leader};
                    const double c0 = cpu_seconds();
                    res[on ? 1 : 0] = r.run_until_complete(run_cell(c, producers, seconds));
                    cpu[on ? 1 : 0] = cpu_seconds() - c0;
                }
                metrics::set_metrics_enabled(true);
                metrics::set_tracing_enabled(true);
                double tput[2], us_per_ack[2];
                for (int k = 0; k < 2; ++k) {
                    tput[k] = static_cast<double>(res[k].acks) / res[k].seconds;
                    us_per_ack[k] = res[k].acks ? cpu[k] * 1e6 / static_cast<double>(res[k].acks) : 0;
                }
                sum.tput_ratio.push_back(tput[1] / tput[0]);
                sum.cpu_ratio.push_back(us_per_ack[1] / us_per_ack[0]);
                std::printf("| %s | %d | %d | %d | %.0f | %.0f | %.3f | %.2f | %.2f | %.3f | %.3f / %.3f | %.3f / %.3f |\n",
                            leader ? "1" : "-1", ms, parts, round + 1, tput[0], tput[1], tput[1] / tput[0], us_per_ack[0], us_per_ack[1],
                            us_per_ack[1] / us_per_ack[0], pct(res[0].lat_ms, 0.50), pct(res[0].lat_ms, 0.99),
                            pct(res[1].lat_ms, 0.50), pct(res[1].lat_ms, 0.99));
                std::fflush(stdout);
            }
            sums.push_back(std::move(sum));
        }
    }
    std::printf("\nsummary (median over rounds, [min, max]):\n\n");
    std::printf("| acks | store RTT ms | partitions | throughput on/off | CPU per ack on/off |\n"
                "|---|---:|---:|---:|---:|\n");
    for (auto& s : sums) {
        auto [tmin, tmax] = std::minmax_element(s.tput_ratio.begin(), s.tput_ratio.end());
        auto [cmin, cmax] = std::minmax_element(s.cpu_ratio.begin(), s.cpu_ratio.end());
        std::printf("| %s | %d | %d | %.3f [%.3f, %.3f] | %.3f [%.3f, %.3f] |\n", s.leader ? "1" : "-1", s.store_ms,
                    s.parts, median(s.tput_ratio),
                    *tmin, *tmax, median(s.cpu_ratio), *cmin, *cmax);
    }
}

// ---- --schedule: the flush scheduler (docs/flush-scheduling.md) --------------------------------

// A closed-loop producer as a network client looks to the broker: after each acknowledgement it
// takes a client-and-network delay (uniform in [50, 400] µs) before its next append, so the
// producers of one partition do not all come back in the same reactor turn.
task<void> spread_producer(partition_log* log, const std::string* batch, time_point until, std::uint64_t seed,
                           cell_result* out) {
    auto& r = reactor::local();
    std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    while (r.now() < until) {
        auto start = std::chrono::steady_clock::now();
        auto res = co_await log->append(std::span<const char>(batch->data(), batch->size()), ack_mode::durable);
        auto end = std::chrono::steady_clock::now();
        if (res) {
            out->lat_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
            ++out->acks;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (void)co_await sleep(std::chrono::microseconds(50 + static_cast<int>(x % 351)));
    }
}

struct schedule_result {
    cell_result c;
    std::uint64_t puts = 0;
    std::uint64_t bytes = 0;
};

task<schedule_result> run_schedule_cell(std::optional<std::chrono::milliseconds> linger, int store_ms, int partitions,
                                        int producers, double seconds) {
    memory_store store;
    io_budget budget(256, nullptr);
    log_config cfg;
    cfg.linger = linger;
    cfg.append_timeout = 60s;
    std::vector<std::unique_ptr<partition_log>> logs;
    for (int p = 0; p < partitions; ++p) {
        auto l = co_await partition_log::open(store, budget, "default", partition_id("bench", p), cfg);
        if (!l) throw std::runtime_error(l.error().message);
        logs.push_back(std::move(*l));
    }
    store.set_latency(std::chrono::milliseconds(store_ms));
    const auto puts0 = store.stats().puts;
    std::vector<record> recs;
    recs.emplace_back(std::string("key"), std::string(1000, 'v'));
    const std::string batch = build_batch(0, recs); // one ~1 KiB record
    schedule_result out;
    auto start = reactor::local().now();
    auto until = start + std::chrono::duration_cast<duration>(std::chrono::duration<double>(seconds));
    std::vector<task<void>> ps;
    std::uint64_t seed = 1;
    for (auto& l : logs)
        for (int i = 0; i < producers; ++i) ps.push_back(spread_producer(l.get(), &batch, until, seed++, &out.c));
    co_await when_all(std::move(ps));
    out.c.seconds = std::chrono::duration<double>(reactor::local().now() - start).count();
    out.puts = store.stats().puts - puts0;
    out.bytes = out.c.acks * batch.size();
    for (auto& l : logs) {
        out.c.flushes += l->stats().flushes;
        co_await l->close();
    }
    co_return out;
}

void run_schedule(reactor& r, int rounds, double seconds, int partitions, int producers, int store_ms) {
    std::printf("flush schedule: %d closed-loop producers over %d partitions (%d each), 1 KiB records, store "
                "round trip %d ms, client delay 50-400 µs, %.1f s per cell, %d rounds, cells rotating; cost at "
                "$0.005 per 1,000 PUTs\n\n",
                partitions * producers, partitions, producers, store_ms, seconds, rounds);
    struct series {
        const char* name;
        std::optional<std::chrono::milliseconds> linger;
        std::vector<double> lat;
        std::uint64_t acks = 0, puts = 0, bytes = 0;
        double secs = 0;
    };
    std::vector<series> ss;
    ss.push_back(series{"adaptive", std::nullopt, {}, 0, 0, 0, 0});
    ss.push_back(series{"linger 2 ms", std::chrono::milliseconds(2), {}, 0, 0, 0, 0});
    ss.push_back(series{"linger 0", std::chrono::milliseconds(0), {}, 0, 0, 0, 0});
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t k = 0; k < ss.size(); ++k) {
            auto& s = ss[(k + static_cast<std::size_t>(round)) % ss.size()];
            auto res = r.run_until_complete(run_schedule_cell(s.linger, store_ms, partitions, producers, seconds));
            s.lat.insert(s.lat.end(), res.c.lat_ms.begin(), res.c.lat_ms.end());
            s.acks += res.c.acks;
            s.puts += res.puts;
            s.bytes += res.bytes;
            s.secs += res.c.seconds;
        }
    }
    std::printf("| schedule | acks/s | p50 ms | p99 ms | PUTs per ack | PUTs/s | request cost per GB |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
    for (auto& s : ss) {
        const double per_ack = s.acks ? static_cast<double>(s.puts) / static_cast<double>(s.acks) : 0;
        const double gb = static_cast<double>(s.bytes) / 1e9;
        const double cost = gb > 0 ? static_cast<double>(s.puts) / 1000.0 * 0.005 / gb : 0;
        std::printf("| %s | %.0f | %.2f | %.2f | %.3f | %.0f | $%.2f |\n", s.name, static_cast<double>(s.acks) / s.secs,
                    pct(s.lat, 0.50), pct(s.lat, 0.99), per_ack, static_cast<double>(s.puts) / s.secs, cost);
    }
}

// A bucket holding `segments` one-record segments (and indexes) of `pid`, written directly.
std::shared_ptr<memory_bucket> seeded_bucket(const partition_id& pid, int segments) {
    auto bucket = std::make_shared<memory_bucket>();
    std::vector<record> recs;
    recs.emplace_back(std::string("k"), std::string("v"));
    for (int i = 0; i < segments; ++i) {
        segment_builder sb(i);
        auto b = build_batch(0, recs);
        (void)sb.append(std::span<const char>(b.data(), b.size()));
        auto built = std::move(sb).finish(1700000000000);
        bucket->objects[segment_key("default", pid, i)] = std::move(built.kfs);
        bucket->objects[index_key("default", pid, i)] = std::move(built.index);
    }
    return bucket;
}

task<void> run_restore(int segments, int store_ms) {
    partition_id pid("restore", 0);
    auto bucket = seeded_bucket(pid, segments);
    memory_store store(bucket);
    store.set_latency(std::chrono::milliseconds(store_ms));
    io_budget budget(64, nullptr);
    auto t0 = std::chrono::steady_clock::now();
    auto log = co_await partition_log::open(store, budget, "default", pid, log_config());
    auto t1 = std::chrono::steady_clock::now();
    if (!log) throw std::runtime_error(log.error().message);
    std::printf("| %d | %d | %.1f | %llu | %llu | %lld |\n", segments, store_ms,
                std::chrono::duration<double, std::milli>(t1 - t0).count(),
                static_cast<unsigned long long>(store.stats().lists), static_cast<unsigned long long>(store.stats().gets),
                static_cast<long long>((*log)->next_offset()));
    co_await (*log)->close();
}

// --restore: a partition of N segments restored with and without its manifest, one after the
// other on the same bucket, at store_ms per request (docs/benchmarks.md, "Restore").
task<void> run_restore_manifest(int segments, int store_ms) {
    partition_id pid("restore", 0);
    auto bucket = seeded_bucket(pid, segments);
    io_budget budget(64, nullptr);
    log_config cfg;
    cfg.lifecycle_tick = std::chrono::hours(1); // no background check during the measurement
    double ms[2] = {0, 0};
    std::uint64_t lists[2] = {0, 0}, gets[2] = {0, 0};
    std::size_t manifest_bytes = 0;
    for (int with = 0; with < 2; ++with) {
        memory_store store(bucket);
        store.set_latency(std::chrono::milliseconds(store_ms));
        auto t0 = std::chrono::steady_clock::now();
        auto log = co_await partition_log::open(store, budget, "default", pid, cfg);
        auto t1 = std::chrono::steady_clock::now();
        if (!log) throw std::runtime_error(log.error().message);
        if ((*log)->next_offset() != segments) throw std::runtime_error("wrong next offset");
        if ((*log)->restored().from_manifest != (with == 1)) throw std::runtime_error("manifest use not as expected");
        ms[with] = std::chrono::duration<double, std::milli>(t1 - t0).count();
        lists[with] = store.stats().lists;
        gets[with] = store.stats().gets;
        store.set_latency(0ms);
        co_await (*log)->close(); // the first run's close writes the manifest the second reads
    }
    for (auto& [k, v] : bucket->objects) {
        if (k.find("/skiff~meta/") != std::string::npos) manifest_bytes = std::max(manifest_bytes, v.size());
    }
    std::printf("| %d | %d | %.0f | %llu | %llu | %.0f | %llu | %llu | %zu | %.1f |\n", segments, store_ms, ms[0],
                static_cast<unsigned long long>(lists[0]), static_cast<unsigned long long>(gets[0]), ms[1],
                static_cast<unsigned long long>(lists[1]), static_cast<unsigned long long>(gets[1]), manifest_bytes,
                ms[1] > 0 ? ms[0] / ms[1] : 0.0);
    std::fflush(stdout);
}

} // namespace

// --compaction (see the top).
void run_compaction(int rounds) {
    std::printf("compaction CPU per core: 64 MiB of 100-byte records over 10,000 keys, batches of 100 records\n\n");
    std::printf("| batches | stored MiB | records | kept | CPU s (median of %d) | stored MB/s | records/s (M) | "
                "record MB/s |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
                rounds);
    for (auto codec : {compression_codec::none, compression_codec::zstd}) {
        std::vector<std::string> batches;
        std::size_t in_bytes = 0;
        std::int64_t offset = 0;
        const std::string value(100, 'v');
        while (offset * 110 < (64ll << 20)) {
            std::vector<record> recs;
            for (int i = 0; i < 100; ++i) {
                recs.emplace_back(fmt::format("key-{}", (offset + i) * 7919 % 10000), value);
            }
            batch_options o;
            o.base_timestamp = 1'700'000'000'000;
            o.compress = codec;
            batches.push_back(build_batch(offset, recs, o));
            in_bytes += batches.back().size();
            offset += 100;
        }
        std::vector<double> secs;
        std::int64_t kept = 0;
        for (int r = 0; r < rounds; ++r) {
            const double c0 = cpu_seconds();
            key_index index;
            std::vector<batch_view> views;
            for (auto& b : batches) {
                auto v = parse_batch(std::span<const char>(b.data(), b.size()));
                if (!v || !index.add(*v, 64u << 20)) std::abort();
                views.push_back(*v);
            }
            compaction_rules rules;
            rules.now_ms = 1'700'000'000'000;
            segment_builder builder(0);
            kept = 0;
            for (std::size_t i = 0; i < views.size(); ++i) {
                auto f = filter_batch(views[i], index, rules, i == 0 || i + 1 == views.size());
                if (!f) std::abort();
                kept += f->records_out;
                if (f->fate == batch_fate::dropped) continue;
                std::span<const char> out = f->fate == batch_fate::kept ? views[i].bytes
                                                                        : std::span<const char>(f->bytes.data(), f->bytes.size());
                if (!builder.skip_to(views[i].base_offset) || !builder.append(out)) std::abort();
            }
            auto built = std::move(builder).finish(0);
            if (built.kfs.empty()) std::abort();
            secs.push_back(cpu_seconds() - c0);
        }
        const double s = median(secs);
        // "record MB/s": the records' own bytes (key and value), whatever the codec.
        const double record_bytes = static_cast<double>(offset) * (9 + 100);
        std::printf("| %s | %.1f | %lld | %lld | %.3f | %.0f | %.2f | %.0f |\n", to_string(codec),
                    in_bytes / 1048576.0, static_cast<long long>(offset), static_cast<long long>(kept), s,
                    in_bytes / 1e6 / s, offset / 1e6 / s, record_bytes / 1e6 / s);
    }
}

// --compaction-pass (see the top).
namespace {

std::uint64_t local_counter(std::string_view name) {
    auto snap = metrics::registry::local().snapshot();
    for (auto& f : snap.families) {
        if (f.name != name) continue;
        std::uint64_t sum = 0;
        for (auto& series : f.series) sum += series.counter;
        return sum;
    }
    return 0;
}

struct pass_result {
    pass_result() = default;
    double seconds = 0;
    std::uint64_t gets = 0, puts = 0;
};

// A partition of `segments` segments of about 1 MiB (100-byte records over 10,000 keys),
// restored, its manifest stored, then one compaction pass timed from the manifest to the
// pass's end.
task<pass_result> run_compaction_pass(int segments, int store_ms, std::size_t read_ahead) {
    partition_id pid("compact", 0);
    auto bucket = std::make_shared<memory_bucket>();
    const std::string value(100, 'v');
    std::int64_t offset = 0;
    for (int sidx = 0; sidx < segments; ++sidx) {
        segment_builder sb(offset);
        while (sb.body_bytes() < (1u << 20)) {
            std::vector<record> recs;
            for (int i = 0; i < 100; ++i) recs.emplace_back(fmt::format("key-{}", (offset + i) * 7919 % 10000), value);
            batch_options o;
            o.base_timestamp = 1'700'000'000'000;
            auto b = build_batch(offset, recs, o);
            if (!sb.append(std::span<const char>(b.data(), b.size()))) std::abort();
            offset += 100;
        }
        auto base = sb.base_offset();
        auto built = std::move(sb).finish(1'700'000'000'000);
        bucket->objects[segment_key("default", pid, base)] = std::move(built.kfs);
        bucket->objects[index_key("default", pid, base)] = std::move(built.index);
    }
    io_budget budget(64, nullptr);
    log_config cfg;
    cfg.compact = true;
    cfg.compaction_interval = 0ms;
    cfg.compaction_read_ahead = read_ahead;
    cfg.lifecycle_tick = 5ms;
    cfg.manifest_interval = std::chrono::hours(1);
    cfg.manifest_every_segments = 1000000;
    cfg.merge_target_bytes = 32u << 20;
    cfg.delete_delay = std::chrono::hours(1); // the deletes after the pass are not measured
    cfg.wall_ms = [] { return std::int64_t{1'800'000'000'000}; };
    memory_store store(bucket);
    auto opened = co_await partition_log::open(store, budget, "default", pid, cfg);
    if (!opened) throw std::runtime_error(opened.error().message);
    auto& log = *opened;
    if (!co_await log->checkpoint()) throw std::runtime_error("no manifest");
    store.set_latency(std::chrono::milliseconds(store_ms));
    const auto gets0 = store.stats().gets;
    const auto puts0 = store.stats().puts;
    const auto passes0 = local_counter("skiff_compactions_total");
    const auto t0 = std::chrono::steady_clock::now();
    while (local_counter("skiff_compactions_total") == passes0) (void)co_await runtime::sleep(1ms);
    pass_result out;
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.gets = store.stats().gets - gets0;
    out.puts = store.stats().puts - puts0;
    store.set_latency(0ms);
    co_await log->close();
    co_return out;
}

} // namespace

void run_compaction_passes(reactor& r, int store_ms) {
    constexpr int segments = 64;
    std::printf("one compaction pass over %d segments of 1 MiB (100-byte records over 10,000 keys), store at "
                "0 and %d ms per request, GETs read ahead 1 (one after another) vs 8\n\n",
                segments, store_ms);
    std::printf("| store ms | read-ahead | pass s | GETs | PUTs | source MB/s |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|\n");
    for (int ms : {0, store_ms}) {
        for (std::size_t ahead : {std::size_t{1}, std::size_t{8}}) {
            auto res = r.run_until_complete(run_compaction_pass(segments, ms, ahead));
            std::printf("| %d | %zu | %.2f | %llu | %llu | %.0f |\n", ms, ahead, res.seconds,
                        static_cast<unsigned long long>(res.gets), static_cast<unsigned long long>(res.puts),
                        segments * 1.048576 / res.seconds);
            std::fflush(stdout);
        }
    }
}

int main(int argc, char** argv) {
    double seconds = 2.0;
    int producers = 4;
    int many = 16;
    int open_rate = 1000;
    bool metrics_cost = false;
    bool schedule = false;
    bool restore = false;
    bool compaction = false;
    bool compaction_pass = false;
    int store_ms = 5;
    int rounds = 5;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--producers") && i + 1 < argc) producers = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--partitions-many") && i + 1 < argc) many = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--open-rate") && i + 1 < argc) open_rate = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--metrics-cost")) metrics_cost = true;
        else if (!std::strcmp(argv[i], "--schedule")) schedule = true;
        else if (!std::strcmp(argv[i], "--restore")) restore = true;
        else if (!std::strcmp(argv[i], "--compaction")) compaction = true;
        else if (!std::strcmp(argv[i], "--compaction-pass")) compaction_pass = true;
        else if (!std::strcmp(argv[i], "--store-ms") && i + 1 < argc) store_ms = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: skiff-bench-storage [--seconds S] [--producers N] [--partitions-many P] "
                                 "[--open-rate R]\n       skiff-bench-storage --metrics-cost [--rounds R] "
                                 "[--seconds S] [--producers N] [--partitions-many P]\n       skiff-bench-storage "
                                 "--schedule [--rounds R] [--seconds S] [--producers N] [--partitions-many P] "
                                 "[--store-ms MS]\n       skiff-bench-storage --restore [--store-ms MS]\n");
            return 2;
        }
    }
    log::set_level(log::level::warn);
    auto r = reactor::create(0);
    if (!r) {
        std::fprintf(stderr, "%s\n", r.error().c_str());
        return 1;
    }
    if (metrics_cost) {
        // As the skiff binary does: without it, glibc's dynamic mmap/trim thresholds make the
        // page faults on fresh 4 MiB segment buffers (most of this workload's CPU) depend on
        // the allocation history, and any extra allocation (a span) shifts them.
        skiff::tune_allocator();
        run_metrics_cost(**r, rounds, producers, seconds, many);
        return 0;
    }
    if (compaction_pass) {
        run_compaction_passes(**r, store_ms == 5 ? 40 : store_ms);
        return 0;
    }
    if (compaction) {
        run_compaction(rounds);
        return 0;
    }
    if (restore) {
        const int rtt = store_ms == 5 ? 40 : store_ms;
        std::printf("restore of one partition without and with its manifest, %d ms per store request\n\n", rtt);
        std::printf("| segments | RTT ms | full LIST ms | LISTs | GETs | manifest ms | LISTs | GETs | manifest bytes | "
                    "ratio |\n");
        std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int n : {1000, 10000, 100000}) (*r)->run_until_complete(run_restore_manifest(n, rtt));
        return 0;
    }
    if (schedule) {
        skiff::tune_allocator();
        run_schedule(**r, rounds, seconds, many, producers, store_ms);
        return 0;
    }
    std::printf("append-to-ack latency, %d closed-loop producers per partition, ~1 KiB batches, %.1f s per cell\n\n",
                producers, seconds);
    std::printf("| store RTT ms | partitions | upload | flushes in flight | p50 ms | p99 ms | acks/s | segments/s |\n");
    std::printf("|---:|---:|---|---:|---:|---:|---:|---:|\n");
    for (int ms : {0, 10, 50}) {
        for (int parts : {1, many}) {
            for (int inflight : {1, 4}) {
                for (auto mode : {upload_mode::sequential, upload_mode::parallel}) {
                    cell c{ms, mode, inflight, parts};
                    auto res = (*r)->run_until_complete(run_cell(c, producers, seconds));
                    std::printf("| %d | %d | %s | %d | %.2f | %.2f | %.0f | %.0f |\n", ms, parts,
                                mode == upload_mode::parallel ? "parallel" : "sequential", inflight,
                                pct(res.lat_ms, 0.50), pct(res.lat_ms, 0.99),
                                static_cast<double>(res.acks) / res.seconds,
                                static_cast<double>(res.flushes) / res.seconds);
                    std::fflush(stdout);
                }
            }
        }
    }
    std::printf("\nopen loop: %d appends/s into one partition (independent producers), %.1f s per cell\n\n", open_rate,
                seconds);
    std::printf("| store RTT ms | upload | flushes in flight | p50 ms | p99 ms | acks/s | segments/s |\n");
    std::printf("|---:|---|---:|---:|---:|---:|---:|\n");
    for (int ms : {10, 50}) {
        for (int inflight : {1, 4}) {
            for (auto mode : {upload_mode::sequential, upload_mode::parallel}) {
                cell c{ms, mode, inflight, 1, open_rate};
                auto res = (*r)->run_until_complete(run_cell(c, producers, seconds));
                std::printf("| %d | %s | %d | %.2f | %.2f | %.0f | %.0f |\n", ms,
                            mode == upload_mode::parallel ? "parallel" : "sequential", inflight, pct(res.lat_ms, 0.50),
                            pct(res.lat_ms, 0.99), static_cast<double>(res.acks) / res.seconds,
                            static_cast<double>(res.flushes) / res.seconds);
                std::fflush(stdout);
            }
        }
    }
    std::printf("\nrestore of one partition\n\n| segments | store RTT ms | restore ms | LIST requests | GET requests | next offset |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|\n");
    (*r)->run_until_complete(run_restore(10000, 0));
    (*r)->run_until_complete(run_restore(10000, 10));
    return 0;
}
