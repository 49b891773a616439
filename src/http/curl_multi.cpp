// libcurl's multi interface driven by the reactor: curl_multi_socket_action on an external
// event loop, with io_uring one-shot POLL_ADDs as the readiness source.
//
// The rules this file keeps (see curl's docs/examples/ephiperfifo.c for the pattern):
//  - curl's callbacks (socket, timer, and the easy handle's data callbacks in transfer.cpp)
//    only record state. No libcurl call and no coroutine resumption ever happens inside them;
//    curl forbids re-entering the multi handle and a resumed coroutine could do anything.
//  - After every call into the multi handle returns, reconcile() turns the recorded wishes
//    into ring operations: arm a poll where curl wants events and none is armed, cancel a poll
//    whose events are stale (re-armed when its CQE arrives), free the state of sockets curl is
//    done with once the ring has let go of them.
//  - Each socket curl tells us about gets its own sock_state, which is also the poll's io_op
//    (its address is the SQE user_data). The fd number is only a lookup key while curl uses
//    the socket: when curl closes fd 7 and opens another socket that gets fd 7 again, the old
//    state (removed, its poll cancelled) and the new one never meet, so a late CQE of the old
//    poll can never be taken as readiness of the new socket. That is why no OPENSOCKET or
//    CLOSESOCKET callback is needed.
//  - A poll is one-shot: after its CQE we tell curl, then re-arm if curl still wants events.
#include "transfer.hpp"

#include <skiff/core/log.hpp>
#include <skiff/http/client.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <curl/curl.h>
#include <liburing.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <poll.h>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace skiff::http {

namespace {

// curl_global_init is not thread-safe and must run before any other curl call; every client
// constructor goes through here. Never paired with curl_global_cleanup: clients on other
// cores may outlive any one of them, and the process exit reclaims the rest.
void global_init_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        const CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (rc != CURLE_OK) {
            std::fprintf(stderr, "skiff: curl_global_init failed: %s\n", curl_easy_strerror(rc));
            std::abort();
        }
    });
}

[[noreturn]] void contract_violation(const char* what) {
    std::fprintf(stderr, "skiff: http::client misuse: %s\n", what);
    std::abort();
}

} // namespace

class client::impl {
public:
    explicit impl(client_config cfg);
    ~impl();

    runtime::task<result<response, transport_error>> send(request req, std::stop_token st);
    client_stats stats;

    struct sock_state;

private:
    struct transfer_awaiter;
    struct canceller;

    // curl callbacks: record only.
    static int on_socket(CURL* easy, curl_socket_t fd, int what, void* userp, void* socketp) noexcept;
    static int on_timer_change(CURLM* multi, long timeout_ms, void* userp) noexcept;
    void record_socket(curl_socket_t fd, int what, sock_state* known);

    // Entry points from the reactor.
    void on_timer();
    void on_poll(sock_state* s, int res);

    // Calls into curl, each followed by drain + reconcile.
    void socket_action(curl_socket_t fd, int ev_bitmask);
    void drain_finished();
    void reconcile();
    bool start(detail::transfer& t);
    void cancel(detail::transfer& t);

    void mark_dirty(sock_state* s);
    void destroy_state(sock_state* s);

    client_config _cfg;
    runtime::reactor* _reactor;
    CURLM* _multi = nullptr;
    runtime::timer _timer;

    // Sockets curl currently uses, by fd (a fallback for socketp before curl_multi_assign ran).
    std::unordered_map<curl_socket_t, sock_state*> _live;
    // Every state we own: live ones and removed ones still waiting for their poll's CQE.
    std::unordered_set<sock_state*> _all;
    // States whose wishes changed since the last reconcile().
    std::vector<sock_state*> _dirty;
    // Transfers added to the multi handle and not yet finished or cancelled.
    std::unordered_set<detail::transfer*> _transfers;

    bool _in_curl = false;     // inside a curl_multi_* call (so inside its callbacks' reach)
    bool _reconciling = false; // reconcile() is on the stack
    bool _closing = false;     // destructor running: callbacks ignore curl's last words
};

namespace {

// States whose client is gone while their poll is still with the kernel. They free
// themselves when the CQE arrives; whatever is left when the thread ends (the reactor was
// destroyed first and will never deliver it) is freed here, so nothing leaks.
struct orphanage {
    std::unordered_set<client::impl::sock_state*> states;
    ~orphanage();
};
orphanage& orphans() {
    thread_local orphanage o;
    return o;
}

} // namespace

// One socket curl asked us to watch. It is the io_op of that socket's one-shot poll.
struct client::impl::sock_state final : runtime::io_op {
    impl* owner; // null once orphaned by the client's destructor
    curl_socket_t fd;
    short wanted = 0;           // POLLIN/POLLOUT curl asked for last
    short armed = 0;            // events of the poll with the kernel
    bool in_flight = false;     // a poll (or its cancellation) is pending
    bool cancel_requested = false;
    bool removed = false;       // curl said CURL_POLL_REMOVE: free after the poll's CQE
    bool needs_assign = true;   // curl_multi_assign not done yet
    bool dirty = false;         // queued in _dirty

    sock_state(impl* o, curl_socket_t f) : owner(o), fd(f) {}

    void prepare(io_uring_sqe* sqe) noexcept override {
        io_uring_prep_poll_add(sqe, fd, static_cast<unsigned>(armed));
    }
    void complete(int res, std::uint32_t) noexcept override {
        if (!owner) {
            orphans().states.erase(this);
            delete this;
            return;
        }
        owner->on_poll(this, res);
    }
};

orphanage::~orphanage() {
    for (auto* s : states) delete s;
}

std::size_t detail::orphaned_sockets() noexcept { return orphans().states.size(); }

namespace {
struct in_curl_scope {
    bool& flag;
    explicit in_curl_scope(bool& f) : flag(f) { flag = true; }
    ~in_curl_scope() { flag = false; }
};
} // namespace

client::impl::impl(client_config cfg)
    : _cfg(std::move(cfg)), _reactor(&runtime::reactor::local()), _timer([this] { on_timer(); }) {
    global_init_once();
    _multi = curl_multi_init();
    if (!_multi) contract_violation("curl_multi_init failed (out of memory?)");
    curl_multi_setopt(_multi, CURLMOPT_SOCKETFUNCTION, &impl::on_socket);
    curl_multi_setopt(_multi, CURLMOPT_SOCKETDATA, static_cast<void*>(this));
    curl_multi_setopt(_multi, CURLMOPT_TIMERFUNCTION, &impl::on_timer_change);
    curl_multi_setopt(_multi, CURLMOPT_TIMERDATA, static_cast<void*>(this));
    curl_multi_setopt(_multi, CURLMOPT_MAXCONNECTS, _cfg.max_connects_cache);
    curl_multi_setopt(_multi, CURLMOPT_MAX_HOST_CONNECTIONS, _cfg.max_host_connections);
    curl_multi_setopt(_multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, _cfg.max_total_connections);
}

client::impl::~impl() {
#ifndef NDEBUG
    if (runtime::reactor::try_local() != _reactor) contract_violation("client destroyed off its reactor thread");
#endif
    if (!_transfers.empty()) {
        log::error("http client destroyed with {} requests in flight; every send() must finish or be "
                   "cancelled before the client goes away",
                   _transfers.size());
#ifndef NDEBUG
        contract_violation("client destroyed with requests in flight");
#else
        // Release builds degrade to cancelling them: their coroutines resume later and touch
        // only their own transfer (never this client).
        for (auto* t : std::vector<detail::transfer*>(_transfers.begin(), _transfers.end())) {
            curl_multi_remove_handle(_multi, t->easy());
            t->release_easy();
            t->cancelled_by_caller();
            _reactor->schedule(t->waiter);
        }
        _transfers.clear();
#endif
    }
    _closing = true;
    _timer.cancel();
    // Closes the pooled connections; the socket callbacks it triggers are ignored (_closing),
    // every state is handled below instead.
    curl_multi_cleanup(_multi);
    _multi = nullptr;
    for (auto* s : std::vector<sock_state*>(_all.begin(), _all.end())) {
        if (!s->in_flight) {
            delete s;
            continue;
        }
        // The kernel still holds the poll: the state must outlive its CQE. Orphan it first,
        // since cancelling a parked poll completes it (and frees it) synchronously.
        s->owner = nullptr;
        orphans().states.insert(s);
        if (!s->cancel_requested) {
            s->cancel_requested = true;
            _reactor->cancel(*s);
        }
    }
    _all.clear();
    _live.clear();
    _dirty.clear();
}

// ---- curl callbacks: record only -------------------------------------------------------

int client::impl::on_socket(CURL*, curl_socket_t fd, int what, void* userp, void* socketp) noexcept {
    auto* self = static_cast<impl*>(userp);
    if (self->_closing) return 0;
    try {
        self->record_socket(fd, what, static_cast<sock_state*>(socketp));
    } catch (...) {
        return -1; // out of memory: curl fails the transfers on this socket
    }
    return 0;
}

void client::impl::record_socket(curl_socket_t fd, int what, sock_state* s) {
    if (!s) {
        // Not assigned yet (curl told us about it earlier in this same multi call).
        auto it = _live.find(fd);
        if (it != _live.end()) s = it->second;
    }
    if (what == CURL_POLL_REMOVE) {
        if (!s) return;
        // curl forgets the socket (and our assignment) now and may close it right after we
        // return: detach the state from the fd number before anything else can reuse it.
        s->removed = true;
        s->wanted = 0;
        _live.erase(fd);
        mark_dirty(s);
        return;
    }
    if (!s) {
        auto owned = std::make_unique<sock_state>(this, fd);
        _all.insert(owned.get());
        _live[fd] = owned.get();
        s = owned.release();
    }
    s->wanted = static_cast<short>(((what & CURL_POLL_IN) ? POLLIN : 0) | ((what & CURL_POLL_OUT) ? POLLOUT : 0));
    mark_dirty(s);
}

int client::impl::on_timer_change(CURLM*, long timeout_ms, void* userp) noexcept {
    auto* self = static_cast<impl*>(userp);
    if (self->_closing) return 0;
    try {
        // -1: no timeout wanted. 0: "as soon as possible", i.e. the next loop turn; never
        // call curl from here even for 0 (that would re-enter the multi handle).
        if (timeout_ms < 0) self->_timer.cancel();
        else self->_timer.arm_after(std::chrono::milliseconds(timeout_ms));
    } catch (...) {
        return -1;
    }
    return 0;
}

void client::impl::mark_dirty(sock_state* s) {
    if (s->dirty) return;
    s->dirty = true;
    _dirty.push_back(s);
}

// ---- reactor side ------------------------------------------------------------------------

void client::impl::on_timer() { socket_action(CURL_SOCKET_TIMEOUT, 0); }

void client::impl::on_poll(sock_state* s, int res) {
    s->in_flight = false;
    s->cancel_requested = false;
    s->armed = 0;
    if (s->removed) {
        destroy_state(s);
        return;
    }
    // One-shot: whatever happens next, the socket needs a fresh poll if curl still wants one.
    mark_dirty(s);
    if (_in_curl || _reconciling) {
        // Only a cancelled parked poll completes synchronously (inside reconcile, which picks
        // up the re-arm); readiness is level-triggered, so a re-armed poll reports anything
        // we did not pass on.
        return;
    }
    if (res == -ECANCELED || res == 0) {
        // We cancelled it to change its events (or the cancel raced an unrelated re-arm).
        reconcile();
        return;
    }
    int ev = 0;
    if (res > 0) {
        if (res & (POLLIN | POLLHUP)) ev |= CURL_CSELECT_IN; // HUP: let curl read the EOF
        if (res & POLLOUT) ev |= CURL_CSELECT_OUT;
        if (res & POLLERR) ev |= CURL_CSELECT_ERR;
    } else {
        log::warn("http: poll on fd {} failed: {}", s->fd, std::strerror(-res));
        ev = CURL_CSELECT_ERR;
    }
    socket_action(s->fd, ev); // `s` may be removed (not freed) meanwhile: reconcile frees it
}

void client::impl::socket_action(curl_socket_t fd, int ev_bitmask) {
    int running = 0;
    CURLMcode mc;
    {
        in_curl_scope g(_in_curl);
        mc = curl_multi_socket_action(_multi, fd, ev_bitmask, &running);
    }
    if (mc != CURLM_OK) log::warn("http: curl_multi_socket_action failed: {}", curl_multi_strerror(mc));
    drain_finished();
    reconcile();
}

void client::impl::drain_finished() {
    for (;;) {
        CURLMsg* msg;
        int left = 0;
        {
            in_curl_scope g(_in_curl);
            msg = curl_multi_info_read(_multi, &left);
        }
        if (!msg) return;
        if (msg->msg != CURLMSG_DONE) continue;
        // The message dies with curl_multi_remove_handle: copy what we need first.
        CURL* easy = msg->easy_handle;
        const CURLcode code = msg->data.result;
        void* priv = nullptr;
        long status = 0;
        long connects = 0;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
        auto* t = static_cast<detail::transfer*>(priv);
        {
            in_curl_scope g(_in_curl);
            curl_multi_remove_handle(_multi, easy);
        }
        t->release_easy();
        _transfers.erase(t);
        --stats.in_flight;
        stats.connections_opened += static_cast<std::uint64_t>(std::max(0L, connects));
        if (code != CURLE_OK) ++stats.transport_errors;
        t->finished(code, status);
        // Resume on a later loop turn: we are between curl calls, and the awaiting code may
        // start or cancel other requests on this client.
        _reactor->schedule(t->waiter);
    }
}

void client::impl::reconcile() {
    if (_reconciling || _closing) return;
    _reconciling = true;
    while (!_dirty.empty()) {
        sock_state* s = _dirty.back();
        _dirty.pop_back();
        s->dirty = false;
        if (s->removed) {
            if (!s->in_flight) {
                destroy_state(s);
            } else if (!s->cancel_requested) {
                // The poll pins the socket's file in the kernel (a close() does not end it);
                // cancel it so curl's close takes effect, and free the state on its CQE.
                s->cancel_requested = true;
                _reactor->cancel(*s); // a parked poll completes (and frees `s`) right here
            }
            continue;
        }
        if (s->needs_assign) {
            // Outside curl's callback, as promised; speeds up later lookups for this socket.
            s->needs_assign = false;
            curl_multi_assign(_multi, s->fd, s);
        }
        if (s->in_flight) {
            if (s->armed != s->wanted && !s->cancel_requested) {
                s->cancel_requested = true;
                _reactor->cancel(*s); // re-armed with the new events from on_poll
            }
        } else if (s->wanted != 0) {
            s->armed = s->wanted;
            s->in_flight = true;
            _reactor->start(*s);
        }
    }
    _reconciling = false;
}

void client::impl::destroy_state(sock_state* s) {
    if (s->dirty) {
        std::erase(_dirty, s);
        s->dirty = false;
    }
    auto it = _live.find(s->fd);
    if (it != _live.end() && it->second == s) _live.erase(it);
    _all.erase(s);
    delete s;
}

// ---- transfers ---------------------------------------------------------------------------

bool client::impl::start(detail::transfer& t) {
    CURLMcode mc;
    {
        in_curl_scope g(_in_curl);
        mc = curl_multi_add_handle(_multi, t.easy());
    }
    if (mc != CURLM_OK) {
        ++stats.transport_errors;
        t.failed_to_start(transport_error{CURLE_FAILED_INIT,
                                          std::string("curl_multi_add_handle failed: ") + curl_multi_strerror(mc),
                                          false, false});
        return false;
    }
    _transfers.insert(&t);
    ++stats.in_flight;
    // add_handle only asks for a 0 ms timer (the transfer starts on the next turn), but the
    // rule is simple: after every multi call, reconcile.
    reconcile();
    return true;
}

void client::impl::cancel(detail::transfer& t) {
    if (t.done) return;
    // Stop callbacks run user code's request_stop(); user code never runs inside our curl
    // calls (completions are resumed through the ready queue), so this cannot happen unless
    // the token was signalled from another thread, which the contract forbids.
    if (_in_curl) contract_violation("stop_token signalled while the client is inside libcurl "
                                     "(from another thread?)");
    {
        in_curl_scope g(_in_curl);
        // Mid-transfer removal makes curl close the connection (it cannot be reused with a
        // half-sent request or half-read response); the socket callback reports REMOVE.
        curl_multi_remove_handle(_multi, t.easy());
    }
    t.release_easy();
    _transfers.erase(&t);
    --stats.in_flight;
    ++stats.cancelled;
    t.cancelled_by_caller();
    reconcile();
    _reactor->schedule(t.waiter);
}

struct client::impl::canceller {
    impl* self;
    detail::transfer* t;
    void operator()() noexcept {
        if (t->done) return; // finished first: the result stands, nothing to undo
        self->cancel(*t);
    }
};

struct client::impl::transfer_awaiter {
    impl* self;
    detail::transfer* t;
    std::stop_token st;
    std::optional<std::stop_callback<canceller>> on_stop;

    bool await_ready() const noexcept { return false; }
    bool await_suspend(std::coroutine_handle<> h) {
        t->waiter = h;
        if (!self->start(*t)) return false; // the error is in `t`
        // Registered after start(): a stop arriving from here on finds the handle in curl.
        if (st.stop_possible()) on_stop.emplace(st, canceller{self, t});
        return true;
    }
    void await_resume() noexcept { on_stop.reset(); }
};

runtime::task<result<response, transport_error>> client::impl::send(request req, std::stop_token st) {
#ifndef NDEBUG
    if (runtime::reactor::try_local() != _reactor) contract_violation("send() called off the client's reactor thread");
#endif
    ++stats.requests;
    if (st.stop_requested()) {
        ++stats.cancelled;
        co_return failure{transport_error{CURLE_ABORTED_BY_CALLBACK, "request cancelled", true, false}};
    }
    detail::transfer t(std::move(req), _cfg.max_response_bytes);
    if (auto err = t.setup(_cfg)) {
        ++stats.transport_errors;
        co_return failure{std::move(*err)};
    }
    transfer_awaiter aw{this, &t, std::move(st), std::nullopt};
    co_await aw;
    // From here on only `t` is touched: the client may be gone (release builds, contract
    // broken) and statistics were settled before we were scheduled.
    co_return t.take_result();
}

// ---- public API --------------------------------------------------------------------------

client::client(client_config cfg) : _impl(std::make_unique<impl>(std::move(cfg))) {}
client::~client() = default;

runtime::task<result<response, transport_error>> client::send(request req, std::stop_token st) {
    return _impl->send(std::move(req), std::move(st));
}

const client_stats& client::stats() const noexcept { return _impl->stats; }

} // namespace skiff::http
