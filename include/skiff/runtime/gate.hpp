// gate: background work only runs under a gate, and shutdown waits for it.
//
// enter() hands out holders while the gate is open; close() refuses new entries, signals
// the gate's stop token so loops can end early, and resumes once every holder is gone.
// spawn() is the only sanctioned fire-and-forget: the task holds the gate until it ends.
// Single-threaded: use a gate on the reactor that owns it.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/task.hpp>

#include <coroutine>
#include <cstddef>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace skiff::runtime {

class gate {
public:
    class holder {
    public:
        holder() = default;
        explicit holder(gate* g) noexcept : _g(g) {}
        holder(holder&& o) noexcept : _g(std::exchange(o._g, nullptr)) {}
        holder& operator=(holder&& o) noexcept {
            if (this != &o) {
                release();
                _g = std::exchange(o._g, nullptr);
            }
            return *this;
        }
        ~holder() { release(); }
        void release() noexcept {
            if (auto* g = std::exchange(_g, nullptr)) g->leave();
        }

    private:
        gate* _g = nullptr;
    };

    explicit gate(std::string name = "gate") : _name(std::move(name)) {}
    ~gate();
    gate(const gate&) = delete;
    gate& operator=(const gate&) = delete;

    // errc::gate_closed once close() was called.
    result<holder> enter();
    // Runs `t` in the background under this gate. Exceptions escaping it are logged.
    result<void> spawn(task<void> t);
    // Stops admitting work and waits until everything inside has left. Idempotent.
    task<void> close();

    bool is_closed() const noexcept { return _closed; }
    std::size_t count() const noexcept { return _count; }
    // Fires when close() begins, so long-running background loops can wind down.
    std::stop_token stop_token() const noexcept { return _stop.get_token(); }
    const std::string& name() const noexcept { return _name; }

private:
    void leave() noexcept;

    std::string _name;
    std::size_t _count = 0;
    bool _closed = false;
    std::stop_source _stop;
    std::vector<std::coroutine_handle<>> _closers;
};

} // namespace skiff::runtime
