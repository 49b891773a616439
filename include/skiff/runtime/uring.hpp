// co_await one io_uring operation: `int res = co_await uring_op(prep, stop_token)`.
//
// `prep` fills the SQE (never user_data: the reactor sets that). The result is the CQE's
// res: >= 0 on success, -errno on failure, -ECANCELED when the stop_token fired and the
// kernel acknowledged the cancellation. A cancelled operation resumes only after its own
// CQE arrives, so buffers it references stay valid until the kernel lets go of them.
// Must be awaited on the reactor's thread; the stop_token must be signalled on that thread.
#pragma once

#include <skiff/runtime/reactor.hpp>

#include <cerrno>
#include <coroutine>
#include <optional>
#include <stop_token>
#include <utility>

namespace skiff::runtime {

template <typename Prep>
class uring_awaitable final : public io_op {
public:
    uring_awaitable(Prep prep, std::stop_token st) : _prep(std::move(prep)), _st(std::move(st)) {}
    uring_awaitable(const uring_awaitable&) = delete;
    uring_awaitable& operator=(const uring_awaitable&) = delete;

    bool await_ready() noexcept {
        if (_st.stop_requested()) {
            _res = -ECANCELED;
            return true;
        }
        return false;
    }
    void await_suspend(std::coroutine_handle<> h) {
        _h = h;
        _reactor = &reactor::local();
        _reactor->start(*this);
        if (_st.stop_possible()) _cb.emplace(_st, canceller{this});
    }
    int await_resume() noexcept { return _res; }

    void prepare(io_uring_sqe* sqe) noexcept override { _prep(sqe); }
    void complete(int res, std::uint32_t) noexcept override {
        _res = res;
        _completed = true;
        if (_in_cancel) return; // resumed by the canceller once it returns
        _cb.reset();
        _h.resume();
    }

private:
    struct canceller {
        uring_awaitable* self;
        void operator()() noexcept {
            // May run inside our own await_suspend (token already stopped) or from another
            // coroutine on this thread. A parked op completes synchronously inside cancel():
            // defer its resumption to the loop so the stop_callback is not destroyed while
            // it runs.
            self->_in_cancel = true;
            self->_reactor->cancel(*self);
            self->_in_cancel = false;
            if (self->_completed) self->_reactor->schedule(self->_h);
        }
    };

    Prep _prep;
    std::stop_token _st;
    std::optional<std::stop_callback<canceller>> _cb;
    std::coroutine_handle<> _h;
    reactor* _reactor = nullptr;
    int _res = 0;
    bool _completed = false;
    bool _in_cancel = false;
};

template <typename Prep>
uring_awaitable<Prep> uring_op(Prep prep, std::stop_token st = {}) {
    return uring_awaitable<Prep>(std::move(prep), std::move(st));
}

} // namespace skiff::runtime
