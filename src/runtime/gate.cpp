#include <skiff/core/log.hpp>
#include <skiff/runtime/detached.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/reactor.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace skiff::runtime {

namespace {
detail::detached run_under_gate(task<void> t, gate::holder h, const std::string* name) {
    try {
        co_await std::move(t);
    } catch (const std::exception& e) {
        log::error("background task under gate '{}' failed: {}", *name, e.what());
    } catch (...) {
        log::error("background task under gate '{}' failed with an unknown exception", *name);
    }
    h.release();
}
} // namespace

gate::~gate() {
    if (_count != 0) {
        // A gate destroyed with work inside would leave that work pointing at freed memory.
        std::fprintf(stderr, "skiff: gate '%s' destroyed with %zu holders inside\n", _name.c_str(), _count);
        std::abort();
    }
}

result<gate::holder> gate::enter() {
    if (_closed) return errc::gate_closed;
    ++_count;
    return holder(this);
}

result<void> gate::spawn(task<void> t) {
    auto h = enter();
    if (!h) return failure{h.error()};
    run_under_gate(std::move(t), std::move(*h), &_name);
    return {};
}

void gate::leave() noexcept {
    if (--_count == 0 && !_closers.empty()) {
        // Resume on a later turn: leave() runs inside the last holder's destructor.
        for (auto c : std::exchange(_closers, {})) reactor::local().schedule(c);
    }
}

task<void> gate::close() {
    if (!_closed) {
        _closed = true;
        _stop.request_stop();
    }
    if (_count == 0) co_return;
    struct waiter {
        gate* g;
        bool await_ready() const noexcept { return g->_count == 0; }
        void await_suspend(std::coroutine_handle<> h) { g->_closers.push_back(h); }
        void await_resume() const noexcept {}
    };
    co_await waiter{this};
}

} // namespace skiff::runtime
