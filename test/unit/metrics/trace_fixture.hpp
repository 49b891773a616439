// Recorded spans of two flushes (with parallel PUTs, one retried) and the produces they
// acknowledged, with fixed times: shared by the trace tests and the page snapshot tool.
#pragma once

#include <skiff/metrics/exposition.hpp>
#include <skiff/metrics/trace.hpp>

#include <cstdint>
#include <vector>

namespace skiff::test {

// Times in ns since the trace epoch; `t0` offsets the whole scenario.
inline std::vector<metrics::trace_snapshot> flush_scenario(std::int64_t t0 = 1'000'000'000) {
    using namespace skiff::metrics;
    constexpr std::int64_t ms = 1'000'000;
    std::vector<span_record> core0, core1;
    auto make = [](std::uint64_t trace, std::uint64_t id, std::uint64_t parent, const char* name, unsigned core,
                   std::int64_t start, std::int64_t end, volume v = volume::low) {
        span_record r;
        r.trace_id = trace;
        r.span_id = id;
        r.parent_id = parent;
        r.name = name;
        r.core = core;
        r.start_ns = start;
        r.end_ns = end;
        r.vol = v;
        return r;
    };
    auto attr = [](span_record& r, const char* k, std::int64_t v) {
        span_attribute a;
        a.key = k;
        a.num = v;
        a.is_int = true;
        r.attributes.push_back(a);
    };
    auto sattr = [](span_record& r, const char* k, const char* v) {
        span_attribute a;
        a.key = k;
        a.str = v;
        r.attributes.push_back(a);
    };

    // Flush A on core 0: build 0-4 ms, PUT .kfs 4-60 ms (1 retry), PUT .index 4-20 ms, commit 60-66 ms.
    const std::uint64_t fa = 0xa0;
    auto root_a = make(fa, 0xa1, 0, "flush", 0, t0, t0 + 66 * ms);
    sattr(root_a, "topic", "orders");
    attr(root_a, "partition", 0);
    attr(root_a, "bytes", 4 << 20);
    auto build_a = make(fa, 0xa2, 0xa1, "build", 0, t0, t0 + 4 * ms);
    auto kfs_a = make(fa, 0xa3, 0xa1, "put", 0, t0 + 4 * ms, t0 + 60 * ms);
    sattr(kfs_a, "kind", "kfs");
    attr(kfs_a, "bytes", 4 << 20);
    attr(kfs_a, "retries", 1);
    attr(kfs_a, "status", 200);
    auto idx_a = make(fa, 0xa4, 0xa1, "put", 0, t0 + 4 * ms, t0 + 20 * ms);
    sattr(idx_a, "kind", "index");
    attr(idx_a, "bytes", 8192);
    attr(idx_a, "retries", 0);
    attr(idx_a, "status", 200);
    auto commit_a = make(fa, 0xa5, 0xa1, "commit", 0, t0 + 60 * ms, t0 + 66 * ms);
    for (auto* r : {&root_a, &build_a, &kfs_a, &idx_a, &commit_a}) core0.push_back(*r);

    // Flush B on core 1, 200 ms later: PUT .index starts before and ends inside PUT .kfs
    // (overlapping, not nested).
    const std::uint64_t fb = 0xb0;
    const std::int64_t tb = t0 + 200 * ms;
    auto root_b = make(fb, 0xb1, 0, "flush", 1, tb, tb + 40 * ms);
    sattr(root_b, "topic", "orders");
    attr(root_b, "partition", 1);
    attr(root_b, "bytes", 1 << 20);
    auto build_b = make(fb, 0xb2, 0xb1, "build", 1, tb, tb + 2 * ms);
    auto idx_b = make(fb, 0xb4, 0xb1, "put", 1, tb + 2 * ms, tb + 12 * ms);
    sattr(idx_b, "kind", "index");
    attr(idx_b, "status", 200);
    auto kfs_b = make(fb, 0xb3, 0xb1, "put", 1, tb + 3 * ms, tb + 35 * ms);
    sattr(kfs_b, "kind", "kfs");
    attr(kfs_b, "status", 503);
    auto commit_b = make(fb, 0xb5, 0xb1, "commit", 1, tb + 35 * ms, tb + 40 * ms);
    for (auto* r : {&root_b, &build_b, &idx_b, &kfs_b, &commit_b}) core1.push_back(*r);

    // Produces: three acknowledged by flush A (core 0), two by flush B (core 1), one unlinked.
    std::uint64_t next = 0x100;
    auto produce = [&](std::vector<span_record>& out, unsigned core, std::int64_t start, std::int64_t end,
                       std::uint64_t flush_trace, std::uint64_t flush_root) {
        auto p = make(next, next + 1, 0, "produce", core, start, end, volume::high);
        next += 0x10;
        sattr(p, "topic", "orders");
        attr(p, "records", 10);
        if (flush_trace) p.links.push_back(span_context{flush_trace, flush_root, volume::low});
        out.push_back(p);
    };
    produce(core0, 0, t0 - 30 * ms, t0 + 67 * ms, fa, 0xa1);
    produce(core0, 0, t0 - 12 * ms, t0 + 67 * ms, fa, 0xa1);
    produce(core0, 0, t0 - 2 * ms, t0 + 67 * ms, fa, 0xa1);
    produce(core1, 1, tb - 20 * ms, tb + 41 * ms, fb, 0xb1);
    produce(core1, 1, tb - 5 * ms, tb + 41 * ms, fb, 0xb1);
    produce(core1, 1, tb + 100 * ms, tb + 101 * ms, 0, 0);

    std::vector<trace_snapshot> out(2);
    out[0].core = 0;
    out[0].spans = core0;
    out[0].capacity_low = out[0].capacity_high = 4096;
    out[1].core = 1;
    out[1].spans = core1;
    out[1].capacity_low = out[1].capacity_high = 4096;
    return out;
}

} // namespace skiff::test
