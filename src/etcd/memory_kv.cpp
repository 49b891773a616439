#include <skiff/etcd/memory_kv.hpp>

#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace skiff::etcd {

namespace {

failure<error> fail(errc c, std::string msg) { return failure{error{c, std::move(msg)}}; }

// A key or a prefix as a half-open range, with "" as "to the end" (etcd's range_end).
struct key_range {
    std::string begin;
    std::string end;
    bool single = true;

    static key_range of(std::string key, bool prefix) {
        if (!prefix) return {std::move(key), {}, true};
        auto end = prefix_end(key);
        return {std::move(key), std::move(end), false};
    }
    bool contains(const std::string& k) const {
        if (single) return k == begin;
        return k >= begin && (end.empty() || k < end);
    }
};

} // namespace

class memory_watcher;

struct memory_kv::client_state {
    bool unavailable = false;
    std::vector<memory_watcher*> watchers;
};

class memory_store::impl {
public:
    struct entry {
        std::string value;
        std::int64_t create_revision = 0;
        std::int64_t mod_revision = 0;
        std::int64_t version = 0;
        std::int64_t lease = 0;
    };
    struct lease_state {
        std::chrono::seconds ttl{0};
        runtime::time_point deadline{};
        std::set<std::string> keys;
    };

    explicit impl(std::chrono::seconds min_ttl) : _min_ttl(min_ttl) {}

    // Every operation starts here: leases whose deadline passed are gone before anything is
    // read or written, whether or not the expiry timer has run yet.
    void reap_expired() {
        const auto now = runtime::reactor::local().now();
        std::vector<std::int64_t> due;
        for (const auto& [id, l] : _leases)
            if (l.deadline <= now) due.push_back(id);
        for (auto id : due) end_lease(id);
        rearm();
    }

    range_result range(const key_range& r) const {
        range_result out;
        out.revision = _revision;
        for (auto it = _keys.lower_bound(r.begin); it != _keys.end() && r.contains(it->first); ++it) {
            out.kvs.push_back(to_kv(it->first, it->second));
        }
        return out;
    }

    bool holds(const compare& c) const {
        auto it = _keys.find(c.key);
        if (it == _keys.end() && c.what == compare::target::value) return false; // as etcd
        static const entry absent{};
        const entry& e = it == _keys.end() ? absent : it->second;
        int cmp = 0;
        auto three_way = [](auto a, auto b) { return a < b ? -1 : (a > b ? 1 : 0); };
        switch (c.what) {
        case compare::target::version: cmp = three_way(e.version, c.number); break;
        case compare::target::create_revision: cmp = three_way(e.create_revision, c.number); break;
        case compare::target::mod_revision: cmp = three_way(e.mod_revision, c.number); break;
        case compare::target::lease: cmp = three_way(e.lease, c.number); break;
        case compare::target::value: cmp = e.value.compare(c.value) < 0 ? -1 : (e.value == c.value ? 0 : 1); break;
        }
        switch (c.how) {
        case compare::op::equal: return cmp == 0;
        case compare::op::not_equal: return cmp != 0;
        case compare::op::greater: return cmp > 0;
        case compare::op::less: return cmp < 0;
        }
        return false;
    }

    // Runs one branch as one write: all its writes share the next revision, which is only
    // taken when something changed (etcd does not move the revision for a no-op delete).
    result<txn_result, error> apply(const std::vector<txn_op>& ops, bool succeeded) {
        std::set<std::string> put_keys;
        for (const auto& op : ops) {
            if (const auto* p = std::get_if<put_op>(&op)) {
                if (!put_keys.insert(p->key).second) {
                    return fail(errc::invalid_argument, "duplicate key given in txn request");
                }
                if (p->lease != 0 && !_leases.contains(p->lease)) {
                    return fail(errc::lease_not_found, fmt::format("lease {:x} not found", p->lease));
                }
            }
        }
        txn_result out;
        out.succeeded = succeeded;
        const std::int64_t rev = _revision + 1;
        std::vector<event> events;
        for (const auto& op : ops) {
            if (const auto* p = std::get_if<put_op>(&op)) {
                write(p->key, p->value, p->lease, rev, events);
            } else if (const auto* d = std::get_if<delete_op>(&op)) {
                erase_range(key_range::of(d->key, d->prefix), rev, events);
            } else {
                const auto& r = std::get<range_op>(op);
                out.ranges.push_back(range(key_range::of(r.key, r.prefix)));
            }
        }
        commit(std::move(events));
        out.revision = _revision;
        for (auto& r : out.ranges) r.revision = _revision;
        return out;
    }

    lease_grant grant(std::chrono::seconds ttl) {
        const auto t = std::max(ttl, _min_ttl);
        const auto id = _next_lease++;
        _leases[id] = lease_state{t, runtime::reactor::local().now() + t, {}};
        rearm();
        return {id, t};
    }

    std::optional<std::chrono::seconds> keepalive(std::int64_t id) {
        auto it = _leases.find(id);
        if (it == _leases.end()) return std::nullopt;
        it->second.deadline = runtime::reactor::local().now() + it->second.ttl;
        rearm();
        return it->second.ttl;
    }

    bool end_lease(std::int64_t id) {
        auto it = _leases.find(id);
        if (it == _leases.end()) return false;
        const auto keys = std::move(it->second.keys);
        _leases.erase(it);
        std::vector<event> events;
        for (const auto& k : keys) erase_range(key_range::of(k, false), _revision + 1, events);
        commit(std::move(events));
        return true;
    }

    void compact(std::int64_t rev) {
        _compacted = std::max(_compacted, rev);
        while (!_history.empty() && _history.front().kv.mod_revision < _compacted) _history.pop_front();
    }

    std::int64_t revision() const noexcept { return _revision; }
    std::int64_t compacted() const noexcept { return _compacted; }
    std::size_t lease_count() const noexcept { return _leases.size(); }
    const std::deque<event>& history() const noexcept { return _history; }

    void attach(memory_watcher* w) { _watchers.push_back(w); }
    void detach(memory_watcher* w) { std::erase(_watchers, w); }

private:
    static key_value to_kv(const std::string& k, const entry& e) {
        return {k, e.value, e.create_revision, e.mod_revision, e.version, e.lease};
    }

    void write(const std::string& key, const std::string& value, std::int64_t lease, std::int64_t rev,
               std::vector<event>& events) {
        auto [it, fresh] = _keys.try_emplace(key);
        entry& e = it->second;
        if (fresh) e.create_revision = rev;
        if (e.lease != 0 && e.lease != lease) {
            if (auto l = _leases.find(e.lease); l != _leases.end()) l->second.keys.erase(key);
        }
        if (lease != 0) _leases[lease].keys.insert(key);
        e.value = value;
        e.mod_revision = rev;
        ++e.version;
        e.lease = lease;
        events.push_back({event::kind::put, to_kv(key, e)});
    }

    void erase_range(const key_range& r, std::int64_t rev, std::vector<event>& events) {
        auto it = _keys.lower_bound(r.begin);
        while (it != _keys.end() && r.contains(it->first)) {
            if (it->second.lease != 0) {
                if (auto l = _leases.find(it->second.lease); l != _leases.end()) l->second.keys.erase(it->first);
            }
            event ev;
            ev.type = event::kind::del;
            ev.kv.key = it->first;
            ev.kv.mod_revision = rev;
            events.push_back(std::move(ev));
            it = _keys.erase(it);
        }
    }

    void commit(std::vector<event> events);
    void rearm();

    std::map<std::string, entry> _keys;
    std::map<std::int64_t, lease_state> _leases;
    std::int64_t _revision = 1;
    std::int64_t _compacted = 0;
    // Every event since the compaction point, in revision order, for watches from the past.
    std::deque<event> _history;
    std::vector<memory_watcher*> _watchers;
    std::chrono::seconds _min_ttl;
    // Random-looking ids like etcd's, so nothing relies on them being small.
    std::int64_t _next_lease = 0x694d7a1c00000001;
    // Fires at the earliest lease deadline so expiry reaches watchers without any call.
    runtime::timer _expiry{[this] { reap_expired(); }};
};

class memory_watcher final : public watcher {
public:
    memory_watcher(std::shared_ptr<memory_store> store, std::shared_ptr<memory_kv::client_state> client,
                   key_range range, std::int64_t start)
        : _store(std::move(store)), _client(std::move(client)), _range(std::move(range)) {
        auto& s = _store->internals();
        s.reap_expired();
        _client->watchers.push_back(this);
        if (_client->unavailable) {
            _failed = error{errc::unavailable, "etcd is unavailable (injected)"};
            return;
        }
        if (start <= 0) start = s.revision() + 1;
        if (start < s.compacted()) {
            _failed = error{errc::compacted, fmt::format("watch from revision {} but the store is compacted up "
                                                         "to {}", start, s.compacted())};
            return;
        }
        _start = start;
        deliver(s.history());
        s.attach(this);
        _attached = true;
    }
    ~memory_watcher() override {
        if (_attached) _store->internals().detach(this);
        std::erase(_client->watchers, this);
    }

    template <typename Events>
    void deliver(const Events& events) {
        if (_failed) return;
        bool any = false;
        for (const auto& ev : events) {
            if (ev.kv.mod_revision < _start || !_range.contains(ev.kv.key)) continue;
            _pending.push_back(ev);
            any = true;
        }
        if (any) wake();
    }

    void break_stream(error e) {
        if (_failed) return;
        _failed = std::move(e);
        if (_attached) {
            _store->internals().detach(this);
            _attached = false;
        }
        wake();
    }

    runtime::task<result<std::vector<event>, error>> next(std::stop_token st) override {
        for (;;) {
            if (!_pending.empty()) co_return std::exchange(_pending, {});
            if (_failed) co_return failure{*_failed};
            _signal = std::make_unique<runtime::oneshot<void>>();
            auto waiting = _signal->wait(st);
            auto woke = co_await waiting;
            _signal.reset();
            if (!woke) {
                break_stream(error{errc::cancelled, "watch cancelled"});
                co_return failure{*_failed};
            }
        }
    }

private:
    void wake() {
        if (_signal) _signal->set();
    }

    std::shared_ptr<memory_store> _store;
    std::shared_ptr<memory_kv::client_state> _client;
    key_range _range;
    std::int64_t _start = 0;
    bool _attached = false;
    std::vector<event> _pending;
    std::optional<error> _failed;
    std::unique_ptr<runtime::oneshot<void>> _signal;
};

void memory_store::impl::commit(std::vector<event> events) {
    if (events.empty()) return;
    ++_revision;
    for (const auto& ev : events) _history.push_back(ev);
    // A watcher's deliver() only buffers and schedules: the list cannot change under us.
    for (auto* w : _watchers) w->deliver(events);
}

void memory_store::impl::rearm() {
    if (_leases.empty()) {
        _expiry.cancel();
        return;
    }
    auto earliest = _leases.begin()->second.deadline;
    for (const auto& [id, l] : _leases) earliest = std::min(earliest, l.deadline);
    _expiry.arm(earliest);
}

// ---- memory_store ------------------------------------------------------------------------

memory_store::memory_store(std::chrono::seconds min_ttl) : _impl(std::make_unique<impl>(min_ttl)) {}
memory_store::~memory_store() = default;

std::shared_ptr<memory_store> memory_store::create(std::chrono::seconds min_ttl) {
    return std::shared_ptr<memory_store>(new memory_store(min_ttl));
}

std::int64_t memory_store::revision() const noexcept { return _impl->revision(); }
void memory_store::compact(std::int64_t rev) { _impl->compact(rev); }
bool memory_store::expire_lease(std::int64_t id) {
    _impl->reap_expired();
    return _impl->end_lease(id);
}
std::size_t memory_store::lease_count() {
    _impl->reap_expired();
    return _impl->lease_count();
}

// ---- memory_kv ---------------------------------------------------------------------------

namespace {
// The checks every call makes first, in etcd's order: the caller's token, then the link.
std::optional<error> refuse(const memory_kv::client_state& c, const std::stop_token& st) {
    if (st.stop_requested()) return error{errc::cancelled, "etcd request cancelled"};
    if (c.unavailable) return error{errc::unavailable, "etcd is unavailable (injected)"};
    return std::nullopt;
}
} // namespace

memory_kv::memory_kv(std::shared_ptr<memory_store> store)
    : _store(std::move(store)), _state(std::make_shared<client_state>()) {}
memory_kv::~memory_kv() = default;

void memory_kv::set_unavailable(bool down) {
    _state->unavailable = down;
    if (!down) return;
    for (auto* w : std::vector<memory_watcher*>(_state->watchers)) {
        w->break_stream(error{errc::unavailable, "etcd is unavailable (injected): the watch stream broke"});
    }
}

runtime::task<result<range_result, error>> memory_kv::get(std::string key, std::stop_token st) {
    if (auto e = refuse(*_state, st)) co_return failure{std::move(*e)};
    auto& s = _store->internals();
    s.reap_expired();
    co_return s.range(key_range::of(std::move(key), false));
}

runtime::task<result<range_result, error>> memory_kv::get_prefix(std::string prefix, std::stop_token st) {
    if (auto e = refuse(*_state, st)) co_return failure{std::move(*e)};
    auto& s = _store->internals();
    s.reap_expired();
    co_return s.range(key_range::of(std::move(prefix), true));
}

runtime::task<result<std::int64_t, error>> memory_kv::put(std::string key, std::string value, std::int64_t lease,
                                                          std::stop_token st) {
    if (auto e = refuse(*_state, st)) co_return failure{std::move(*e)};
    auto& s = _store->internals();
    s.reap_expired();
    auto r = s.apply({put_op{std::move(key), std::move(value), lease}}, true);
    if (!r) co_return failure{std::move(r).error()};
    co_return r->revision;
}

runtime::task<result<std::int64_t, error>> memory_kv::del(std::string key, std::stop_token st) {
    if (auto e = refuse(*_state, st)) co_return failure{std::move(*e)};
    auto& s = _store->internals();
    s.reap_expired();
    auto r = s.apply({delete_op{std::move(key), false}}, true);
    if (!r) co_return failure{std::move(r).error()};
    co_return r->revision;
}

runtime::task<result<txn_result, error>> memory_kv::txn(txn_request req, std::stop_token st) {
    if (auto e = refuse(*_state, st)) co_return failure{std::move(*e)};
    auto& s = _store->internals();
    s.reap_expired();
    const bool ok = std::all_of(req.compares.begin(), req.compares.end(), [&s](const compare& c) { return s.holds(c); });
    co_return s.apply(ok ? req.success : req.failure, ok);
}

runtime::task<result<lease_grant, error>> memory_kv::grant(std::chrono::seconds ttl, std::stop_token st) {
    if (auto e = refuse(*_state, st)) co_return failure{std::move(*e)};
    auto& s = _store->internals();
    s.reap_expired();
    co_return s.grant(ttl);
}

runtime::task<result<std::chrono::seconds, error>> memory_kv::keepalive(std::int64_t lease, std::stop_token st) {
    if (auto e = refuse(*_state, st)) co_return failure{std::move(*e)};
    auto& s = _store->internals();
    s.reap_expired();
    auto ttl = s.keepalive(lease);
    if (!ttl) co_return fail(errc::lease_not_found, fmt::format("lease {:x} not found", lease));
    co_return *ttl;
}

runtime::task<result<void, error>> memory_kv::revoke(std::int64_t lease, std::stop_token st) {
    if (auto e = refuse(*_state, st)) co_return failure{std::move(*e)};
    auto& s = _store->internals();
    s.reap_expired();
    if (!s.end_lease(lease)) co_return fail(errc::lease_not_found, fmt::format("lease {:x} not found", lease));
    co_return ok();
}

std::unique_ptr<watcher> memory_kv::watch(std::string key, bool prefix, std::int64_t start_revision) {
    return std::make_unique<memory_watcher>(_store, _state, key_range::of(std::move(key), prefix), start_revision);
}

} // namespace skiff::etcd
