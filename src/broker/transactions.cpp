#include "transactions.hpp"

#include "idempotence.hpp"
#include "ownership.hpp"
#include "peers.hpp"
#include "routing.hpp"
#include "txn/abort_index.hpp"
#include "txn/control_batch.hpp"

#include <skiff/cluster/assignment.hpp>
#include <skiff/core/log.hpp>
#include <skiff/runtime/timer.hpp>

#include <algorithm>
#include <chrono>
#include <functional>

namespace skiff::broker {

namespace {

std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

runtime::task<result<std::int64_t, std::string>> allocate_on_core0(shard* sh) {
    auto id = co_await on_core(*sh, 0, [](shard& sh0) { return allocate_producer_id(sh0); });
    if (!id) co_return failure{id.error().message};
    co_return *id;
}

// Cluster mode: the partition's owner is another broker; it appends the marker (WriteTxnMarkers).
runtime::task<result<void, std::string>> marker_to_peer(shard* sh, std::int32_t broker, txn::topic_partition tp,
                                                        std::int64_t pid, std::int16_t epoch, bool commit) {
    kafka::WriteTxnMarkersRequest req;
    kafka::WriteTxnMarkersRequest::WritableTxnMarker m;
    m.producer_id = pid;
    m.producer_epoch = epoch;
    m.transaction_result = commit;
    m.coordinator_epoch = 0;
    kafka::WriteTxnMarkersRequest::WritableTxnMarkerTopic t;
    t.name = tp.first;
    t.partition_indexes.push_back(tp.second);
    m.topics.push_back(std::move(t));
    req.markers.push_back(std::move(m));
    auto r = co_await send_to_peer(*sh, broker, std::move(req));
    if (!r) co_return failure{r.error()};
    for (const auto& mr : r->markers)
        for (const auto& tr : mr.topics)
            for (const auto& pr : tr.partitions) {
                if (tr.name != tp.first || pr.partition_index != tp.second) continue;
                if (pr.error_code == kerr::none) co_return ok();
                co_return failure{fmt::format("{}/{}: broker {} answered {}", tp.first, tp.second, broker,
                                              kafka::name(pr.error_code))};
            }
    co_return failure{fmt::format("{}/{}: broker {} did not answer for the partition", tp.first, tp.second, broker)};
}

runtime::task<result<void, std::string>> marker_from(shard* sh, txn::topic_partition tp, std::int64_t pid,
                                                     std::int16_t epoch, bool commit) {
    if (sh->cfg().clustered()) {
        // The owner the view shows; a stale view costs a NOT_LEADER answer and a retry.
        const cluster::view* v = sh->cview.get();
        const cluster::owner* o = v ? v->owner_of(tp.first, tp.second) : nullptr;
        if (!o) co_return failure{fmt::format("{}/{}: no broker owns it now", tp.first, tp.second)};
        if (o->broker != sh->cfg().node_id)
            co_return co_await marker_to_peer(sh, o->broker, std::move(tp), pid, epoch, commit);
    }
    const std::string* topic = &tp.first;
    const std::int32_t partition = tp.second;
    auto r = co_await on_partition_owner(*sh, tp.first, partition, [topic, partition, pid, epoch, commit](shard& o) {
        return write_marker(o, *topic, partition, pid, epoch, commit);
    });
    if (!r) co_return failure{std::move(r.error().message)};
    co_return ok();
}

runtime::task<kafka::error_code> commit_on_group_core(
    shard& o, std::string group,
    std::map<std::string, std::map<std::int32_t, std::tuple<std::int64_t, std::int32_t, std::string>>> entries) {
    co_return co_await coordinator_for(o, group).commit_txn_offsets(std::move(group), std::move(entries));
}

runtime::task<result<void, std::string>> offsets_from(
    shard* sh, std::string group, std::map<std::string, std::map<std::int32_t, txn::pending_offset>> offsets) {
    // Cluster mode: the group's broker applies them (a stale view costs NOT_COORDINATOR and a retry).
    if (const std::int32_t remote = remote_coordinator(*sh, group); remote >= 0)
        co_return co_await apply_txn_offsets_at_peer(*sh, remote, std::string(), std::move(group), std::move(offsets));
    std::map<std::string, std::map<std::int32_t, std::tuple<std::int64_t, std::int32_t, std::string>>> entries;
    for (auto& [t, parts] : offsets)
        for (auto& [p, o] : parts) entries[t][p] = {o.offset, o.leader_epoch, o.metadata};
    const std::string* g = &group;
    auto* e = &entries;
    const auto code = co_await on_group_owner(*sh, group, [g, e](shard& o) { return commit_on_group_core(o, *g, std::move(*e)); });
    if (code != kerr::none) co_return failure{std::string("group '") + group + "': " + std::string(kafka::name(code))};
    co_return ok();
}

} // namespace

unsigned txn_owner(std::string_view transactional_id, unsigned cores) noexcept {
    return group_owner(transactional_id, cores);
}

std::unique_ptr<txn::coordinator> make_txn_coordinator(shard& sh, bool takeover) {
    txn::coordinator_config cfg;
    cfg.keep_ongoing = takeover;
    cfg.ns = sh.cfg().ns;
    cfg.max_timeout = sh.cfg().transaction_max_timeout;
    cfg.id_expiration = sh.cfg().transactional_id_expiration;
    txn::coordinator_env env;
    shard* p = &sh;
    env.allocate_producer_id = [p] { return allocate_on_core0(p); };
    env.write_marker = [p](txn::topic_partition tp, std::int64_t pid, std::int16_t epoch, bool commit) {
        return marker_from(p, std::move(tp), pid, epoch, commit);
    };
    env.commit_offsets = [p](std::string group, std::map<std::string, std::map<std::int32_t, txn::pending_offset>> o) {
        return offsets_from(p, std::move(group), std::move(o));
    };
    return std::make_unique<txn::coordinator>(*sh.store, std::move(cfg), std::move(env));
}

runtime::task<std::string> load_txns(shard* sh) {
    const unsigned core = sh->core, cores = sh->shared->cores;
    std::string last;
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (attempt) (void)co_await runtime::sleep(std::chrono::milliseconds(200 << attempt));
        auto r = co_await sh->txns->load([core, cores](std::string_view id) { return txn_owner(id, cores) == core; });
        if (r) {
            sh->txns->start();
            co_return std::string();
        }
        last = r.error().message;
        log::warn("loading transactional ids on core {} (attempt {}): {}", core, attempt + 1, last);
    }
    co_return "cannot load the transaction coordinator's state: " + last;
}

runtime::task<std::unique_ptr<txn::coordinator>> load_slot_txns(shard* sh, std::int32_t slot,
                                                                 std::function<bool()> still_ours) {
    // Retried for as long as the slot is ours: giving up would leave its ids answering
    // COORDINATOR_LOAD_IN_PROGRESS for good, and a store that fails now usually answers later.
    for (int attempt = 0;; ++attempt) {
        auto tc = make_txn_coordinator(*sh, true);
        auto r = co_await tc->load([slot](std::string_view id) { return cluster::group_slot(id) == slot; });
        if (r) co_return tc;
        co_await tc->close();
        sh->retired_txns.push_back(std::move(tc));
        if (attempt % 10 == 0) {
            log::warn("group slot {}: loading its transactional ids (attempt {}): {}; retrying", slot, attempt + 1,
                      r.error().message);
        }
        const auto backoff = std::chrono::milliseconds(std::min(200 << std::min(attempt, 5), 5000));
        auto slept = co_await runtime::sleep(backoff, sh->stop.get_token());
        if (!slept || !still_ours()) co_return nullptr;
    }
}

runtime::task<result<void, marker_error>> write_marker(shard& sh, std::string topic, std::int32_t partition,
                                                      std::int64_t producer_id, std::int16_t epoch, bool commit) {
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        co_return failure{marker_error{owned.error, fmt::format("{}/{}: {}", topic, partition,
                                                                owned.message.empty() ? std::string(kafka::name(owned.error))
                                                                                      : owned.message)}};
    }
    partition_slot* slot = owned.slot;
    if (!slot->producers_loaded) co_await ensure_producers_loaded(&sh, slot, topic, partition);
    if (!may_acknowledge(sh, *slot))
        co_return failure{marker_error{kerr::not_leader_or_follower, fmt::format("{}/{}: not provably the owner", topic, partition)}};
    // From this marker on, the producer's older epochs are fenced on this partition (a zombie
    // instance's late batches are refused with INVALID_PRODUCER_EPOCH).
    slot->producers.fence(producer_id, epoch);
    std::string bytes = txn::make_control_batch(producer_id, epoch, commit ? txn::marker_type::commit : txn::marker_type::abort,
                                                0, wall_ms());
    auto view = storage::parse_batch(std::span<const char>(bytes.data(), bytes.size()), true);
    if (!view) co_return failure{marker_error{kerr::unknown_server_error, std::string("building the marker: ") + view.error().message}};
    storage::batch_view v = *view;
    v.crc_verified = true;
    const std::span<const storage::batch_view> views(&v, 1);
    auto r = co_await slot->log->append(views, storage::ack_mode::durable, {}, sh.cfg().log.append_timeout);
    if (!r)
        co_return failure{marker_error{kerr::kafka_storage_error,
                                       fmt::format("{}/{}: appending the marker: {}", topic, partition, r.error().message)}};
    v.base_offset = r->base_offset;
    slot->txns.on_batch(v);
    if (commit) co_return ok();
    // The abort goes into the partition's abort index (abort_index.hpp). The entry is the one
    // this marker just made, or, when the transaction was already closed here (a coordinator
    // writing its markers again after a restart), the producer's newest one: a crash between
    // that earlier marker and its index write is repaired now.
    const auto& aborted = slot->txns.aborted();
    auto it = std::find_if(aborted.rbegin(), aborted.rend(),
                           [producer_id](const txn::aborted_txn& a) { return a.producer_id == producer_id; });
    if (it == aborted.rend()) co_return ok(); // the transaction wrote nothing here
    const txn::aborted_txn entry = *it;
    const std::string prefix = storage::partition_prefix(sh.cfg().ns, storage::partition_id(topic, partition));
    const std::string body = txn::abort_index_body(entry);
    std::string last_error;
    for (int attempt = 0; attempt < 5; ++attempt) {
        if (attempt) (void)co_await runtime::sleep(std::chrono::milliseconds(100 << attempt));
        std::string key = txn::abort_index_key(prefix, entry);
        auto put = co_await sh.store->put(std::move(key), std::span<const char>(body.data(), body.size()), false, {});
        if (put) co_return ok();
        last_error = put.error().message;
    }
    co_return failure{marker_error{kerr::kafka_storage_error,
                                   fmt::format("{}/{}: storing the abort index entry: {}", topic, partition, last_error)}};
}

} // namespace skiff::broker
