// `skiff serve --iceberg-topics`: the broker appends topics to Iceberg tables in its own store
// (the sink of src/iceberg, run on core 0 with core 0's store and io budget). A single broker
// sinks every partition; in a cluster each broker sinks the partitions it owns, and the
// brokers' commits to one table rebase on each other (iceberg/sink.hpp). docs/iceberg.md.
#pragma once

#include "shard.hpp"

#include <skiff/runtime/task.hpp>

namespace skiff::broker {

// Core 0, spawned on its background gate once the broker serves; returns when the core stops.
runtime::task<void> run_iceberg_sinks(shard* sh0);

} // namespace skiff::broker
