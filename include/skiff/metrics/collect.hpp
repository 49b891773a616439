// Gathering every core's metrics and spans for a scrape.
//
// Each core serializes its own registry and trace rings on its own thread (through
// runtime::submit_to), so nothing is shared or locked; the results travel back to the calling
// core as plain values. Without a running smp group only the calling thread's registry and
// rings are read. Call on a reactor thread; the returned vectors are ordered by core.
#pragma once

#include <skiff/metrics/exposition.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/runtime/task.hpp>

#include <vector>

namespace skiff::metrics {

runtime::task<std::vector<core_snapshot>> collect_metrics();
runtime::task<std::vector<trace_snapshot>> collect_traces();

// The calling thread's part of the above (what each core runs).
core_snapshot local_metrics();
trace_snapshot local_traces();

} // namespace skiff::metrics
