// The Kafka request handlers, one file per API or API family under handlers/ (dispatch,
// produce, fetch, list_offsets, metadata, topics, configs, delete_records, cluster,
// producer_ids, leader_epoch, groups). Work on a partition or a group runs on its owning core
// through routing.hpp. Private to the module.
#pragma once

#include "connection.hpp"
#include "shard.hpp"

#include <skiff/acl/model.hpp>
#include <skiff/cluster/records.hpp>
#include <skiff/core/log.hpp>
#include <skiff/kafka/frame.hpp>

#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace skiff::broker {

// Thrown by a handler when the connection cannot go on (undecodable body, unknown API,
// unencodable answer). The connection logs it and closes, as Kafka does.
struct connection_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A request for an API or version that is not served: the connection closes, as Kafka closes it;
// expected of old or foreign clients, so it is logged as a warning rather than a handler error.
struct unserved_request : connection_error {
    using connection_error::connection_error;
};

struct request_ctx {
    shard& sh;
    const conn_info& ci;
    std::int16_t version;
    std::int32_t correlation_id;
    std::string client_id;
};

// Handles one request frame on this core; the framed response, or nullopt when none is sent
// (acks=0). Throws connection_error when the connection must close.
// The request starts `at` bytes into `frame` (the connection hands over its read buffer rather
// than copying a large request out of it).
runtime::task<std::optional<std::string>> handle_request(shard& sh, const conn_info& ci, std::string frame,
                                                         std::size_t at = 0);

// Handlers fill responses without regard to which fields the request's version has;
// normalize() drops what that version cannot carry before encoding.
template <typename Resp>
std::string respond(Resp& r, const request_ctx& ctx) {
    r.normalize(ctx.version);
    auto e = kafka::encode_response(r, ctx.version, ctx.correlation_id);
    if (!e) throw connection_error(std::string(Resp::message_name) + " v" + std::to_string(ctx.version) +
                                   " cannot be encoded: " + e.error().message);
    return std::move(*e);
}

// With borrow_records, records fields view `body` (kafka/record_bytes.hpp): the caller keeps the
// frame alive as long as the request.
template <typename Req>
Req decode_body(std::span<const char> body, std::int16_t version, bool borrow_records = false) {
    kafka::reader rd(body);
    rd.borrow_records(borrow_records);
    auto r = Req::decode(rd, version);
    if (!r) throw connection_error(std::string(Req::message_name) + " v" + std::to_string(version) +
                                   " is malformed: " + r.error().message);
    return std::move(*r);
}

// The address put in Metadata, DescribeCluster and FindCoordinator: the advertised address of
// the listener the request came in on, else the address the client connected to.
std::pair<std::string, std::int32_t> advertised(const request_ctx& ctx);
// Another broker's address for this request: its listener of the same name as the one the
// request came in on (so a SASL client is not sent to a PLAINTEXT port), else its first.
std::pair<std::string, std::int32_t> member_endpoint(const cluster::member& m, const request_ctx& ctx);

// Produce and Fetch answer as response objects (unit-tested without a connection);
// handle_request encodes them.
// `authorized_txn`: the principal may WRITE the request's transactional id (if it names one).
runtime::task<kafka::ProduceResponse> produce(shard& sh, kafka::ProduceRequest req, bool authorized_txn = true);
runtime::task<kafka::FetchResponse> fetch(shard& sh, kafka::FetchRequest req);
// So do the config changes (topics only; they run on core 0, see alter_topic_configs) and
// DeleteRecords (on each partition's owning core).
runtime::task<kafka::AlterConfigsResponse> alter_configs(shard& sh, kafka::AlterConfigsRequest req);
runtime::task<kafka::IncrementalAlterConfigsResponse> incremental_alter_configs(shard& sh,
                                                                                kafka::IncrementalAlterConfigsRequest req);
runtime::task<kafka::DeleteRecordsResponse> delete_records(shard& sh, kafka::DeleteRecordsRequest req);
// DescribeProducers: each partition's idempotent producers, from its owning core.
runtime::task<kafka::DescribeProducersResponse> describe_producers(shard& sh, kafka::DescribeProducersRequest req);
// DescribeClientQuotas / AlterClientQuotas (APIs 48, 49): handlers/client_quotas.cpp.
kafka::DescribeClientQuotasResponse describe_client_quotas(const shard& sh, const kafka::DescribeClientQuotasRequest& req);
runtime::task<kafka::AlterClientQuotasResponse> alter_client_quotas(shard& sh, kafka::AlterClientQuotasRequest req);
// AlterPartitionReassignments / ListPartitionReassignments (APIs 45, 46): handlers/reassignments.cpp.
runtime::task<kafka::AlterPartitionReassignmentsResponse> alter_partition_reassignments(
    shard& sh, kafka::AlterPartitionReassignmentsRequest req);
kafka::ListPartitionReassignmentsResponse list_partition_reassignments(const shard& sh,
                                                                      const kafka::ListPartitionReassignmentsRequest& req);
// ElectLeaders (API 43): handlers/elect_leaders.cpp.
runtime::task<kafka::ElectLeadersResponse> elect_leaders(shard& sh, kafka::ElectLeadersRequest req,
                                                          std::int16_t version);
// DescribeLogDirs: the store as the one log dir, with the size of each partition served here.
runtime::task<kafka::DescribeLogDirsResponse> describe_log_dirs(shard& sh, kafka::DescribeLogDirsRequest req);

// SASL (handlers/sasl.cpp): SaslHandshake, SaslAuthenticate, and the bare tokens that follow a
// SaslHandshake v0. They change ci.sasl and ci.principal; a failure sets ci.close_after_answer.
std::string handle_sasl_handshake(const request_ctx& ctx, const kafka::SaslHandshakeRequest& req);
runtime::task<std::string> handle_sasl_authenticate(request_ctx ctx, kafka::SaslAuthenticateRequest req);
// The framed raw answer, or nullopt when the exchange failed (the connection then closes).
runtime::task<std::optional<std::string>> handle_raw_sasl_token(shard& sh, const conn_info& ci, std::string_view token);
// Marks the session failed and the connection to close after this answer, counted and logged.
void refuse_sasl_state(const request_ctx& ctx, std::string_view what);
// Authorization (handlers/acls.cpp, docs/acl.md): whether the connection's principal may do
// `op` on the resource, by the catalog's ACLs and the broker's super users; always true when
// authorization is off. Denials are counted by resource type.
bool authorized(const request_ctx& ctx, acl::operation op, acl::resource_type type, std::string_view name);
bool authorized_cluster(const request_ctx& ctx, acl::operation op);
// Kafka's authorizeByResourceType: some binding of `type` allows `op` (IDEMPOTENT_WRITE's
// fallback to WRITE on any topic).
bool authorized_any(const request_ctx& ctx, acl::operation op, acl::resource_type type);
// DescribeAcls / CreateAcls / DeleteAcls (APIs 29, 30, 31).
kafka::DescribeAclsResponse describe_acls(const request_ctx& ctx, const kafka::DescribeAclsRequest& req);
runtime::task<kafka::CreateAclsResponse> create_acls(request_ctx ctx, kafka::CreateAclsRequest req);
runtime::task<kafka::DeleteAclsResponse> delete_acls(request_ctx ctx, kafka::DeleteAclsRequest req);

// DescribeUserScramCredentials / AlterUserScramCredentials (APIs 50, 51): handlers/scram_users.cpp.
kafka::DescribeUserScramCredentialsResponse describe_user_scram_credentials(
    const shard& sh, const kafka::DescribeUserScramCredentialsRequest& req);
runtime::task<kafka::AlterUserScramCredentialsResponse> alter_user_scram_credentials(
    shard& sh, kafka::AlterUserScramCredentialsRequest req);

runtime::task<std::string> handle_list_offsets(request_ctx ctx, kafka::ListOffsetsRequest req);
runtime::task<std::string> handle_metadata(request_ctx ctx, kafka::MetadataRequest req);
runtime::task<std::string> handle_create_topics(request_ctx ctx, kafka::CreateTopicsRequest req);
runtime::task<std::string> handle_delete_topics(request_ctx ctx, kafka::DeleteTopicsRequest req);
runtime::task<std::string> handle_create_partitions(request_ctx ctx, kafka::CreatePartitionsRequest req);
std::string describe_configs(const request_ctx& ctx, const kafka::DescribeConfigsRequest& req);
std::string describe_cluster(const request_ctx& ctx, const kafka::DescribeClusterRequest& req);
std::string find_coordinator(const request_ctx& ctx, const kafka::FindCoordinatorRequest& req);
runtime::task<std::string> handle_init_producer_id(request_ctx ctx, kafka::InitProducerIdRequest req);
// The transaction APIs (handlers/transactions.cpp).
runtime::task<std::string> handle_add_partitions_to_txn(request_ctx ctx, kafka::AddPartitionsToTxnRequest req);
runtime::task<std::string> handle_add_offsets_to_txn(request_ctx ctx, kafka::AddOffsetsToTxnRequest req);
runtime::task<std::string> handle_txn_offset_commit(request_ctx ctx, kafka::TxnOffsetCommitRequest req);
runtime::task<std::string> handle_end_txn(request_ctx ctx, kafka::EndTxnRequest req);
runtime::task<std::string> handle_write_txn_markers(request_ctx ctx, kafka::WriteTxnMarkersRequest req);
runtime::task<std::string> handle_list_transactions(request_ctx ctx, kafka::ListTransactionsRequest req);
runtime::task<std::string> handle_describe_transactions(request_ctx ctx, kafka::DescribeTransactionsRequest req);
runtime::task<std::string> handle_offset_for_leader_epoch(request_ctx ctx, kafka::OffsetForLeaderEpochRequest req);

runtime::task<std::string> handle_join_group(request_ctx ctx, kafka::JoinGroupRequest req);
runtime::task<std::string> handle_sync_group(request_ctx ctx, kafka::SyncGroupRequest req);
runtime::task<std::string> handle_heartbeat(request_ctx ctx, kafka::HeartbeatRequest req);
runtime::task<std::string> handle_leave_group(request_ctx ctx, kafka::LeaveGroupRequest req);
runtime::task<std::string> handle_offset_commit(request_ctx ctx, kafka::OffsetCommitRequest req);
runtime::task<std::string> handle_offset_fetch(request_ctx ctx, kafka::OffsetFetchRequest req);
runtime::task<std::string> handle_list_groups(request_ctx ctx, kafka::ListGroupsRequest req);
runtime::task<std::string> handle_describe_groups(request_ctx ctx, kafka::DescribeGroupsRequest req);
runtime::task<std::string> handle_delete_groups(request_ctx ctx, kafka::DeleteGroupsRequest req);
runtime::task<std::string> handle_offset_delete(request_ctx ctx, kafka::OffsetDeleteRequest req);

inline constexpr std::int8_t dynamic_topic_config = 1, static_broker_config = 4, default_config = 5;
// A topic's configs as reported (CreateTopics v5+, DescribeConfigs): every config Kafka
// defines (topic_configs.hpp), the value set on the topic (CreateTopics, AlterConfigs), else
// the broker's setting where a serve flag gives one, else Kafka's default.
struct effective_config {
    std::string_view name;
    std::string value;
    bool custom = false;                  // set on the topic
    std::int8_t source = default_config;  // DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG
    std::int8_t type = 0;                 // DescribeConfigs v3+ config_type
};
std::vector<effective_config> effective_configs(const topic_info& t, const broker_config& cfg);

// The APIs and versions this broker serves (ApiVersions lists exactly these).
struct served_api {
    kafka::api_key key;
    std::int16_t min_version;
    std::int16_t max_version;
};
std::span<const served_api> served_apis() noexcept;

} // namespace skiff::broker
