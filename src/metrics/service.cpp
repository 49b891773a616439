#include <skiff/core/percent.hpp>
#include <skiff/metrics/collect.hpp>
#include <skiff/metrics/exposition.hpp>
#include <skiff/metrics/service.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <exception>

namespace skiff::metrics {

namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view json_type = "application/json";

reply error_reply(int status, std::string_view message) {
    ojson o;
    o["error"] = std::string(message);
    return reply(status, std::string(json_type), o.dump());
}

std::int64_t unix_ms_now() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool truthy(std::string_view v) { return v.empty() || v == "1" || v == "true" || v == "yes"; }

runtime::task<readiness> run_check(readiness_check fn, runtime::duration timeout) {
    runtime::deadline_scope scope(runtime::reactor::local().now() + timeout);
    readiness r;
    try {
        auto t = fn(scope.token());
        r = co_await std::move(t);
    } catch (const std::exception& e) {
        r = readiness::no(fmt::format("check failed: {}", e.what()));
    } catch (...) {
        r = readiness::no("check failed with an unknown exception");
    }
    if (!r.ready && scope.expired()) {
        r.detail = fmt::format("no answer within {} ms{}{}",
                               std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count(),
                               r.detail.empty() ? "" : ": ", r.detail);
    }
    co_return r;
}

runtime::task<readiness> flag_check(bool ready, std::string detail) { co_return readiness(ready, std::move(detail)); }

} // namespace

std::string query_value(std::string_view query, std::string_view key, bool* found) {
    auto value = form_value(query, key);
    if (found) *found = value.has_value();
    return value ? std::move(*value) : std::string{};
}

service::service(service_options opts) : _opts(std::move(opts)), _started(std::chrono::steady_clock::now()) {}
service::~service() = default;

void service::set_readiness_check(std::string name, readiness_check fn) {
    for (auto& c : _checks) {
        if (c.name == name) {
            c.fn = std::move(fn);
            return;
        }
    }
    _checks.push_back(check_entry{std::move(name), std::move(fn)});
}

void service::set_ready_flag(std::string name, bool ready, std::string detail) {
    set_readiness_check(std::move(name), [ready, detail = std::move(detail)](std::stop_token) {
        return flag_check(ready, detail);
    });
}

void service::remove_readiness_check(std::string_view name) {
    std::erase_if(_checks, [name](const check_entry& c) { return c.name == name; });
}

runtime::task<reply> service::metrics_json() {
    try {
        auto cores = co_await collect_metrics();
        co_return reply(200, std::string(json_type), metrics::metrics_json(cores, unix_ms_now()));
    } catch (const std::exception& e) {
        co_return error_reply(500, fmt::format("cannot collect metrics: {}", e.what()));
    }
}

runtime::task<reply> service::metrics_prometheus(std::string query) {
    try {
        prometheus_options opts;
        bool found = false;
        const std::string agg = query_value(query, "aggregate", &found);
        opts.per_core = !(found && truthy(agg));
        auto cores = co_await collect_metrics();
        co_return reply(200, std::string(prometheus_content_type), metrics::metrics_prometheus(cores, opts));
    } catch (const std::exception& e) {
        co_return reply(500, "text/plain; charset=utf-8", fmt::format("cannot collect metrics: {}\n", e.what()));
    }
}

runtime::task<reply> service::traces(std::string query) {
    try {
        const std::string format = query_value(query, "format");
        if (!format.empty() && format != "json" && format != "chrome") {
            co_return error_reply(400, fmt::format("unknown format '{}': use json or chrome", format));
        }
        const trace_query q = trace_query::parse(query);
        auto cores = co_await collect_traces();
        if (format == "chrome") co_return reply(200, std::string(json_type), traces_chrome(cores, q));
        co_return reply(200, std::string(json_type), traces_json(cores, q));
    } catch (const std::exception& e) {
        co_return error_reply(500, fmt::format("cannot collect traces: {}", e.what()));
    }
}

runtime::task<reply> service::traces_view(std::string query) {
    try {
        trace_query q = trace_query::parse(query);
        bool found = false;
        (void)query_value(query, "limit", &found);
        if (!found) q.limit = _opts.view_flushes;
        if (q.root.empty()) q.root = _opts.view_root;
        q.linked = true;
        auto cores = co_await collect_traces();
        co_return reply(200, "text/html; charset=utf-8", traces_view_html(traces_json(cores, q)));
    } catch (const std::exception& e) {
        co_return reply(500, "text/plain; charset=utf-8", fmt::format("cannot collect traces: {}\n", e.what()));
    }
}

reply service::health() const {
    ojson o;
    o["status"] = "up";
    o["uptime_seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - _started).count();
    if (auto* r = runtime::reactor::try_local()) o["core"] = r->core_id();
    return reply(200, std::string(json_type), o.dump());
}

runtime::task<reply> service::ready() {
    // Copies: checks may be replaced or removed while they run.
    const std::vector<check_entry> checks = _checks;
    std::vector<runtime::task<readiness>> runs;
    runs.reserve(checks.size());
    for (const auto& c : checks) runs.push_back(run_check(c.fn, _opts.readiness_timeout));
    std::vector<readiness> results;
    try {
        results = co_await runtime::when_all(std::move(runs));
    } catch (const std::exception& e) {
        co_return error_reply(503, fmt::format("readiness checks failed: {}", e.what()));
    }
    bool all = !checks.empty();
    ojson detail = ojson::object();
    ojson not_ready = ojson::array();
    for (std::size_t i = 0; i < checks.size(); ++i) {
        ojson one;
        one["ready"] = results[i].ready;
        one["detail"] = results[i].detail;
        detail[checks[i].name] = std::move(one);
        if (!results[i].ready) {
            all = false;
            not_ready.push_back(checks[i].name);
        }
    }
    ojson o;
    o["status"] = all ? "ready" : "not_ready";
    if (checks.empty()) o["reason"] = "no readiness checks registered yet";
    o["not_ready"] = std::move(not_ready);
    o["checks"] = std::move(detail);
    co_return reply(all ? 200 : 503, std::string(json_type), o.dump());
}

runtime::task<reply> service::handle(std::string method, std::string target) {
    const auto q = target.find('?');
    const std::string path = target.substr(0, q);
    const std::string query = q == std::string::npos ? std::string{} : target.substr(q + 1);
    static constexpr std::string_view paths[] = {"/metrics", "/metrics/prometheus", "/traces", "/traces/view",
                                                 "/health", "/ready"};
    bool known = false;
    for (auto p : paths) known = known || p == path;
    if (!known) co_return error_reply(404, fmt::format("no endpoint at {}", path));
    if (method != "GET" && method != "HEAD") co_return error_reply(405, "only GET and HEAD are supported");
    if (path == "/metrics") co_return co_await metrics_json();
    if (path == "/metrics/prometheus") co_return co_await metrics_prometheus(query);
    if (path == "/traces") co_return co_await traces(query);
    if (path == "/traces/view") co_return co_await traces_view(query);
    if (path == "/health") co_return health();
    co_return co_await ready();
}

} // namespace skiff::metrics
