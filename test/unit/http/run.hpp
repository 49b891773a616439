// Test helper: drive a fresh reactor on this thread until a task finishes, or skip the test
// cleanly where io_uring is unavailable (old kernel, seccomp policy, ...).
#pragma once

#include <skiff/runtime/reactor.hpp>

#include <catch2/catch.hpp>

#include <utility>

namespace skiff::test {

// Runs `t` to completion on a new reactor; returns false (after a Catch2 warning) when no
// reactor can be created here.
inline bool run_task_or_skip(runtime::task<void> t, runtime::reactor_config cfg = {}) {
    auto r = runtime::reactor::create(0, std::move(cfg));
    if (!r) {
        WARN("skipped: " << r.error());
        return false;
    }
    (*r)->run_until_complete(std::move(t));
    return true;
}

} // namespace skiff::test
