// Timers on the reactor's timer heap and clock: sleep, callback timers, deadlines, timeouts.
// All of them must be used on the reactor's thread. With a manual clock they fire when the
// test advances time (on the next loop turn), never by themselves.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/task.hpp>

#include <functional>
#include <optional>
#include <stop_token>

namespace skiff::runtime {

// `co_await sleep_until(tp, st)`: ok once the clock reaches tp, errc::cancelled if `st`
// fires first. Cancellation never reports the sleep as finished.
class sleep_awaitable final : public timer_node {
public:
    sleep_awaitable(time_point tp, std::stop_token st) : _tp(tp), _st(std::move(st)) {}
    sleep_awaitable(const sleep_awaitable&) = delete;
    sleep_awaitable& operator=(const sleep_awaitable&) = delete;

    bool await_ready() noexcept {
        if (_st.stop_requested()) {
            _cancelled = true;
            return true;
        }
        return false;
    }
    void await_suspend(std::coroutine_handle<> h) {
        _h = h;
        _reactor = &reactor::local();
        _reactor->arm(*this, _tp);
        if (_st.stop_possible()) _cb.emplace(_st, canceller{this});
    }
    result<void> await_resume() noexcept {
        if (_cancelled) return errc::cancelled;
        return {};
    }
    void fire() noexcept override {
        _cb.reset();
        _h.resume();
    }

private:
    struct canceller {
        sleep_awaitable* self;
        void operator()() noexcept {
            if (!self->armed()) return; // already fired and resuming
            self->_reactor->disarm(*self);
            self->_cancelled = true;
            self->_reactor->schedule(self->_h);
        }
    };
    time_point _tp;
    std::stop_token _st;
    std::optional<std::stop_callback<canceller>> _cb;
    std::coroutine_handle<> _h;
    reactor* _reactor = nullptr;
    bool _cancelled = false;
};

inline sleep_awaitable sleep_until(time_point tp, std::stop_token st = {}) {
    return sleep_awaitable(tp, std::move(st));
}
inline sleep_awaitable sleep(duration d, std::stop_token st = {}) {
    return sleep_awaitable(reactor::local().now() + d, std::move(st));
}

// A re-armable callback timer (the curl glue's single timer is one of these).
class timer final : public timer_node {
public:
    explicit timer(std::function<void()> cb) : _cb(std::move(cb)) {}
    ~timer() { cancel(); }
    timer(const timer&) = delete;
    timer& operator=(const timer&) = delete;

    void arm(time_point tp) {
        _reactor = &reactor::local();
        _reactor->arm(*this, tp);
    }
    void arm_after(duration d) { arm(reactor::local().now() + d); }
    void cancel() noexcept {
        if (_reactor) _reactor->disarm(*this);
    }
    void fire() noexcept override { _cb(); }

private:
    std::function<void()> _cb;
    reactor* _reactor = nullptr;
};

// A re-armable timer that calls a plain function with a context pointer: no allocation, so
// objects that hold several (a consumer group: join, sync and one session timer per member)
// stay cheap. The function may destroy the timer itself (a member removed by its own session
// timer): fire() touches nothing of the timer after the call. arm_after() replaces an earlier
// deadline; cancel() and the destructor disarm it. Reactor thread only.
class fn_timer final : public timer_node {
public:
    using fn_t = void (*)(void*);
    fn_timer(fn_t f, void* ctx) noexcept : _f(f), _ctx(ctx) {}
    ~fn_timer() { cancel(); }
    fn_timer(const fn_timer&) = delete;
    fn_timer& operator=(const fn_timer&) = delete;

    void arm(time_point tp) {
        _reactor = &reactor::local();
        _reactor->arm(*this, tp);
    }
    void arm_after(duration d) { arm(reactor::local().now() + d); }
    void cancel() noexcept {
        if (_reactor && armed()) _reactor->disarm(*this);
    }
    void fire() noexcept override {
        fn_t f = _f;
        void* c = _ctx;
        f(c); // `this` may be gone after this call
    }

private:
    fn_t _f;
    void* _ctx;
    reactor* _reactor = nullptr;
};

// A stop token that fires at a deadline or when the parent token fires, whichever is first.
// expired() tells the two apart afterwards, so callers can report timed_out vs cancelled.
class deadline_scope final : public timer_node {
public:
    deadline_scope(time_point deadline, std::stop_token parent = {})
        : _parent_cb(std::in_place, std::move(parent), forward_stop{this}) {
        reactor::local().arm(*this, deadline);
    }
    ~deadline_scope() {
        _parent_cb.reset();
        if (armed()) reactor::local().disarm(*this);
    }
    deadline_scope(const deadline_scope&) = delete;
    deadline_scope& operator=(const deadline_scope&) = delete;

    std::stop_token token() const noexcept { return _source.get_token(); }
    bool expired() const noexcept { return _expired; }
    void fire() noexcept override {
        _expired = true;
        _source.request_stop();
    }

private:
    struct forward_stop {
        deadline_scope* self;
        void operator()() noexcept { self->_source.request_stop(); }
    };
    std::stop_source _source;
    bool _expired = false;
    std::optional<std::stop_callback<forward_stop>> _parent_cb;
};

// Runs fn(token) with a timeout. If the operation ends with errc::cancelled because the
// timeout fired (not because `parent` did), the result becomes errc::timed_out.
// fn must return task<result<T>> with a std::error_code error type.
template <typename Fn>
auto with_timeout(duration d, Fn fn, std::stop_token parent = {})
    -> decltype(fn(std::stop_token{})) {
    deadline_scope scope(reactor::local().now() + d, parent);
    auto t = fn(scope.token());
    auto r = co_await std::move(t);
    if (!r && is_cancelled(r.error()) && scope.expired() && !parent.stop_requested()) {
        co_return errc::timed_out;
    }
    co_return r;
}

} // namespace skiff::runtime
