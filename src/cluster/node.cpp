#include <skiff/cluster/node.hpp>

#include <skiff/cluster/assignment.hpp>
#include <skiff/core/log.hpp>
#include <skiff/core/parse_int.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <algorithm>

namespace skiff::cluster {

namespace {
using namespace std::chrono_literals;

error from_etcd(const etcd::error& e) {
    switch (e.code) {
    case etcd::errc::cancelled: return {errc::cancelled, e.message};
    case etcd::errc::lease_not_found: return {errc::lease_lost, e.message};
    default: return {errc::unavailable, "etcd: " + e.message};
    }
}

runtime::time_point now() { return runtime::reactor::local().now(); }
} // namespace

// ---- view ----

std::vector<std::int32_t> view::live() const {
    std::vector<std::int32_t> ids;
    ids.reserve(members.size());
    for (auto& [id, _] : members) ids.push_back(id);
    return ids;
}

const owner* view::owner_of(std::string_view topic, std::int32_t partition) const {
    auto it = owners.find(std::pair<std::string, std::int32_t>(std::string(topic), partition));
    return it == owners.end() ? nullptr : &it->second;
}

const member* view::find_member(std::int32_t id) const {
    auto it = members.find(id);
    return it == members.end() ? nullptr : &it->second;
}

std::int32_t view::placement_of(std::string_view topic, std::int32_t partition) const {
    auto it = placements.find(std::pair<std::string, std::int32_t>(std::string(topic), partition));
    return it == placements.end() ? -1 : it->second;
}

std::int32_t view::preferred_owner(std::string_view topic, std::int32_t partition,
                                   std::span<const std::int32_t> live) const {
    const std::int32_t placed = placement_of(topic, partition);
    if (placed >= 0 && std::find(live.begin(), live.end(), placed) != live.end()) return placed;
    return cluster::preferred_owner(topic, partition, live);
}

// ---- node ----

node::node(etcd::kv& kv, node_config cfg) : _kv(kv), _cfg(std::move(cfg)), _keys(_cfg.ns) {}
node::~node() = default;

runtime::task<result<void, error>> node::register_self(std::stop_token st) {
    const auto deadline = now() + _cfg.join_wait;
    for (;;) {
        const auto sent = now();
        auto g = co_await _kv.grant(_cfg.lease_ttl, st);
        if (!g) co_return failure{from_etcd(g.error())};
        etcd::txn_request t;
        const std::string key = _keys.member(_cfg.self.id);
        t.compares.push_back(etcd::compare::absent(key));
        t.success.push_back(etcd::put_op{key, encode(_cfg.self), g->id});
        t.failure.push_back(etcd::range_op{key, false});
        auto r = co_await _kv.txn(std::move(t), st);
        if (r && r->succeeded) {
            _lease = g->id;
            ++_generation;
            _valid_until = sent + std::chrono::duration_cast<runtime::duration>(g->ttl) - _cfg.safety_margin;
            co_return ok();
        }
        (void)co_await _kv.revoke(g->id, {}); // never leave an unused lease behind
        if (!r) co_return failure{from_etcd(r.error())};
        // The id is live. A previous run of this broker (same address) holds it until its lease
        // expires: wait for that. Anyone else: refuse now.
        std::string holder = "another broker";
        bool same_address = false;
        if (!r->ranges.empty() && !r->ranges[0].kvs.empty()) {
            if (auto m = decode_member(r->ranges[0].kvs[0].value)) {
                holder = m->host + ":" + std::to_string(m->port);
                same_address = m->host == _cfg.self.host && m->port == _cfg.self.port;
            }
        }
        if (!same_address || now() >= deadline) {
            co_return failure{error(errc::already_live, "broker id " + std::to_string(_cfg.self.id) +
                                                            " is already registered in etcd by " + holder)};
        }
        log::info("broker id {} is still registered by an earlier run at {}; waiting for its lease to expire",
                  _cfg.self.id, holder);
        if (!co_await runtime::sleep(1s, st)) co_return failure{error(errc::cancelled, "cancelled")};
    }
}

runtime::task<result<void, error>> node::join(std::stop_token st) {
    auto r = co_await register_self(st);
    if (!r) co_return r;
    auto s = co_await resync(st);
    if (!s) co_return s;
    notify();
    co_return ok();
}

void node::apply(const etcd::key_value& kv, bool deleted, view& v) const {
    if (kv.key == _keys.catalog()) {
        v.catalog_revision = deleted ? 0 : kv.mod_revision;
        return;
    }
    if (auto id = _keys.parse_member(kv.key)) {
        if (deleted) {
            v.members.erase(*id);
        } else if (auto m = decode_member(kv.value)) {
            v.members[*id] = std::move(*m);
        } else {
            log::warn("etcd {}: {}; ignored", kv.key, m.error());
        }
        return;
    }
    if (auto p = _keys.parse_placement(kv.key)) {
        auto id = parse_unsigned<std::uint32_t>(kv.value);
        if (deleted) {
            v.placements.erase(*p);
        } else if (id && *id <= 0x7fffffffu) {
            v.placements[*p] = static_cast<std::int32_t>(*id);
        } else {
            log::warn("etcd {}: not a broker id; ignored", kv.key);
        }
        return;
    }
    if (auto p = _keys.parse_owner(kv.key)) {
        if (deleted) {
            v.owners.erase(*p);
        } else if (auto o = decode_owner(kv.value)) {
            v.owners[*p] = *o;
        } else {
            log::warn("etcd {}: {}; ignored", kv.key, o.error());
        }
    }
}

runtime::task<result<void, error>> node::resync(std::stop_token st) {
    auto r = co_await _kv.get_prefix(_keys.root, st);
    if (!r) co_return failure{from_etcd(r.error())};
    auto v = std::make_shared<view>();
    for (auto& kv : r->kvs) apply(kv, false, *v);
    v->revision = r->revision;
    publish(std::move(v));
    co_return ok();
}

void node::publish(std::shared_ptr<const view> v) { _view = std::move(v); }

void node::notify() {
    if (_on_change) _on_change();
}

runtime::task<void> node::keepalive_loop(std::stop_token st) {
    const auto interval = std::max<runtime::duration>(std::chrono::duration_cast<runtime::duration>(_cfg.lease_ttl) / 3,
                                                      std::chrono::milliseconds(500));
    while (!st.stop_requested()) {
        if (!co_await runtime::sleep(_lease ? interval : runtime::duration(500ms), st)) break;
        if (_lease == 0) {
            // The lease was lost: join again (same id; the old member key went with the lease).
            auto r = co_await register_self(st);
            if (r) {
                log::info("rejoined the cluster as broker {} with a new lease", _cfg.self.id);
                notify();
            } else if (r.error().code != errc::cancelled) {
                log::warn("rejoining the cluster: {}", r.error().message);
            }
            continue;
        }
        const auto sent = now();
        auto r = co_await _kv.keepalive(_lease, st);
        if (r) {
            ++_stats.keepalives;
            _valid_until = sent + std::chrono::duration_cast<runtime::duration>(*r) - _cfg.safety_margin;
            continue;
        }
        if (r.error().code == etcd::errc::cancelled) break;
        ++_stats.keepalive_failures;
        if (r.error().code == etcd::errc::lease_not_found) {
            ++_stats.leases_lost;
            log::error("broker {} lost its etcd lease: it owns nothing until it joins again", _cfg.self.id);
            _lease = 0;
            _valid_until = {};
            notify();
        } else {
            // Still ours until _valid_until; the next attempts may get through.
            log::warn("etcd keep-alive failed: {}", r.error().message);
        }
    }
}

runtime::task<void> node::watch_loop(std::stop_token st) {
    while (!st.stop_requested()) {
        auto w = _kv.watch(_keys.root, true, _view->revision + 1);
        for (;;) {
            auto batch = co_await w->next(st);
            if (!batch) {
                if (batch.error().code == etcd::errc::cancelled || st.stop_requested()) co_return;
                break;
            }
            auto v = std::make_shared<view>(*_view);
            for (auto& e : *batch) {
                apply(e.kv, e.type == etcd::event::kind::del, *v);
                v->revision = std::max(v->revision, e.kv.mod_revision);
            }
            publish(std::move(v));
            notify();
        }
        ++_stats.watch_restarts;
        // Compacted or broken: read everything again and watch from there.
        for (;;) {
            if (!co_await runtime::sleep(300ms, st)) co_return;
            auto r = co_await resync(st);
            if (r) {
                notify();
                break;
            }
        }
    }
}

runtime::task<void> node::run(std::stop_token st) {
    // Two loops; the view and the lease are independent.
    co_await runtime::when_all(keepalive_loop(st), watch_loop(st));
}

runtime::task<void> node::leave() {
    if (_lease == 0) co_return;
    auto r = co_await _kv.revoke(_lease, {});
    if (!r) log::warn("revoking the etcd lease: {}", r.error().message);
    _lease = 0;
    _valid_until = {};
}

runtime::task<result<claim, error>> node::claim_partition(std::string topic, std::int32_t partition,
                                                          std::stop_token st) {
    if (_lease == 0 || !lease_valid(now())) co_return failure{error(errc::lease_lost, "no valid lease")};
    const std::string okey = _keys.owner(topic, partition), skey = _keys.state(topic, partition);
    auto cur = co_await _kv.get(skey, st);
    if (!cur) co_return failure{from_etcd(cur.error())};
    takeover prev;
    prev.clean = true; // never owned: nothing can be in flight
    std::int64_t state_rev = 0;
    if (!cur->kvs.empty()) {
        auto t = decode_takeover(cur->kvs[0].value);
        if (!t) co_return failure{error(errc::bad_record, skey + ": " + t.error())};
        prev = *t;
        state_rev = cur->kvs[0].mod_revision;
    }
    claim c;
    c.epoch = prev.epoch + 1;
    c.previous = prev;
    c.lease_generation = _generation;
    takeover mine{c.epoch, false, prev.next_offset};
    etcd::txn_request t;
    t.compares.push_back(etcd::compare::absent(okey));
    t.compares.push_back(etcd::compare::mod_revision_is(skey, state_rev));
    t.success.push_back(etcd::put_op{okey, encode(owner{_cfg.self.id, c.epoch}), _lease});
    t.success.push_back(etcd::put_op{skey, encode(mine), 0});
    auto r = co_await _kv.txn(std::move(t), st);
    if (!r) co_return failure{from_etcd(r.error())};
    if (!r->succeeded) {
        ++_stats.claims_lost;
        co_return failure{error(errc::lost, okey + " is owned by another broker")};
    }
    ++_stats.claims;
    co_return c;
}

runtime::task<result<void, error>> node::release_partition(std::string topic, std::int32_t partition,
                                                           std::int32_t epoch, bool clean, std::int64_t next_offset,
                                                           std::stop_token st) {
    const std::string okey = _keys.owner(topic, partition), skey = _keys.state(topic, partition);
    etcd::txn_request t;
    t.compares.push_back(etcd::compare::value_is(okey, encode(owner{_cfg.self.id, epoch})));
    t.success.push_back(etcd::delete_op{okey, false});
    t.success.push_back(etcd::put_op{skey, encode(takeover{epoch, clean, next_offset}), 0});
    auto r = co_await _kv.txn(std::move(t), st);
    if (!r) co_return failure{from_etcd(r.error())};
    if (!r->succeeded) co_return failure{error(errc::lost, okey + " is no longer owned by this broker")};
    ++_stats.releases;
    co_return ok();
}

runtime::task<result<void, error>> node::lock(std::string key, std::chrono::milliseconds wait, std::stop_token st) {
    const auto deadline = now() + wait;
    auto pause = 20ms;
    for (;;) {
        if (_lease == 0) co_return failure{error(errc::lease_lost, "no valid lease")};
        etcd::txn_request t;
        t.compares.push_back(etcd::compare::absent(key));
        t.success.push_back(etcd::put_op{key, std::to_string(_cfg.self.id), _lease});
        auto r = co_await _kv.txn(std::move(t), st);
        if (!r) co_return failure{from_etcd(r.error())};
        if (r->succeeded) co_return ok();
        if (now() + pause > deadline) co_return failure{error(errc::unavailable, key + " is held by another broker")};
        if (!co_await runtime::sleep(pause, st)) co_return failure{error(errc::cancelled, "cancelled")};
        pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
}

runtime::task<void> node::unlock(std::string key) {
    etcd::txn_request t;
    t.compares.push_back(etcd::compare::value_is(key, std::to_string(_cfg.self.id)));
    t.success.push_back(etcd::delete_op{key, false});
    auto r = co_await _kv.txn(std::move(t), {});
    if (!r) log::warn("releasing {}: {} (it expires with this broker's lease)", key, r.error().message);
}

runtime::task<result<void, error>> node::bump_catalog(std::stop_token st) {
    auto r = co_await _kv.put(_keys.catalog(), std::to_string(_cfg.self.id), 0, st);
    if (!r) co_return failure{from_etcd(r.error())};
    co_return ok();
}

} // namespace skiff::cluster
