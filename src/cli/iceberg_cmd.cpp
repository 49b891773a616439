// `skiff iceberg TARGET --topic T ...`: appends topics to Iceberg tables in the same store,
// read straight from their segments (the sink of src/iceberg; docs/iceberg.md).
#include "commands.hpp"
#include "run_until_signal.hpp"
#include "s3_config.hpp"
#include "store_target.hpp"

#include <skiff/core/log.hpp>
#include <skiff/iceberg/maintenance.hpp>
#include <skiff/iceberg/sink.hpp>
#include <skiff/iceberg/sink_metrics.hpp>
#include <skiff/metrics/endpoint.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/iceberg/table_store.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/when_all.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <signal.h>
#include <string>
#include <thread>
#include <vector>

namespace skiff::cli {

namespace {

constexpr const char* iceberg_usage =
    "usage: skiff iceberg s3://BUCKET[/NAMESPACE] --topic T [--topic T2 ...] [options] [--s3-endpoint URL] ...\n"
    "       skiff iceberg DIR --topic T [--namespace NS] [options]\n"
    "\n"
    "Appends each topic's records, read straight from its segments, to an Iceberg v2 table in the\n"
    "same store, exactly once, until SIGINT/SIGTERM (or, with --once, until nothing is left).\n"
    "\n"
    "  --topic T               a topic to sink (repeatable)\n"
    "  --namespace NS          the namespace of a local data directory (default \"default\")\n"
    "  --warehouse PREFIX      key prefix of the tables (default iceberg/NAMESPACE); table = PREFIX/TOPIC\n"
    "  --location-base URI     the URI engines reach the store's root at (default s3://BUCKET or\n"
    "                          file://DIR); written into the tables' metadata\n"
    "  --partition-by P        day (day(timestamp), the default) | partition | none\n"
    "  --project [TOPIC/]NAME:TYPE:PATH  a typed column from JSON values, for every topic or for\n"
    "                          TOPIC only (repeatable); TYPE: string, long, double, boolean,\n"
    "                          timestamptz; PATH: $.a.b\n"
    "  --commit-interval-ms N  time between commits (default 10000)\n"
    "  --commit-bytes N        record bytes per commit at most (default 134217728)\n"
    "  --uncompressed          Parquet pages without ZSTD\n"
    "  --expire-after-ms N     maintenance expires snapshots older than this (default 604800000, 7 days)...\n"
    "  --keep-snapshots N      ...but keeps the newest N (default 10)\n"
    "  --orphan-grace-ms N     unreferenced files younger than this are kept (default 3600000)\n"
    "  --maintenance-interval-ms N  time between maintenance passes (default 600000; 0: never)\n"
    "  --rewrite-min-files N   maintenance rewrites a partition's small files once it has N (default 8; 0: never)\n"
    "  --small-file-bytes N    data files below this are small (default 33554432)\n"
    "  --target-file-bytes N   rewritten files are up to this big (default 134217728)\n"
    "  --once                  commit everything there is now, then exit\n"
    "  --http-addr HOST:PORT   serve /metrics, /traces and /health there (skiff_iceberg_* per topic)\n"
    "  --log-level L           error | warn | info (default) | debug\n"
    "\n"
    "Exit status: 0 success, 1 store or table error, 2 usage.\n";

struct iceberg_options {
    iceberg_options() = default;
    std::string target, ns = "default", warehouse, location_base, http_addr;
    std::vector<std::string> topics;
    iceberg::partitioning partition_by = iceberg::partitioning::day;
    std::vector<iceberg::scoped_projection> projections;
    std::int64_t interval_ms = 10'000;
    std::size_t commit_bytes = 128u << 20;
    bool zstd = true, once = false;
    iceberg::maintenance_config maintenance;
    std::int64_t maintenance_interval_ms = 600'000;
    s3_flags flags;
};

runtime::task<int> maintain_once(iceberg::table_store* table, const iceberg::maintenance_config* cfg, std::stop_token st) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto r = co_await iceberg::maintain(*table, *cfg, now, st);
    if (!r) {
        std::fprintf(stderr, "skiff: iceberg: maintenance of %s: %s\n", table->location().c_str(), r.error().message.c_str());
        co_return 1;
    }
    if (auto line = iceberg::describe(*r); !line.empty()) log::info("iceberg: {}: maintenance {}", table->location(), line);
    co_return 0;
}

runtime::task<int> maintenance_loop(iceberg::table_store* table, const iceberg_options* o, std::stop_token st) {
    co_await iceberg::maintain_every(*table, o->maintenance, std::chrono::milliseconds(o->maintenance_interval_ms), st);
    co_return 0;
}

runtime::task<int> sink_topic(iceberg::sink* s, iceberg::table_store* table, const iceberg_options* o, std::stop_token st) {
    if (!o->once) {
        co_await s->run(st);
        co_return 0;
    }
    while (true) {
        auto r = co_await s->step(st);
        if (!r) {
            std::fprintf(stderr, "skiff: iceberg: topic %s: %s\n", s->config().topic.c_str(), r.error().message.c_str());
            co_return 1;
        }
        if (r->committed) {
            std::fprintf(stdout, "%s: committed %lld rows in %d files as version %d (snapshot %lld)\n", s->config().topic.c_str(),
                         static_cast<long long>(r->rows), r->files, r->version, static_cast<long long>(r->snapshot_id));
            std::fflush(stdout);
        }
        if (!r->more) break;
    }
    co_return co_await maintain_once(table, &o->maintenance, st);
}

runtime::task<int> run_iceberg(iceberg_options o, std::stop_token st) {
    auto opened = open_store_target(o.target, o.ns, o.flags);
    if (!opened) {
        std::fprintf(stderr, "skiff: %s\n", opened.error().message.c_str());
        co_return opened.error().status;
    }
    auto& store = *opened->store;
    const std::string ns = opened->ns;
    // The observability endpoint, when asked for: the same routes as the broker's.
    std::unique_ptr<http::server> http_srv;
    metrics::service obs;
    runtime::gate http_gate("http");
    std::stop_source http_stop;
    if (!o.http_addr.empty()) {
        http::server_config hc;
        hc.addr = o.http_addr;
        auto srv = http::server::listen(hc);
        if (!srv) {
            std::fprintf(stderr, "skiff: %s (--http-addr)\n", srv.error().c_str());
            co_return 1;
        }
        http_srv = std::move(*srv);
        metrics::add_routes(*http_srv, obs);
        (void)http_gate.spawn(http_srv->serve(http_stop.get_token()));
        log::info("iceberg: metrics on http://{}", http_srv->local_address().to_string());
    }
    std::vector<std::unique_ptr<iceberg::sink_metrics>> observers;
    std::vector<std::unique_ptr<iceberg::sink>> sinks;
    std::vector<std::unique_ptr<iceberg::table_store>> tables; // maintenance's view of each table
    for (const auto& topic : o.topics) {
        iceberg::sink_config c;
        c.ns = ns;
        c.topic = topic;
        const auto place = iceberg::place_table(o.warehouse, ns, o.location_base, store.describe(), topic);
        c.table_prefix = place.prefix;
        c.location = place.location;
        c.partition_by = o.partition_by;
        auto projections = iceberg::projections_for(o.projections, topic); // checked before
        if (projections) c.projections = std::move(*projections);
        c.commit_interval = std::chrono::milliseconds(o.interval_ms);
        c.commit_bytes = o.commit_bytes;
        c.zstd = o.zstd;
        observers.push_back(std::make_unique<iceberg::sink_metrics>(topic));
        iceberg::sink_metrics* m = observers.back().get();
        c.on_step = [topic, m](const iceberg::step_result& r) {
            m->on_step(r);
            if (r.committed) {
                log::info("iceberg: {}: {} rows, {} files, {} bytes -> version {} ({} conflicts)", topic, r.rows, r.files,
                          r.file_bytes, r.version, r.conflicts);
            } else if (r.abandoned) {
                log::info("iceberg: {}: another writer committed these offsets first; resuming from theirs", topic);
            }
        };
        // Crash tests: SKIFF_ICEBERG_FAILPOINT=data|manifest|list|commit kills the process
        // (SIGKILL, nothing cleaned up) just before that stage of the first step that gets there.
        if (const char* fp = std::getenv("SKIFF_ICEBERG_FAILPOINT"); fp && *fp) {
            c.before_stage = [stage = std::string(fp)](std::string_view at) {
                if (at == stage) {
                    std::fprintf(stderr, "skiff: iceberg: failpoint %s: SIGKILL\n", stage.c_str());
                    std::fflush(stderr);
                    ::raise(SIGKILL);
                }
                return true;
            };
        }
        log::info("iceberg: topic {} -> {}", topic, c.location);
        tables.push_back(std::make_unique<iceberg::table_store>(store, c.table_prefix, c.location));
        sinks.push_back(std::make_unique<iceberg::sink>(store, std::move(c)));
        m->attach(*sinks.back());
    }
    std::vector<runtime::task<int>> runs;
    for (std::size_t k = 0; k < sinks.size(); ++k) {
        runs.push_back(sink_topic(sinks[k].get(), tables[k].get(), &o, st));
        if (!o.once && o.maintenance_interval_ms > 0) runs.push_back(maintenance_loop(tables[k].get(), &o, st));
    }
    auto results = co_await runtime::when_all(std::move(runs));
    int rc = 0;
    for (auto& r : results) rc = std::max(rc, r);
    http_stop.request_stop();
    co_await http_gate.close();
    observers.clear(); // unregistered before the sinks they read go
    co_return rc;
}

} // namespace

int iceberg_command(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(iceberg_usage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    iceberg_options o;
    bool help = false;
    std::string endpoint, region, partition_by = "day", level = "info";
    std::vector<std::string> projects, pos;
    CLI::App app{"skiff iceberg"};
    app.set_help_flag();
    app.allow_extras(true);
    app.add_flag("-h,--help", help);
    app.add_option("--topic", o.topics);
    app.add_option("--namespace", o.ns);
    app.add_option("--warehouse", o.warehouse);
    app.add_option("--location-base", o.location_base);
    app.add_option("--partition-by", partition_by);
    app.add_option("--project", projects);
    app.add_option("--commit-interval-ms", o.interval_ms)->check(CLI::Range(std::int64_t{10}, std::int64_t{86'400'000}));
    app.add_option("--commit-bytes", o.commit_bytes)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 34));
    std::int64_t expire_after_ms = 604'800'000, orphan_grace_ms = 3'600'000;
    app.add_option("--expire-after-ms", expire_after_ms)->check(CLI::NonNegativeNumber);
    app.add_option("--keep-snapshots", o.maintenance.keep_snapshots)->check(CLI::Range(1, 1'000'000));
    app.add_option("--orphan-grace-ms", orphan_grace_ms)->check(CLI::NonNegativeNumber);
    app.add_option("--maintenance-interval-ms", o.maintenance_interval_ms)->check(CLI::NonNegativeNumber);
    app.add_option("--rewrite-min-files", o.maintenance.rewrite_min_files)->check(CLI::Range(0, 100000));
    app.add_option("--small-file-bytes", o.maintenance.small_file_bytes)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 34));
    app.add_option("--target-file-bytes", o.maintenance.target_file_bytes)->check(CLI::Range(std::size_t{1}, std::size_t{1} << 34));
    bool uncompressed = false;
    app.add_flag("--uncompressed", uncompressed);
    app.add_flag("--once", o.once);
    app.add_option("--http-addr", o.http_addr);
    app.add_option("--log-level", level)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    auto* endpoint_opt = app.add_option("--s3-endpoint", endpoint)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    auto* region_opt = app.add_option("--s3-region", region)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_flag("--s3-path-style", o.flags.path_style);
    app.add_option("target", pos);
    if (auto code = parse_s3_style_args(app, args)) return *code;
    if (help) {
        std::fputs(iceberg_usage, stdout);
        return 0;
    }
    if (auto extra = app.remaining(); !extra.empty()) {
        std::fprintf(stderr, "skiff: unknown option '%s'\n%s", extra.front().c_str(), iceberg_usage);
        return 2;
    }
    if (pos.size() != 1) {
        std::fputs(pos.empty() ? iceberg_usage : "skiff: iceberg takes one target\n", stderr);
        return 2;
    }
    if (o.topics.empty()) {
        std::fprintf(stderr, "skiff: iceberg needs at least one --topic\n");
        return 2;
    }
    o.target = pos[0];
    o.zstd = !uncompressed;
    o.maintenance.expire_after = std::chrono::milliseconds(expire_after_ms);
    o.maintenance.orphan_grace = std::chrono::milliseconds(orphan_grace_ms);
    o.maintenance.zstd = o.zstd;
    auto p = iceberg::parse_partitioning(partition_by);
    if (!p) {
        std::fprintf(stderr, "skiff: --partition-by: %s\n", p.error().message.c_str());
        return 2;
    }
    o.partition_by = *p;
    for (const auto& s : projects) {
        auto pr = iceberg::parse_projection_spec(s);
        if (!pr) {
            std::fprintf(stderr, "skiff: --project %s\n", pr.error().message.c_str());
            return 2;
        }
        if (!pr->topic.empty() && std::find(o.topics.begin(), o.topics.end(), pr->topic) == o.topics.end()) {
            std::fprintf(stderr, "skiff: --project %s: topic '%s' is not a --topic\n", s.c_str(), pr->topic.c_str());
            return 2;
        }
        o.projections.push_back(std::move(*pr));
    }
    for (const auto& t : o.topics) {
        if (auto c = iceberg::projections_for(o.projections, t); !c) {
            std::fprintf(stderr, "skiff: --project: %s\n", c.error().message.c_str());
            return 2;
        }
    }
    if (endpoint_opt->count()) o.flags.endpoint = endpoint;
    if (region_opt->count()) o.flags.region = region;
    if (!log::set_level(level)) {
        std::fprintf(stderr, "skiff: --log-level %s: not one of error, warn, info, debug\n", level.c_str());
        return 2;
    }

    return run_until_signal([&o](std::stop_token st) { return run_iceberg(std::move(o), st); });
}

} // namespace skiff::cli
