// Produce: each partition's batch is validated once (produce_validation), then appended on
// the partition's owning core; the request fans out to the owners and gathers the answers.
#include "../handlers.hpp"
#include "../idempotence.hpp"
#include "../produce_validation.hpp"
#include "../ownership.hpp"
#include "../peers.hpp"
#include "../routing.hpp"
#include "../transactions.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/core/log.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/when_all.hpp>

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>

namespace skiff::broker {

namespace {

struct produce_outcome {
    kafka::error_code error = kerr::none;
    std::string message;
    std::int64_t base_offset = -1;
    std::int64_t log_start_offset = -1;
    std::chrono::nanoseconds room_wait{0}; // admission: waited for room in the log
};

kafka::error_code append_error_code(storage::append_errc c) {
    switch (c) {
    case storage::append_errc::corrupt_message: return kerr::corrupt_message;
    case storage::append_errc::unsupported_version: return kerr::unsupported_for_message_format;
    case storage::append_errc::timed_out: return kerr::request_timed_out;
    case storage::append_errc::shutting_down: return kerr::not_leader_or_follower;
    case storage::append_errc::cancelled: return kerr::request_timed_out;
    case storage::append_errc::fenced: return kerr::not_leader_or_follower;
    case storage::append_errc::no_room: return kerr::request_timed_out;
    }
    return kerr::unknown_server_error;
}

kafka::error_code verdict_error_code(producer_table::verdict v) {
    switch (v) {
    case producer_table::verdict::stale_epoch: return kerr::invalid_producer_epoch;
    case producer_table::verdict::out_of_order: return kerr::out_of_order_sequence_number;
    default: return kerr::request_timed_out; // duplicate_pending for too long
    }
}

storage::ack_mode ack_mode_of(std::int16_t acks) {
    return acks == -1 ? storage::ack_mode::durable : (acks == 1 ? storage::ack_mode::leader : storage::ack_mode::none);
}

// Waits until [.., last] is committed: a duplicate is acknowledged like its original.
runtime::task<bool> durable_through(storage::partition_log& log, std::int64_t last, std::chrono::milliseconds timeout) {
    if (log.high_watermark() > last) co_return true;
    co_return co_await log.wait_for_data(last, timeout);
}

// Runs on the partition's core. No suspension before the append is issued when the
// partition is open and its producer table loaded, so appends keep the order in which
// requests were read (routing.hpp). `batch` lives in the request's frame until this returns.
runtime::task<produce_outcome> append_on_owner(shard& sh, std::string topic, std::int32_t partition,
                                               const validated_batch* batch, std::int16_t acks,
                                               std::chrono::milliseconds room_timeout) {
    produce_outcome out;
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        out.error = owned.error;
        out.message = std::move(owned.message);
        co_return out;
    }
    auto& log = *owned.slot->log;
    out.log_start_offset = log.log_start_offset();
    const auto mode = ack_mode_of(acks);
    if (!may_acknowledge(sh, *owned.slot)) {
        // Cluster mode, lease not provably alive (etcd unreachable): what would be appended now
        // could not be acknowledged, and the client's retries would pile up copies of it.
        out.error = kerr::not_leader_or_follower;
        out.message = "this broker cannot currently prove it owns the partition";
        co_return out;
    }

    idempotence_guard guard(sh, *owned.slot, topic, partition, batch->view);
    auto chk = co_await guard.reserve();
    if (chk.v == producer_table::verdict::duplicate) {
        // Already written: answer with the original offsets, once they are durable if the
        // producer asked for that.
        if (mode == storage::ack_mode::durable &&
            !co_await durable_through(log, chk.last_offset, sh.cfg().log.append_timeout)) {
            out.error = kerr::request_timed_out;
            co_return out;
        }
        if (!may_acknowledge(sh, *owned.slot)) {
            out.error = kerr::not_leader_or_follower;
            co_return out;
        }
        out.base_offset = chk.base_offset;
        co_return out;
    }
    if (chk.v != producer_table::verdict::accept) {
        out.error = verdict_error_code(chk.v);
        co_return out;
    }

    // A produce trace per partition append, linked to the flush that made it durable, so an
    // operator sees in /traces how much of a produce's latency each upload took.
    auto span = metrics::span::root("produce", metrics::volume::high);
    if (span.active()) {
        span.set("topic", topic);
        span.set("partition", partition);
        span.set("acks", static_cast<std::int64_t>(acks));
        span.set("bytes", static_cast<std::int64_t>(batch->view.size()));
    }
    if (batch->view.is_transactional() && !owned.slot->txns.is_open(batch->view.producer_id)) {
        // The transaction's first batch here opens it at an offset no later than the one the
        // append is given (offsets are assigned in order, from next_offset() on), before the
        // append can move the high watermark: read_committed fetches stop below it at once.
        storage::batch_view first = batch->view;
        first.base_offset = log.next_offset();
        owned.slot->txns.on_batch(first);
    }
    const std::span<const storage::batch_view> views(&batch->view, 1);
    auto r = co_await log.append(views, mode, {}, room_timeout);
    if (span.active()) {
        if (r) {
            span.set("base_offset", r->base_offset);
            span.link(r->flush_span);
        } else {
            span.set("error", static_cast<std::int64_t>(append_error_code(r.error().code)));
        }
    }
    out.room_wait = r ? r->room_wait : r.error().room_wait;
    if (!r) {
        out.error = append_error_code(r.error().code);
        out.message = r.error().message;
        // A timed-out append is still being written at the offsets it was given; anything
        // else was not written (the guard's destructor aborts the reservation).
        if (r.error().code == storage::append_errc::timed_out && r.error().last_offset >= 0) {
            guard.complete_when_durable(r.error().base_offset, r.error().last_offset);
        }
        co_return out;
    }
    guard.complete(r->base_offset, r->last_offset);
    if (!may_acknowledge(sh, *owned.slot)) {
        // Cluster mode: stored, but this broker can no longer prove it was still the owner when
        // the upload landed (docs/cluster.md, "Fencing"). Retriable: the client asks the owner.
        out.error = kerr::not_leader_or_follower;
        out.message = "this broker's ownership of the partition could not be confirmed";
        co_return out;
    }
    out.base_offset = r->base_offset;
    co_return out;
}

std::int64_t wall_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// One partition of a transactional Produce to verify (KIP-890's check).
struct txn_check {
    txn::topic_partition tp;
    std::int64_t pid;
    std::int16_t epoch;
};

// The check at a coordinator on another broker, through DescribeTransactions (the state, the
// producer and the partitions of the id's transaction): one round trip per request. An
// unreachable coordinator is NOT_ENOUGH_REPLICAS, which producers retry.
runtime::task<std::vector<kafka::error_code>> verify_at_peer(shard& sh, std::int32_t broker, std::string id,
                                                              std::vector<txn_check> checks) {
    kafka::DescribeTransactionsRequest req;
    req.transactional_ids.push_back(id);
    auto r = co_await send_to_peer(sh, broker, std::move(req));
    std::vector<kafka::error_code> out(checks.size(), kerr::not_enough_replicas);
    if (!r || r->transaction_states.size() != 1) {
        if (!r) log::warn("verifying a transactional produce of '{}' at broker {}: {}", id, broker, r.error());
        co_return out;
    }
    const auto& st = r->transaction_states.front();
    for (std::size_t i = 0; i < checks.size(); ++i) {
        const auto& c = checks[i];
        if (st.error_code == kerr::not_coordinator || st.error_code == kerr::coordinator_load_in_progress ||
            st.error_code == kerr::coordinator_not_available) {
            continue; // moving: retriable
        }
        if (st.error_code == kerr::transactional_id_not_found || st.producer_id != c.pid) {
            out[i] = kerr::invalid_producer_id_mapping;
        } else if (st.producer_epoch != c.epoch) {
            out[i] = kerr::invalid_producer_epoch;
        } else if (st.error_code != kerr::none) {
            out[i] = st.error_code;
        } else {
            bool listed = false;
            for (const auto& t : st.topic_partitions) {
                if (t.name != c.tp.first) continue;
                for (auto p : t.partition_indexes) listed = listed || p == c.tp.second;
            }
            out[i] = st.transaction_state == "Ongoing" && listed ? kerr::none : kerr::invalid_txn_state;
        }
    }
    co_return out;
}

} // namespace

runtime::task<kafka::ProduceResponse> produce(shard& sh, kafka::ProduceRequest req, bool authorized_txn) {
    const auto started = std::chrono::steady_clock::now();
    auto& m = sh.produce[req.acks == 0 ? 0 : (req.acks == 1 ? 1 : 2)];
    kafka::ProduceResponse r;
    kafka::error_code blanket = kerr::none;
    if (req.acks != 0 && req.acks != 1 && req.acks != -1) blanket = kerr::invalid_required_acks;
    if (req.transactional_id) {
        // KafkaApis.handleProduceRequest: WRITE on the transactional id first.
        if (req.transactional_id->empty()) blanket = kerr::invalid_request;
        else if (!authorized_txn) blanket = kerr::transactional_id_authorization_failed;
    }
    const std::int16_t acks = req.acks;
    const std::int64_t now = wall_ms();
    // Admission waits for room at most the request's own timeout (Kafka's timeout_ms: how long
    // the producer lets the broker take), and never less than a millisecond.
    const std::chrono::milliseconds room_timeout(std::max<std::int32_t>(req.timeout_ms, 1));

    // Every partition is issued before the first suspension (routing.hpp). The validated
    // batches stay here, in a container that never moves its elements, until every append
    // has completed.
    struct where {
        std::size_t topic, partition;
    };
    std::vector<where> issued;
    std::deque<validated_batch> batches;
    std::vector<runtime::task<produce_outcome>> work;
    for (std::size_t ti = 0; ti < req.topic_data.size(); ++ti) {
        auto& td = req.topic_data[ti];
        kafka::ProduceResponse::TopicProduceResponse tr;
        tr.name = td.name;
        const topic_info* info = sh.cat->find(td.name);
        // Computed once per catalog snapshot (partitions.cpp compute_policies); nothing here
        // suspends before the batches are validated, so the reference stays valid.
        const topic_policy& policy = policy_of(sh, td.name);
        for (std::size_t pi = 0; pi < td.partition_data.size(); ++pi) {
            auto& pd = td.partition_data[pi];
            kafka::ProduceResponse::PartitionProduceResponse pr;
            pr.index = pd.index;
            pr.base_offset = -1;
            pr.log_append_time_ms = -1;
            pr.log_start_offset = -1;
            if (blanket != kerr::none) {
                pr.error_code = blanket;
            } else if (!info || pd.index < 0 || pd.index >= info->partitions) {
                pr.error_code = kerr::unknown_topic_or_partition;
            } else if (!pd.records || pd.records->empty()) {
                pr.error_code = kerr::invalid_record;
                pr.error_message = "the partition has no records";
            } else if (auto v = validate_produce(*pd.records, policy, now); !v) {
                pr.error_code = v.error().code;
                pr.error_message = std::move(v.error().message);
                for (auto& re : v.error().record_errors) {
                    kafka::ProduceResponse::BatchIndexAndErrorMessage e;
                    e.batch_index = re.batch_index;
                    e.batch_index_error_message = std::move(re.message);
                    pr.record_errors.push_back(std::move(e));
                }
            } else {
                sh.produce_bytes.inc(pd.records->size());
                // LogAppendTime: the broker time validate_produce wrote into the batch.
                if (policy.log_append_time) pr.log_append_time_ms = v->view.max_timestamp;
                if (v->view.is_transactional() && !req.transactional_id) {
                    pr.error_code = kerr::invalid_record;
                    pr.error_message = "a transactional batch in a produce request without a transactional id";
                } else {
                    issued.push_back(where{ti, pi});
                    batches.push_back(std::move(*v));
                }
            }
            tr.partition_responses.push_back(std::move(pr));
        }
        r.responses.push_back(std::move(tr));
    }
    // Transactional batches: each partition must be in the producer's ongoing transaction
    // (KIP-890's check, at the coordinator), else its batch would open a transaction nobody
    // ends. One hop to the coordinator's core for the whole request; the answers come back in
    // the order the requests were sent (posts between cores are FIFO), so pipelined produces
    // still issue their appends in order.
    std::vector<kafka::error_code> refused(issued.size(), kerr::none);
    if (req.transactional_id && !issued.empty()) {
        std::vector<txn_check> checks;
        for (std::size_t i = 0; i < issued.size(); ++i) {
            const auto& b = batches[i].view;
            checks.push_back(txn_check{{req.topic_data[issued[i].topic].name,
                                    req.topic_data[issued[i].topic].partition_data[issued[i].partition].index},
                                   b.producer_id, b.producer_epoch});
        }
        const std::string* tid = &*req.transactional_id;
        const auto* cp = &checks;
        // Cluster mode: a coordinator on another broker checks there; on none, the local
        // check answers (retriably).
        const std::int32_t remote = remote_coordinator(sh, *tid);
        if (remote >= 0) {
            refused = co_await verify_at_peer(sh, remote, *tid, std::move(checks));
        } else {
            refused = co_await on_core(sh, txn_owner(*tid, sh.shared->cores), [tid, cp](shard& o) {
                std::vector<kafka::error_code> out;
                auto* c = txn_coordinator_for(o, *tid);
                for (const auto& ch : *cp) {
                    // No coordinator here (cluster mode, the slot moving): retriable, as in
                    // Kafka, whose verification answers NOT_ENOUGH_REPLICAS then.
                    out.push_back(c ? c->verify_produce(*tid, ch.pid, ch.epoch, ch.tp, false) : kerr::not_enough_replicas);
                }
                return out;
            });
        }
    }
    std::vector<std::size_t> worked; // index into issued of each task in `work`
    for (std::size_t i = 0; i < issued.size(); ++i) {
        if (refused[i] != kerr::none) continue;
        worked.push_back(i);
        const validated_batch* b = &batches[i];
        const std::string* topic = &req.topic_data[issued[i].topic].name;
        const std::int32_t partition = req.topic_data[issued[i].topic].partition_data[issued[i].partition].index;
        work.push_back(on_partition_owner(sh, *topic, partition, [topic, partition, b, acks, room_timeout](shard& o) {
            return append_on_owner(o, *topic, partition, b, acks, room_timeout);
        }));
    }
    auto done = co_await runtime::when_all(std::move(work));
    std::vector<produce_outcome> results(issued.size());
    for (std::size_t i = 0; i < issued.size(); ++i) {
        if (refused[i] != kerr::none) results[i].error = refused[i];
    }
    for (std::size_t k = 0; k < worked.size(); ++k) results[worked[k]] = std::move(done[k]);
    std::chrono::nanoseconds room_wait{0};
    for (std::size_t i = 0; i < issued.size(); ++i) {
        auto& pr = r.responses[issued[i].topic].partition_responses[issued[i].partition];
        produce_outcome& o = results[i];
        room_wait = std::max(room_wait, o.room_wait);
        pr.error_code = o.error;
        pr.base_offset = o.base_offset;
        pr.log_start_offset = o.log_start_offset;
        if (o.error != kerr::none) pr.log_append_time_ms = -1;
        if (!o.message.empty() && o.error != kerr::none) pr.error_message = o.message;
    }
    for (auto& tr : r.responses) {
        for (auto& pr : tr.partition_responses) {
            if (pr.error_code != kerr::none) m.errors.inc();
        }
    }
    // Admission: a request that had to wait for room tells the producer so, as a quota does
    // (docs/quotas.md): clients slow down and report it (librdkafka's throttle callback).
    if (room_wait >= std::chrono::milliseconds(1)) {
        r.throttle_time_ms = static_cast<std::int32_t>(
            std::min<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(room_wait).count(),
                                   std::numeric_limits<std::int32_t>::max()));
        sh.admission_throttled.inc();
    }
    m.requests.inc();
    m.latency.record(std::chrono::steady_clock::now() - started);
    co_return r;
}

} // namespace skiff::broker
