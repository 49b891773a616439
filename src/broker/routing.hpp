// Routing a request's work to the core that owns it: a partition (partition_owner), a group
// (group_owner), or core 0 (the catalog and producer ids). Private to the broker module.
//
// on_partition_owner(sh, topic, p, fn) runs fn(owner_shard) on the owning core and resumes
// the caller on its own core with fn's result; fn returns a value or a task<T> (which then
// runs to completion on the owner). On the caller's own core fn is called directly.
//
// Ordering: the work is issued when the returned task starts, before it first suspends, and
// posts from one core to another run in FIFO order. A handler that starts its routed tasks
// before its own first suspension (when_all starts its children in order) therefore reaches
// each partition's core in the order its requests were read; two pipelined produces of one
// connection are appended in send order (idempotent producers with five in flight rely on it).
//
// fn must be trivially destructible: capture pointers, references to the caller's frame
// (which stays suspended until fn's result is back) and plain values; whatever fn's work
// owns, it takes as parameters of the coroutine fn starts. The reason is g++ 12, which
// destroys a lambda with non-trivial captures twice when it is a temporary inside a co_await
// expression (README, contributor notes); the static_assert below turns that runtime double
// free into a compile error, in this one place instead of a comment at every call site.
#pragma once

#include "shard.hpp"

#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/task.hpp>

#include <string_view>
#include <type_traits>

namespace skiff::broker {

namespace detail {

template <typename Fn>
using routed_t = typename runtime::detail::unwrap_task<std::invoke_result_t<Fn&, shard&>>::type;

template <typename Fn>
runtime::task<routed_t<Fn>> run_on(shard* local, unsigned core, Fn fn) {
    shard* target = local->shared->shards[core];
    using R = std::invoke_result_t<Fn&, shard&>;
    if (core == local->core) {
        if constexpr (runtime::awaitable_task<R>) {
            co_return co_await fn(*target);
        } else {
            co_return fn(*target);
        }
    }
    // Only pointers cross into the submitted lambda: fn stays in this (suspended) frame.
    Fn* f = &fn;
    co_return co_await runtime::submit_to(core, [f, target] { return (*f)(*target); });
}

} // namespace detail

// Runs fn(shard&) on `core`.
template <typename Fn>
runtime::task<detail::routed_t<Fn>> on_core(shard& local, unsigned core, Fn fn) {
    static_assert(std::is_trivially_destructible_v<Fn>,
                  "routed work must capture only pointers, references and plain values (g++ 12; see routing.hpp)");
    return detail::run_on(&local, core, fn);
}

// Runs fn(shard&) on the core that owns (topic, partition).
template <typename Fn>
runtime::task<detail::routed_t<Fn>> on_partition_owner(shard& local, std::string_view topic, std::int32_t partition,
                                                       Fn fn) {
    return on_core(local, partition_owner(topic, partition, local.shared->cores), fn);
}

// Runs fn(shard&) on the core that owns the group.
template <typename Fn>
runtime::task<detail::routed_t<Fn>> on_group_owner(shard& local, std::string_view group, Fn fn) {
    return on_core(local, group_owner(group, local.shared->cores), fn);
}

} // namespace skiff::broker
