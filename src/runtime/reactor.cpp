#include <skiff/core/log.hpp>
#include <skiff/runtime/reactor.hpp>

#include <liburing.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <sys/eventfd.h>
#include <unistd.h>

namespace skiff::runtime {

namespace {
thread_local reactor* t_local = nullptr;

struct probe_deleter {
    void operator()(io_uring_probe* p) const noexcept { io_uring_free_probe(p); }
};
} // namespace

// Reads the eventfd that post() and request_stop() write, so foreign threads can wake a
// loop sleeping in io_uring_enter. Re-armed after every completion (one read in flight).
struct reactor::wakeup_op final : io_op {
    reactor* r;
    std::uint64_t value = 0;
    explicit wakeup_op(reactor* owner) : r(owner) {}
    void prepare(io_uring_sqe* sqe) noexcept override {
        io_uring_prep_read(sqe, r->_event_fd, &value, sizeof(value), 0);
    }
    void complete(int, std::uint32_t) noexcept override {
        // Clear the flag before draining: a post() racing with the drain writes again.
        r->_wake_pending.store(false, std::memory_order_release);
        r->drain_posted();
        if (r->_event_fd >= 0) r->start(*this);
    }
};

reactor::reactor(unsigned core_id, reactor_config cfg)
    : _core(core_id),
      _clock(cfg.clk ? std::move(cfg.clk) : std::make_shared<steady_clock_source>()),
      _ring(std::make_unique<io_uring>()),
      _cq_limit(cfg.cq_entries) {}

result<std::unique_ptr<reactor>, std::string> reactor::create(unsigned core_id, reactor_config cfg) {
    const unsigned sq = cfg.sq_entries;
    const unsigned cq = std::max(cfg.cq_entries, sq * 2);
    cfg.cq_entries = cq;
    std::unique_ptr<reactor> r(new reactor(core_id, std::move(cfg)));

    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = cq;
    int rc = io_uring_queue_init_params(sq, r->_ring.get(), &params);
    if (rc < 0) {
        r->_ring.reset(); // nothing to tear down
        return failure{fmt::format("io_uring is not available: io_uring_queue_init failed: {}",
                                   std::strerror(-rc))};
    }
    // The real CQ size may be rounded up; keep our cap at what we asked for.
    r->_cq_limit = std::min(cq, params.cq_entries);

    if (!(params.features & IORING_FEAT_EXT_ARG)) {
        return failure{std::string("io_uring is too old: IORING_FEAT_EXT_ARG (Linux 5.11) is required")};
    }
    if (!(params.features & IORING_FEAT_NODROP)) {
        return failure{std::string("io_uring is too old: IORING_FEAT_NODROP (Linux 5.5) is required")};
    }
    std::unique_ptr<io_uring_probe, probe_deleter> probe(io_uring_get_probe_ring(r->_ring.get()));
    if (!probe) return failure{std::string("io_uring is not available: cannot probe opcodes")};
    struct needed {
        int op;
        const char* name;
    };
    static constexpr needed ops[] = {
        {IORING_OP_POLL_ADD, "POLL_ADD"}, {IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL"},
        {IORING_OP_ACCEPT, "ACCEPT"},     {IORING_OP_CONNECT, "CONNECT"},
        {IORING_OP_RECV, "RECV"},         {IORING_OP_SEND, "SEND"},
        {IORING_OP_READ, "READ"},         {IORING_OP_WRITE, "WRITE"},
        {IORING_OP_OPENAT, "OPENAT"},     {IORING_OP_CLOSE, "CLOSE"},
        {IORING_OP_FSYNC, "FSYNC"},
    };
    for (const auto& n : ops) {
        if (!io_uring_opcode_supported(probe.get(), n.op)) {
            return failure{fmt::format("io_uring lacks the {} opcode this kernel would need (Linux 5.6+)",
                                       n.name)};
        }
    }

    r->_event_fd = ::eventfd(0, EFD_CLOEXEC);
    if (r->_event_fd < 0) {
        return failure{fmt::format("cannot create eventfd: {}", std::strerror(errno))};
    }
    r->_wakeup = std::make_unique<wakeup_op>(r.get());
    r->start(*r->_wakeup);
    return r;
}

reactor::~reactor() {
    if (_ring) {
        if (_event_fd >= 0) {
            ::close(_event_fd);
            _event_fd = -1;
        }
        // Pending kernel ops reference memory owned by coroutine frames that may already be
        // gone; tearing the ring down cancels them without delivering completions to us.
        io_uring_queue_exit(_ring.get());
    }
    if (t_local == this) t_local = nullptr;
}

reactor& reactor::local() noexcept {
    if (!t_local) {
        std::fprintf(stderr, "skiff: no reactor on this thread\n");
        std::abort();
    }
    return *t_local;
}

reactor* reactor::try_local() noexcept { return t_local; }

void reactor::run() {
    loop([this] { return stop_requested(); });
    _stop.store(false, std::memory_order_release);
}

void reactor::request_stop() noexcept {
    _stop.store(true, std::memory_order_release);
    std::uint64_t one = 1;
    if (_event_fd >= 0) (void)!::write(_event_fd, &one, sizeof(one));
}

void reactor::schedule(std::coroutine_handle<> h) { _ready.push_back(h); }

void reactor::post(std::function<void()> fn) {
    {
        std::lock_guard lk(_posted_mutex);
        _posted.push_back(std::move(fn));
    }
    if (!_wake_pending.exchange(true, std::memory_order_acq_rel)) {
        std::uint64_t one = 1;
        (void)!::write(_event_fd, &one, sizeof(one));
    }
}

void reactor::drain_posted() {
    std::vector<std::function<void()>> batch;
    {
        std::lock_guard lk(_posted_mutex);
        batch.swap(_posted);
    }
    for (auto& fn : batch) fn();
}

io_uring_sqe* reactor::get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(_ring.get());
    while (!sqe) {
        // SQ full: hand what we have to the kernel and retry.
        io_uring_submit(_ring.get());
        sqe = io_uring_get_sqe(_ring.get());
    }
    return sqe;
}

void reactor::prepare_now(io_op& op) {
    io_uring_sqe* sqe = get_sqe();
    op.prepare(sqe);
    // Prep helpers do not clear user_data: always set it.
    io_uring_sqe_set_data(sqe, &op);
    op._state = io_op::state::in_flight;
    ++_in_flight;
}

void reactor::start(io_op& op) {
    if (_in_flight >= _cq_limit) {
        op._state = io_op::state::parked;
        _parked.push_back(&op);
        return;
    }
    prepare_now(op);
}

void reactor::cancel(io_op& op) {
    switch (op._state) {
    case io_op::state::idle:
        return;
    case io_op::state::parked: {
        // Never reached the kernel: complete it ourselves, on a later turn via a zero-delay
        // path so the caller (often a stop_callback) is not re-entered.
        for (auto it = _parked.begin(); it != _parked.end(); ++it) {
            if (*it == &op) {
                _parked.erase(it);
                break;
            }
        }
        op._state = io_op::state::idle;
        op.complete(-ECANCELED, 0);
        return;
    }
    case io_op::state::in_flight: {
        io_uring_sqe* sqe = get_sqe();
        io_uring_prep_cancel64(sqe, reinterpret_cast<std::uint64_t>(&op), 0);
        io_uring_sqe_set_data(sqe, nullptr); // the cancel's own CQE is ignored
        ++_in_flight;
        return;
    }
    }
}

void reactor::arm(timer_node& t, time_point deadline) {
    if (t.armed()) disarm(t);
    t._deadline = deadline;
    t._heap_index = _timers.size();
    _timers.push_back(&t);
    heap_up(t._heap_index);
}

void reactor::disarm(timer_node& t) noexcept {
    if (!t.armed()) return;
    std::size_t i = t._heap_index;
    std::size_t last = _timers.size() - 1;
    if (i != last) heap_swap(i, last);
    _timers.pop_back();
    t._heap_index = timer_node::npos;
    if (i < _timers.size()) {
        heap_down(i);
        heap_up(i);
    }
}

void reactor::heap_swap(std::size_t a, std::size_t b) noexcept {
    std::swap(_timers[a], _timers[b]);
    _timers[a]->_heap_index = a;
    _timers[b]->_heap_index = b;
}

void reactor::heap_up(std::size_t i) noexcept {
    while (i > 0) {
        std::size_t p = (i - 1) / 2;
        if (_timers[p]->_deadline <= _timers[i]->_deadline) break;
        heap_swap(i, p);
        i = p;
    }
}

void reactor::heap_down(std::size_t i) noexcept {
    const std::size_t n = _timers.size();
    for (;;) {
        std::size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && _timers[l]->_deadline < _timers[m]->_deadline) m = l;
        if (r < n && _timers[r]->_deadline < _timers[m]->_deadline) m = r;
        if (m == i) return;
        heap_swap(i, m);
        i = m;
    }
}

void reactor::run_ready() {
    // Only what is ready now: coroutines scheduled while we run wait for the next turn, so
    // I/O and timers are never starved by a busy ready queue.
    std::size_t n = _ready.size();
    while (n-- > 0 && !_ready.empty()) {
        auto h = _ready.front();
        _ready.pop_front();
        h.resume();
    }
}

void reactor::fire_timers() {
    const time_point now = _clock->now();
    while (!_timers.empty() && _timers.front()->_deadline <= now) {
        timer_node* t = _timers.front();
        disarm(*t);
        t->fire();
    }
}

void reactor::wait_and_dispatch(bool block) {
    io_uring* ring = _ring.get();
    io_uring_cqe* cqe = nullptr;
    int rc;
    if (!block) {
        rc = io_uring_submit(ring);
    } else if (!_timers.empty() && !_clock->is_manual()) {
        auto delta = _timers.front()->_deadline - _clock->now();
        if (delta < duration::zero()) delta = duration::zero();
        __kernel_timespec ts{};
        ts.tv_sec = static_cast<long long>(delta.count() / 1'000'000'000);
        ts.tv_nsec = static_cast<long long>(delta.count() % 1'000'000'000);
        rc = io_uring_submit_and_wait_timeout(ring, &cqe, 1, &ts, nullptr);
    } else {
        rc = io_uring_submit_and_wait(ring, 1);
    }
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
        log::error("io_uring_enter failed on core {}: {}", _core, std::strerror(-rc));
    }
    // Dispatch one CQE at a time and mark it seen before the callback, which may submit
    // more work or even run a nested loop.
    unsigned handled = 0;
    while (io_uring_peek_cqe(ring, &cqe) == 0 && cqe) {
        auto* op = static_cast<io_op*>(io_uring_cqe_get_data(cqe));
        const int res = cqe->res;
        const std::uint32_t flags = cqe->flags;
        io_uring_cqe_seen(ring, cqe);
        if (!(flags & IORING_CQE_F_MORE)) --_in_flight;
        if (op) {
            if (!(flags & IORING_CQE_F_MORE)) op->_state = io_op::state::idle;
            op->complete(res, flags);
        }
        // Freed CQ room goes to parked operations first.
        while (!_parked.empty() && _in_flight < _cq_limit) {
            io_op* next = _parked.front();
            _parked.pop_front();
            prepare_now(*next);
        }
        if (++handled >= _cq_limit) break;
    }
}

void reactor::loop(const std::function<bool()>& done) {
    reactor* prev = t_local;
    t_local = this;
    while (!done()) {
        ++_turns;
        run_ready();
        fire_timers();
        if (done()) break;
        // With a manual clock, a due timer or a ready coroutine must not wait on the kernel.
        bool block = _ready.empty();
        if (block && !_timers.empty() && _timers.front()->_deadline <= _clock->now()) block = false;
        wait_and_dispatch(block);
    }
    // Leave prepared SQEs with the kernel so nothing sits unsubmitted across loop calls.
    io_uring_submit(_ring.get());
    t_local = prev;
}

} // namespace skiff::runtime
