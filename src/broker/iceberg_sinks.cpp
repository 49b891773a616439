// The broker's Iceberg sinks (iceberg_sinks.hpp).
#include "iceberg_sinks.hpp"

#include "ownership.hpp"

#include <skiff/core/log.hpp>
#include <skiff/iceberg/maintenance.hpp>
#include <skiff/iceberg/sink.hpp>
#include <skiff/iceberg/sink_metrics.hpp>
#include <skiff/iceberg/table_store.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <chrono>
#include <memory>

namespace skiff::broker {

namespace {

using namespace std::chrono_literals;

struct sink_state {
    std::unique_ptr<iceberg::sink> sink;
    std::unique_ptr<iceberg::table_store> table;
    std::unique_ptr<iceberg::sink_metrics> metrics; // last: unregistered before the sink goes
    std::string topic;
};

// On one core: the high watermarks of `topic`'s partitions open there.
runtime::task<std::vector<std::pair<std::int32_t, std::int64_t>>> watermarks(shard* sh, const std::string* topic) {
    std::vector<std::pair<std::int32_t, std::int64_t>> out;
    for (auto& [k, slot] : sh->parts) {
        if (k.first == *topic && slot && slot->log) out.emplace_back(k.second, slot->log->high_watermark());
    }
    co_return out;
}

// Keeps skiff_iceberg_lag_offsets current: the partitions open on this broker's cores (the
// ones it owns), their high watermarks against the table's next offsets.
runtime::task<void> lag_loop(shard* sh0, const std::string* topic, iceberg::sink_metrics* m, std::chrono::milliseconds every,
                             std::stop_token st) {
    while (!st.stop_requested()) {
        auto slept = co_await runtime::sleep(every, st);
        if (!slept) break;
        std::int64_t lag = 0;
        const auto& next = m->next_offsets();
        for (unsigned c = 0; c < sh0->shared->cores; ++c) {
            shard* target = sh0->shared->shards[c];
            auto hw = co_await runtime::submit_to(c, [target, topic] { return watermarks(target, topic); });
            for (const auto& [p, h] : hw) {
                auto it = next.find(p);
                lag += std::max<std::int64_t>(0, h - (it == next.end() ? 0 : it->second));
            }
        }
        m->set_lag_offsets(lag);
    }
}

} // namespace

runtime::task<void> run_iceberg_sinks(shard* sh0) {
    const auto& cfg = sh0->cfg();
    const auto& ic = cfg.iceberg;
    if (ic.topics.empty()) co_return;
    std::vector<std::unique_ptr<sink_state>> sinks;
    const std::stop_token st = sh0->stop.get_token();
    for (const auto& topic : ic.topics) {
        iceberg::sink_config c;
        c.ns = cfg.ns;
        c.topic = topic;
        const auto place = iceberg::place_table(ic.warehouse, cfg.ns, ic.location_base, sh0->store->describe(), topic);
        c.table_prefix = place.prefix;
        c.location = place.location;
        c.partition_by = ic.partition_by;
        auto projections = iceberg::projections_for(ic.projections, topic); // checked at start-up
        if (projections) c.projections = std::move(*projections);
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
        state->metrics = std::make_unique<iceberg::sink_metrics>(topic);
        state->topic = topic;
        iceberg::sink_metrics* m = state->metrics.get();
        c.on_step = [m, topic](const iceberg::step_result& r) {
            m->on_step(r);
            if (!r.committed) return;
            log::info("iceberg: {}: {} rows in {} files -> version {} ({} conflicts)", topic, r.rows, r.files, r.version,
                      r.conflicts);
        };
        log::info("iceberg: sinking topic {} into {}", topic, c.location);
        state->table = std::make_unique<iceberg::table_store>(*sh0->store, c.table_prefix, c.location);
        state->table->set_budget(sh0->budget.get()); // maintenance, throttled with everything else
        state->sink = std::make_unique<iceberg::sink>(*sh0->store, std::move(c));
        state->metrics->attach(*state->sink);
        sinks.push_back(std::move(state));
    }
    const iceberg::maintenance_config maintenance; // the defaults (docs/iceberg.md)
    std::vector<runtime::task<void>> runs;
    for (auto& s : sinks) {
        runs.push_back(s->sink->run(st));
        runs.push_back(iceberg::maintain_every(*s->table, maintenance, 10min, st));
        runs.push_back(lag_loop(sh0, &s->topic, s->metrics.get(), std::max(ic.commit_interval, std::chrono::milliseconds(500)), st));
    }
    co_await runtime::when_all(std::move(runs));
}

} // namespace skiff::broker
