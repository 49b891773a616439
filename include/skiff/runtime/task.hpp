// task<T>: a lazy coroutine that starts when awaited and resumes its awaiter by symmetric
// transfer (so long chains of synchronous completions cannot overflow the stack).
//
// A task is owned by exactly one awaiter; destroying an unstarted task destroys its frame.
// Exceptions thrown inside propagate to the awaiter (they stay inside a module: across
// module boundaries skiff returns result<T>).
//
// Coroutine lambdas: a lambda's captures live in the lambda object, not in the coroutine
// frame, so they dangle once the lambda is gone (Seastar's "lambda coroutine fiasco"). Pass
// state as parameters to coroutine functions instead.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace skiff::runtime {

template <typename T = void>
class task;

namespace detail {

struct promise_base {
    std::coroutine_handle<> _continuation = std::noop_coroutine();
    std::exception_ptr _exception;

    std::suspend_always initial_suspend() noexcept { return {}; }

    struct final_awaiter {
        bool await_ready() const noexcept { return false; }
        template <typename P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            return h.promise()._continuation;
        }
        void await_resume() const noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }
    void unhandled_exception() noexcept { _exception = std::current_exception(); }
};

template <typename T>
struct promise : promise_base {
    std::optional<T> _value;

    task<T> get_return_object() noexcept;
    template <typename U>
        requires std::is_convertible_v<U&&, T>
    void return_value(U&& v) {
        _value.emplace(std::forward<U>(v));
    }
    T take() {
        if (_exception) std::rethrow_exception(_exception);
        return std::move(*_value);
    }
};

template <>
struct promise<void> : promise_base {
    task<void> get_return_object() noexcept;
    void return_void() noexcept {}
    void take() {
        if (_exception) std::rethrow_exception(_exception);
    }
};

} // namespace detail

template <typename T>
class [[nodiscard]] task {
public:
    using promise_type = detail::promise<T>;
    using handle_type = std::coroutine_handle<promise_type>;
    using value_type = T;

    task() noexcept = default;
    explicit task(handle_type h) noexcept : _h(h) {}
    task(task&& o) noexcept : _h(std::exchange(o._h, {})) {}
    task& operator=(task&& o) noexcept {
        if (this != &o) {
            reset();
            _h = std::exchange(o._h, {});
        }
        return *this;
    }
    task(const task&) = delete;
    task& operator=(const task&) = delete;
    ~task() { reset(); }

    bool valid() const noexcept { return static_cast<bool>(_h); }
    bool done() const noexcept { return _h && _h.done(); }

    auto operator co_await() && noexcept {
        struct awaiter {
            handle_type h;
            bool await_ready() const noexcept { return !h || h.done(); }
            std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
                h.promise()._continuation = awaiting;
                return h; // symmetric transfer: start the child without growing the stack
            }
            T await_resume() { return h.promise().take(); }
        };
        return awaiter{_h};
    }

    // For the runtime's own drivers (spawn, run, when_all): hand over the frame.
    handle_type release() noexcept { return std::exchange(_h, {}); }

private:
    void reset() noexcept {
        if (_h) _h.destroy();
        _h = {};
    }
    handle_type _h{};
};

namespace detail {
template <typename T>
task<T> promise<T>::get_return_object() noexcept {
    return task<T>(std::coroutine_handle<promise<T>>::from_promise(*this));
}
inline task<void> promise<void>::get_return_object() noexcept {
    return task<void>(std::coroutine_handle<promise<void>>::from_promise(*this));
}
} // namespace detail

template <typename A>
concept awaitable_task = requires { typename std::remove_cvref_t<A>::promise_type; };

} // namespace skiff::runtime
