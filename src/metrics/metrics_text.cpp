// /metrics (JSON) and /metrics/prometheus renderings of core snapshots.
#include <skiff/metrics/exposition.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace skiff::metrics {

namespace {

using ojson = nlohmann::ordered_json;

// Raw histogram values → the base unit exposed.
double scale(unit u, double raw) noexcept { return u == unit::seconds ? raw / 1e9 : raw; }

ojson number(unit u, double raw) {
    const double v = scale(u, raw);
    if (u != unit::seconds && std::floor(v) == v && std::fabs(v) < 9.007199254740992e15) {
        return ojson(static_cast<std::int64_t>(v));
    }
    return ojson(v);
}

ojson summary(const histogram_snapshot& h, unit u) {
    ojson o;
    o["count"] = h.count;
    o["sum"] = number(u, static_cast<double>(h.sum));
    o["min"] = number(u, static_cast<double>(h.min));
    o["max"] = number(u, static_cast<double>(h.max));
    o["mean"] = ojson(scale(u, h.mean()));
    o["p50"] = number(u, h.quantile(0.50));
    o["p90"] = number(u, h.quantile(0.90));
    o["p99"] = number(u, h.quantile(0.99));
    o["p999"] = number(u, h.quantile(0.999));
    return o;
}

ojson labels_json(const labels& l) {
    ojson o = ojson::object();
    for (const auto& [k, v] : l) o[k] = v;
    return o;
}

// Snapshots keep families sorted by name and series sorted by labels: binary searches.
const family_snapshot* find_family(const core_snapshot& c, const std::string& name) {
    auto it = std::lower_bound(c.families.begin(), c.families.end(), name,
                               [](const family_snapshot& f, const std::string& n) { return f.name < n; });
    return it != c.families.end() && it->name == name ? &*it : nullptr;
}

const series_snapshot* find_series(const family_snapshot& f, const labels& l) {
    auto it = std::lower_bound(f.series.begin(), f.series.end(), l,
                               [](const series_snapshot& s, const labels& x) { return s.labels < x; });
    return it != f.series.end() && it->labels == l ? &*it : nullptr;
}

} // namespace

std::string metrics_json(const std::vector<core_snapshot>& cores, std::int64_t unix_ms) {
    const core_snapshot total = merge_cores(cores);
    ojson doc;
    doc["schema"] = "skiff.metrics.v1";
    doc["timestamp_unix_ms"] = unix_ms;
    ojson core_ids = ojson::array();
    for (const auto& c : cores) core_ids.push_back(c.core);
    doc["cores"] = core_ids;
    ojson sections[3] = {ojson::object(), ojson::object(), ojson::object()};
    for (const auto& f : total.families) {
        ojson fam;
        fam["help"] = f.help;
        fam["unit"] = to_string(f.unit);
        ojson series = ojson::array();
        for (const auto& s : f.series) {
            ojson js;
            js["labels"] = labels_json(s.labels);
            ojson per_core = ojson::object();
            for (const auto& c : cores) {
                const auto* cf = find_family(c, f.name);
                const auto* cs = cf && cf->type == f.type ? find_series(*cf, s.labels) : nullptr;
                if (!cs) continue;
                const std::string key = std::to_string(c.core);
                switch (f.type) {
                case metric_type::counter: per_core[key] = cs->counter; break;
                case metric_type::gauge: per_core[key] = cs->gauge; break;
                case metric_type::histogram: per_core[key] = summary(cs->hist, f.unit); break;
                }
            }
            switch (f.type) {
            case metric_type::counter: js["value"] = s.counter; break;
            case metric_type::gauge: js["value"] = s.gauge; break;
            case metric_type::histogram: js["total"] = summary(s.hist, f.unit); break;
            }
            js["per_core"] = std::move(per_core);
            series.push_back(std::move(js));
        }
        fam["series"] = std::move(series);
        sections[static_cast<int>(f.type)][f.name] = std::move(fam);
    }
    doc["counters"] = std::move(sections[0]);
    doc["gauges"] = std::move(sections[1]);
    doc["histograms"] = std::move(sections[2]);
    return doc.dump();
}

namespace {

// Exponents k of the `le` = 2^k (raw units) boundaries exposed per unit.
std::pair<int, int> le_range(unit u) noexcept {
    switch (u) {
    case unit::seconds: return {10, 36}; // 1.024 µs .. 68.7 s
    case unit::bytes: return {6, 33};    // 64 B .. 8 GiB
    case unit::none: return {0, 30};
    }
    return {0, 30};
}

void escape_label_value(std::string& out, std::string_view v) {
    for (char c : v) {
        switch (c) {
        case '\\': out += "\\\\"; break;
        case '"': out += "\\\""; break;
        case '\n': out += "\\n"; break;
        default: out += c;
        }
    }
}

void escape_help(std::string& out, std::string_view v) {
    for (char c : v) {
        switch (c) {
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        default: out += c;
        }
    }
}

// {core="0",a="b",le="..."}; empty when there is nothing to print.
std::string label_set(const labels& l, const std::string* core, std::string_view le = {}) {
    if (l.empty() && !core && le.empty()) return {};
    std::string out = "{";
    bool first = true;
    auto add = [&](std::string_view k, std::string_view v) {
        if (!first) out += ',';
        first = false;
        out += k;
        out += "=\"";
        escape_label_value(out, v);
        out += '"';
    };
    if (core) add("core", *core);
    for (const auto& [k, v] : l) add(k, v);
    if (!le.empty()) add("le", le);
    out += '}';
    return out;
}

std::string format_double(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (std::isnan(v)) return "NaN";
    return fmt::format("{}", v);
}

void write_series(std::string& out, const family_snapshot& f, const series_snapshot& s, const std::string* core) {
    switch (f.type) {
    case metric_type::counter:
        fmt::format_to(std::back_inserter(out), "{}{} {}\n", f.name, label_set(s.labels, core), s.counter);
        return;
    case metric_type::gauge:
        fmt::format_to(std::back_inserter(out), "{}{} {}\n", f.name, label_set(s.labels, core), s.gauge);
        return;
    case metric_type::histogram: break;
    }
    const auto [lo, hi] = le_range(f.unit);
    for (int k = lo; k <= hi; ++k) {
        const std::uint64_t bound = std::uint64_t{1} << k;
        const std::string le = f.unit == unit::seconds ? format_double(static_cast<double>(bound) / 1e9)
                                                       : std::to_string(bound);
        fmt::format_to(std::back_inserter(out), "{}_bucket{} {}\n", f.name, label_set(s.labels, core, le),
                       s.hist.count_at_or_below(bound));
    }
    fmt::format_to(std::back_inserter(out), "{}_bucket{} {}\n", f.name, label_set(s.labels, core, "+Inf"),
                   s.hist.count);
    const std::string sum = f.unit == unit::seconds ? format_double(static_cast<double>(s.hist.sum) / 1e9)
                                                    : std::to_string(s.hist.sum);
    fmt::format_to(std::back_inserter(out), "{}_sum{} {}\n", f.name, label_set(s.labels, core), sum);
    fmt::format_to(std::back_inserter(out), "{}_count{} {}\n", f.name, label_set(s.labels, core), s.hist.count);
}

} // namespace

std::string metrics_prometheus(const std::vector<core_snapshot>& cores, const prometheus_options& opts) {
    const core_snapshot total = merge_cores(cores);
    std::string out;
    for (const auto& f : total.families) {
        out += "# HELP ";
        out += f.name;
        out += ' ';
        escape_help(out, f.help);
        out += '\n';
        fmt::format_to(std::back_inserter(out), "# TYPE {} {}\n", f.name, to_string(f.type));
        if (!opts.per_core) {
            for (const auto& s : f.series) write_series(out, f, s, nullptr);
            continue;
        }
        for (const auto& s : f.series) {
            for (const auto& c : cores) {
                const auto* cf = find_family(c, f.name);
                const auto* cs = cf && cf->type == f.type ? find_series(*cf, s.labels) : nullptr;
                if (!cs) continue;
                const std::string core = std::to_string(c.core);
                write_series(out, f, *cs, &core);
            }
        }
    }
    return out;
}

} // namespace skiff::metrics
