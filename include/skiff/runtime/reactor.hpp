// One reactor per core thread, each owning one io_uring.
//
// The loop: run ready coroutines, fire due timers, submit every prepared SQE in one
// io_uring_enter that also waits for at least one completion with the earliest timer as the
// kernel timeout, then dispatch completions. A completion's user_data is always the address of
// an io_op (or 0 for CQEs we ignore, such as those of cancel requests).
//
// Everything here is single-threaded except post() and request_stop(), which any thread may
// call. A reactor must be driven by the thread that created it.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/task.hpp>

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct io_uring;
struct io_uring_sqe;

namespace skiff::runtime {

class reactor;

// An operation submitted to the ring. Subclasses prepare their SQE when the reactor has room
// and are told the result when the CQE arrives. Invariant: the object outlives its CQE, also
// when it was cancelled (a cancel only hurries the CQE along).
class io_op {
public:
    virtual void prepare(io_uring_sqe* sqe) noexcept = 0;
    virtual void complete(int res, std::uint32_t flags) noexcept = 0;

protected:
    ~io_op() = default;

private:
    friend class reactor;
    enum class state : std::uint8_t { idle, parked, in_flight } _state = state::idle;
};

// An element of the reactor's timer heap. The owner keeps it alive while armed.
class timer_node {
public:
    virtual void fire() noexcept = 0;
    time_point deadline() const noexcept { return _deadline; }
    bool armed() const noexcept { return _heap_index != npos; }

protected:
    ~timer_node() = default;

private:
    friend class reactor;
    static constexpr std::size_t npos = static_cast<std::size_t>(-1);
    time_point _deadline{};
    std::size_t _heap_index = npos;
};

struct reactor_config {
    unsigned sq_entries = 256;
    // Operations in flight are capped at the CQ size so the CQ can never overflow; the rest
    // wait in a parking queue until completions free room. Long-lived operations (a recv on
    // an idle connection, an accept, curl's polls) count too, so size this well above the
    // number of connections a core serves: a parked op cannot run until another completes.
    unsigned cq_entries = 16384;
    std::shared_ptr<clock> clk; // null: steady clock
};

class reactor {
public:
    // Creates the ring and probes the opcodes skiff needs; the error is one sentence
    // naming what is missing ("io_uring is not available: ...").
    static result<std::unique_ptr<reactor>, std::string> create(unsigned core_id = 0,
                                                                reactor_config cfg = {});
    ~reactor();
    reactor(const reactor&) = delete;
    reactor& operator=(const reactor&) = delete;

    // The reactor driving the calling thread; aborts when there is none.
    static reactor& local() noexcept;
    static reactor* try_local() noexcept;

    unsigned core_id() const noexcept { return _core; }
    clock& clk() noexcept { return *_clock; }
    time_point now() const noexcept { return _clock->now(); }

    // Runs the loop until request_stop(). Binds the reactor to the calling thread.
    void run();
    // Runs the loop until `t` finishes and returns its value (or rethrows). For tests and
    // the CLI; background work spawned by `t` keeps its state, but the loop stops turning.
    template <typename T>
    T run_until_complete(task<T> t);

    // Thread-safe: ask the loop to return. Work still pending stays pending.
    void request_stop() noexcept;
    bool stop_requested() const noexcept { return _stop.load(std::memory_order_acquire); }

    // Resume `h` on a later loop turn (never inline: callers may hold locks or be mid-update).
    void schedule(std::coroutine_handle<> h);
    // Thread-safe: run `fn` on this reactor's thread.
    void post(std::function<void()> fn);

    // Ring operations. start() prepares the op's SQE now or parks it; cancel() asks the
    // kernel to finish it early (its CQE still arrives, with -ECANCELED or its real result).
    void start(io_op& op);
    void cancel(io_op& op);

    // Timer heap. One kernel timeout (the wait's timeout) covers the earliest entry.
    void arm(timer_node& t, time_point deadline);
    void disarm(timer_node& t) noexcept;

    // Counters for tests and metrics.
    std::size_t ops_in_flight() const noexcept { return _in_flight; }
    std::size_t ops_parked() const noexcept { return _parked.size(); }
    std::size_t timers_armed() const noexcept { return _timers.size(); }
    std::uint64_t loop_turns() const noexcept { return _turns; }

private:
    reactor(unsigned core_id, reactor_config cfg);
    void loop(const std::function<bool()>& done);
    void run_ready();
    void fire_timers();
    void wait_and_dispatch(bool block);
    io_uring_sqe* get_sqe();
    void prepare_now(io_op& op);
    void arm_wakeup();
    void drain_posted();
    void heap_up(std::size_t i) noexcept;
    void heap_down(std::size_t i) noexcept;
    void heap_swap(std::size_t a, std::size_t b) noexcept;

    struct wakeup_op;

    unsigned _core;
    std::shared_ptr<clock> _clock;
    std::unique_ptr<io_uring> _ring;
    unsigned _cq_limit;
    std::size_t _in_flight = 0;
    std::deque<io_op*> _parked;
    std::deque<std::coroutine_handle<>> _ready;
    std::vector<timer_node*> _timers;
    std::uint64_t _turns = 0;

    std::atomic<bool> _stop{false};
    int _event_fd = -1;
    std::unique_ptr<wakeup_op> _wakeup;
    std::mutex _posted_mutex;
    std::vector<std::function<void()>> _posted;
    std::atomic<bool> _wake_pending{false};
};

namespace detail {
// Drives a task from plain code: starts it and records completion.
template <typename T>
struct root_runner {
    struct promise_type;
    using handle = std::coroutine_handle<promise_type>;
    struct promise_type {
        bool done = false;
        root_runner get_return_object() { return root_runner{handle::from_promise(*this)}; }
        std::suspend_always initial_suspend() noexcept { return {}; }
        std::suspend_always final_suspend() noexcept {
            done = true;
            return {};
        }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { std::terminate(); }
    };
    handle h;
};

template <typename T>
root_runner<T> run_root(task<T> t, std::optional<T>& out, std::exception_ptr& ex) {
    try {
        out.emplace(co_await std::move(t));
    } catch (...) {
        ex = std::current_exception();
    }
}
inline root_runner<void> run_root_void(task<void> t, std::exception_ptr& ex) {
    try {
        co_await std::move(t);
    } catch (...) {
        ex = std::current_exception();
    }
}
} // namespace detail

template <typename T>
T reactor::run_until_complete(task<T> t) {
    std::exception_ptr ex;
    if constexpr (std::is_void_v<T>) {
        auto r = detail::run_root_void(std::move(t), ex);
        schedule(r.h);
        loop([&] { return r.h.promise().done; });
        r.h.destroy();
        if (ex) std::rethrow_exception(ex);
    } else {
        std::optional<T> out;
        auto r = detail::run_root<T>(std::move(t), out, ex);
        schedule(r.h);
        loop([&] { return r.h.promise().done; });
        r.h.destroy();
        if (ex) std::rethrow_exception(ex);
        return std::move(*out);
    }
}

} // namespace skiff::runtime
