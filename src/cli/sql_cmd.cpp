// `skiff sql TARGET --listen 127.0.0.1:5432`: SQL over the topics of a namespace, read straight
// from the bucket, for Postgres clients (psql, drivers). docs/sql.md.
#include "commands.hpp"
#include "run_until_signal.hpp"
#include "s3_config.hpp"

#include <skiff/core/log.hpp>
#include <skiff/core/parse_int.hpp>
#include <skiff/http/server.hpp>
#include <skiff/metrics/endpoint.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/pgwire/server.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/sql/engine.hpp>
#include <skiff/storage/local_store.hpp>
#include <skiff/storage/s3_store.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace skiff::cli {

namespace {

constexpr const char* sql_usage =
    "usage: skiff sql s3://BUCKET[/NAMESPACE] [options] [--s3-endpoint URL] [--s3-region R] [--s3-path-style]\n"
    "       skiff sql DIR [--namespace NS] [options]\n"
    "\n"
    "Serves SQL (SQLite, through the Postgres wire protocol) over the topics of a namespace\n"
    "(default \"default\"), read straight from the bucket: each topic is a table with columns\n"
    "topic, partition, offset, timestamp (ms), key, value, headers (JSON). See docs/sql.md.\n"
    "\n"
    "options:\n"
    "  --listen ADDR                 Postgres wire address (default 127.0.0.1:5432; port 0 picks one)\n"
    "  --http ADDR                   serve /metrics, /metrics/prometheus, /traces, /traces/view, /ready on ADDR\n"
    "  --max-concurrent-queries N    queries running at once, one worker thread each (default 4)\n"
    "  --max-queued-queries N        queries waiting for a worker; beyond, 53300 (default 64)\n"
    "  --max-scan-bytes N            bytes one query may read; beyond, 54000 (default unlimited)\n"
    "  --max-scan-segments N         segments one query may read; beyond, 54000 (default unlimited)\n"
    "  --query-timeout DURATION      e.g. 30s, 500ms; beyond, 57014 (default none)\n"
    "  --max-connections N           client connections (default 64)\n"
    "  --parallel-gets N             GETs in flight per scan (default 8)\n"
    "  --log-level LEVEL             error|warn|info|debug (default warn)\n";

std::optional<std::chrono::milliseconds> parse_duration(const std::string& s) {
    std::size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
    if (digits == 0) return std::nullopt;
    auto n = parse_u64(s.substr(0, digits));
    if (!n) return std::nullopt;
    auto unit = s.substr(digits);
    if (unit == "ms") return std::chrono::milliseconds(*n);
    if (unit == "s" || unit.empty()) return std::chrono::milliseconds(*n * 1000);
    if (unit == "m") return std::chrono::milliseconds(*n * 60000);
    return std::nullopt;
}

struct sql_options {
    std::string target;
    std::string ns = "default";
    std::string listen = "127.0.0.1:5432";
    std::string http;
    sql::engine_config engine;
    std::size_t max_connections = 64;
    s3_flags flags;
};

// The worker's store, opened on the worker's reactor. For S3 the client comes first (it lives
// on that reactor, driving curl from it).
struct s3_holder {
    std::unique_ptr<s3::client> client;
    std::unique_ptr<storage::object_store> store;
};

result<sql::worker_store, std::string> open_store(const std::string& target, const s3_flags& flags) {
    sql::worker_store w;
    if (target.rfind("s3://", 0) == 0) {
        auto rest = target.substr(5);
        std::string bucket = rest.substr(0, rest.find('/'));
        auto cfg = make_s3_config(flags);
        if (!cfg) return failure{cfg.error()};
        auto c = s3::client::create(std::move(*cfg));
        if (!c) return failure{c.error()};
        auto h = std::make_shared<s3_holder>();
        h->client = std::move(*c);
        auto s = storage::s3_store::create(*h->client, "s3://" + bucket);
        if (!s) return failure{s.error().message};
        h->store = std::move(*s);
        w.store = h->store.get();
        w.keep_alive = h;
        return w;
    }
    auto s = storage::local_store::create(target);
    if (!s) return failure{s.error().message};
    std::shared_ptr<storage::object_store> store(std::move(*s));
    w.store = store.get();
    w.keep_alive = store;
    return w;
}

// The Postgres wire server's counters, sampled on this core at scrape time (the engine
// registers its own skiff_sql_* metrics when it is created).
std::vector<metrics::registration> register_server_metrics(pgwire::server* p) {
    auto& reg = metrics::registry::local();
    std::vector<metrics::registration> out;
    auto counter = [&](const char* name, const char* help, std::uint64_t pgwire::server_stats::*field) {
        out.push_back(reg.counter_fn(name, help, {}, [p, field] { return p->stats().*field; }));
    };
    counter("skiff_sql_connections_total", "Client connections accepted.", &pgwire::server_stats::connections);
    counter("skiff_sql_cancels_total", "CancelRequests that matched a running query.", &pgwire::server_stats::cancels);
    counter("skiff_sql_protocol_violations_total", "Connections closed for protocol violations.",
            &pgwire::server_stats::protocol_violations);
    out.push_back(reg.gauge_fn("skiff_sql_connections_open", "Client connections open now.", {},
                               [p] { return static_cast<std::int64_t>(p->stats().connections_open); }));
    return out;
}

runtime::task<void> serve_http(http::server* srv, std::stop_token st) {
    if (srv) co_await srv->serve(st);
}

runtime::task<int> run_sql(sql_options o, std::stop_token st) {
    auto target = o.target;
    auto flags = o.flags;
    auto opener = [target, flags](runtime::reactor&) { return open_store(target, flags); };
    auto e = sql::engine::create(o.engine, opener, runtime::reactor::local());
    if (!e) {
        std::fprintf(stderr, "skiff sql: %s\n", e.error().c_str());
        co_return 1;
    }
    pgwire::server_config pc;
    pc.addr = o.listen;
    pc.max_connections = o.max_connections;
    auto srv = pgwire::server::create(pc, **e);
    if (!srv) {
        std::fprintf(stderr, "skiff sql: %s\n", srv.error().c_str());
        co_return 1;
    }
    std::unique_ptr<http::server> http_srv;
    metrics::service_options so;
    so.view_root = "sql.query";
    metrics::service obs(so);
    obs.set_ready_flag("engine", true, fmt::format("{} query workers", o.engine.max_concurrent_queries));
    auto server_metrics = register_server_metrics(srv->get());
    if (!o.http.empty()) {
        http::server_config hc;
        hc.addr = o.http;
        auto h = http::server::listen(hc);
        if (!h) {
            std::fprintf(stderr, "skiff sql: %s\n", h.error().c_str());
            co_return 1;
        }
        http_srv = std::move(*h);
        metrics::add_routes(*http_srv, obs);
        std::fprintf(stderr, "metrics on http://%s/metrics\n", http_srv->local_address().to_string().c_str());
    }
    std::fprintf(stderr, "listening on %s\n", (*srv)->local_address().to_string().c_str());
    std::fflush(stderr);
    auto a = (*srv)->serve(st);
    auto b = serve_http(http_srv.get(), st);
    co_await runtime::when_all(std::move(a), std::move(b));
    // The server has cancelled and finished every session; the engine joins its workers.
    co_return 0;
}

} // namespace

int sql_command(const std::vector<std::string>& args) {
    if (args.empty()) {
        std::fputs(sql_usage, stderr);
        return 2;
    }
    sql_options o;
    bool help = false;
    std::string endpoint, region, timeout, level = "warn";
    std::vector<std::string> pos;
    CLI::App app{"skiff sql"};
    app.set_help_flag();
    app.allow_extras(true);
    app.add_flag("-h,--help", help);
    app.add_option("--namespace", o.ns)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_option("--listen", o.listen)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_option("--http", o.http)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_option("--max-concurrent-queries", o.engine.max_concurrent_queries)->check(CLI::Range(1, 256));
    app.add_option("--max-queued-queries", o.engine.max_queued_queries);
    app.add_option("--max-scan-bytes", o.engine.max_scan_bytes);
    app.add_option("--max-scan-segments", o.engine.max_scan_segments);
    app.add_option("--query-timeout", timeout);
    app.add_option("--max-connections", o.max_connections)->check(CLI::Range(1, 100000));
    app.add_option("--parallel-gets", o.engine.parallel_gets)->check(CLI::Range(1, 256));
    app.add_option("--log-level", level);
    auto* endpoint_opt = app.add_option("--s3-endpoint", endpoint)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    auto* region_opt = app.add_option("--s3-region", region)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_flag("--s3-path-style", o.flags.path_style);
    app.add_option("target", pos);
    if (auto code = parse_s3_style_args(app, args)) return *code;
    if (help) {
        std::fputs(sql_usage, stdout);
        return 0;
    }
    if (auto extra = app.remaining(); !extra.empty()) {
        std::fprintf(stderr, "skiff: unknown option '%s'\n%s", extra.front().c_str(), sql_usage);
        return 2;
    }
    if (pos.size() != 1) {
        std::fputs(sql_usage, stderr);
        return 2;
    }
    o.target = pos[0];
    if (endpoint_opt->count()) o.flags.endpoint = endpoint;
    if (region_opt->count()) o.flags.region = region;
    if (!timeout.empty()) {
        auto d = parse_duration(timeout);
        if (!d) {
            std::fprintf(stderr, "skiff: --query-timeout: '%s' is not a duration (e.g. 30s, 500ms)\n", timeout.c_str());
            return 2;
        }
        o.engine.query_timeout = *d;
    }
    if (o.target.rfind("s3://", 0) == 0) {
        auto rest = o.target.substr(5);
        auto slash = rest.find('/');
        if (slash != std::string::npos && slash + 1 < rest.size()) o.ns = rest.substr(slash + 1);
        while (!o.ns.empty() && o.ns.back() == '/') o.ns.pop_back();
    }
    if (o.ns.empty()) o.ns = "default";
    o.engine.ns = o.ns;
    if (level == "error") log::set_level(log::level::error);
    else if (level == "info") log::set_level(log::level::info);
    else if (level == "debug") log::set_level(log::level::debug);
    else log::set_level(log::level::warn);

    return run_until_signal([&o](std::stop_token st) { return run_sql(std::move(o), st); });
}

} // namespace skiff::cli
