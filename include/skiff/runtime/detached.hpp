// The one way to run a coroutine nobody awaits: started at once, it destroys its own frame
// when it ends. Only gate::spawn and the cross-core machinery use it, so every background
// coroutine is either counted by a gate or awaited by a remote caller.
#pragma once

#include <coroutine>
#include <exception>

namespace skiff::runtime::detail {

struct detached {
    struct promise_type {
        detached get_return_object() noexcept { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() noexcept {}
        // Bodies catch everything themselves; reaching here is a bug.
        void unhandled_exception() noexcept { std::terminate(); }
    };
};

} // namespace skiff::runtime::detail
