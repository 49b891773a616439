#include "coordinator.hpp"

#include <skiff/core/log.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <algorithm>
#include <limits>

namespace skiff::broker::txn {

using kafka::error_code;
using namespace std::chrono_literals;

namespace {
// Kafka bumps an epoch up to Short.MaxValue - 1; at the end a new producer id is allocated.
constexpr std::int16_t max_epoch = std::numeric_limits<std::int16_t>::max() - 1;

struct entry {
    txn_metadata meta; // as stored
    // Decided and applied, its record still being stored (complete() with a lock hand-over):
    // what ListTransactions and DescribeTransactions show meanwhile.
    std::optional<txn_metadata> completing;
    runtime::semaphore lock{1, "txn-id"};
    bool timing_out = false;
};

error_code fenced_code(bool fenced_known) {
    return fenced_known ? error_code::producer_fenced : error_code::invalid_producer_epoch;
}
} // namespace

struct coordinator::impl {
    impl(storage::object_store& s, coordinator_config c, coordinator_env e)
        : store(s), cfg(std::move(c)), env(std::move(e)) {}

    storage::object_store& store;
    coordinator_config cfg;
    coordinator_env env;
    std::map<std::string, std::unique_ptr<entry>, std::less<>> ids;
    std::vector<std::string> in_flight; // loaded in a prepare or ongoing state
    runtime::gate gate{"txn-coordinator"};
    coordinator_stats st;

    std::int64_t now_ms() const {
        if (cfg.wall_ms) return cfg.wall_ms();
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    }

    entry& get(const std::string& id) {
        auto it = ids.find(id);
        if (it == ids.end()) {
            it = ids.emplace(id, std::make_unique<entry>()).first;
            it->second->meta.id = id;
        }
        return *it->second;
    }
    const entry* find(std::string_view id) const {
        auto it = ids.find(id);
        return it == ids.end() ? nullptr : it->second.get();
    }

    // Stores `m` as `e`'s state; on success it becomes e.meta.
    runtime::task<bool> store_state(entry& e, txn_metadata m) {
        std::string body = serialize_txn(m);
        std::string key = txn_state_key(cfg.ns, m.id);
        std::span<const char> bytes(body.data(), body.size());
        runtime::deadline_scope scope(runtime::reactor::local().now() + cfg.write_timeout, gate.stop_token());
        auto r = co_await store.put(std::move(key), bytes, false, scope.token());
        ++st.state_writes;
        if (!r) {
            ++st.state_write_failures;
            log::warn("transactional id '{}': storing its state failed ({}): {}", m.id, storage::to_string(r.error().code),
                      r.error().message);
            co_return false;
        }
        e.meta = std::move(m);
        co_return true;
    }

    // Retries `op` with backoff until it succeeds or the coordinator closes. `op` is a named
    // object of the caller's frame: a lambda temporary inside a co_await expression is
    // destroyed twice by g++ 12 (routing.hpp).
    using attempt_fn = std::function<runtime::task<result<void, std::string>>()>;
    runtime::task<bool> retry(const attempt_fn& op, const char* what, std::string id) {
        auto delay = 50ms;
        for (int attempt = 0;; ++attempt) {
            auto r = co_await op();
            if (r) co_return true;
            ++st.marker_retries;
            if (attempt % 20 == 0) log::warn("transactional id '{}': {} failed (will retry): {}", id, what, r.error());
            auto slept = co_await runtime::sleep(delay, gate.stop_token());
            if (!slept) co_return false;
            delay = std::min<std::chrono::milliseconds>(delay * 2, 2000ms);
        }
    }

    // Ends `e`'s transaction (the lock held). From ongoing: stores the prepare state first (with
    // the epoch bumped when `bump`: the producer instance is being fenced). From prepare_*:
    // finishes what the stored state decided. Markers go to every partition at once.
    // With `lock` (the caller's hold on e.lock), the answer does not wait for the "complete"
    // record: the outcome is decided and applied (markers durable, offsets stored), so the
    // record is written in the background, the lock going with it, and the id's next request
    // still finds it stored. Without, complete() returns once it is stored.
    runtime::task<error_code> complete(entry& e, bool commit, bool bump, runtime::semaphore::units* lock = nullptr) {
        if (e.meta.st == state::ongoing) {
            txn_metadata m = e.meta;
            if (bump && m.producer_epoch < max_epoch) ++m.producer_epoch;
            m.st = commit ? state::prepare_commit : state::prepare_abort;
            m.update_ms = now_ms();
            const bool stored = co_await store_state(e, std::move(m));
            if (!stored) co_return error_code::coordinator_not_available;
        }
        if (e.meta.st != state::prepare_commit && e.meta.st != state::prepare_abort) co_return error_code::invalid_txn_state;
        commit = e.meta.st == state::prepare_commit;
        const std::int64_t pid = e.meta.producer_id;
        const std::int16_t epoch = e.meta.producer_epoch;
        std::vector<attempt_fn> writers;
        for (const auto& tp : e.meta.partitions) {
            writers.emplace_back([this, tp, pid, epoch, commit] { return env.write_marker(tp, pid, epoch, commit); });
        }
        std::vector<runtime::task<bool>> markers;
        for (const auto& w : writers) markers.push_back(retry(w, "writing a transaction marker", e.meta.id));
        auto written = co_await runtime::when_all(std::move(markers));
        bool all = std::all_of(written.begin(), written.end(), [](bool b) { return b; });
        if (all && commit) {
            for (const auto& [group, offsets] : e.meta.offsets) {
                const std::string g = group;
                const auto o = offsets;
                const attempt_fn apply = [this, g, o] { return env.commit_offsets(g, o); };
                const bool done = co_await retry(apply, "committing the transaction's offsets", e.meta.id);
                all = all && done;
            }
        }
        if (!all) co_return error_code::coordinator_not_available; // closing: recovery finishes it
        txn_metadata done = e.meta;
        done.st = commit ? state::complete_commit : state::complete_abort;
        done.partitions.clear();
        done.groups.clear();
        done.offsets.clear();
        done.update_ms = now_ms();
        if (commit) ++st.committed;
        if (lock) {
            e.completing = done;
            auto spawned = gate.spawn(store_complete_later(e, done, std::move(*lock)));
            if (spawned) co_return error_code::none;
            e.completing.reset();
        }
        const bool stored = co_await store_complete(e, std::move(done));
        co_return stored ? error_code::none : error_code::coordinator_not_available;
    }

    // The outcome is decided and applied; storing "complete" only spares a restart from doing
    // it again, so it is retried until it lands or the coordinator closes.
    runtime::task<bool> store_complete(entry& e, txn_metadata done) {
        const std::string id = e.meta.id;
        const attempt_fn store_done = [this, &e, done] { return store_completed(e, done); };
        co_return co_await retry(store_done, "storing the completed state", id);
    }

    runtime::task<void> store_complete_later(entry& e, txn_metadata done, runtime::semaphore::units lock) {
        (void)co_await store_complete(e, std::move(done));
        e.completing.reset();
        lock.release();
    }

    runtime::task<result<void, std::string>> store_completed(entry& e, txn_metadata m) {
        const bool stored = co_await store_state(e, std::move(m));
        if (!stored) co_return failure{std::string("state write failed")};
        co_return skiff::ok();
    }

    // A request's hold on its id: inside the gate, the id's lock taken, its producer checked
    // (before waiting for the lock, so a fenced producer does not queue, and after it).
    struct held_id {
        runtime::gate::holder inside;
        runtime::semaphore::units lock;
        entry* e = nullptr;
    };
    runtime::task<result<held_id, error_code>> hold(const std::string& id, std::int64_t pid, std::int16_t epoch,
                                                    bool fenced_known) {
        auto h = gate.enter();
        if (!h) co_return failure{error_code::coordinator_not_available};
        if (auto c = check_producer(find(id), pid, epoch, fenced_known); c != error_code::none) co_return failure{c};
        entry& e = get(id);
        auto held = co_await e.lock.acquire(1, gate.stop_token());
        if (!held) co_return failure{error_code::coordinator_not_available};
        if (auto c = check_producer(&e, pid, epoch, fenced_known); c != error_code::none) co_return failure{c};
        held_id out;
        out.inside = std::move(*h);
        out.lock = std::move(*held);
        out.e = &e;
        co_return out;
    }

    // A transaction begins with the first partition or group added after the last one ended.
    void begin_if_needed(txn_metadata& m) const {
        if (m.st == state::ongoing) return;
        m.st = state::ongoing;
        m.start_ms = now_ms();
        m.partitions.clear();
        m.groups.clear();
        m.offsets.clear();
    }

    // Stores `m` unless it equals what is stored (nothing new to promise).
    runtime::task<error_code> store_if_changed(entry& e, txn_metadata m) {
        if (m == e.meta) co_return error_code::none;
        m.update_ms = now_ms();
        const bool stored = co_await store_state(e, std::move(m));
        co_return stored ? error_code::none : error_code::coordinator_not_available;
    }

    static bool preparing(const entry& e) {
        return e.meta.st == state::prepare_commit || e.meta.st == state::prepare_abort;
    }

    // Checks the producer of a request against the id's state.
    static error_code check_producer(const entry* e, std::int64_t pid, std::int16_t epoch, bool fenced_known) {
        if (!e || e->meta.producer_id < 0 || e->meta.producer_id != pid) return error_code::invalid_producer_id_mapping;
        if (epoch != e->meta.producer_epoch) return fenced_code(fenced_known);
        return error_code::none;
    }

    runtime::task<void> abort_timed_out(std::string id) {
        auto h = gate.enter();
        if (!h) co_return;
        entry& e = get(id);
        auto held = co_await e.lock.acquire(1, gate.stop_token());
        e.timing_out = false;
        if (!held) co_return;
        const auto now = now_ms();
        if (e.meta.st != state::ongoing || now - e.meta.start_ms <= e.meta.timeout_ms) co_return;
        log::info("transactional id '{}': aborting the transaction of producer {} epoch {}: open for {} ms, timeout {} ms",
                  id, e.meta.producer_id, e.meta.producer_epoch, now - e.meta.start_ms, e.meta.timeout_ms);
        auto r = co_await complete(e, false, true);
        if (r == error_code::none) ++st.timed_out;
    }

    runtime::task<void> timeout_loop() {
        auto stop = gate.stop_token();
        for (;;) {
            auto slept = co_await runtime::sleep(cfg.check_interval, stop);
            if (!slept) co_return;
            const auto now = now_ms();
            std::vector<std::string> idle;
            for (auto& [id, e] : ids) {
                if (e->meta.st == state::ongoing && !e->timing_out && now - e->meta.start_ms > e->meta.timeout_ms) {
                    e->timing_out = true;
                    (void)gate.spawn(abort_timed_out(id));
                } else if (expirable(*e, now)) {
                    idle.push_back(id);
                }
            }
            for (auto& id : idle) (void)gate.spawn(expire(id));
        }
    }

    // No transaction in flight, and untouched for longer than the expiration.
    bool expirable(const entry& e, std::int64_t now) const {
        const bool idle = e.meta.st == state::empty || e.meta.st == state::complete_commit ||
                          e.meta.st == state::complete_abort;
        return idle && e.meta.producer_id >= 0 && !e.completing && e.meta.update_ms >= 0 &&
               now - e.meta.update_ms > cfg.id_expiration.count();
    }

    // Forgets an idle id (Kafka's transactional id expiration): its object is deleted under the
    // id's lock; a request that comes meanwhile waits, then finds it unknown and starts afresh.
    runtime::task<void> expire(std::string id) {
        auto h = gate.enter();
        if (!h) co_return;
        auto it = ids.find(id);
        if (it == ids.end()) co_return;
        entry& e = *it->second;
        auto held = e.lock.try_acquire(1);
        if (!held) co_return; // a request is using it: not idle after all
        if (!expirable(e, now_ms())) co_return;
        std::string key = txn_state_key(cfg.ns, id);
        runtime::deadline_scope scope(runtime::reactor::local().now() + cfg.write_timeout, gate.stop_token());
        auto r = co_await store.remove(std::move(key), scope.token());
        if (!r && r.error().code != storage::errc::not_found) {
            log::warn("transactional id '{}': deleting its expired state failed: {}; retried later", id,
                      r.error().message);
            co_return;
        }
        log::info("transactional id '{}': expired after {} ms without a transaction", id, now_ms() - e.meta.update_ms);
        ++st.expired;
        txn_metadata fresh;
        fresh.id = id;
        e.meta = std::move(fresh);
        const bool waited_on = e.lock.waiters() > 0;
        held->release();
        if (!waited_on) ids.erase(id); // nobody holds a reference: the lock was free and unwaited
    }

    runtime::task<void> recover(std::string id) {
        auto h = gate.enter();
        if (!h) co_return;
        entry& e = get(id);
        auto held = co_await e.lock.acquire(1, gate.stop_token());
        if (!held) co_return;
        const state was = e.meta.st;
        if (was == state::ongoing && cfg.keep_ongoing) {
            log::info("transactional id '{}': taking over its open transaction (producer {} epoch {}, {} partition(s))",
                      id, e.meta.producer_id, e.meta.producer_epoch, e.meta.partitions.size());
        } else if (was == state::ongoing) {
            log::info("transactional id '{}': aborting the transaction that was open at the restart (producer {} epoch {})",
                      id, e.meta.producer_id, e.meta.producer_epoch);
            auto r = co_await complete(e, false, true);
            if (r == error_code::none) ++st.fenced;
        } else if (was == state::prepare_commit || was == state::prepare_abort) {
            log::info("transactional id '{}': finishing its {} after the {}", id, state_name(was),
                      cfg.keep_ongoing ? "takeover" : "restart");
            co_await complete(e, was == state::prepare_commit, false);
        }
    }
};

coordinator::coordinator(storage::object_store& store, coordinator_config cfg, coordinator_env env)
    : _i(std::make_unique<impl>(store, std::move(cfg), std::move(env))) {}

coordinator::~coordinator() = default;

runtime::task<result<void, storage::store_error>> coordinator::load(std::function<bool(std::string_view)> owns) {
    std::string token;
    std::size_t loaded = 0;
    for (;;) {
        std::string pfx = txns_prefix(_i->cfg.ns);
        auto page = co_await _i->store.list(std::move(pfx), std::string(), std::move(token), 1000, {});
        if (!page) co_return failure{page.error()};
        for (auto& obj : page->objects) {
            if (obj.key.size() < 11 || obj.key.substr(obj.key.size() - 11) != "/state.json") continue;
            std::string key = obj.key;
            auto got = co_await _i->store.get(std::move(key), std::nullopt, {});
            if (!got) {
                if (got.error().code == storage::errc::not_found) continue; // deleted meanwhile
                co_return failure{got.error()};
            }
            auto parsed = parse_txn(got->data);
            if (!parsed) {
                log::warn("transaction state object {} is unusable ({}); skipping it", obj.key, parsed.error());
                continue;
            }
            if (txn_state_key(_i->cfg.ns, parsed->id) != obj.key) {
                log::warn("transaction state object {} names transactional id '{}', which is stored elsewhere; skipping it",
                          obj.key, parsed->id);
                continue;
            }
            if (owns && !owns(parsed->id)) continue;
            entry& e = _i->get(parsed->id);
            e.meta = std::move(*parsed);
            if (e.meta.st == state::ongoing || e.meta.st == state::prepare_commit || e.meta.st == state::prepare_abort)
                _i->in_flight.push_back(e.meta.id);
            ++loaded;
        }
        if (page->next_token.empty()) break;
        token = std::move(page->next_token);
    }
    if (loaded)
        log::info("transaction coordinator: loaded {} transactional id(s), {} with a transaction in flight", loaded,
                  _i->in_flight.size());
    co_return ok();
}

void coordinator::start() {
    (void)_i->gate.spawn(_i->timeout_loop());
    for (auto& id : std::exchange(_i->in_flight, {})) (void)_i->gate.spawn(_i->recover(id));
}

runtime::task<coordinator::init_result> coordinator::init_producer_id(std::string id, std::int32_t timeout_ms,
                                                                      std::int64_t producer_id,
                                                                      std::int16_t producer_epoch, bool fenced_known) {
    init_result out;
    if (timeout_ms <= 0 || std::chrono::milliseconds(timeout_ms) > _i->cfg.max_timeout) {
        out.error = error_code::invalid_transaction_timeout;
        co_return out;
    }
    auto h = _i->gate.enter();
    if (!h) {
        out.error = error_code::coordinator_not_available;
        co_return out;
    }
    entry& e = _i->get(id);
    auto held = co_await e.lock.acquire(1, _i->gate.stop_token());
    if (!held) {
        out.error = error_code::coordinator_not_available;
        co_return out;
    }
    txn_metadata m = e.meta;
    if (m.producer_id >= 0 && producer_id >= 0) {
        // KIP-360: a producer that knows its id asks for a bump; only the current instance may.
        if (producer_id != m.producer_id || producer_epoch != m.producer_epoch) {
            out.error = fenced_code(fenced_known);
            co_return out;
        }
    }
    if (m.st == state::ongoing || m.st == state::prepare_commit || m.st == state::prepare_abort) {
        // A new instance fences the old one: its open transaction is aborted (a prepared one
        // is finished as decided) before the new epoch is handed out.
        const bool was_ongoing = m.st == state::ongoing;
        auto r = co_await _i->complete(e, m.st == state::prepare_commit, was_ongoing);
        if (r != error_code::none) {
            out.error = error_code::concurrent_transactions; // retriable: the client asks again
            co_return out;
        }
        if (was_ongoing) ++_i->st.fenced;
        m = e.meta;
    }
    if (m.producer_id < 0 || m.producer_epoch >= max_epoch) {
        auto pid = co_await _i->env.allocate_producer_id();
        if (!pid) {
            log::warn("transactional id '{}': allocating a producer id: {}", id, pid.error());
            out.error = error_code::coordinator_not_available;
            co_return out;
        }
        m.producer_id = *pid;
        m.producer_epoch = 0;
    } else {
        ++m.producer_epoch;
    }
    m.id = id;
    m.timeout_ms = timeout_ms;
    m.st = state::empty;
    m.partitions.clear();
    m.groups.clear();
    m.offsets.clear();
    m.start_ms = -1;
    m.update_ms = _i->now_ms();
    const bool stored = co_await _i->store_state(e, m);
    if (!stored) {
        out.error = error_code::coordinator_not_available;
        co_return out;
    }
    out.producer_id = e.meta.producer_id;
    out.producer_epoch = e.meta.producer_epoch;
    co_return out;
}

runtime::task<error_code> coordinator::add_partitions(std::string id, std::int64_t producer_id, std::int16_t epoch,
                                                      std::vector<topic_partition> partitions, bool fenced_known) {
    auto held = co_await _i->hold(id, producer_id, epoch, fenced_known);
    if (!held) co_return held.error();
    entry& e = *held->e;
    if (impl::preparing(e)) co_return error_code::concurrent_transactions;
    txn_metadata m = e.meta;
    _i->begin_if_needed(m);
    for (auto& tp : partitions) m.partitions.insert(tp);
    co_return co_await _i->store_if_changed(e, std::move(m));
}

runtime::task<error_code> coordinator::add_offsets(std::string id, std::int64_t producer_id, std::int16_t epoch,
                                                   std::string group, bool fenced_known) {
    auto held = co_await _i->hold(id, producer_id, epoch, fenced_known);
    if (!held) co_return held.error();
    entry& e = *held->e;
    if (impl::preparing(e)) co_return error_code::concurrent_transactions;
    txn_metadata m = e.meta;
    _i->begin_if_needed(m);
    m.groups.insert(group);
    co_return co_await _i->store_if_changed(e, std::move(m));
}

runtime::task<error_code> coordinator::txn_offset_commit(
    std::string id, std::int64_t producer_id, std::int16_t epoch, std::string group,
    std::map<std::string, std::map<std::int32_t, pending_offset>> offsets, bool fenced_known) {
    auto held = co_await _i->hold(id, producer_id, epoch, fenced_known);
    if (!held) co_return held.error();
    entry& e = *held->e;
    if (impl::preparing(e)) co_return error_code::concurrent_transactions;
    // Offsets of a group the transaction never added (AddOffsetsToTxn) would be applied by no
    // commit: refused rather than silently dropped.
    if (e.meta.st != state::ongoing || !e.meta.groups.count(group)) co_return error_code::invalid_txn_state;
    txn_metadata m = e.meta;
    auto& g = m.offsets[group];
    for (auto& [topic, parts] : offsets) {
        for (auto& [p, o] : parts) g[topic][p] = o;
    }
    co_return co_await _i->store_if_changed(e, std::move(m));
}

runtime::task<error_code> coordinator::end_txn(std::string id, std::int64_t producer_id, std::int16_t epoch, bool commit,
                                               bool fenced_known) {
    auto held = co_await _i->hold(id, producer_id, epoch, fenced_known);
    if (!held) co_return held.error();
    entry& e = *held->e;
    switch (e.meta.st) {
    case state::ongoing: {
        auto r = co_await _i->complete(e, commit, false, &held->lock);
        if (r == error_code::none && !commit) ++_i->st.aborted;
        co_return r;
    }
    case state::complete_commit: co_return commit ? error_code::none : error_code::invalid_txn_state;
    case state::complete_abort: co_return commit ? error_code::invalid_txn_state : error_code::none;
    case state::prepare_commit:
    case state::prepare_abort: co_return error_code::concurrent_transactions;
    case state::empty: break;
    }
    co_return error_code::invalid_txn_state;
}

error_code coordinator::verify_produce(std::string_view id, std::int64_t producer_id, std::int16_t epoch,
                                       const topic_partition& tp, bool fenced_known) const {
    const entry* e = _i->find(id);
    if (auto c = impl::check_producer(e, producer_id, epoch, fenced_known); c != error_code::none) return c;
    if (e->meta.st != state::ongoing || !e->meta.partitions.count(tp)) return error_code::invalid_txn_state;
    return error_code::none;
}

std::vector<txn_metadata> coordinator::list(const std::set<std::string>& states,
                                            const std::set<std::int64_t>& producer_ids) const {
    std::vector<txn_metadata> out;
    for (auto& [id, e] : _i->ids) {
        const txn_metadata& m = e->completing ? *e->completing : e->meta;
        if (m.producer_id < 0) continue;
        if (!states.empty() && !states.count(std::string(state_name(m.st)))) continue;
        if (!producer_ids.empty() && !producer_ids.count(m.producer_id)) continue;
        out.push_back(m);
    }
    return out;
}

std::optional<txn_metadata> coordinator::describe(std::string_view id) const {
    const entry* e = _i->find(id);
    if (!e || e->meta.producer_id < 0) return std::nullopt;
    return e->completing ? *e->completing : e->meta;
}

runtime::task<void> coordinator::close() { co_await _i->gate.close(); }

coordinator_stats coordinator::stats() const noexcept {
    coordinator_stats s = _i->st;
    for (auto& [id, e] : _i->ids) {
        if (e->meta.producer_id >= 0) ++s.ids;
        const state now = e->completing ? e->completing->st : e->meta.st;
        if (now == state::ongoing || now == state::prepare_commit || now == state::prepare_abort) ++s.open;
    }
    return s;
}

} // namespace skiff::broker::txn
