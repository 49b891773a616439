#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/semaphore.hpp>

#include <cstdio>
#include <cstdlib>

namespace skiff::runtime {

semaphore::semaphore(std::size_t count, std::string name)
    : _name(std::move(name)), _capacity(count), _available(static_cast<std::int64_t>(count)) {}

semaphore::~semaphore() {
    if (_waiting != 0) {
        std::fprintf(stderr, "skiff: semaphore '%s' destroyed with %zu waiters\n", _name.c_str(), _waiting);
        std::abort();
    }
}

semaphore::acquire_awaitable semaphore::acquire(std::size_t n, std::stop_token st, priority p) {
    return acquire_awaitable(*this, n, std::move(st), p);
}

std::optional<semaphore::units> semaphore::try_acquire(std::size_t n) {
    if (_broken || _waiting != 0 || _available < static_cast<std::int64_t>(n)) return std::nullopt;
    _available -= static_cast<std::int64_t>(n);
    return units(this, n);
}

void semaphore::signal(std::size_t n) {
    _available += static_cast<std::int64_t>(n);
    wake();
}

void semaphore::set_capacity(std::size_t cap) {
    _available += static_cast<std::int64_t>(cap) - static_cast<std::int64_t>(_capacity);
    _capacity = cap;
    wake();
}

void semaphore::broken() noexcept {
    _broken = true;
    for (auto& q : _queues) {
        while (q.head) {
            auto* w = q.head;
            unlink(w);
            w->_outcome = acquire_awaitable::outcome::broken;
            w->_reactor->schedule(w->_h);
        }
    }
}

void semaphore::enqueue(acquire_awaitable* w) noexcept {
    auto& q = _queues[static_cast<int>(w->_prio)];
    w->_prev = q.tail;
    w->_next = nullptr;
    if (q.tail) q.tail->_next = w;
    else q.head = w;
    q.tail = w;
    w->_queued = true;
    ++_waiting;
    ++_waits_total;
}

void semaphore::unlink(acquire_awaitable* w) noexcept {
    if (!w->_queued) return;
    auto& q = _queues[static_cast<int>(w->_prio)];
    if (w->_prev) w->_prev->_next = w->_next;
    else q.head = w->_next;
    if (w->_next) w->_next->_prev = w->_prev;
    else q.tail = w->_prev;
    w->_prev = w->_next = nullptr;
    w->_queued = false;
    --_waiting;
}

void semaphore::wake() noexcept {
    // Head of the highest non-empty class first; stop at the first that does not fit so
    // a big request is not starved by a stream of small ones behind it.
    for (auto& q : _queues) {
        while (q.head) {
            auto* w = q.head;
            if (_available < static_cast<std::int64_t>(w->_n)) return;
            _available -= static_cast<std::int64_t>(w->_n);
            unlink(w);
            w->_outcome = acquire_awaitable::outcome::granted;
            // Resume later: signal() often runs inside ~units in the middle of other work.
            w->_reactor->schedule(w->_h);
        }
    }
}

semaphore::acquire_awaitable::~acquire_awaitable() {
    _cb.reset();
    _s.unlink(this);
}

bool semaphore::acquire_awaitable::await_ready() noexcept {
    if (_s._broken) {
        _outcome = outcome::broken;
        return true;
    }
    if (_st.stop_requested()) {
        _outcome = outcome::cancelled;
        return true;
    }
    if (_s._waiting == 0 && _s._available >= static_cast<std::int64_t>(_n)) {
        _s._available -= static_cast<std::int64_t>(_n);
        _outcome = outcome::granted;
        return true;
    }
    return false;
}

void semaphore::acquire_awaitable::await_suspend(std::coroutine_handle<> h) {
    _h = h;
    _reactor = &reactor::local();
    _s.enqueue(this);
    if (_st.stop_possible()) _cb.emplace(_st, canceller{this});
}

void semaphore::acquire_awaitable::canceller::operator()() noexcept {
    if (self->_outcome != outcome::pending) return; // granted or broken already, resuming
    self->_s.unlink(self);
    self->_outcome = outcome::cancelled;
    self->_reactor->schedule(self->_h);
    // Whoever was behind us may fit now.
    self->_s.wake();
}

result<semaphore::units> semaphore::acquire_awaitable::await_resume() noexcept {
    switch (_outcome) {
    case outcome::granted: return units(&_s, _n);
    case outcome::broken: return errc::broken;
    default: return errc::cancelled;
    }
}

} // namespace skiff::runtime
