// Several reactors, one per core thread, and cross-core calls between them.
//
// submit_to(core, fn) runs fn on `core` and resumes the caller on its own core with the
// result. The work item (fn and the result slot) lives in the caller's coroutine frame, so
// it is created and destroyed on the calling core; only fn's execution happens remotely.
// fn may return a value or a task<T>; exceptions travel back to the caller.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/detached.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/task.hpp>

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace skiff::runtime {

class smp {
public:
    // Creates `cores` reactors (core 0 is driven by the thread that calls run()).
    static result<std::unique_ptr<smp>, std::string> create(unsigned cores, reactor_config cfg = {});
    ~smp();
    smp(const smp&) = delete;
    smp& operator=(const smp&) = delete;

    unsigned size() const noexcept { return static_cast<unsigned>(_reactors.size()); }
    reactor& at(unsigned core) noexcept { return *_reactors[core]; }

    // Runs main(core) on every core (core 0 on this thread) and returns when all of them
    // have finished. Every core keeps serving cross-core calls until the last main ends.
    void run(std::function<task<void>(unsigned core)> main);

    // The reactor of `core` in the running smp group, or null.
    static reactor* reactor_of(unsigned core) noexcept;
    static unsigned count() noexcept;

private:
    smp() = default;
    void run_core(unsigned core, const std::function<task<void>(unsigned)>& main);

    std::vector<std::unique_ptr<reactor>> _reactors;
    std::atomic<unsigned> _remaining{0};
};

namespace detail {

template <typename Fn>
using submit_result_t = std::invoke_result_t<Fn&>;

template <typename R>
struct unwrap_task {
    using type = R;
};
template <typename T>
struct unwrap_task<task<T>> {
    using type = T;
};

template <typename T>
struct xcall_state {
    std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;
    std::exception_ptr error;
};

template <typename Fn, typename T>
detached run_remote(Fn* fn, xcall_state<T>* st, reactor* home, std::coroutine_handle<> caller) {
    try {
        using R = submit_result_t<Fn>;
        if constexpr (awaitable_task<R>) {
            if constexpr (std::is_void_v<T>) {
                co_await (*fn)();
                st->value.emplace(true);
            } else {
                T v = co_await (*fn)();
                st->value.emplace(std::move(v));
            }
        } else if constexpr (std::is_void_v<T>) {
            (*fn)();
            st->value.emplace(true);
        } else {
            st->value.emplace((*fn)());
        }
    } catch (...) {
        st->error = std::current_exception();
    }
    // Hand control back: the caller resumes on its own core.
    home->post([caller] { caller.resume(); });
}

} // namespace detail

template <typename Fn>
auto submit_to(unsigned core, Fn fn) -> task<typename detail::unwrap_task<detail::submit_result_t<Fn>>::type> {
    using T = typename detail::unwrap_task<detail::submit_result_t<Fn>>::type;
    reactor& home = reactor::local();
    reactor* target = smp::reactor_of(core);
    if (!target) throw std::out_of_range("submit_to: no such core");
    detail::xcall_state<T> st;
    struct awaiter {
        Fn* fn;
        detail::xcall_state<T>* st;
        reactor* home;
        reactor* target;
        bool await_ready() const noexcept { return false; }
        void await_suspend(std::coroutine_handle<> h) {
            if (target == home) {
                // Same core: still go through the ready queue so the caller never runs fn
                // inside its own await_suspend.
                home->post([f = fn, s = st, hm = home, h] { detail::run_remote<Fn, T>(f, s, hm, h); });
                return;
            }
            target->post([f = fn, s = st, hm = home, h] { detail::run_remote<Fn, T>(f, s, hm, h); });
        }
        void await_resume() const noexcept {}
    };
    co_await awaiter{&fn, &st, &home, target};
    if (st.error) std::rethrow_exception(st.error);
    if constexpr (!std::is_void_v<T>) co_return std::move(*st.value);
}

} // namespace skiff::runtime
