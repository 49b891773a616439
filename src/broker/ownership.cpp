#include "ownership.hpp"

#include "transactions.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/cluster/assignment.hpp>
#include <skiff/core/log.hpp>
#include <skiff/etcd/gateway_kv.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <algorithm>

namespace skiff::broker {

broker_shared::broker_shared() = default;
broker_shared::~broker_shared() = default;

namespace {
using namespace std::chrono_literals;
using part_key = std::pair<std::string, std::int32_t>;

std::int64_t steady_ns(runtime::time_point t) { return t.time_since_epoch().count(); }

cluster::member self_member(const broker_config& cfg) {
    cluster::member m;
    m.id = cfg.node_id;
    const auto first = cfg.effective_listeners().front();
    const std::string adv = first.advertised.empty() ? first.addr : first.advertised;
    const auto colon = adv.rfind(':');
    m.host = adv.substr(0, colon);
    if (m.host.size() >= 2 && m.host.front() == '[' && m.host.back() == ']') m.host = m.host.substr(1, m.host.size() - 2);
    m.port = static_cast<std::int32_t>(std::stoi(adv.substr(colon + 1)));
    m.rack = cfg.rack;
    if (!cfg.listeners.empty()) {
        for (const auto& l : cfg.listeners) {
            m.listeners[std::string(l.name())] = l.advertised.empty() ? l.addr : l.advertised;
        }
    }
    return m;
}

void wake(cluster_runtime& cr) {
    if (cr.wake_pending) return;
    cr.wake_pending = true;
    cr.wake.signal(1);
}

void publish_lease(shard& sh0) {
    auto& cr = *sh0.shared->cluster;
    sh0.shared->lease_valid_until_ns.store(steady_ns(cr.node->valid_until()), std::memory_order_release);
}

// ---- on the serving core ----

runtime::task<void> install_view(shard* sh, std::shared_ptr<const cluster::view> v) {
    sh->cview = std::move(v);
    co_return;
}

// Takes the claim and opens the partition's log at its epoch (partitions.cpp reads the claim).
runtime::task<void> install_claim(shard* sh, std::string topic, std::int32_t p, cluster::claim c) {
    sh->claims[part_key{topic, p}] = c;
    if (topic == cluster::groups_topic) {
        // A group slot: a coordinator of its own, with the slot's committed offsets loaded
        // before it answers anything (else consumers would fall back to auto.offset.reset).
        auto gc = std::make_unique<group_coordinator>(*sh->store, group_config_for(sh->cfg()));
        for (int attempt = 0;; ++attempt) {
            auto r = co_await gc->load([p](std::string_view g) { return cluster::group_slot(g) == p; });
            if (r) break;
            if (attempt >= 5) {
                log::error("group slot {}: cannot load committed offsets: {}; not coordinating it", p,
                           r.error().message);
                co_await gc->close();
                sh->retired_groups.push_back(std::move(gc));
                sh->claims.erase(part_key{topic, p});
                co_return;
            }
            (void)co_await runtime::sleep(std::chrono::milliseconds(200 << attempt));
        }
        const cluster::claim* still = claim_of(*sh, topic, p);
        if (!still || still->epoch != c.epoch) {
            co_await gc->close();
            sh->retired_groups.push_back(std::move(gc));
            co_return;
        }
        sh->slot_groups[p] = std::move(gc);
        // The slot's transactional ids: their states loaded before it answers, then what was
        // in flight at the previous owner is finished or aborted (txn/coordinator.hpp).
        auto ours = [sh, topic, p, epoch = c.epoch] {
            const cluster::claim* now = claim_of(*sh, topic, p);
            return now && now->epoch == epoch;
        };
        auto tc = co_await load_slot_txns(sh, p, ours);
        if (!tc) co_return; // the slot moved on, or the broker is stopping
        if (!ours() || sh->slot_txns.count(p)) {
            co_await tc->close();
            sh->retired_txns.push_back(std::move(tc));
            co_return;
        }
        tc->start();
        sh->slot_txns[p] = std::move(tc);
        co_return;
    }
    auto r = co_await local_partition(*sh, topic, p);
    if (!r) log::warn("partition {}/{}: restore after claiming it failed: {}; retried", topic, p, r.error().message);
}

struct handed_over {
    bool clean = false;
    std::int64_t next_offset = -1;
};

// Stops serving (topic, p) on this core: no more acknowledgements from its slot, then a flush
// and close. Clean when everything appended was committed.
runtime::task<handed_over> retire_claim(shard* sh, std::string topic, std::int32_t p) {
    handed_over out;
    auto key = part_key{topic, p};
    auto c = sh->claims.find(key);
    if (c != sh->claims.end()) {
        out.clean = c->second.previous.clean;
        out.next_offset = c->second.previous.next_offset;
        sh->claims.erase(c);
    }
    if (topic == cluster::groups_topic) {
        // Commits accepted before this are still written (close() waits for them).
        // The transactions first: a marker round waits for its groups' offsets to be applied.
        if (auto t = sh->slot_txns.find(p); t != sh->slot_txns.end()) {
            auto tc = std::move(t->second);
            sh->slot_txns.erase(t);
            co_await tc->close();
            sh->retired_txn_stats += tc->stats();
            sh->retired_txns.push_back(std::move(tc));
        }
        if (auto g = sh->slot_groups.find(p); g != sh->slot_groups.end()) {
            auto gc = std::move(g->second);
            sh->slot_groups.erase(g);
            co_await gc->close();
            sh->retired_groups.push_back(std::move(gc));
        }
        out.clean = true;
        co_return out;
    }
    auto it = sh->parts.find(key);
    if (it == sh->parts.end()) co_return out; // never opened here: nothing appended by us
    auto slot = std::move(it->second);
    sh->parts.erase(it);
    slot->released = true;
    co_await slot->log->close();
    // Clean when nothing is left unstored (the offsets may end past the high watermark after
    // a takeover gap; the next owner continues from next_offset either way).
    const auto st = slot->log->stats();
    out.next_offset = slot->log->next_offset();
    out.clean = !slot->log->fenced() && st.pending_bytes == 0 && st.buffered_bytes == 0 && st.inflight_flushes == 0;
    sh->retired.push_back(std::move(slot)); // requests inside it still hold a pointer
    co_return out;
}

unsigned serving_core(const shard& sh0, std::string_view topic, std::int32_t p) {
    if (topic == cluster::groups_topic) return static_cast<unsigned>(p) % sh0.shared->cores;
    return partition_owner(topic, p, sh0.shared->cores);
}

// ---- core 0 ----

runtime::task<void> claim_one(shard* sh0, std::string topic, std::int32_t p) {
    auto& cr = *sh0->shared->cluster;
    auto c = co_await cr.node->claim_partition(topic, p, sh0->stop.get_token());
    if (!c) {
        if (c.error().code != cluster::errc::lost && c.error().code != cluster::errc::cancelled) {
            log::warn("claiming {}/{}: {}", topic, p, c.error().message);
        }
        cr.moving.erase(part_key{topic, p});
        co_return;
    }
    cr.claimed[part_key{topic, p}] = *c;
    if (!c->previous.clean) {
        log::info("took over {}/{} at epoch {} after an unclean hand-over: offsets continue after a gap", topic, p,
                  c->epoch);
    }
    const unsigned core = serving_core(*sh0, topic, p);
    shard* target = sh0->shared->shards[core];
    const std::string* tp = &topic; // pointer captures: routing.hpp
    const cluster::claim* cp = &*c;
    co_await runtime::submit_to(core, [target, tp, p, cp] { return install_claim(target, *tp, p, *cp); });
    cr.moving.erase(part_key{topic, p});
    wake(cr); // the next wave, if the last pass was capped
}

runtime::task<void> release_one(shard* sh0, std::string topic, std::int32_t p, bool tell_etcd) {
    auto& cr = *sh0->shared->cluster;
    auto key = part_key{topic, p};
    auto it = cr.claimed.find(key);
    if (it == cr.claimed.end()) {
        cr.moving.erase(key);
        co_return;
    }
    const cluster::claim c = it->second;
    const unsigned core = serving_core(*sh0, topic, p);
    shard* target = sh0->shared->shards[core];
    const std::string* tp = &topic; // pointer capture: routing.hpp
    auto h = co_await runtime::submit_to(core, [target, tp, p] { return retire_claim(target, *tp, p); });
    cr.claimed.erase(key);
    if (tell_etcd && c.lease_generation == cr.node->lease_generation()) {
        auto r = co_await cr.node->release_partition(topic, p, c.epoch, h.clean, h.next_offset, {});
        if (!r) log::warn("releasing {}/{}: {}", topic, p, r.error().message);
    }
    cr.moving.erase(key);
}

template <typename Fn>
runtime::task<void> run_bounded(std::vector<Fn> jobs, std::size_t width) {
    for (std::size_t i = 0; i < jobs.size(); i += width) {
        std::vector<runtime::task<void>> batch;
        for (std::size_t j = i; j < std::min(jobs.size(), i + width); ++j) batch.push_back(jobs[j]());
        co_await runtime::when_all(std::move(batch));
    }
}

runtime::task<void> reload_catalog(shard* sh0, std::int64_t revision) {
    auto& cr = *sh0->shared->cluster;
    auto cat = co_await load_catalog(*sh0->store, sh0->cfg().ns, sh0->stop.get_token());
    if (!cat) {
        log::warn("reloading the topic catalog: {}", cat.error().message);
        co_return;
    }
    auto snap = std::make_shared<catalog>(std::move(*cat));
    snap->version = sh0->cat->version + 1;
    cr.catalog_revision = revision;
    co_await install_catalog(*sh0, std::move(snap));
}

// What this broker should claim and release now, by its view: partitions and group slots
// whose preferred owner differs from where they are, leaving out those already in motion.
// The pass starts these moves; the skiff_cluster_unsettled gauge counts them.
struct moves {
    std::vector<part_key> to_claim, to_release;
};
moves plan_moves(const shard& sh0, const cluster_runtime& cr, const cluster::view& v) {
    const auto live = v.live();
    const std::int32_t self = sh0.cfg().node_id;
    std::vector<part_key> to_claim, to_release;
    auto consider = [&](const std::string& topic, std::int32_t p, std::int32_t desired) {
        part_key k{topic, p};
        if (cr.moving.count(k)) return;
        const cluster::owner* o = v.owner_of(topic, p);
        const bool mine = cr.claimed.count(k) > 0;
        if (!o && !mine && desired == self) to_claim.push_back(k);
        if (mine && desired != self && desired >= 0) to_release.push_back(k);
        // Ours in our records but someone else's in etcd: our key is gone (the view may lag
        // the lease by a moment; the generation check above handles real losses).
        if (mine && o && o->broker != self) to_release.push_back(k);
    };
    for (auto& [name, t] : sh0.cat->topics) {
        for (std::int32_t p = 0; p < t.partitions; ++p) consider(name, p, v.preferred_owner(name, p, live));
    }
    for (std::int32_t s = 0; s < cluster::group_slots; ++s) {
        consider(std::string(cluster::groups_topic), s,
                 cluster::preferred_coordinator("slot-" + std::to_string(s), live));
    }
    // Partitions of deleted topics we still hold: hand them back (apply_catalog closed them).
    for (auto& [k, c] : cr.claimed) {
        if (cr.moving.count(k) || k.first == cluster::groups_topic) continue;
        const topic_info* t = sh0.cat->find(k.first);
        if (!t || k.second >= t->partitions) to_release.push_back(k);
    }
    std::sort(to_release.begin(), to_release.end());
    to_release.erase(std::unique(to_release.begin(), to_release.end()), to_release.end());
    return {std::move(to_claim), std::move(to_release)};
}

// One pass: view to the cores, lease generation, catalog, then claims and releases.
runtime::task<void> reconcile(shard* sh0) {
    auto& cr = *sh0->shared->cluster;
    auto& node = *cr.node;
    publish_lease(*sh0);
    auto v = node.current();
    if (v != cr.published) {
        cr.published = v;
        for (unsigned c = 0; c < sh0->shared->cores; ++c) {
            shard* target = sh0->shared->shards[c];
            const std::shared_ptr<const cluster::view>* vp = &v; // pointer capture: routing.hpp
            co_await runtime::submit_to(c, [target, vp] { return install_view(target, *vp); });
        }
    }
    // A new lease: every claim of the old one is void (its keys expired with it; another
    // broker may own those partitions now). Close them without telling etcd.
    if (node.lease_generation() != cr.generation) {
        std::vector<part_key> stale;
        for (auto& [k, c] : cr.claimed) {
            if (c.lease_generation != node.lease_generation() && !cr.moving.count(k)) stale.push_back(k);
        }
        for (auto& k : stale) {
            cr.moving.insert(k);
            co_await release_one(sh0, k.first, k.second, false);
        }
        cr.generation = node.lease_generation();
    }
    if (node.lease_id() == 0) {
        // Lost and not yet rejoined: stop serving everything we hold.
        std::vector<part_key> all;
        for (auto& [k, _] : cr.claimed) {
            if (!cr.moving.count(k)) all.push_back(k);
        }
        for (auto& k : all) {
            cr.moving.insert(k);
            co_await release_one(sh0, k.first, k.second, false);
        }
        co_return;
    }
    if (v->catalog_revision != cr.catalog_revision) co_await reload_catalog(sh0, v->catalog_revision);
    if (!node.lease_valid(runtime::reactor::local().now())) co_return;

    moves planned = plan_moves(*sh0, cr, *v);
    auto& to_claim = planned.to_claim;
    auto& to_release = planned.to_release;
    // At most this many etcd transactions and restores start per pass (a broker joining a
    // cluster of thousands of partitions claims them in waves; each claim wakes the next pass).
    constexpr std::size_t per_pass = 64;
    if (to_claim.size() > per_pass) to_claim.resize(per_pass);
    if (to_release.size() > per_pass) to_release.resize(per_pass);
    for (auto& k : to_claim) cr.moving.insert(k);
    for (auto& k : to_release) cr.moving.insert(k);
    for (auto& k : to_claim) (void)cr.work.spawn(claim_one(sh0, k.first, k.second));
    for (auto& k : to_release) (void)cr.work.spawn(release_one(sh0, k.first, k.second, true));
}

} // namespace

runtime::task<std::string> cluster_join(shard& sh0) {
    const auto& cfg = sh0.cfg();
    auto cr = std::make_unique<cluster_runtime>();
    etcd::gateway_config gc;
    gc.endpoints = cfg.etcd_endpoints;
    auto kv = etcd::gateway_kv::create(gc);
    if (!kv) co_return "--etcd: " + kv.error().message;
    cr->kv = std::move(*kv);
    cluster::node_config nc;
    nc.ns = cfg.ns;
    nc.self = self_member(cfg);
    nc.lease_ttl = cfg.lease_ttl;
    nc.join_wait = cfg.lease_ttl + 2s;
    cr->node = std::make_unique<cluster::node>(*cr->kv, nc);
    auto r = co_await cr->node->join(sh0.stop.get_token());
    if (!r) co_await cr->kv->close();
    if (!r) {
        if (r.error().code == cluster::errc::unavailable) {
            co_return "cannot reach etcd at " + fmt::format("{}", fmt::join(cfg.etcd_endpoints, ",")) + ": " +
                r.error().message;
        }
        co_return r.error().message;
    }
    cluster_runtime* raw = cr.get();
    cr->node->on_change([raw] { wake(*raw); });
    auto& reg = metrics::registry::local();
    auto* n = raw->node.get();
    cr->registrations.push_back(reg.gauge_fn("skiff_cluster_members", "Live brokers in this broker's view.", {},
                                             [n] { return static_cast<std::int64_t>(n->current()->members.size()); }));
    cr->registrations.push_back(reg.gauge_fn("skiff_cluster_owned", "Partitions and group slots this broker owns.", {},
                                             [raw] { return static_cast<std::int64_t>(raw->claimed.size()); }));
    cr->registrations.push_back(reg.gauge_fn(
        "skiff_cluster_lease_valid_ms", "How much longer this broker's etcd lease is proven alive (0: not at all).", {},
        [n] {
            const auto left = n->valid_until() - runtime::reactor::local().now();
            return std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(left).count());
        }));
    shard* sh0p = &sh0;
    cr->registrations.push_back(reg.gauge_fn(
        "skiff_cluster_unsettled",
        "Partitions and group slots this broker is claiming or releasing, or will by its view (0: placement "
        "settled here).",
        {}, [raw, sh0p] {
            const moves m = plan_moves(*sh0p, *raw, *raw->node->current());
            return static_cast<std::int64_t>(raw->moving.size() + m.to_claim.size() + m.to_release.size());
        }));
    cr->registrations.push_back(reg.counter_fn("skiff_cluster_claims_total", "Partitions and group slots claimed.", {},
                                               [n] { return n->counters().claims; }));
    cr->registrations.push_back(reg.counter_fn("skiff_cluster_releases_total", "Partitions and group slots released.",
                                               {}, [n] { return n->counters().releases; }));
    cr->registrations.push_back(reg.counter_fn("skiff_cluster_leases_lost_total",
                                               "Times this broker's etcd lease expired under it.", {},
                                               [n] { return n->counters().leases_lost; }));
    sh0.shared->cluster = std::move(cr);
    publish_lease(sh0);
    log::info("joined the cluster as broker {} ({} live)", cfg.node_id, raw->node->current()->members.size());
    co_return std::string();
}

runtime::task<void> cluster_loop(shard* sh0) {
    auto& cr = *sh0->shared->cluster;
    auto st = cr.loop_stop.get_token();
    cr.loop_running = true;
    (void)cr.work.spawn(cr.node->run(cr.work.stop_token()));
    while (!st.stop_requested()) {
        co_await reconcile(sh0);
        // Woken by a change, else a periodic pass (lease publication, retries of failed claims).
        runtime::deadline_scope scope(runtime::reactor::local().now() + 250ms, st);
        auto got = co_await cr.wake.acquire(1, scope.token());
        if (got) got->consume();
        cr.wake_pending = false;
    }
    cr.loop_done.signal(1);
}

runtime::task<void> cluster_leave(shard* sh0) {
    auto& cr = *sh0->shared->cluster;
    // The reconcile loop first (so nothing is claimed meanwhile); the node keeps the lease
    // alive while the partitions flush.
    cr.loop_stop.request_stop();
    if (cr.loop_running) {
        auto d = co_await cr.loop_done.acquire(1);
        if (d) d->consume();
    }
    // Claims and releases in flight finish first (a claim may be installing its partition).
    for (int i = 0; i < 1500 && !cr.moving.empty(); ++i) (void)co_await runtime::sleep(10ms);
    std::vector<part_key> all;
    for (auto& [k, _] : cr.claimed) all.push_back(k);
    for (auto& k : all) cr.moving.insert(k);
    std::vector<std::function<runtime::task<void>()>> jobs;
    for (auto& k : all) {
        jobs.push_back([sh0, k] { return release_one(sh0, k.first, k.second, true); });
    }
    co_await run_bounded(std::move(jobs), 32);
    co_await cr.work.close(); // the node's loops and claims in flight
    co_await cr.node->leave();
    co_await cr.kv->close();
    sh0->shared->lease_valid_until_ns.store(0, std::memory_order_release);
    // The etcd client belongs to this reactor: destroy it here, not with broker_shared.
    cr.registrations.clear();
    cr.node.reset();
    cr.kv.reset();
    log::info("left the cluster: {} partitions handed over", all.size());
}

bool may_acknowledge(const shard& sh, const partition_slot& slot) {
    if (!sh.cfg().clustered()) return true;
    if (slot.released) return false;
    const auto now = steady_ns(runtime::reactor::local().now());
    return now < sh.shared->lease_valid_until_ns.load(std::memory_order_acquire);
}

bool may_change_bucket(const shard& sh, const partition_slot& slot) {
    if (!sh.cfg().clustered()) return true;
    if (slot.released) return false;
    const auto margin = std::chrono::duration_cast<runtime::duration>(sh.cfg().lease_ttl) / 4;
    const auto now = steady_ns(runtime::reactor::local().now());
    return now + margin.count() < sh.shared->lease_valid_until_ns.load(std::memory_order_acquire);
}

group_coordinator& coordinator_for(shard& sh, std::string_view group) {
    if (!sh.cfg().clustered()) return *sh.groups;
    auto it = sh.slot_groups.find(cluster::group_slot(group));
    return it == sh.slot_groups.end() ? *sh.groups : *it->second;
}

txn::coordinator* txn_coordinator_for(shard& sh, std::string_view id) {
    if (!sh.cfg().clustered()) return sh.txns.get();
    auto it = sh.slot_txns.find(cluster::group_slot(id));
    return it == sh.slot_txns.end() ? nullptr : it->second.get();
}

kafka::error_code txn_coordinator_missing(const shard& sh, std::string_view id) {
    if (!sh.cfg().clustered()) return kerr::coordinator_not_available;
    return claim_of(sh, cluster::groups_topic, cluster::group_slot(id)) ? kerr::coordinator_load_in_progress
                                                                       : kerr::not_coordinator;
}

std::vector<txn::coordinator*> txn_coordinators_of(shard& sh) {
    if (!sh.cfg().clustered()) return sh.txns ? std::vector<txn::coordinator*>{sh.txns.get()} : std::vector<txn::coordinator*>{};
    std::vector<txn::coordinator*> out;
    for (auto& [_, c] : sh.slot_txns) out.push_back(c.get());
    return out;
}

txn::coordinator_stats txn_stats_of(shard& sh) {
    txn::coordinator_stats sum = sh.retired_txn_stats;
    sum.ids = 0;
    sum.open = 0; // gauges: only live coordinators count
    for (auto* c : txn_coordinators_of(sh)) sum += c->stats();
    return sum;
}

std::vector<group_coordinator*> coordinators_of(shard& sh) {
    if (!sh.cfg().clustered()) return {sh.groups.get()};
    std::vector<group_coordinator*> out;
    for (auto& [_, g] : sh.slot_groups) out.push_back(g.get());
    return out;
}

const cluster::claim* claim_of(const shard& sh, std::string_view topic, std::int32_t partition) {
    auto it = sh.claims.find(std::pair<std::string, std::int32_t>(std::string(topic), partition));
    return it == sh.claims.end() ? nullptr : &it->second;
}

} // namespace skiff::broker
