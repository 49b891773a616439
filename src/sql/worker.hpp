// A query worker: one thread with its own reactor, store and sqlite3 connection (topic tables,
// catalog, functions). It takes jobs from the engine's queue until told to stop.
#pragma once

#include "job.hpp"
#include "topic_vtab.hpp"

#include <skiff/sql/engine.hpp>

#include <functional>
#include <memory>
#include <string>

namespace skiff::sql {

struct worker_shared {
    engine_config cfg;
    store_opener open;
    scan_counters counters;
    std::atomic<std::uint64_t> rows{0};
    // Pops the next job; null when the engine is stopping.
    std::function<std::shared_ptr<job>()> take;
    std::function<void(const std::shared_ptr<job>&)> done;
};

// Runs on the worker thread. `started` receives "" once ready or the reason it cannot run.
void worker_main(worker_shared& shared, unsigned index, std::function<void(std::string)> started);

} // namespace skiff::sql
