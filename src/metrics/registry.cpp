#include <skiff/metrics/registry.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/reactor.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>

namespace skiff::metrics {

namespace {
std::atomic<bool> g_metrics_enabled{true};
} // namespace

void set_metrics_enabled(bool on) noexcept { g_metrics_enabled.store(on, std::memory_order_relaxed); }
bool metrics_enabled() noexcept { return g_metrics_enabled.load(std::memory_order_relaxed); }

namespace detail {

struct series {
    family* fam = nullptr;
    metrics::labels labels;
    std::uint64_t counter = 0;
    std::int64_t gauge = 0;
    std::unique_ptr<histogram_cell> hist;
    std::function<std::int64_t()> gauge_fn;
    std::function<std::uint64_t()> counter_fn;
    bool callback = false;
};

struct family {
    std::string name;
    std::string help;
    metric_type type = metric_type::counter;
    metrics::unit unit = unit::none;
    std::map<metrics::labels, std::unique_ptr<series>> members;
};

} // namespace detail

const char* to_string(metric_type t) noexcept {
    switch (t) {
    case metric_type::counter: return "counter";
    case metric_type::gauge: return "gauge";
    case metric_type::histogram: return "histogram";
    }
    return "unknown";
}

const char* to_string(unit u) noexcept {
    switch (u) {
    case unit::none: return "none";
    case unit::seconds: return "seconds";
    case unit::bytes: return "bytes";
    }
    return "none";
}

namespace {

bool is_snake(std::string_view s) noexcept {
    if (s.empty()) return false;
    if (!(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z'))) return false;
    for (char c : s) {
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
    }
    return true;
}

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

metrics::labels canonical(const metrics::labels& l) {
    metrics::labels out = l;
    std::sort(out.begin(), out.end());
    for (std::size_t i = 0; i < out.size(); ++i) {
        const auto& name = out[i].first;
        if (!is_snake(name) || name.starts_with("__")) {
            throw std::invalid_argument(fmt::format("metric label name '{}' is not snake_case", name));
        }
        if (name == "core" || name == "le") {
            throw std::invalid_argument(fmt::format("metric label name '{}' is reserved", name));
        }
        if (i > 0 && out[i - 1].first == name) {
            throw std::invalid_argument(fmt::format("metric label '{}' given twice", name));
        }
    }
    return out;
}

} // namespace

registration& registration::operator=(registration&& o) noexcept {
    if (this != &o) {
        reset();
        _owner = std::move(o._owner);
        _s = std::exchange(o._s, nullptr);
    }
    return *this;
}

void registration::reset() noexcept {
    auto* s = std::exchange(_s, nullptr);
    if (!s) return;
    if (auto owner = _owner.lock()) (*owner)->remove(s);
    _owner.reset();
}

registry::registry() : _self(std::make_shared<registry*>(this)) {}
registry::~registry() = default;

registry& registry::local() {
    static thread_local registry r;
    return r;
}

void registry::check_name(std::string_view name, metric_type t, metrics::unit u) {
    if (!is_snake(name)) {
        throw std::invalid_argument(fmt::format("metric name '{}' is not snake_case ([a-z_][a-z0-9_]*)", name));
    }
    if (t == metric_type::counter && !ends_with(name, "_total")) {
        throw std::invalid_argument(fmt::format("counter name '{}' must end in _total", name));
    }
    if (t != metric_type::counter && ends_with(name, "_total")) {
        throw std::invalid_argument(fmt::format("only counter names end in _total ('{}')", name));
    }
    if (ends_with(name, "_bucket") || ends_with(name, "_sum") || ends_with(name, "_count")) {
        throw std::invalid_argument(fmt::format("metric name '{}' ends in a reserved histogram suffix", name));
    }
    if (t != metric_type::histogram && u == unit::seconds) {
        throw std::invalid_argument(fmt::format(
            "{} '{}' cannot be in seconds: counters and gauges hold integers; record durations in a histogram",
            to_string(t), name));
    }
    if (t != metric_type::counter && u != unit::none) {
        const std::string suffix = fmt::format("_{}", to_string(u));
        if (!ends_with(name, suffix)) {
            throw std::invalid_argument(fmt::format("{} '{}' is in {}: its name must end in {}", to_string(t), name,
                                                    to_string(u), suffix));
        }
    }
    if (t == metric_type::counter && u != unit::none) {
        const std::string suffix = fmt::format("_{}_total", to_string(u));
        if (!ends_with(name, suffix)) {
            throw std::invalid_argument(
                fmt::format("counter '{}' is in {}: its name must end in {}", name, to_string(u), suffix));
        }
    }
}

detail::series& registry::find_or_add(std::string_view name, std::string_view help, metric_type t, metrics::unit u,
                                      const metrics::labels& l, bool callback) {
    auto key = canonical(l);
    auto it = _families.find(name);
    if (it == _families.end()) {
        check_name(name, t, u);
        auto f = std::make_unique<detail::family>();
        f->name = std::string(name);
        f->help = std::string(help);
        f->type = t;
        f->unit = u;
        it = _families.emplace(f->name, std::move(f)).first;
    }
    detail::family& fam = *it->second;
    if (fam.type != t || fam.unit != u) {
        throw std::invalid_argument(fmt::format("metric '{}' is already registered as a {} in {}", name,
                                                to_string(fam.type), to_string(fam.unit)));
    }
    auto sit = fam.members.find(key);
    if (sit != fam.members.end()) {
        if (callback || sit->second->callback) {
            throw std::invalid_argument(
                fmt::format("metric '{}' with these labels is already registered with a callback", name));
        }
        return *sit->second;
    }
    auto s = std::make_unique<detail::series>();
    s->fam = &fam;
    s->labels = key;
    s->callback = callback;
    if (t == metric_type::histogram) s->hist = std::make_unique<histogram_cell>();
    auto& ref = *s;
    fam.members.emplace(std::move(key), std::move(s));
    return ref;
}

void registry::remove(detail::series* s) noexcept {
    detail::family* fam = s->fam;
    fam->members.erase(s->labels);
    if (fam->members.empty()) _families.erase(fam->name);
}

counter registry::counter(std::string_view name, std::string_view help, const metrics::labels& l, metrics::unit u) {
    return metrics::counter(&find_or_add(name, help, metric_type::counter, u, l, false).counter);
}

gauge registry::gauge(std::string_view name, std::string_view help, const metrics::labels& l, metrics::unit u) {
    return metrics::gauge(&find_or_add(name, help, metric_type::gauge, u, l, false).gauge);
}

histogram registry::histogram(std::string_view name, std::string_view help, metrics::unit u,
                              const metrics::labels& l) {
    return metrics::histogram(find_or_add(name, help, metric_type::histogram, u, l, false).hist.get());
}

registration registry::gauge_fn(std::string_view name, std::string_view help, const metrics::labels& l,
                                std::function<std::int64_t()> fn, metrics::unit u) {
    auto& s = find_or_add(name, help, metric_type::gauge, u, l, true);
    s.gauge_fn = std::move(fn);
    return registration(_self, &s);
}

registration registry::counter_fn(std::string_view name, std::string_view help, const metrics::labels& l,
                                  std::function<std::uint64_t()> fn, metrics::unit u) {
    auto& s = find_or_add(name, help, metric_type::counter, u, l, true);
    s.counter_fn = std::move(fn);
    return registration(_self, &s);
}

std::size_t registry::series_count() const noexcept {
    std::size_t n = 0;
    for (const auto& [_, f] : _families) n += f->members.size();
    return n;
}

namespace {

family_snapshot builtin(std::string name, std::string help, metric_type t) {
    family_snapshot f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = t;
    return f;
}

void add_builtins(std::vector<family_snapshot>& out) {
    if (auto* r = runtime::reactor::try_local()) {
        auto f = builtin("skiff_reactor_ops_in_flight", "io_uring operations submitted and not yet completed.",
                         metric_type::gauge);
        f.series.emplace_back().gauge = static_cast<std::int64_t>(r->ops_in_flight());
        out.push_back(std::move(f));
        f = builtin("skiff_reactor_ops_parked", "io_uring operations waiting for room in the completion queue.",
                    metric_type::gauge);
        f.series.emplace_back().gauge = static_cast<std::int64_t>(r->ops_parked());
        out.push_back(std::move(f));
        f = builtin("skiff_reactor_timers_armed", "Timers armed on the reactor.", metric_type::gauge);
        f.series.emplace_back().gauge = static_cast<std::int64_t>(r->timers_armed());
        out.push_back(std::move(f));
        f = builtin("skiff_reactor_loop_turns_total", "Turns of the reactor loop.", metric_type::counter);
        f.series.emplace_back().counter = r->loop_turns();
        out.push_back(std::move(f));
    }
    if (auto* tb = trace_buffer::existing()) {
        auto rec = builtin("skiff_trace_spans_recorded_total", "Spans written into the trace rings.",
                           metric_type::counter);
        auto drop = builtin("skiff_trace_spans_dropped_total",
                            "Spans overwritten in the trace rings before being read (oldest first).",
                            metric_type::counter);
        for (auto v : {volume::low, volume::high}) {
            const char* name = v == volume::low ? "low" : "high";
            auto& a = rec.series.emplace_back();
            a.labels = {{"volume", name}};
            a.counter = tb->recorded(v);
            auto& b = drop.series.emplace_back();
            b.labels = {{"volume", name}};
            b.counter = tb->dropped(v);
        }
        std::sort(rec.series.begin(), rec.series.end(),
                  [](const series_snapshot& x, const series_snapshot& y) { return x.labels < y.labels; });
        std::sort(drop.series.begin(), drop.series.end(),
                  [](const series_snapshot& x, const series_snapshot& y) { return x.labels < y.labels; });
        out.push_back(std::move(rec));
        out.push_back(std::move(drop));
    }
}

} // namespace

core_snapshot registry::snapshot() const {
    core_snapshot out;
    if (auto* r = runtime::reactor::try_local()) out.core = r->core_id();
    out.families.reserve(_families.size() + 6);
    for (const auto& [name, f] : _families) {
        family_snapshot fs;
        fs.name = f->name;
        fs.help = f->help;
        fs.type = f->type;
        fs.unit = f->unit;
        fs.series.reserve(f->members.size());
        for (const auto& [labels, s] : f->members) {
            series_snapshot ss;
            ss.labels = labels;
            switch (f->type) {
            case metric_type::counter: ss.counter = s->counter_fn ? s->counter_fn() : s->counter; break;
            case metric_type::gauge: ss.gauge = s->gauge_fn ? s->gauge_fn() : s->gauge; break;
            case metric_type::histogram: ss.hist = s->hist->snapshot(); break;
            }
            fs.series.push_back(std::move(ss));
        }
        out.families.push_back(std::move(fs));
    }
    // Registered names win over built-ins of the same name (there should be none).
    std::vector<family_snapshot> extra;
    add_builtins(extra);
    for (auto& f : extra) {
        if (!_families.contains(f.name)) out.families.push_back(std::move(f));
    }
    std::sort(out.families.begin(), out.families.end(),
              [](const family_snapshot& a, const family_snapshot& b) { return a.name < b.name; });
    return out;
}

core_snapshot merge_cores(const std::vector<core_snapshot>& cores) {
    core_snapshot out;
    std::map<std::string, family_snapshot> fams;
    std::map<std::string, std::map<labels, series_snapshot>> series;
    for (const auto& c : cores) {
        for (const auto& f : c.families) {
            auto [fit, added] = fams.try_emplace(f.name);
            if (added) {
                fit->second.name = f.name;
                fit->second.help = f.help;
                fit->second.type = f.type;
                fit->second.unit = f.unit;
            } else if (fit->second.type != f.type) {
                continue; // conflicting registrations on different cores: keep the first
            }
            auto& by_labels = series[f.name];
            for (const auto& s : f.series) {
                auto [sit, fresh] = by_labels.try_emplace(s.labels);
                auto& dst = sit->second;
                if (fresh) dst.labels = s.labels;
                dst.counter += s.counter;
                dst.gauge += s.gauge;
                dst.hist.merge(s.hist);
            }
        }
    }
    for (auto& [name, f] : fams) {
        for (auto& [l, s] : series[name]) f.series.push_back(std::move(s));
        out.families.push_back(std::move(f));
    }
    return out;
}

} // namespace skiff::metrics
