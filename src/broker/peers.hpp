// Requests to the other brokers of a cluster. Brokers coordinate through etcd and the bucket,
// with one exception: a transaction's coordinator must append markers to partitions other
// brokers own, and only a partition's owner appends to it (Kafka's WriteTxnMarkers, sent the
// same way). Private to the broker module; docs/transactions.md, "Cluster mode".
//
// One connection per peer broker per core (the client module's, on this core's reactor),
// opened on first use and reopened after it broke. Peers are reached on their advertised
// PLAINTEXT listener (the only one when the broker has no --listeners); a peer with no such
// listener is an error the caller retries and logs.
#pragma once

#include "shard.hpp"

#include <skiff/client/connection.hpp>

#include <cstdint>
#include <string>

namespace skiff::broker {

// The client ids of requests between brokers. A peer answers a request with one of these
// differently from a client's (handlers/transactions.cpp), and only for a principal with
// CLUSTER_ACTION on the cluster, like Kafka's inter-broker APIs.
inline constexpr std::string_view peer_client_id = "skiff-broker";
// TxnOffsetCommit checked at the group's broker, passed on to the id's coordinator.
inline constexpr std::string_view peer_forward_client_id = "skiff-broker-txn-forward";
// TxnOffsetCommit of a committed transaction, applied by the group's broker.
inline constexpr std::string_view peer_apply_client_id = "skiff-broker-txn-apply";

// The connection to broker `id` on this core with `client_id`, opened if needed. Errors say
// why ("broker 3 is not a live member", "cannot connect to 127.0.0.1:9093: connection refused").
runtime::task<result<client::connection*, std::string>> peer_connection(shard& sh, std::int32_t id,
                                                                       std::string_view client_id = peer_client_id);

// The broker coordinating group or transactional id `key` (both hash to group slots) when it
// is another one, else -1 (this broker, or nobody now).
std::int32_t remote_coordinator(const shard& sh, std::string_view key);

// Sends `req` to broker `id`; the answer, or why there is none.
template <typename Req>
runtime::task<result<client::response_t<Req>, std::string>> send_to_peer(shard& sh, std::int32_t id, Req req,
                                                                          std::string_view client_id = peer_client_id) {
    auto c = co_await peer_connection(sh, id, client_id);
    if (!c) co_return failure{c.error()};
    client::request_options o;
    o.timeout = std::chrono::seconds(10);
    auto r = co_await (*c)->send(std::move(req), o);
    if (!r) co_return failure{fmt::format("broker {}: {}", id, r.error().message)};
    co_return std::move(*r);
}

// Closes this core's peer connections (at shutdown).
runtime::task<void> close_peers(shard& sh);

} // namespace skiff::broker
