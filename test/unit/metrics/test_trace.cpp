#include "trace_fixture.hpp"

#include <skiff/metrics/exposition.hpp>
#include <skiff/metrics/trace.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <set>

using namespace skiff;
using namespace skiff::metrics;

namespace {

// Isolates a test from spans other tests left in this thread's rings.
struct fresh_rings {
    fresh_rings() {
        trace_buffer::local().set_capacity(volume::low, trace_buffer::default_capacity);
        trace_buffer::local().set_capacity(volume::high, trace_buffer::default_capacity);
        trace_buffer::local().clear();
        set_tracing_enabled(true);
        set_high_volume_sampling(1);
    }
    ~fresh_rings() {
        trace_buffer::local().set_capacity(volume::low, trace_buffer::default_capacity);
        trace_buffer::local().set_capacity(volume::high, trace_buffer::default_capacity);
        set_tracing_enabled(true);
        set_high_volume_sampling(1);
    }
};

} // namespace

TEST_CASE("spans record parent, attributes and links into the ring when they end", "[metrics][trace]") {
    fresh_rings fresh;
    span_context flush_ctx;
    std::uint64_t flush_trace = 0;
    {
        auto flush = span::root("flush");
        REQUIRE(flush.active());
        flush_ctx = flush.context();
        flush_trace = flush.trace_id();
        CHECK(flush_ctx.valid());
        flush.set("partition", 3);
        flush.set("topic", "orders");
        flush.set("topic", std::string("payments")); // replaces
        flush.set("ok", true);
        {
            auto put = flush.child("put");
            put.set("kind", "kfs");
            put.set("bytes", std::uint64_t{4096});
            put.set("retries", 2);
            CHECK(trace_buffer::local().size(volume::low) == 0); // not before it ends
        }
        CHECK(trace_buffer::local().size(volume::low) == 1);
    }
    {
        auto produce = span::root("produce", volume::high);
        produce.link(flush_ctx);
        produce.link(span_context{}); // invalid links are ignored
    }
    const auto spans = trace_buffer::local().snapshot();
    REQUIRE(spans.size() == 3);
    const auto& put = spans[0];
    const auto& flush = spans[1];
    const auto& produce = spans[2];
    CHECK(put.name == "put");
    CHECK(put.trace_id == flush_trace);
    CHECK(put.parent_id == flush.span_id);
    CHECK(flush.parent_id == 0);
    CHECK(put.start_ns >= flush.start_ns);
    CHECK(put.end_ns <= flush.end_ns);
    REQUIRE(put.attribute("bytes"));
    CHECK(put.attribute("bytes")->num == 4096);
    CHECK(put.attribute("kind")->str == "kfs");
    CHECK(flush.attribute("topic")->str == "payments");
    CHECK(flush.attributes.size() == 3);
    CHECK(flush.attribute("ok")->num == 1);
    CHECK(produce.vol == volume::high);
    CHECK(produce.trace_id != flush_trace);
    REQUIRE(produce.links.size() == 1);
    CHECK(produce.links[0].trace_id == flush_trace);
    CHECK(produce.links[0].span_id == flush.span_id);
}

TEST_CASE("span ids are unique and print as 16 hex digits", "[metrics][trace]") {
    fresh_rings fresh;
    std::set<std::uint64_t> ids;
    for (int i = 0; i < 1000; ++i) {
        auto s = span::root("x");
        auto c = s.child("y");
        ids.insert(s.context().span_id);
        ids.insert(c.context().span_id);
    }
    CHECK(ids.size() == 2000);
    CHECK(format_id(0x1a2b) == "0000000000001a2b");
    CHECK(format_id(0).empty());
    CHECK(parse_id("0000000000001a2b") == 0x1a2b);
    CHECK(parse_id("xyz") == 0);
    CHECK(parse_id("") == 0);
}

TEST_CASE("end() is idempotent, moves transfer the span, explicit times are kept", "[metrics][trace]") {
    fresh_rings fresh;
    auto s = span::root("a");
    s.set_start_ns(100);
    s.end_at(50); // before the start: clamped
    s.end();
    s.set("late", 1); // ignored after the end
    span moved;
    {
        auto t = span::root("b");
        moved = std::move(t);
        CHECK_FALSE(t.active());
    }
    CHECK(moved.active());
    moved.end();
    const auto spans = trace_buffer::local().snapshot();
    REQUIRE(spans.size() == 2);
    CHECK(spans[0].start_ns == 100);
    CHECK(spans[0].end_ns == 100);
    CHECK(spans[0].attributes.empty());
    CHECK(spans[1].name == "b");
}

TEST_CASE("disabled tracing and unsampled high-volume roots record nothing, children included",
          "[metrics][trace]") {
    fresh_rings fresh;
    set_tracing_enabled(false);
    {
        auto s = span::root("flush");
        auto c = s.child("put");
        CHECK_FALSE(s.active());
        CHECK_FALSE(c.active());
        CHECK_FALSE(s.context().valid());
        c.set("k", 1);
    }
    CHECK(trace_buffer::local().size(volume::low) == 0);
    set_tracing_enabled(true);
    set_high_volume_sampling(4);
    int active = 0;
    for (int i = 0; i < 100; ++i) {
        auto p = span::root("produce", volume::high);
        active += p.active() ? 1 : 0;
    }
    CHECK(active == 25);
    set_high_volume_sampling(0);
    CHECK_FALSE(span::root("produce", volume::high).active());
    CHECK(span::root("flush").active()); // low volume is never sampled
}

TEST_CASE("the ring keeps the newest spans up to its capacity and counts the dropped ones", "[metrics][trace]") {
    fresh_rings fresh;
    auto& tb = trace_buffer::local();
    tb.set_capacity(volume::low, 16);
    tb.set_capacity(volume::high, 8);
    for (int i = 0; i < 40; ++i) {
        auto s = span::root("low");
        s.set("i", i);
    }
    for (int i = 0; i < 100; ++i) auto s = span::root("high", volume::high);
    CHECK(tb.size(volume::low) == 16);
    CHECK(tb.dropped(volume::low) == 24);
    CHECK(tb.recorded(volume::low) == 40);
    CHECK(tb.size(volume::high) == 8);
    CHECK(tb.dropped(volume::high) == 92);
    const auto spans = tb.snapshot();
    REQUIRE(spans.size() == 24);
    // Oldest first; the low-volume ring was not evicted by the high-volume burst.
    for (int i = 0; i < 16; ++i) CHECK(spans[static_cast<std::size_t>(i)].attribute("i")->num == 24 + i);
    CHECK(spans[16].name == "high");
}

TEST_CASE("trace JSON groups spans by trace, newest first, with root filter, limit and links",
          "[metrics][trace]") {
    const auto cores = test::flush_scenario();
    SECTION("everything") {
        const auto doc = nlohmann::json::parse(traces_json(cores, trace_query{}));
        CHECK(doc["schema"] == "skiff.traces.v1");
        CHECK(doc["cores"].size() == 2);
        CHECK(doc["cores"][1]["spans"] == 8);
        const auto& traces = doc["traces"];
        REQUIRE(traces.size() == 8); // 2 flushes + 6 produces
        for (std::size_t i = 1; i < traces.size(); ++i) {
            CHECK(traces[i - 1]["start_ns"].get<std::int64_t>() >= traces[i]["start_ns"].get<std::int64_t>());
        }
        const nlohmann::json* a = nullptr;
        for (const auto& t : traces)
            if (t["trace_id"] == "00000000000000a0") a = &t;
        REQUIRE(a);
        CHECK((*a)["root"] == "flush");
        CHECK((*a)["duration_ns"] == 66'000'000);
        REQUIRE((*a)["spans"].size() == 5);
        const auto& root = (*a)["spans"][0];
        CHECK(root["name"] == "flush");
        CHECK(root["parent_id"] == "");
        CHECK(root["attributes"]["topic"] == "orders");
        const auto& kfs = (*a)["spans"][2];
        CHECK(kfs["parent_id"] == "00000000000000a1");
        CHECK(kfs["attributes"]["retries"] == 1);
        CHECK(kfs["duration_ns"] == 56'000'000);
    }
    SECTION("root filter and limit") {
        trace_query q;
        q.root = "flush";
        q.limit = 1;
        const auto doc = nlohmann::json::parse(traces_json(cores, q));
        REQUIRE(doc["traces"].size() == 1);
        CHECK(doc["traces"][0]["trace_id"] == "00000000000000b0"); // the newer flush
    }
    SECTION("linked traces come along") {
        const auto q = trace_query::parse("root=flush&limit=5&linked=1&junk=%ZZ");
        CHECK(q.limit == 5);
        CHECK(q.root == "flush");
        CHECK(q.linked);
        const auto doc = nlohmann::json::parse(traces_json(cores, q));
        REQUIRE(doc["traces"].size() == 7); // 2 flushes + 5 linked produces, not the unlinked one
        CHECK(doc["traces"][0]["root"] == "flush");
        CHECK(doc["traces"][1]["root"] == "flush");
        for (std::size_t i = 2; i < 7; ++i) {
            CHECK(doc["traces"][i]["root"] == "produce");
            CHECK(doc["traces"][i]["spans"][0]["links"].size() == 1);
        }
    }
    SECTION("query parsing keeps defaults on bad input") {
        const auto q = trace_query::parse("limit=-3&linked=0");
        CHECK(q.limit == 100);
        CHECK_FALSE(q.linked);
        CHECK(trace_query::parse("linked").linked);
        CHECK(trace_query::parse("root=a%20b+c").root == "a b c");
    }
}

TEST_CASE("Chrome trace events: X events per core, overlapping PUTs on separate tracks, flows",
          "[metrics][trace][chrome]") {
    const auto cores = test::flush_scenario();
    const auto doc = nlohmann::json::parse(traces_chrome(cores, trace_query{}));
    REQUIRE(doc.contains("traceEvents"));
    CHECK(doc["displayTimeUnit"] == "ms");
    std::map<std::uint64_t, nlohmann::json> by_span;
    std::map<unsigned, std::string> thread_names;
    int flows_s = 0, flows_f = 0;
    for (const auto& e : doc["traceEvents"]) {
        REQUIRE(e.contains("ph"));
        REQUIRE(e["pid"] == 1);
        if (e["ph"] == "M") {
            if (e["name"] == "thread_name") thread_names[e["tid"].get<unsigned>()] = e["args"]["name"];
            continue;
        }
        if (e["ph"] == "s") ++flows_s;
        if (e["ph"] == "f") {
            ++flows_f;
            CHECK(e["bp"] == "e");
        }
        if (e["ph"] != "X") continue;
        REQUIRE(e.contains("name"));
        REQUIRE(e.contains("ts"));
        REQUIRE(e.contains("dur"));
        REQUIRE(e.contains("tid"));
        REQUIRE(e["args"].contains("trace_id"));
        by_span[parse_id(e["args"]["span_id"].get<std::string>())] = e;
    }
    REQUIRE(by_span.size() == 16);
    CHECK(flows_s == 5);
    CHECK(flows_f == 5);
    // ts and dur in microseconds.
    const auto& kfs_a = by_span.at(0xa3);
    CHECK(kfs_a["ts"].get<double>() == Approx(1'004'000.0));
    CHECK(kfs_a["dur"].get<double>() == Approx(56'000.0));
    CHECK(kfs_a["args"]["kind"] == "kfs");
    CHECK(kfs_a["args"]["retries"] == 1);
    CHECK(kfs_a["args"]["parent_id"] == "00000000000000a1");
    CHECK(kfs_a["name"] == "put");
    // Flush A on core 0: flush, build and the first PUT nest on the core's own track; the
    // second PUT overlaps the first without nesting in it, so it gets a second track.
    CHECK(by_span.at(0xa1)["tid"] == 0);
    CHECK(by_span.at(0xa2)["tid"] == 0);
    CHECK(by_span.at(0xa5)["tid"] == 0);
    CHECK(by_span.at(0xa3)["tid"] != by_span.at(0xa4)["tid"]);
    // Flush B on core 1: overlapping (not nested) PUTs are on different tracks of core 1.
    CHECK(by_span.at(0xb1)["tid"] == 1);
    CHECK(by_span.at(0xb3)["tid"] != by_span.at(0xb4)["tid"]);
    CHECK(by_span.at(0xb3)["tid"].get<unsigned>() % 1000 == 1);
    CHECK(by_span.at(0xb4)["tid"].get<unsigned>() % 1000 == 1);
    CHECK(thread_names.at(0) == "core 0");
    CHECK(thread_names.at(1) == "core 1");
    CHECK(thread_names.at(1001).rfind("core 1", 0) == 0);
    // Per track, X events nest properly (what Perfetto and chrome://tracing need).
    std::map<unsigned, std::vector<std::pair<double, double>>> tracks;
    for (const auto& [id, e] : by_span)
        tracks[e["tid"].get<unsigned>()].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
    for (auto& [tid, iv] : tracks) {
        std::sort(iv.begin(), iv.end(), [](auto& a, auto& b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
        std::vector<std::pair<double, double>> stack;
        for (const auto& x : iv) {
            while (!stack.empty() && stack.back().second <= x.first) stack.pop_back();
            INFO("track " << tid);
            if (!stack.empty()) CHECK(x.second <= stack.back().second);
            stack.push_back(x);
        }
    }
}

TEST_CASE("the view page is self-contained and embeds the data safely", "[metrics][trace][view]") {
    auto cores = test::flush_scenario();
    span_attribute evil;
    evil.key = "note";
    evil.str = "</script><script>alert(1)</script>";
    cores[0].spans[0].attributes.push_back(evil);
    trace_query q;
    q.root = "flush";
    q.linked = true;
    const std::string data = traces_json(cores, q);
    const std::string html = traces_view_html(data);
    CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(html.find("http://") == std::string::npos);
    CHECK(html.find("https://") == std::string::npos);
    CHECK(html.find("src=") == std::string::npos);
    CHECK(html.find("<link") == std::string::npos);
    CHECK(html.find("@import") == std::string::npos);
    CHECK(html.find("<script>alert(1)") == std::string::npos);
    CHECK(html.find("@@SKIFF_TRACES_JSON@@") == std::string::npos);
    // The embedded document parses back to the same JSON.
    const auto open = html.find("<script type=\"application/json\" id=\"skiff-traces\">");
    REQUIRE(open != std::string::npos);
    const auto start = html.find('>', open) + 1;
    const auto end = html.find("</script>", start);
    REQUIRE(end != std::string::npos);
    CHECK(nlohmann::json::parse(html.substr(start, end - start)) == nlohmann::json::parse(data));
    // Exactly two script elements: the data and the code.
    std::size_t scripts = 0;
    for (auto p = html.find("<script"); p != std::string::npos; p = html.find("<script", p + 1)) ++scripts;
    CHECK(scripts == 2);
}
