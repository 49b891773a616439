// The broker's Iceberg sinks (iceberg_sinks.hpp).
#include "iceberg_sinks.hpp"

#include "ownership.hpp"

#include <skiff/core/log.hpp>
#include <skiff/iceberg/maintenance.hpp>
#include <skiff/iceberg/sink.hpp>
#include <skiff/iceberg/table_store.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <chrono>
#include <memory>

namespace skiff::broker {

namespace {

using namespace std::chrono_literals;

// What a topic's sink reports, for the metrics (read at scrape time on core 0).
struct sink_state {
    std::unique_ptr<iceberg::sink> sink;
    std::unique_ptr<iceberg::table_store> table;
    std::int64_t visible_lag_ms = 0;   // at the last commit: now - the oldest committed record's timestamp
    std::int64_t last_commit_ms = 0;   // wall clock of the last commit (0: none yet)
    std::vector<metrics::registration> regs;
};

std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

runtime::task<void> maintenance_loop(iceberg::table_store* table, std::stop_token st) {
    const iceberg::maintenance_config mc;
    while (!st.stop_requested()) {
        auto slept = co_await runtime::sleep(10min, st);
        if (!slept) break;
        auto r = co_await iceberg::maintain(*table, mc, wall_ms(), st);
        if (!r && r.error().code != iceberg::errc::cancelled) {
            log::warn("iceberg: maintenance of {}: {}", table->location(), r.error().message);
        }
    }
}

void register_metrics(sink_state& s, const std::string& topic) {
    auto& reg = metrics::registry::local();
    const metrics::labels l = {{"topic", topic}};
    const iceberg::sink* k = s.sink.get();
    auto counter = [&](const char* name, const char* help, std::uint64_t iceberg::sink_stats::*field) {
        s.regs.push_back(reg.counter_fn(name, help, l, [k, field] { return k->stats().*field; }));
    };
    counter("skiff_iceberg_rows_total", "Records committed to the topic's Iceberg table.", &iceberg::sink_stats::rows);
    counter("skiff_iceberg_record_bytes_total", "Key, value and header bytes of those records.", &iceberg::sink_stats::record_bytes);
    counter("skiff_iceberg_file_bytes_total", "Bytes of Parquet data files committed.", &iceberg::sink_stats::file_bytes);
    counter("skiff_iceberg_files_total", "Parquet data files committed.", &iceberg::sink_stats::files);
    counter("skiff_iceberg_commits_total", "Snapshots this broker added to the table.", &iceberg::sink_stats::commits);
    counter("skiff_iceberg_conflicts_total", "Commits lost to another writer (then rebased or given up).",
            &iceberg::sink_stats::conflicts);
    counter("skiff_iceberg_abandoned_total", "Steps given up because another writer committed their offsets first.",
            &iceberg::sink_stats::abandoned);
    counter("skiff_iceberg_dead_letters_total", "Records whose value did not fit the JSON projections.",
            &iceberg::sink_stats::dead_letters);
    counter("skiff_iceberg_failures_total", "Steps that failed (retried at the next interval).", &iceberg::sink_stats::failures);
    counter("skiff_iceberg_skipped_by_retention_total", "Offsets deleted by retention before the sink read them.",
            &iceberg::sink_stats::skipped_by_retention);
    const sink_state* sp = &s;
    s.regs.push_back(reg.gauge_fn("skiff_iceberg_visible_lag_ms",
                                  "At the last commit: how long ago its oldest record was produced (produce to visible).", l,
                                  [sp] { return sp->visible_lag_ms; }));
    s.regs.push_back(reg.gauge_fn("skiff_iceberg_last_commit_age_ms", "Time since this broker's last commit (-1: none yet).", l,
                                  [sp] { return sp->last_commit_ms ? wall_ms() - sp->last_commit_ms : -1; }));
}

} // namespace

runtime::task<void> run_iceberg_sinks(shard* sh0) {
    const auto& cfg = sh0->cfg();
    const auto& ic = cfg.iceberg;
    if (ic.topics.empty()) co_return;
    std::string warehouse = ic.warehouse.empty() ? "iceberg/" + cfg.ns : ic.warehouse;
    while (!warehouse.empty() && warehouse.back() == '/') warehouse.pop_back();
    std::string base = ic.location_base.empty() ? sh0->store->describe() : ic.location_base;
    while (!base.empty() && base.back() == '/') base.pop_back();
    std::vector<std::unique_ptr<sink_state>> sinks;
    const std::stop_token st = sh0->stop.get_token();
    for (const auto& topic : ic.topics) {
        iceberg::sink_config c;
        c.ns = cfg.ns;
        c.topic = topic;
        c.table_prefix = warehouse + "/" + topic;
        c.location = base + "/" + c.table_prefix;
        c.partition_by = ic.partition_by;
        c.projections = ic.projections;
        c.commit_interval = ic.commit_interval;
        c.scan.budget = sh0->budget.get(); // reads share the S3 budget with flushes and lifecycle work
        c.scan.parallel_gets = 8;
        if (sh0->shared->cluster) {
            // Partitions this broker owns now; claims and releases happen on this core too.
            c.owns_partition = [sh0, topic](std::int32_t p) {
                const auto& claimed = sh0->shared->cluster->claimed;
                return claimed.find(std::pair<std::string, std::int32_t>(topic, p)) != claimed.end();
            };
        }
        auto state = std::make_unique<sink_state>();
        sink_state* raw = state.get();
        c.on_step = [raw, topic](const iceberg::step_result& r) {
            if (!r.committed) return;
            raw->last_commit_ms = wall_ms();
            if (r.oldest_timestamp_ms >= 0) raw->visible_lag_ms = raw->last_commit_ms - r.oldest_timestamp_ms;
            log::info("iceberg: {}: {} rows in {} files -> version {} ({} conflicts)", topic, r.rows, r.files, r.version,
                      r.conflicts);
        };
        log::info("iceberg: sinking topic {} into {}", topic, c.location);
        state->table = std::make_unique<iceberg::table_store>(*sh0->store, c.table_prefix, c.location);
        state->sink = std::make_unique<iceberg::sink>(*sh0->store, std::move(c));
        register_metrics(*state, topic);
        sinks.push_back(std::move(state));
    }
    std::vector<runtime::task<void>> runs;
    for (auto& s : sinks) {
        runs.push_back(s->sink->run(st));
        runs.push_back(maintenance_loop(s->table.get(), st));
    }
    co_await runtime::when_all(std::move(runs));
}

} // namespace skiff::broker
