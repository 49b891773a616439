// The one driver for coroutine tests: run a task on a fresh reactor on this thread until it
// finishes (or build the reactor / smp group a test drives itself).
//
// Where this machine cannot run a reactor at all (no io_uring: old kernel, seccomp or container
// policy, io_uring_disabled), the test binary is skipped, not failed: it prints why and exits
// with 77, which meson reports as SKIP. Catch2 v2 has no per-case skip, and a case that needs
// a reactor has no value to return without one, so the whole binary stops there. Whether the
// machine can run a reactor is decided by creating one with the default configuration, so a
// test whose own configuration is refused still fails loudly instead of skipping.
#pragma once

#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/task.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace skiff::test {

// The exit status meson (like automake) reads as "skipped".
inline constexpr int skip_exit_status = 77;

// Why no reactor can run on this machine, or nullopt when one can. Probed once per process.
inline const std::optional<std::string>& reactor_unavailable() {
    static const std::optional<std::string> why = []() -> std::optional<std::string> {
        auto r = runtime::reactor::create(0);
        if (r) return std::nullopt;
        return r.error();
    }();
    return why;
}

// A reactor could not be created for a test: skip the binary if no reactor can run here at
// all, otherwise this is a test failure (abort, with the reason).
[[noreturn]] inline void reactor_refused(const char* what, const std::string& error) {
    if (const auto& why = reactor_unavailable()) {
        std::printf("SKIP: this machine cannot run a reactor (%s)\n", why->c_str());
        std::fflush(stdout);
        // _Exit, not exit: Catch2's session is on the stack and must not be torn down under it.
        std::_Exit(skip_exit_status);
    }
    std::fprintf(stderr, "cannot create %s: %s\n", what, error.c_str());
    std::abort();
}

} // namespace skiff::test

namespace skiff::runtime {

// Resumes the awaiting coroutine on the next loop turn (reactor::schedule). On a manual clock
// sleep(0ms) would not yield, so tests that need "let the others run" use this.
struct next_turn {
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) { reactor::local().schedule(h); }
    void await_resume() const noexcept {}
};
inline task<void> turns(int n) {
    for (int i = 0; i < n; ++i) co_await next_turn{};
}

inline std::unique_ptr<reactor> make_test_reactor(reactor_config cfg = {}) {
    auto r = reactor::create(0, std::move(cfg));
    if (!r) test::reactor_refused("reactor", r.error());
    return std::move(*r);
}

inline std::unique_ptr<smp> make_test_smp(unsigned cores, reactor_config cfg = {}) {
    auto s = smp::create(cores, std::move(cfg));
    if (!s) test::reactor_refused("smp group", s.error());
    return std::move(*s);
}

template <typename T>
T run_task(task<T> t, reactor_config cfg = {}) {
    auto r = make_test_reactor(std::move(cfg));
    return r->run_until_complete(std::move(t));
}

} // namespace skiff::runtime
