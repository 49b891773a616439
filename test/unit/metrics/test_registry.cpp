#include "run_task.hpp"

#include <skiff/metrics/registry.hpp>
#include <skiff/metrics/trace.hpp>

#include <catch2/catch.hpp>

#include <stdexcept>

using namespace skiff;
using namespace skiff::metrics;

namespace {
const family_snapshot* family(const core_snapshot& s, std::string_view name) {
    for (const auto& f : s.families)
        if (f.name == name) return &f;
    return nullptr;
}
} // namespace

TEST_CASE("counters and gauges count, and the same name and labels share a cell", "[metrics][registry]") {
    registry reg;
    auto a = reg.counter("skiff_flush_bytes_total", "Bytes uploaded.", {{"kind", "kfs"}}, unit::bytes);
    auto b = reg.counter("skiff_flush_bytes_total", "Bytes uploaded.", {{"kind", "kfs"}}, unit::bytes);
    auto c = reg.counter("skiff_flush_bytes_total", "Bytes uploaded.", {{"kind", "index"}}, unit::bytes);
    a.inc(100);
    b.inc(5);
    c.inc();
    CHECK(a.value() == 105);
    CHECK(b.value() == 105);
    CHECK(c.value() == 1);

    // Label order does not matter.
    auto x = reg.gauge("skiff_buffered_bytes", "Buffered.", {{"topic", "t"}, {"partition", "3"}}, unit::bytes);
    auto y = reg.gauge("skiff_buffered_bytes", "Buffered.", {{"partition", "3"}, {"topic", "t"}}, unit::bytes);
    x.set(10);
    y.add(5);
    x.sub(3);
    CHECK(y.value() == 12);
    x.add(-20);
    CHECK(x.value() == -8);
    CHECK(reg.series_count() == 3);

    const auto snap = reg.snapshot();
    const auto* f = family(snap, "skiff_flush_bytes_total");
    REQUIRE(f);
    CHECK(f->type == metric_type::counter);
    CHECK(f->unit == unit::bytes);
    CHECK(f->help == "Bytes uploaded.");
    REQUIRE(f->series.size() == 2);
    // Series are sorted by labels: index < kfs.
    CHECK(f->series[0].labels == labels{{"kind", "index"}});
    CHECK(f->series[0].counter == 1);
    CHECK(f->series[1].counter == 105);
    const auto* g = family(snap, "skiff_buffered_bytes");
    REQUIRE(g);
    CHECK(g->series.at(0).labels == labels{{"partition", "3"}, {"topic", "t"}});
    CHECK(g->series.at(0).gauge == -8);
    CHECK(std::is_sorted(snap.families.begin(), snap.families.end(),
                         [](const auto& l, const auto& r) { return l.name < r.name; }));
}

TEST_CASE("names and labels follow the conventions or registration throws", "[metrics][registry]") {
    registry reg;
    CHECK_THROWS_AS(reg.counter("skiff_requests", "no _total"), std::invalid_argument);
    CHECK_THROWS_AS(reg.gauge("skiff_requests_total", "gauge with _total"), std::invalid_argument);
    CHECK_THROWS_AS(reg.counter("Skiff_Requests_total", "not snake case"), std::invalid_argument);
    CHECK_THROWS_AS(reg.counter("skiff-requests_total", "dash"), std::invalid_argument);
    CHECK_THROWS_AS(reg.histogram("skiff_put_latency", "no unit suffix", unit::seconds), std::invalid_argument);
    CHECK_THROWS_AS(reg.histogram("skiff_put_size", "no unit suffix", unit::bytes), std::invalid_argument);
    CHECK_THROWS_AS(reg.gauge("skiff_wait_seconds", "gauges hold integers", {}, unit::seconds), std::invalid_argument);
    CHECK_THROWS_AS(reg.counter("skiff_flush_total", "bytes counter without _bytes_total", {}, unit::bytes),
                    std::invalid_argument);
    CHECK_THROWS_AS(reg.histogram("skiff_x_count", "reserved suffix", unit::none), std::invalid_argument);
    CHECK_THROWS_AS(reg.counter("skiff_x_total", "reserved label", {{"core", "1"}}), std::invalid_argument);
    CHECK_THROWS_AS(reg.counter("skiff_x_total", "reserved label", {{"le", "1"}}), std::invalid_argument);
    CHECK_THROWS_AS(reg.counter("skiff_x_total", "bad label", {{"Op", "put"}}), std::invalid_argument);
    CHECK_THROWS_AS(reg.counter("skiff_x_total", "twice", {{"op", "a"}, {"op", "b"}}), std::invalid_argument);
    // Same name, another type or unit.
    auto ok = reg.counter("skiff_x_total", "fine", {{"op", "put"}});
    CHECK_THROWS_AS(reg.histogram("skiff_x_total", "type clash", unit::none), std::invalid_argument);
    auto h = reg.histogram("skiff_put_duration_seconds", "fine", unit::seconds);
    CHECK_THROWS_AS(reg.histogram("skiff_put_duration_seconds", "unit clash", unit::none), std::invalid_argument);
    CHECK_NOTHROW(reg.histogram("skiff_put_size_bytes", "fine", unit::bytes, {{"kind", "kfs"}}));
    CHECK_NOTHROW(reg.gauge("skiff_high_watermark", "fine", {{"partition", "1"}}));
    ok.inc();
    h.record(1);
}

TEST_CASE("callback metrics are sampled at scrape time and removed with their registration",
          "[metrics][registry]") {
    registry reg;
    std::int64_t buffered = 7;
    std::uint64_t turns = 3;
    {
        auto g = reg.gauge_fn("skiff_partition_high_watermark", "HWM.", {{"partition", "0"}},
                              [&buffered] { return buffered; });
        auto c = reg.counter_fn("skiff_loop_turns_total", "Turns.", {}, [&turns] { return turns; });
        CHECK(g);
        buffered = 42;
        turns = 9;
        auto snap = reg.snapshot();
        REQUIRE(family(snap, "skiff_partition_high_watermark"));
        CHECK(family(snap, "skiff_partition_high_watermark")->series.at(0).gauge == 42);
        CHECK(family(snap, "skiff_loop_turns_total")->series.at(0).counter == 9);
        // A second registration of the same series while the first lives is a bug.
        CHECK_THROWS_AS(reg.gauge_fn("skiff_partition_high_watermark", "HWM.", {{"partition", "0"}}, [] { return 0; }),
                        std::invalid_argument);
        // Moving a registration keeps the series.
        registration moved = std::move(g);
        CHECK_FALSE(g);
        CHECK(family(reg.snapshot(), "skiff_partition_high_watermark"));
        moved.reset();
        CHECK_FALSE(family(reg.snapshot(), "skiff_partition_high_watermark"));
    }
    CHECK_FALSE(family(reg.snapshot(), "skiff_loop_turns_total"));
    CHECK(reg.series_count() == 0);
    // Re-registering after removal works.
    auto again = reg.gauge_fn("skiff_partition_high_watermark", "HWM.", {{"partition", "0"}}, [] { return 1; });
    CHECK(family(reg.snapshot(), "skiff_partition_high_watermark")->series.at(0).gauge == 1);
}

TEST_CASE("a registration may outlive its registry", "[metrics][registry]") {
    registration keep;
    {
        registry reg;
        keep = reg.gauge_fn("skiff_orphan", "x", {}, [] { return 1; });
    }
    keep.reset(); // no use-after-free (ASan would tell)
    CHECK_FALSE(keep);
}

TEST_CASE("snapshots include the reactor's and the trace ring's own counters", "[metrics][registry]") {
    auto t = []() -> runtime::task<void> {
        registry reg;
        { auto s = span::root("probe"); }
        auto snap = reg.snapshot();
        CHECK(snap.core == 0);
        CHECK(family(snap, "skiff_reactor_loop_turns_total"));
        CHECK(family(snap, "skiff_reactor_ops_in_flight"));
        const auto* rec = family(snap, "skiff_trace_spans_recorded_total");
        REQUIRE(rec);
        REQUIRE(rec->series.size() == 2);
        CHECK(rec->series[0].labels == labels{{"volume", "high"}});
        CHECK(rec->series[1].counter >= 1);
        co_return;
    };
    runtime::run_task(t());
}

TEST_CASE("merge_cores sums counters and gauges and merges histograms", "[metrics][registry]") {
    registry r0, r1;
    r0.counter("skiff_a_total", "a", {{"op", "put"}}).inc(3);
    r1.counter("skiff_a_total", "a", {{"op", "put"}}).inc(4);
    r1.counter("skiff_a_total", "a", {{"op", "get"}}).inc(1);
    r0.gauge("skiff_g", "g").set(-2);
    r1.gauge("skiff_g", "g").set(5);
    auto h0 = r0.histogram("skiff_h_seconds", "h", unit::seconds);
    auto h1 = r1.histogram("skiff_h_seconds", "h", unit::seconds);
    for (int i = 1; i <= 100; ++i) h0.record(static_cast<std::uint64_t>(i) * 1000);
    for (int i = 101; i <= 200; ++i) h1.record(static_cast<std::uint64_t>(i) * 1000);
    auto s0 = r0.snapshot();
    auto s1 = r1.snapshot();
    s1.core = 1;
    const auto total = merge_cores({s0, s1});
    const auto* a = family(total, "skiff_a_total");
    REQUIRE(a);
    REQUIRE(a->series.size() == 2);
    CHECK(a->series[0].labels == labels{{"op", "get"}});
    CHECK(a->series[0].counter == 1);
    CHECK(a->series[1].counter == 7);
    CHECK(family(total, "skiff_g")->series.at(0).gauge == 3);
    const auto& h = family(total, "skiff_h_seconds")->series.at(0).hist;
    CHECK(h.count == 200);
    CHECK(h.min == 1000);
    CHECK(h.max == 200000);
    CHECK(std::fabs(h.quantile(0.5) - 100000.0) <= 100000.0 / 64 + 1);
}
