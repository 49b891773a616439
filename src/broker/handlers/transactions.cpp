// The transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit,
// EndTxn, ListTransactions and DescribeTransactions, each routed to the core that coordinates
// the transactional id (txn_owner). InitProducerId with a transactional id is in
// producer_ids.cpp; the data path (Produce, markers, Fetch) in produce.cpp, transactions.cpp
// and fetch.cpp. docs/transactions.md.
#include "../handlers.hpp"
#include "../routing.hpp"
#include "../peers.hpp"
#include "../transactions.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/cluster/assignment.hpp>
#include <skiff/core/log.hpp>
#include <skiff/runtime/when_all.hpp>

namespace skiff::broker {

namespace {

// KIP-588: these versions know PRODUCER_FENCED; older ones are told INVALID_PRODUCER_EPOCH.
constexpr std::int16_t add_partitions_fenced_since = 2;
constexpr std::int16_t add_offsets_fenced_since = 2;
constexpr std::int16_t end_txn_fenced_since = 2;
constexpr std::int16_t txn_offset_commit_fenced_since = 3;


bool may_write_txn(const request_ctx& ctx, const std::string& id) {
    return authorized(ctx, acl::operation::write, acl::resource_type::transactional_id, id);
}

} // namespace

runtime::task<std::string> handle_add_partitions_to_txn(request_ctx ctx, kafka::AddPartitionsToTxnRequest req) {
    kafka::AddPartitionsToTxnResponse r;
    const std::string& id = req.v3_and_below_transactional_id;
    // Per partition: unknown or unauthorized topics answer for themselves and the rest is
    // OPERATION_NOT_ATTEMPTED (Kafka's KafkaApis.handleAddPartitionsToTxnRequest).
    std::vector<txn::topic_partition> parts;
    kafka::error_code blanket = kerr::none;
    if (!may_write_txn(ctx, id)) blanket = kerr::transactional_id_authorization_failed;
    bool any_bad = false;
    std::vector<std::pair<std::size_t, std::size_t>> bad;
    for (auto& t : req.v3_and_below_topics) {
        kafka::AddPartitionsToTxnResponse::AddPartitionsToTxnTopicResult tr;
        tr.name = t.name;
        const topic_info* info = ctx.sh.cat->find(t.name);
        const bool topic_ok = authorized(ctx, acl::operation::write, acl::resource_type::topic, t.name);
        for (auto p : t.partitions) {
            kafka::AddPartitionsToTxnResponse::AddPartitionsToTxnPartitionResult pr;
            pr.partition_index = p;
            if (!topic_ok) {
                pr.partition_error_code = kerr::topic_authorization_failed;
                any_bad = true;
            } else if (!info || p < 0 || p >= info->partitions) {
                pr.partition_error_code = kerr::unknown_topic_or_partition;
                any_bad = true;
            } else {
                parts.emplace_back(t.name, p);
                pr.partition_error_code = kerr::none;
            }
            tr.results_by_partition.push_back(pr);
        }
        r.results_by_topic_v3_and_below.push_back(std::move(tr));
    }
    kafka::error_code code = blanket;
    if (code == kerr::none && any_bad) code = kerr::operation_not_attempted;
    if (code == kerr::none) {
        const bool fenced_known = ctx.version >= add_partitions_fenced_since;
        code = co_await on_core(ctx.sh, txn_owner(id, ctx.sh.shared->cores), [&](shard& o) -> runtime::task<kafka::error_code> {
            auto* c = txn_coordinator_for(o, id);
            if (!c) co_return txn_coordinator_missing(o, id);
            co_return co_await c->add_partitions(id, req.v3_and_below_producer_id, req.v3_and_below_producer_epoch,
                                                 std::move(parts), fenced_known);
        });
    }
    for (auto& tr : r.results_by_topic_v3_and_below) {
        for (auto& pr : tr.results_by_partition) {
            if (code == kerr::operation_not_attempted && pr.partition_error_code != kerr::none) continue;
            pr.partition_error_code = code;
        }
    }
    co_return respond(r, ctx);
}

runtime::task<std::string> handle_add_offsets_to_txn(request_ctx ctx, kafka::AddOffsetsToTxnRequest req) {
    kafka::AddOffsetsToTxnResponse r;
    if (!may_write_txn(ctx, req.transactional_id)) {
        r.error_code = kerr::transactional_id_authorization_failed;
    } else if (!authorized(ctx, acl::operation::read, acl::resource_type::group, req.group_id)) {
        r.error_code = kerr::group_authorization_failed;
    } else if (req.group_id.empty()) {
        r.error_code = kerr::invalid_group_id;
    } else {
        const bool fenced_known = ctx.version >= add_offsets_fenced_since;
        r.error_code = co_await on_core(ctx.sh, txn_owner(req.transactional_id, ctx.sh.shared->cores),
                                        [&](shard& o) -> runtime::task<kafka::error_code> {
                                            auto* c = txn_coordinator_for(o, req.transactional_id);
                                            if (!c) co_return txn_coordinator_missing(o, req.transactional_id);
                                            co_return co_await c->add_offsets(req.transactional_id, req.producer_id,
                                                                              req.producer_epoch, req.group_id, fenced_known);
                                        });
    }
    co_return respond(r, ctx);
}

namespace {

// Which broker-to-broker form a TxnOffsetCommit is (peers.hpp), by its client id; only in
// cluster mode.
enum class offsets_form { client, forwarded, apply };

offsets_form form_of(const request_ctx& ctx) {
    if (!ctx.sh.cfg().clustered()) return offsets_form::client;
    if (ctx.client_id == peer_forward_client_id) return offsets_form::forwarded;
    if (ctx.client_id == peer_apply_client_id) return offsets_form::apply;
    return offsets_form::client;
}

// Whether this broker coordinates `group` (always on one broker). Asked on the group's core.
runtime::task<bool> group_here(shard& sh, const std::string* group) {
    if (!sh.cfg().clustered()) co_return true;
    co_return co_await on_group_owner(sh, *group, [group](shard& o) {
        return o.slot_groups.count(cluster::group_slot(*group)) > 0;
    });
}

using offsets_map = std::map<std::string, std::map<std::int32_t, txn::pending_offset>>;

kafka::TxnOffsetCommitRequest offsets_request(const std::string& id, std::int64_t pid, std::int16_t epoch,
                                              const std::string& group, const offsets_map& offsets) {
    kafka::TxnOffsetCommitRequest req;
    req.transactional_id = id;
    req.group_id = group;
    req.producer_id = pid;
    req.producer_epoch = epoch;
    req.generation_id = -1; // checked already, at the group's broker
    for (const auto& [t, parts] : offsets) {
        kafka::TxnOffsetCommitRequest::TxnOffsetCommitRequestTopic rt;
        rt.name = t;
        for (const auto& [p, o] : parts) {
            kafka::TxnOffsetCommitRequest::TxnOffsetCommitRequestPartition rp;
            rp.partition_index = p;
            rp.committed_offset = o.offset;
            rp.committed_leader_epoch = o.leader_epoch;
            rp.committed_metadata = o.metadata;
            rt.partitions.push_back(std::move(rp));
        }
        req.topics.push_back(std::move(rt));
    }
    return req;
}

// The first error of a TxnOffsetCommit answer, NONE when every partition took its offset.
kafka::error_code first_error(const kafka::TxnOffsetCommitResponse& r) {
    for (const auto& t : r.topics)
        for (const auto& p : t.partitions)
            if (p.error_code != kerr::none) return p.error_code;
    return kerr::none;
}

} // namespace

runtime::task<result<void, std::string>> apply_txn_offsets_at_peer(shard& sh, std::int32_t broker, std::string id,
                                                                   std::string group, offsets_map offsets) {
    auto req = offsets_request(id, -1, -1, group, offsets);
    auto r = co_await send_to_peer(sh, broker, std::move(req), peer_apply_client_id);
    if (!r) co_return failure{r.error()};
    if (auto code = first_error(*r); code != kerr::none)
        co_return failure{fmt::format("group '{}' at broker {}: {}", group, broker, kafka::name(code))};
    co_return ok();
}

// TxnOffsetCommit. From a client it goes to the group's coordinator (Kafka's rule), which
// checks the consumer's group metadata (KIP-447) and hands the offsets to the transaction's
// coordinator, which keeps them in the transaction's state until EndTxn. In cluster mode those
// two may be different brokers: the group's broker then passes the request on (the forwarded
// form), and at commit the coordinator asks the group's broker to apply the offsets (the apply
// form). docs/transactions.md, "Cluster mode".
runtime::task<std::string> handle_txn_offset_commit(request_ctx ctx, kafka::TxnOffsetCommitRequest req) {
    kafka::TxnOffsetCommitResponse r;
    const offsets_form form = form_of(ctx);
    kafka::error_code blanket = kerr::none;
    if (form != offsets_form::client) {
        // The client's rights were checked by the broker it reached.
        if (!authorized_cluster(ctx, acl::operation::cluster_action)) blanket = kerr::cluster_authorization_failed;
    } else if (!may_write_txn(ctx, req.transactional_id)) {
        blanket = kerr::transactional_id_authorization_failed;
    } else if (!authorized(ctx, acl::operation::read, acl::resource_type::group, req.group_id)) {
        blanket = kerr::group_authorization_failed;
    }
    if (blanket == kerr::none && req.group_id.empty()) blanket = kerr::invalid_group_id;
    // The group's coordinator answers for it: a client's request and an apply elsewhere are
    // NOT_COORDINATOR, which sends the client to look the group's coordinator up again.
    if (blanket == kerr::none && form != offsets_form::forwarded && !co_await group_here(ctx.sh, &req.group_id))
        blanket = kerr::not_coordinator;
    offsets_map offsets;
    const std::size_t max_md = 4096; // Kafka's offset.metadata.max.bytes, as OffsetCommit
    for (auto& t : req.topics) {
        kafka::TxnOffsetCommitResponse::TxnOffsetCommitResponseTopic tr;
        tr.name = t.name;
        const topic_info* info = ctx.sh.cat->find(t.name);
        const bool topic_ok =
            form != offsets_form::client || authorized(ctx, acl::operation::read, acl::resource_type::topic, t.name);
        for (auto& p : t.partitions) {
            kafka::TxnOffsetCommitResponse::TxnOffsetCommitResponsePartition pr;
            pr.partition_index = p.partition_index;
            const std::string md = p.committed_metadata.value_or(std::string());
            if (blanket != kerr::none) {
                pr.error_code = blanket;
            } else if (!topic_ok) {
                pr.error_code = kerr::topic_authorization_failed;
            } else if (!info || p.partition_index < 0 || p.partition_index >= info->partitions) {
                pr.error_code = kerr::unknown_topic_or_partition;
            } else if (md.size() > max_md) {
                pr.error_code = kerr::offset_metadata_too_large;
            } else {
                txn::pending_offset o;
                o.offset = p.committed_offset;
                o.leader_epoch = p.committed_leader_epoch;
                o.metadata = md;
                offsets[t.name][p.partition_index] = std::move(o);
                pr.error_code = kerr::none;
            }
            tr.partitions.push_back(pr);
        }
        r.topics.push_back(std::move(tr));
    }
    auto set_all = [&r](kafka::error_code code) {
        for (auto& tr : r.topics)
            for (auto& pr : tr.partitions)
                if (pr.error_code == kerr::none) pr.error_code = code;
    };
    if (!offsets.empty() && form == offsets_form::apply) {
        const std::string* g = &req.group_id;
        auto* e = &offsets;
        const auto code = co_await on_group_owner(ctx.sh, req.group_id, [g, e](shard& o) -> runtime::task<kafka::error_code> {
            std::map<std::string, std::map<std::int32_t, std::tuple<std::int64_t, std::int32_t, std::string>>> entries;
            for (auto& [t, parts] : *e)
                for (auto& [p, off] : parts) entries[t][p] = {off.offset, off.leader_epoch, off.metadata};
            co_return co_await coordinator_for(o, *g).commit_txn_offsets(*g, std::move(entries));
        });
        set_all(code);
        co_return respond(r, ctx);
    }
    // KIP-447 (v3+): the offsets come with the consumer's group metadata, checked against the
    // group on its core first; a zombie whose consumer was rebalanced away is refused.
    if (!offsets.empty() && ctx.version >= 3 && form == offsets_form::client) {
        const auto* rq = &req;
        const auto member_code = co_await on_group_owner(ctx.sh, req.group_id, [rq](shard& o) {
            return coordinator_for(o, rq->group_id)
                .validate_txn_member(rq->group_id, rq->member_id, rq->generation_id, rq->group_instance_id);
        });
        if (member_code != kerr::none) {
            offsets.clear();
            set_all(member_code);
        }
    }
    if (offsets.empty()) co_return respond(r, ctx);
    const std::int32_t remote = form == offsets_form::client
                                    ? remote_coordinator(ctx.sh, req.transactional_id)
                                    : -1;
    if (remote >= 0) {
        // The transaction's coordinator is another broker: it keeps the offsets. Its answer
        // (fenced, a wrong state, NOT_COORDINATOR while the id moves) is the client's.
        auto fwd = offsets_request(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id, offsets);
        auto got = co_await send_to_peer(ctx.sh, remote, std::move(fwd), peer_forward_client_id);
        if (!got) log::warn("TxnOffsetCommit of '{}': passing it to broker {}: {}", req.transactional_id, remote, got.error());
        set_all(got ? first_error(*got) : kerr::coordinator_not_available);
        co_return respond(r, ctx);
    }
    const bool fenced_known = ctx.version >= txn_offset_commit_fenced_since || form == offsets_form::forwarded;
    const auto code = co_await on_core(ctx.sh, txn_owner(req.transactional_id, ctx.sh.shared->cores),
                                       [&](shard& o) -> runtime::task<kafka::error_code> {
                                           auto* c = txn_coordinator_for(o, req.transactional_id);
                                           if (!c) co_return txn_coordinator_missing(o, req.transactional_id);
                                           co_return co_await c->txn_offset_commit(
                                               req.transactional_id, req.producer_id, req.producer_epoch,
                                               req.group_id, std::move(offsets), fenced_known);
                                       });
    set_all(code);
    co_return respond(r, ctx);
}

runtime::task<std::string> handle_end_txn(request_ctx ctx, kafka::EndTxnRequest req) {
    kafka::EndTxnResponse r;
    if (!may_write_txn(ctx, req.transactional_id)) {
        r.error_code = kerr::transactional_id_authorization_failed;
    } else {
        const bool fenced_known = ctx.version >= end_txn_fenced_since;
        r.error_code = co_await on_core(ctx.sh, txn_owner(req.transactional_id, ctx.sh.shared->cores),
                                        [&](shard& o) -> runtime::task<kafka::error_code> {
                                            auto* c = txn_coordinator_for(o, req.transactional_id);
                                            if (!c) co_return txn_coordinator_missing(o, req.transactional_id);
                                            co_return co_await c->end_txn(req.transactional_id, req.producer_id,
                                                                          req.producer_epoch, req.committed, fenced_known);
                                        });
    }
    co_return respond(r, ctx);
}

namespace {
std::vector<txn::txn_metadata> list_on(shard& o, const std::set<std::string>* states, const std::set<std::int64_t>* pids) {
    std::vector<txn::txn_metadata> out;
    for (auto* c : txn_coordinators_of(o)) {
        auto l = c->list(*states, *pids);
        out.insert(out.end(), std::make_move_iterator(l.begin()), std::make_move_iterator(l.end()));
    }
    return out;
}
} // namespace

runtime::task<std::string> handle_list_transactions(request_ctx ctx, kafka::ListTransactionsRequest req) {
    kafka::ListTransactionsResponse r;
    std::set<std::string> states(req.state_filters.begin(), req.state_filters.end());
    std::set<std::int64_t> pids(req.producer_id_filters.begin(), req.producer_id_filters.end());
    const auto* sp = &states;
    const auto* pp = &pids;
    std::vector<runtime::task<std::vector<txn::txn_metadata>>> per_core;
    for (unsigned c = 0; c < ctx.sh.shared->cores; ++c)
        per_core.push_back(on_core(ctx.sh, c, [sp, pp](shard& o) { return list_on(o, sp, pp); }));
    auto got = co_await runtime::when_all(std::move(per_core));
    // Cluster mode: like Kafka, each broker lists the ids it coordinates (admin clients ask
    // every broker and merge).
    for (auto& list : got) {
        for (auto& m : list) {
            // Kafka lists only the ids the principal may describe.
            if (!authorized(ctx, acl::operation::describe, acl::resource_type::transactional_id, m.id)) continue;
            kafka::ListTransactionsResponse::TransactionState s;
            s.transactional_id = m.id;
            s.producer_id = m.producer_id;
            s.transaction_state = std::string(txn::state_name(m.st));
            r.transaction_states.push_back(std::move(s));
        }
    }
    co_return respond(r, ctx);
}

namespace {
struct described {
    kafka::error_code error = kerr::none;
    std::optional<txn::txn_metadata> m;
};
described describe_on(shard& o, const std::string* id) {
    auto* c = txn_coordinator_for(o, *id);
    if (!c) return {txn_coordinator_missing(o, *id), std::nullopt};
    return {kerr::none, c->describe(*id)};
}
} // namespace

runtime::task<std::string> handle_describe_transactions(request_ctx ctx, kafka::DescribeTransactionsRequest req) {
    kafka::DescribeTransactionsResponse r;
    for (auto& id : req.transactional_ids) {
        kafka::DescribeTransactionsResponse::TransactionState s;
        s.transactional_id = id;
        s.producer_id = -1;
        s.producer_epoch = -1;
        s.transaction_start_time_ms = -1;
        if (!authorized(ctx, acl::operation::describe, acl::resource_type::transactional_id, id)) {
            s.error_code = kerr::transactional_id_authorization_failed;
            r.transaction_states.push_back(std::move(s));
            continue;
        }
        const std::string* ip = &id;
        auto d = co_await on_core(ctx.sh, txn_owner(id, ctx.sh.shared->cores), [ip](shard& o) { return describe_on(o, ip); });
        const auto& m = d.m;
        if (d.error != kerr::none) {
            s.error_code = d.error;
        } else if (!m) {
            s.error_code = kerr::transactional_id_not_found;
        } else {
            s.transaction_state = std::string(txn::state_name(m->st));
            s.transaction_timeout_ms = m->timeout_ms;
            s.transaction_start_time_ms = m->start_ms;
            s.producer_id = m->producer_id;
            s.producer_epoch = m->producer_epoch;
            std::map<std::string, std::vector<std::int32_t>> by_topic;
            for (auto& [t, p] : m->partitions) by_topic[t].push_back(p);
            for (auto& [t, ps] : by_topic) {
                kafka::DescribeTransactionsResponse::TopicData td;
                td.name = t;
                td.partition_indexes = std::move(ps);
                s.topic_partitions.push_back(std::move(td));
            }
        }
        r.transaction_states.push_back(std::move(s));
    }
    co_return respond(r, ctx);
}

// WriteTxnMarkers (API 27), between brokers: a transaction's coordinator asks the partition's
// owner to append the marker (Kafka's TransactionMarkerChannelManager sends the same). Needs
// CLUSTER_ACTION on the cluster, as in Kafka. Per partition: NONE once the marker is durable,
// NOT_LEADER_OR_FOLLOWER when this broker does not own it (the coordinator retries at the
// owner its view shows), UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR.
runtime::task<std::string> handle_write_txn_markers(request_ctx ctx, kafka::WriteTxnMarkersRequest req) {
    kafka::WriteTxnMarkersResponse r;
    const bool allowed = authorized_cluster(ctx, acl::operation::cluster_action);
    std::vector<runtime::task<result<void, marker_error>>> work;
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t>> where; // marker, topic, partition
    for (std::size_t mi = 0; mi < req.markers.size(); ++mi) {
        const auto& m = req.markers[mi];
        kafka::WriteTxnMarkersResponse::WritableTxnMarkerResult mr;
        mr.producer_id = m.producer_id;
        for (std::size_t ti = 0; ti < m.topics.size(); ++ti) {
            const auto& t = m.topics[ti];
            kafka::WriteTxnMarkersResponse::WritableTxnMarkerTopicResult tr;
            tr.name = t.name;
            const topic_info* info = ctx.sh.cat->find(t.name);
            for (std::size_t pi = 0; pi < t.partition_indexes.size(); ++pi) {
                const std::int32_t p = t.partition_indexes[pi];
                kafka::WriteTxnMarkersResponse::WritableTxnMarkerPartitionResult pr;
                pr.partition_index = p;
                if (!allowed) {
                    pr.error_code = kerr::cluster_authorization_failed;
                } else if (!info || p < 0 || p >= info->partitions) {
                    pr.error_code = kerr::unknown_topic_or_partition;
                } else if (m.producer_id < 0 || m.producer_epoch < 0) {
                    pr.error_code = kerr::invalid_producer_epoch;
                } else {
                    const std::string* topic = &t.name;
                    const std::int64_t pid = m.producer_id;
                    const std::int16_t epoch = m.producer_epoch;
                    const bool commit = m.transaction_result;
                    work.push_back(on_partition_owner(ctx.sh, t.name, p, [topic, p, pid, epoch, commit](shard& o) {
                        return write_marker(o, *topic, p, pid, epoch, commit);
                    }));
                    where.emplace_back(mi, ti, pi);
                }
                tr.partitions.push_back(pr);
            }
            mr.topics.push_back(std::move(tr));
        }
        r.markers.push_back(std::move(mr));
    }
    auto done = co_await runtime::when_all(std::move(work));
    for (std::size_t k = 0; k < done.size(); ++k) {
        auto [mi, ti, pi] = where[k];
        auto& pr = r.markers[mi].topics[ti].partitions[pi];
        pr.error_code = done[k] ? kerr::none : done[k].error().code;
    }
    co_return respond(r, ctx);
}

} // namespace skiff::broker
