// /traces renderings: trace JSON (grouped by trace, newest first) and Chrome trace events.
#include <skiff/metrics/exposition.hpp>
#include <skiff/metrics/service.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace skiff::metrics {

namespace {

using ojson = nlohmann::ordered_json;

struct trace_group {
    std::uint64_t id = 0;
    std::vector<const span_record*> spans; // sorted by start
    const span_record* root = nullptr;
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
};

bool by_start(const span_record* a, const span_record* b) {
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    if (a->end_ns != b->end_ns) return a->end_ns > b->end_ns;
    return a->span_id < b->span_id;
}

bool newest_first(const trace_group* a, const trace_group* b) {
    if (a->start_ns != b->start_ns) return a->start_ns > b->start_ns;
    return a->id > b->id;
}

struct selection {
    std::vector<trace_group> all;
    std::vector<const trace_group*> picked; // selected, then linked ones
};

selection select(const std::vector<trace_snapshot>& cores, const trace_query& q) {
    std::unordered_map<std::uint64_t, std::size_t> index;
    selection sel;
    for (const auto& c : cores) {
        for (const auto& s : c.spans) {
            auto [it, added] = index.try_emplace(s.trace_id, sel.all.size());
            if (added) sel.all.emplace_back().id = s.trace_id;
            sel.all[it->second].spans.push_back(&s);
        }
    }
    for (auto& g : sel.all) {
        std::sort(g.spans.begin(), g.spans.end(), by_start);
        g.start_ns = g.spans.front()->start_ns;
        g.end_ns = g.spans.front()->end_ns;
        for (const auto* s : g.spans) {
            g.end_ns = std::max(g.end_ns, s->end_ns);
            if (!g.root && s->parent_id == 0) g.root = s;
        }
        if (!g.root) g.root = g.spans.front(); // the root was dropped from the ring
    }
    std::vector<const trace_group*> candidates;
    for (const auto& g : sel.all) {
        if (q.root.empty() || g.root->name == q.root) candidates.push_back(&g);
    }
    std::sort(candidates.begin(), candidates.end(), newest_first);
    if (candidates.size() > q.limit) candidates.resize(q.limit);
    sel.picked = candidates;
    if (q.linked) {
        std::unordered_set<std::uint64_t> chosen;
        for (const auto* g : candidates) chosen.insert(g->id);
        std::vector<const trace_group*> linked;
        for (const auto& g : sel.all) {
            if (chosen.contains(g.id)) continue;
            bool links = false;
            for (const auto* s : g.spans) {
                for (const auto& l : s->links) links = links || chosen.contains(l.trace_id);
            }
            if (links) linked.push_back(&g);
        }
        std::sort(linked.begin(), linked.end(), newest_first);
        sel.picked.insert(sel.picked.end(), linked.begin(), linked.end());
    }
    return sel;
}

ojson attributes_json(const span_record& s) {
    ojson a = ojson::object();
    for (const auto& at : s.attributes) {
        if (at.is_int) a[at.key] = at.num;
        else a[at.key] = at.str;
    }
    return a;
}

ojson span_json(const span_record& s) {
    ojson o;
    o["span_id"] = format_id(s.span_id);
    o["parent_id"] = format_id(s.parent_id);
    o["name"] = s.name;
    o["core"] = s.core;
    o["start_ns"] = s.start_ns;
    o["end_ns"] = s.end_ns;
    o["duration_ns"] = s.end_ns - s.start_ns;
    o["attributes"] = attributes_json(s);
    ojson links = ojson::array();
    for (const auto& l : s.links) {
        ojson lj;
        lj["trace_id"] = format_id(l.trace_id);
        lj["span_id"] = format_id(l.span_id);
        links.push_back(std::move(lj));
    }
    o["links"] = std::move(links);
    return o;
}

} // namespace

trace_query trace_query::parse(std::string_view qs) {
    trace_query q;
    bool found = false;
    const std::string limit = query_value(qs, "limit", &found);
    if (found) {
        std::size_t n = 0;
        auto [p, ec] = std::from_chars(limit.data(), limit.data() + limit.size(), n);
        if (ec == std::errc{} && p == limit.data() + limit.size() && n > 0) q.limit = std::min<std::size_t>(n, 100000);
    }
    q.root = query_value(qs, "root");
    const std::string linked = query_value(qs, "linked", &found);
    q.linked = found && (linked.empty() || linked == "1" || linked == "true" || linked == "yes");
    return q;
}

std::string traces_json(const std::vector<trace_snapshot>& cores, const trace_query& q) {
    const selection sel = select(cores, q);
    ojson doc;
    doc["schema"] = "skiff.traces.v1";
    doc["epoch_unix_ns"] = trace_epoch_unix_ns();
    doc["now_ns"] = trace_now_ns();
    ojson query;
    query["limit"] = q.limit;
    query["root"] = q.root;
    query["linked"] = q.linked;
    doc["query"] = std::move(query);
    ojson cj = ojson::array();
    for (const auto& c : cores) {
        ojson o;
        o["core"] = c.core;
        o["spans"] = c.spans.size();
        o["capacity_low"] = c.capacity_low;
        o["capacity_high"] = c.capacity_high;
        o["dropped_low"] = c.dropped_low;
        o["dropped_high"] = c.dropped_high;
        cj.push_back(std::move(o));
    }
    doc["cores"] = std::move(cj);
    ojson traces = ojson::array();
    for (const auto* g : sel.picked) {
        ojson t;
        t["trace_id"] = format_id(g->id);
        t["root"] = g->root->name;
        t["core"] = g->root->core;
        t["start_ns"] = g->start_ns;
        t["end_ns"] = g->end_ns;
        t["duration_ns"] = g->end_ns - g->start_ns;
        ojson spans = ojson::array();
        for (const auto* s : g->spans) spans.push_back(span_json(*s));
        t["spans"] = std::move(spans);
        traces.push_back(std::move(t));
    }
    doc["traces"] = std::move(traces);
    return doc.dump();
}

namespace {

// Tracks of one core: a span joins the first lane where it nests under a span of its own
// ancestry (or where nothing is open), so every lane is properly nested, as the Chrome
// trace viewer and Perfetto require of "X" events on one thread.
std::unordered_map<std::uint64_t, unsigned> assign_lanes(std::vector<const span_record*> spans) {
    std::unordered_map<std::uint64_t, std::uint64_t> parent;
    for (const auto* s : spans) parent[s->span_id] = s->parent_id;
    auto depth = [&](const span_record* s) {
        unsigned d = 0;
        for (auto p = s->parent_id; p != 0 && d < 64; ++d) {
            auto it = parent.find(p);
            if (it == parent.end()) break;
            p = it->second;
        }
        return d;
    };
    auto is_ancestor = [&](std::uint64_t anc, const span_record* s) {
        unsigned guard = 0;
        for (auto p = s->parent_id; p != 0 && guard < 64; ++guard) {
            if (p == anc) return true;
            auto it = parent.find(p);
            if (it == parent.end()) return false;
            p = it->second;
        }
        return false;
    };
    std::stable_sort(spans.begin(), spans.end(), [&](const span_record* a, const span_record* b) {
        if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
        if (a->end_ns != b->end_ns) return a->end_ns > b->end_ns;
        return depth(a) < depth(b);
    });
    std::vector<std::vector<const span_record*>> lanes;
    std::unordered_map<std::uint64_t, unsigned> out;
    for (const auto* s : spans) {
        unsigned chosen = 0;
        bool placed = false;
        for (unsigned i = 0; i < lanes.size() && !placed; ++i) {
            auto& stack = lanes[i];
            while (!stack.empty() && stack.back()->end_ns <= s->start_ns) stack.pop_back();
            if (stack.empty() || (stack.back()->end_ns >= s->end_ns && is_ancestor(stack.back()->span_id, s))) {
                stack.push_back(s);
                chosen = i;
                placed = true;
            }
        }
        if (!placed) {
            chosen = static_cast<unsigned>(lanes.size());
            lanes.emplace_back().push_back(s);
        }
        out[s->span_id] = chosen;
    }
    return out;
}

double to_us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

} // namespace

std::string traces_chrome(const std::vector<trace_snapshot>& cores, const trace_query& q) {
    const selection sel = select(cores, q);
    std::map<unsigned, std::vector<const span_record*>> per_core;
    for (const auto* g : sel.picked)
        for (const auto* s : g->spans) per_core[s->core].push_back(s);

    std::unordered_map<std::uint64_t, const span_record*> by_id;
    std::unordered_map<std::uint64_t, unsigned> tid_of;
    ojson events = ojson::array();
    {
        ojson m;
        m["name"] = "process_name";
        m["ph"] = "M";
        m["pid"] = 1;
        m["args"] = ojson{{"name", "skiff"}};
        events.push_back(std::move(m));
    }
    std::vector<std::pair<double, ojson>> slices;
    for (auto& [core, spans] : per_core) {
        // Background (low-volume) traces get the core's first tracks, request traces the
        // tracks after them, so a flush stays on "core N" however many produces overlap it.
        std::vector<const span_record*> low, high;
        for (const auto* s : spans) (s->vol == volume::high ? high : low).push_back(s);
        auto lanes = assign_lanes(low);
        unsigned low_lanes = 0;
        for (const auto& [id, lane] : lanes) low_lanes = std::max(low_lanes, lane + 1);
        for (const auto& [id, lane] : assign_lanes(high)) lanes[id] = low_lanes + lane;
        unsigned max_lane = 0;
        for (const auto& [id, lane] : lanes) max_lane = std::max(max_lane, lane);
        for (unsigned lane = 0; lane <= max_lane; ++lane) {
            const unsigned tid = core + 1000 * lane;
            ojson name;
            name["name"] = "thread_name";
            name["ph"] = "M";
            name["pid"] = 1;
            name["tid"] = tid;
            name["args"] = ojson{{"name", lane == 0 ? "core " + std::to_string(core)
                                                    : "core " + std::to_string(core) + " · lane " +
                                                          std::to_string(lane)}};
            events.push_back(std::move(name));
            ojson sort;
            sort["name"] = "thread_sort_index";
            sort["ph"] = "M";
            sort["pid"] = 1;
            sort["tid"] = tid;
            sort["args"] = ojson{{"sort_index", core * 1000 + lane}};
            events.push_back(std::move(sort));
        }
        for (const auto* s : spans) {
            const unsigned tid = core + 1000 * lanes.at(s->span_id);
            by_id[s->span_id] = s;
            tid_of[s->span_id] = tid;
            ojson e;
            e["name"] = s->name;
            e["cat"] = s->vol == volume::high ? "request" : "background";
            e["ph"] = "X";
            e["pid"] = 1;
            e["tid"] = tid;
            e["ts"] = to_us(s->start_ns);
            e["dur"] = to_us(s->end_ns - s->start_ns);
            ojson args = attributes_json(*s);
            args["trace_id"] = format_id(s->trace_id);
            args["span_id"] = format_id(s->span_id);
            if (s->parent_id) args["parent_id"] = format_id(s->parent_id);
            if (!s->links.empty()) {
                std::string links;
                for (const auto& l : s->links) {
                    if (!links.empty()) links += ',';
                    links += format_id(l.trace_id);
                }
                args["links"] = links;
            }
            e["args"] = std::move(args);
            slices.emplace_back(to_us(s->start_ns), std::move(e));
        }
    }
    std::stable_sort(slices.begin(), slices.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [ts, e] : slices) events.push_back(std::move(e));

    // Links as flow arrows: from the end of the linked span to the end of the linking one.
    unsigned flow_id = 0;
    for (const auto* g : sel.picked) {
        for (const auto* s : g->spans) {
            for (const auto& l : s->links) {
                auto target = by_id.find(l.span_id);
                if (target == by_id.end()) continue;
                const span_record* from = target->second;
                ++flow_id;
                auto inside_end = [](const span_record* x) {
                    return x->end_ns - x->start_ns > 2 ? x->end_ns - 1 : x->start_ns;
                };
                // A flow is a start ("s") and a finish ("f") event with the same id; "bp":"e"
                // binds the finish to the enclosing slice, as the trace-event format wants.
                auto flow_event = [&](const char* phase, const span_record* at) {
                    ojson e;
                    e["name"] = "link";
                    e["cat"] = "link";
                    e["ph"] = phase;
                    if (phase[0] == 'f') e["bp"] = "e";
                    e["id"] = flow_id;
                    e["pid"] = 1;
                    e["tid"] = tid_of[at->span_id];
                    e["ts"] = to_us(inside_end(at));
                    events.push_back(std::move(e));
                };
                flow_event("s", from);
                flow_event("f", s);
            }
        }
    }
    ojson doc;
    doc["traceEvents"] = std::move(events);
    doc["displayTimeUnit"] = "ms";
    doc["otherData"] = ojson{{"schema", "skiff.traces.chrome.v1"}, {"epoch_unix_ns", trace_epoch_unix_ns()}};
    return doc.dump();
}

} // namespace skiff::metrics
