#include <skiff/metrics/collect.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/when_all.hpp>

namespace skiff::metrics {

core_snapshot local_metrics() { return registry::local().snapshot(); }

trace_snapshot local_traces() {
    trace_snapshot t;
    if (auto* r = runtime::reactor::try_local()) t.core = r->core_id();
    if (auto* tb = trace_buffer::existing()) {
        t.spans = tb->snapshot();
        t.dropped_low = tb->dropped(volume::low);
        t.dropped_high = tb->dropped(volume::high);
        t.capacity_low = tb->capacity(volume::low);
        t.capacity_high = tb->capacity(volume::high);
    } else {
        t.capacity_low = t.capacity_high = trace_buffer::default_capacity;
    }
    return t;
}

namespace {

// Whether the calling thread is a core of the running smp group (else: read only locally).
bool in_smp_group() noexcept {
    auto* self = runtime::reactor::try_local();
    if (!self || runtime::smp::count() == 0) return false;
    return runtime::smp::reactor_of(self->core_id()) == self;
}

} // namespace

runtime::task<std::vector<core_snapshot>> collect_metrics() {
    if (!in_smp_group()) {
        std::vector<core_snapshot> one;
        one.push_back(local_metrics());
        co_return one;
    }
    std::vector<runtime::task<core_snapshot>> calls;
    const unsigned n = runtime::smp::count();
    for (unsigned c = 0; c < n; ++c) calls.push_back(runtime::submit_to(c, [] { return local_metrics(); }));
    auto all = co_await runtime::when_all(std::move(calls));
    co_return all;
}

runtime::task<std::vector<trace_snapshot>> collect_traces() {
    if (!in_smp_group()) {
        std::vector<trace_snapshot> one;
        one.push_back(local_traces());
        co_return one;
    }
    std::vector<runtime::task<trace_snapshot>> calls;
    const unsigned n = runtime::smp::count();
    for (unsigned c = 0; c < n; ++c) calls.push_back(runtime::submit_to(c, [] { return local_traces(); }));
    auto all = co_await runtime::when_all(std::move(calls));
    co_return all;
}

} // namespace skiff::metrics
