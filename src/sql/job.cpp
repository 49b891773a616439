#include "job.hpp"

namespace skiff::sql {

bool job::push(event e) {
    std::unique_lock lock(_m);
    if (!e.terminal())
        _space.wait(lock, [&] { return _q.size() < capacity || _abandoned || _reason.load() != 0; });
    if (_abandoned) return false;
    _q.push_back(std::move(e));
    auto h = std::exchange(_waiter, {});
    lock.unlock();
    if (h) home->post([h] { h.resume(); });
    return true;
}

bool job::next_awaiter::await_ready() {
    std::lock_guard lock(j->_m);
    return !j->_q.empty();
}

bool job::next_awaiter::await_suspend(std::coroutine_handle<> h) {
    std::lock_guard lock(j->_m);
    if (!j->_q.empty()) return false;
    j->_waiter = h;
    return true;
}

event job::next_awaiter::await_resume() {
    std::lock_guard lock(j->_m);
    auto e = std::move(j->_q.front());
    j->_q.pop_front();
    j->_space.notify_all();
    return e;
}

void job::abandon() {
    {
        std::lock_guard lock(_m);
        _abandoned = true;
        _q.clear();
        _waiter = {};
    }
    _space.notify_all();
    cancel(cancel_reason::user);
}

void job::cancel(cancel_reason r) {
    int expected = 0;
    _reason.compare_exchange_strong(expected, static_cast<int>(r));
    {
        std::lock_guard lock(_m);
        if (_db) sqlite3_interrupt(_db);
        // The scan belongs to the worker's reactor: stop it there, never from this thread
        // (README, cross-core work).
        if (_worker) _worker->post([self = shared_from_this()] { self->_scan_stop.request_stop(); });
    }
    _space.notify_all();
}

void job::attach(sqlite3* db, runtime::reactor* worker) {
    std::lock_guard lock(_m);
    _db = db;
    _worker = worker;
    // A cancel that came before the worker picked the job up still stops the scan.
    if (_reason.load() != 0) _scan_stop.request_stop();
}

void job::detach() {
    std::lock_guard lock(_m);
    _db = nullptr;
    _worker = nullptr;
}

pgwire::sql_error cancel_error(cancel_reason r) {
    switch (r) {
    case cancel_reason::timeout: return {"57014", "canceling statement due to statement timeout"};
    case cancel_reason::shutdown: return {"57P01", "terminating connection due to administrator command"};
    default: return {"57014", "canceling statement due to user request"};
    }
}

} // namespace skiff::sql
