// oneshot<T>: a wait-once latch on one core. One side sets a value once; any number of
// coroutines wait for it.
//
//   oneshot<int> done;
//   ... later, elsewhere:  done.set(42);
//   auto r = co_await done.wait(5s, st);   // result<int>
//
// - set(v) stores the value; only the first set counts (later ones are ignored and return
//   false). Every waiter gets its own copy of the value, so T must be copy-constructible.
// - Several waiters are allowed, suspended at once or one after another; a wait after set()
//   completes without suspending.
// - Waiters are resumed through reactor::schedule(), never inline from set(): the setter
//   may be in the middle of updating its own state.
// - wait(st): errc::cancelled when `st` fires first; wait(timeout, st): also
//   errc::timed_out when the timeout passes first. A value already set when the wait
//   starts wins over a stop requested at that moment; otherwise cancellation or timeout is
//   never reported as a value (a set() after a waiter was cancelled does not reach it).
// - Destroying a oneshot that still has waiters resumes them with errc::broken; destroying
//   one nobody waits on is always fine.
//
// Single-core: construct, set, wait and destroy on the same reactor. A set() from another
// core goes through smp; a stop_token must be fired on the waiter's core (see README).
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/reactor.hpp>

#include <coroutine>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>
#include <variant>

namespace skiff::runtime {

template <typename T>
class oneshot {
    // T = void is stored as an empty value so one implementation serves both.
    using stored = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

public:
    class awaiter;

    oneshot() = default;
    ~oneshot() {
        while (_head) _head->finish(outcome::broken, nullptr);
    }
    oneshot(const oneshot&) = delete;
    oneshot& operator=(const oneshot&) = delete;

    // Stores the value and schedules every waiter. Returns false (and changes nothing) when
    // a value was already set.
    template <typename U = T>
        requires(!std::is_void_v<U>)
    bool set(U v) {
        return set_stored(stored(std::move(v)));
    }
    bool set()
        requires std::is_void_v<T>
    {
        return set_stored(stored{});
    }

    bool is_set() const noexcept { return _value.has_value(); }
    // The value once set, else nullptr.
    template <typename U = T>
        requires(!std::is_void_v<U>)
    const U* value_if_set() const noexcept {
        return _value ? &*_value : nullptr;
    }
    // How many coroutines are suspended on this oneshot now.
    std::size_t waiters() const noexcept { return _count; }

    // co_await wait(st) → result<T>: the value, or errc::cancelled.
    awaiter wait(std::stop_token st = {}) { return awaiter(this, std::nullopt, std::move(st)); }
    // co_await wait(timeout, st) → result<T>: the value, errc::timed_out or errc::cancelled.
    awaiter wait(duration timeout, std::stop_token st = {}) {
        return awaiter(this, reactor::local().now() + timeout, std::move(st));
    }
    // co_await latch: wait() without stop or timeout.
    awaiter operator co_await() { return wait(); }

    enum class outcome : unsigned char { pending, value, cancelled, timed_out, broken };

    class awaiter final : public timer_node {
    public:
        awaiter(const awaiter&) = delete;
        awaiter& operator=(const awaiter&) = delete;
        ~awaiter() {
            // Only reached while suspended if the waiting coroutine itself is destroyed.
            if (_linked) _o->unlink(this);
            if (armed()) _reactor->disarm(*this);
        }

        bool await_ready() noexcept {
            if (_o->_value) {
                _value.emplace(*_o->_value);
                _outcome = outcome::value;
                return true;
            }
            if (_st.stop_requested()) {
                _outcome = outcome::cancelled;
                return true;
            }
            return false;
        }
        void await_suspend(std::coroutine_handle<> h) {
            _h = h;
            _reactor = &reactor::local();
            _o->link(this);
            if (_deadline) _reactor->arm(*this, *_deadline);
            if (_st.stop_possible()) _cb.emplace(_st, canceller{this});
        }
        result<T> await_resume() {
            _cb.reset();
            switch (_outcome) {
            case outcome::value:
                if constexpr (std::is_void_v<T>) {
                    return ok();
                } else {
                    return std::move(*_value);
                }
            case outcome::timed_out: return errc::timed_out;
            case outcome::broken: return errc::broken;
            default: return errc::cancelled;
            }
        }

        void fire() noexcept override { finish(outcome::timed_out, nullptr); }

    private:
        friend class oneshot;
        struct canceller {
            awaiter* self;
            void operator()() noexcept { self->finish(outcome::cancelled, nullptr); }
        };

        awaiter(oneshot* o, std::optional<time_point> deadline, std::stop_token st)
            : _o(o), _deadline(deadline), _st(std::move(st)) {}

        // The first of set / timeout / stop / destruction decides; the others find the
        // waiter no longer pending and do nothing.
        void finish(outcome how, const stored* v) noexcept {
            if (_outcome != outcome::pending) return;
            _outcome = how;
            if (v) _value.emplace(*v);
            if (_linked) _o->unlink(this);
            if (armed()) _reactor->disarm(*this);
            _reactor->schedule(_h);
        }

        oneshot* _o;
        std::optional<time_point> _deadline;
        std::stop_token _st;
        std::optional<std::stop_callback<canceller>> _cb;
        std::coroutine_handle<> _h;
        reactor* _reactor = nullptr;
        outcome _outcome = outcome::pending;
        std::optional<stored> _value;
        bool _linked = false;
        awaiter* _prev = nullptr;
        awaiter* _next = nullptr;
    };

private:
    bool set_stored(stored v) {
        if (_value) return false;
        _value.emplace(std::move(v));
        while (_head) _head->finish(outcome::value, &*_value);
        return true;
    }
    void link(awaiter* w) noexcept {
        w->_prev = _tail;
        w->_next = nullptr;
        if (_tail) {
            _tail->_next = w;
        } else {
            _head = w;
        }
        _tail = w;
        w->_linked = true;
        ++_count;
    }
    void unlink(awaiter* w) noexcept {
        if (w->_prev) {
            w->_prev->_next = w->_next;
        } else {
            _head = w->_next;
        }
        if (w->_next) {
            w->_next->_prev = w->_prev;
        } else {
            _tail = w->_prev;
        }
        w->_prev = w->_next = nullptr;
        w->_linked = false;
        --_count;
    }

    std::optional<stored> _value;
    awaiter* _head = nullptr;
    awaiter* _tail = nullptr;
    std::size_t _count = 0;
};

} // namespace skiff::runtime
