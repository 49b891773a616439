// An async counting semaphore with RAII units, FIFO waiters in two priority classes, and
// break-on-shutdown. Used as the S3 concurrency budget: flush uploads (priority::high) go
// ahead of prefetch (priority::normal). Capacity can change at run time (adaptive
// concurrency); shrinking takes effect as units come back.
//
// Single-threaded: acquire, release and break on the owning reactor only.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/errc.hpp>

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

namespace skiff::runtime {

class reactor;

class semaphore {
public:
    enum class priority : std::uint8_t { high = 0, normal = 1 };

    // Units taken from a semaphore; returned when destroyed. Move-only.
    class units {
    public:
        units() = default;
        units(semaphore* s, std::size_t n) noexcept : _s(s), _n(n) {}
        units(units&& o) noexcept : _s(std::exchange(o._s, nullptr)), _n(std::exchange(o._n, 0)) {}
        units& operator=(units&& o) noexcept {
            if (this != &o) {
                release();
                _s = std::exchange(o._s, nullptr);
                _n = std::exchange(o._n, 0);
            }
            return *this;
        }
        ~units() { release(); }
        std::size_t count() const noexcept { return _n; }
        void release() noexcept {
            if (_s && _n) _s->signal(_n);
            _s = nullptr;
            _n = 0;
        }
        // Keeps the units taken for good: the semaphore is then used as a counter of events
        // (acquire consumes one) rather than of resources.
        void consume() noexcept {
            _s = nullptr;
            _n = 0;
        }

    private:
        semaphore* _s = nullptr;
        std::size_t _n = 0;
    };

    class acquire_awaitable;

    explicit semaphore(std::size_t count, std::string name = "semaphore");
    ~semaphore();
    semaphore(const semaphore&) = delete;
    semaphore& operator=(const semaphore&) = delete;

    // co_await acquire(n, st, prio) → result<units>: errc::cancelled when `st` fires first,
    // errc::broken once broken(). Waiters are served FIFO within a priority class, high first;
    // a large request at the head is not overtaken by small ones (no starvation).
    acquire_awaitable acquire(std::size_t n = 1, std::stop_token st = {}, priority p = priority::normal);
    // Succeeds only if nobody waits and the units are there now.
    std::optional<units> try_acquire(std::size_t n = 1);

    // Return units (usually via ~units). Wakes waiters that now fit.
    void signal(std::size_t n);
    // Fail every waiter and every future acquire with errc::broken.
    void broken() noexcept;
    bool is_broken() const noexcept { return _broken; }

    // Adaptive concurrency: the total number of units. Growing wakes waiters now; shrinking
    // makes available() go negative until enough units come back.
    void set_capacity(std::size_t cap);
    std::size_t capacity() const noexcept { return _capacity; }
    std::int64_t available() const noexcept { return _available; }
    std::size_t waiters() const noexcept { return _waiting; }
    std::uint64_t waits_total() const noexcept { return _waits_total; }
    const std::string& name() const noexcept { return _name; }

    class acquire_awaitable {
    public:
        acquire_awaitable(semaphore& s, std::size_t n, std::stop_token st, priority p)
            : _s(s), _n(n), _st(std::move(st)), _prio(p) {}
        acquire_awaitable(const acquire_awaitable&) = delete;
        acquire_awaitable& operator=(const acquire_awaitable&) = delete;
        ~acquire_awaitable();

        bool await_ready() noexcept;
        void await_suspend(std::coroutine_handle<> h);
        result<units> await_resume() noexcept;

    private:
        friend class semaphore;
        enum class outcome : std::uint8_t { pending, granted, cancelled, broken };
        struct canceller {
            acquire_awaitable* self;
            void operator()() noexcept;
        };

        semaphore& _s;
        std::size_t _n;
        std::stop_token _st;
        priority _prio;
        outcome _outcome = outcome::pending;
        std::coroutine_handle<> _h;
        reactor* _reactor = nullptr;
        acquire_awaitable* _prev = nullptr;
        acquire_awaitable* _next = nullptr;
        bool _queued = false;
        std::optional<std::stop_callback<canceller>> _cb;
    };

private:
    struct queue {
        acquire_awaitable* head = nullptr;
        acquire_awaitable* tail = nullptr;
    };
    void enqueue(acquire_awaitable* w) noexcept;
    void unlink(acquire_awaitable* w) noexcept;
    void wake() noexcept;

    std::string _name;
    std::size_t _capacity;
    std::int64_t _available;
    std::size_t _waiting = 0;
    std::uint64_t _waits_total = 0;
    bool _broken = false;
    queue _queues[2];
};

} // namespace skiff::runtime
