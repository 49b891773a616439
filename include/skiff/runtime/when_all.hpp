// when_all: run several tasks concurrently on this reactor and wait for every one of them,
// also when one fails. Returns all results; if any child threw, the first exception (in
// argument order) is rethrown only after every child finished, so no child outlives the
// frames it references.
//
// The counter starts at n + 1 (libcoro's trick): children that finish synchronously while
// the parent is still starting the others cannot resume the parent before it suspended.
#pragma once

#include <skiff/runtime/task.hpp>

#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

namespace skiff::runtime {

namespace detail {

struct when_all_latch {
    std::size_t remaining;
    std::coroutine_handle<> parent;
    // Returns true when the caller was the last one out.
    bool arrive() noexcept { return --remaining == 0; }
};

template <typename T>
using slot_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <typename T>
struct when_all_child {
    struct promise_type {
        when_all_latch* latch = nullptr;
        std::exception_ptr* error = nullptr;

        when_all_child get_return_object() noexcept {
            return when_all_child{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        std::suspend_always initial_suspend() noexcept { return {}; }
        struct final_awaiter {
            bool await_ready() const noexcept { return false; }
            std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
                auto* latch = h.promise().latch;
                if (latch->arrive()) return latch->parent;
                return std::noop_coroutine();
            }
            void await_resume() const noexcept {}
        };
        final_awaiter final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        void unhandled_exception() noexcept { *error = std::current_exception(); }
    };
    std::coroutine_handle<promise_type> h;
};

template <typename T>
when_all_child<T> make_when_all_child(task<T> t, std::optional<slot_t<T>>* slot) {
    if constexpr (std::is_void_v<T>) {
        co_await std::move(t);
        slot->emplace();
    } else {
        // Named first: g++ 12 mishandles temporaries with destructors in co_await operands.
        T value = co_await std::move(t);
        slot->emplace(std::move(value));
    }
}

} // namespace detail

namespace detail {

template <typename T>
class when_all_vector_awaiter {
public:
    explicit when_all_vector_awaiter(std::vector<task<T>> tasks) : _tasks(std::move(tasks)) {}

    bool await_ready() const noexcept { return _tasks.empty(); }
    bool await_suspend(std::coroutine_handle<> parent) {
        const std::size_t n = _tasks.size();
        _slots.resize(n);
        _errors.resize(n);
        _latch.remaining = n + 1;
        _latch.parent = parent;
        _children.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
            auto c = make_when_all_child<T>(std::move(_tasks[i]), &_slots[i]);
            c.h.promise().latch = &_latch;
            c.h.promise().error = &_errors[i];
            _children.push_back(c.h);
        }
        for (auto h : _children) h.resume();
        return !_latch.arrive(); // false: everyone finished synchronously, don't suspend
    }
    std::vector<slot_t<T>> await_resume() {
        for (auto h : _children) h.destroy();
        _children.clear();
        for (auto& e : _errors)
            if (e) std::rethrow_exception(e);
        std::vector<slot_t<T>> out;
        out.reserve(_slots.size());
        for (auto& s : _slots) {
            if constexpr (std::is_void_v<T>) out.emplace_back();
            else out.push_back(std::move(*s));
        }
        return out;
    }
    ~when_all_vector_awaiter() {
        for (auto h : _children) h.destroy();
    }

private:
    std::vector<task<T>> _tasks;
    std::vector<std::optional<slot_t<T>>> _slots;
    std::vector<std::exception_ptr> _errors;
    std::vector<std::coroutine_handle<>> _children;
    when_all_latch _latch{};
};

} // namespace detail

// Waits for all tasks; the vector of results is in input order. void tasks give monostate.
template <typename T>
task<std::vector<detail::slot_t<T>>> when_all(std::vector<task<T>> tasks) {
    co_return co_await detail::when_all_vector_awaiter<T>(std::move(tasks));
}

namespace detail {

template <typename... Ts>
class when_all_tuple_awaiter {
public:
    explicit when_all_tuple_awaiter(task<Ts>... ts) : _tasks(std::move(ts)...) {}

    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> parent) {
        _latch.remaining = sizeof...(Ts) + 1;
        _latch.parent = parent;
        start(std::index_sequence_for<Ts...>{});
        return !_latch.arrive();
    }
    std::tuple<slot_t<Ts>...> await_resume() {
        destroy_children();
        for (auto& e : _errors)
            if (e) std::rethrow_exception(e);
        return take(std::index_sequence_for<Ts...>{});
    }
    ~when_all_tuple_awaiter() { destroy_children(); }

private:
    template <std::size_t... I>
    void start(std::index_sequence<I...>) {
        (make_child<I>(), ...);
        for (auto h : _children) h.resume();
    }
    template <std::size_t I>
    void make_child() {
        using T = std::tuple_element_t<I, std::tuple<Ts...>>;
        auto c = make_when_all_child<T>(std::move(std::get<I>(_tasks)), &std::get<I>(_slots));
        c.h.promise().latch = &_latch;
        c.h.promise().error = &_errors[I];
        _children[I] = c.h;
    }
    template <std::size_t... I>
    std::tuple<slot_t<Ts>...> take(std::index_sequence<I...>) {
        return std::tuple<slot_t<Ts>...>(take_one<I>()...);
    }
    template <std::size_t I>
    auto take_one() {
        using T = std::tuple_element_t<I, std::tuple<Ts...>>;
        if constexpr (std::is_void_v<T>) return std::monostate{};
        else return std::move(*std::get<I>(_slots));
    }
    void destroy_children() {
        for (auto& h : _children) {
            if (h) h.destroy();
            h = {};
        }
    }

    std::tuple<task<Ts>...> _tasks;
    std::tuple<std::optional<slot_t<Ts>>...> _slots;
    std::exception_ptr _errors[sizeof...(Ts)];
    std::coroutine_handle<> _children[sizeof...(Ts)]{};
    when_all_latch _latch{};
};

} // namespace detail

// co_await when_all(put(kfs), put(index)) → std::tuple of both results.
template <typename... Ts>
    requires(sizeof...(Ts) > 0)
task<std::tuple<detail::slot_t<Ts>...>> when_all(task<Ts>... ts) {
    co_return co_await detail::when_all_tuple_awaiter<Ts...>(std::move(ts)...);
}

} // namespace skiff::runtime
