// Kafka's protocol error codes (org.apache.kafka.common.protocol.Errors), as the int16 the
// responses carry. Kafka errors are data in a response, never a dropped connection.
// Names are Kafka's in snake_case; values must never change (they are the wire protocol).
// Header-only; usable on any core.
#pragma once

#include <cstdint>
#include <string_view>

namespace skiff::broker::kerr {
inline constexpr std::int16_t unknown_server_error = -1;
inline constexpr std::int16_t none = 0;
inline constexpr std::int16_t offset_out_of_range = 1;
inline constexpr std::int16_t corrupt_message = 2;
inline constexpr std::int16_t unknown_topic_or_partition = 3;
inline constexpr std::int16_t invalid_fetch_size = 4;
inline constexpr std::int16_t leader_not_available = 5;
inline constexpr std::int16_t not_leader_or_follower = 6;
inline constexpr std::int16_t request_timed_out = 7;
inline constexpr std::int16_t broker_not_available = 8;
inline constexpr std::int16_t replica_not_available = 9;
inline constexpr std::int16_t message_too_large = 10;
inline constexpr std::int16_t stale_controller_epoch = 11;
inline constexpr std::int16_t offset_metadata_too_large = 12;
inline constexpr std::int16_t network_exception = 13;
inline constexpr std::int16_t coordinator_load_in_progress = 14;
inline constexpr std::int16_t coordinator_not_available = 15;
inline constexpr std::int16_t not_coordinator = 16;
inline constexpr std::int16_t invalid_topic_exception = 17;
inline constexpr std::int16_t record_list_too_large = 18;
inline constexpr std::int16_t not_enough_replicas = 19;
inline constexpr std::int16_t not_enough_replicas_after_append = 20;
inline constexpr std::int16_t invalid_required_acks = 21;
inline constexpr std::int16_t illegal_generation = 22;
inline constexpr std::int16_t inconsistent_group_protocol = 23;
inline constexpr std::int16_t invalid_group_id = 24;
inline constexpr std::int16_t unknown_member_id = 25;
inline constexpr std::int16_t invalid_session_timeout = 26;
inline constexpr std::int16_t rebalance_in_progress = 27;
inline constexpr std::int16_t invalid_commit_offset_size = 28;
inline constexpr std::int16_t topic_authorization_failed = 29;
inline constexpr std::int16_t group_authorization_failed = 30;
inline constexpr std::int16_t cluster_authorization_failed = 31;
inline constexpr std::int16_t invalid_timestamp = 32;
inline constexpr std::int16_t unsupported_sasl_mechanism = 33;
inline constexpr std::int16_t illegal_sasl_state = 34;
inline constexpr std::int16_t unsupported_version = 35;
inline constexpr std::int16_t topic_already_exists = 36;
inline constexpr std::int16_t invalid_partitions = 37;
inline constexpr std::int16_t invalid_replication_factor = 38;
inline constexpr std::int16_t invalid_replica_assignment = 39;
inline constexpr std::int16_t invalid_config = 40;
inline constexpr std::int16_t not_controller = 41;
inline constexpr std::int16_t invalid_request = 42;
inline constexpr std::int16_t unsupported_for_message_format = 43;
inline constexpr std::int16_t policy_violation = 44;
inline constexpr std::int16_t out_of_order_sequence_number = 45;
inline constexpr std::int16_t duplicate_sequence_number = 46;
inline constexpr std::int16_t invalid_producer_epoch = 47;
inline constexpr std::int16_t invalid_txn_state = 48;
inline constexpr std::int16_t invalid_producer_id_mapping = 49;
inline constexpr std::int16_t invalid_transaction_timeout = 50;
inline constexpr std::int16_t concurrent_transactions = 51;
inline constexpr std::int16_t transaction_coordinator_fenced = 52;
inline constexpr std::int16_t transactional_id_authorization_failed = 53;
inline constexpr std::int16_t security_disabled = 54;
inline constexpr std::int16_t operation_not_attempted = 55;
inline constexpr std::int16_t kafka_storage_error = 56;
inline constexpr std::int16_t log_dir_not_found = 57;
inline constexpr std::int16_t sasl_authentication_failed = 58;
inline constexpr std::int16_t unknown_producer_id = 59;
inline constexpr std::int16_t reassignment_in_progress = 60;
inline constexpr std::int16_t delegation_token_auth_disabled = 61;
inline constexpr std::int16_t delegation_token_not_found = 62;
inline constexpr std::int16_t delegation_token_owner_mismatch = 63;
inline constexpr std::int16_t delegation_token_request_not_allowed = 64;
inline constexpr std::int16_t delegation_token_authorization_failed = 65;
inline constexpr std::int16_t delegation_token_expired = 66;
inline constexpr std::int16_t invalid_principal_type = 67;
inline constexpr std::int16_t non_empty_group = 68;
inline constexpr std::int16_t group_id_not_found = 69;
inline constexpr std::int16_t fetch_session_id_not_found = 70;
inline constexpr std::int16_t invalid_fetch_session_epoch = 71;
inline constexpr std::int16_t listener_not_found = 72;
inline constexpr std::int16_t topic_deletion_disabled = 73;
inline constexpr std::int16_t fenced_leader_epoch = 74;
inline constexpr std::int16_t unknown_leader_epoch = 75;
inline constexpr std::int16_t unsupported_compression_type = 76;
inline constexpr std::int16_t stale_broker_epoch = 77;
inline constexpr std::int16_t offset_not_available = 78;
inline constexpr std::int16_t member_id_required = 79;
inline constexpr std::int16_t preferred_leader_not_available = 80;
inline constexpr std::int16_t group_max_size_reached = 81;
inline constexpr std::int16_t fenced_instance_id = 82;
inline constexpr std::int16_t eligible_leaders_not_available = 83;
inline constexpr std::int16_t election_not_needed = 84;
inline constexpr std::int16_t no_reassignment_in_progress = 85;
inline constexpr std::int16_t group_subscribed_to_topic = 86;
inline constexpr std::int16_t invalid_record = 87;
inline constexpr std::int16_t unstable_offset_commit = 88;
inline constexpr std::int16_t throttling_quota_exceeded = 89;
inline constexpr std::int16_t producer_fenced = 90;
inline constexpr std::int16_t resource_not_found = 91;
inline constexpr std::int16_t duplicate_resource = 92;
inline constexpr std::int16_t unacceptable_credential = 93;
inline constexpr std::int16_t inconsistent_voter_set = 94;
inline constexpr std::int16_t invalid_update_version = 95;
inline constexpr std::int16_t feature_update_failed = 96;
inline constexpr std::int16_t principal_deserialization_failure = 97;
inline constexpr std::int16_t snapshot_not_found = 98;
inline constexpr std::int16_t position_out_of_range = 99;
inline constexpr std::int16_t unknown_topic_id = 100;
inline constexpr std::int16_t duplicate_broker_registration = 101;
inline constexpr std::int16_t broker_id_not_registered = 102;
inline constexpr std::int16_t inconsistent_topic_id = 103;
inline constexpr std::int16_t inconsistent_cluster_id = 104;
inline constexpr std::int16_t transactional_id_not_found = 105;
inline constexpr std::int16_t fetch_session_topic_id_error = 106;
inline constexpr std::int16_t ineligible_replica = 107;
inline constexpr std::int16_t new_leader_elected = 108;
inline constexpr std::int16_t offset_moved_to_tiered_storage = 109;
inline constexpr std::int16_t fenced_member_epoch = 110;
inline constexpr std::int16_t unreleased_instance_id = 111;
inline constexpr std::int16_t unsupported_assignor = 112;
inline constexpr std::int16_t stale_member_epoch = 113;
inline constexpr std::int16_t mismatched_endpoint_type = 114;
inline constexpr std::int16_t unsupported_endpoint_type = 115;
inline constexpr std::int16_t unknown_controller_id = 116;
inline constexpr std::int16_t unknown_subscription_id = 117;
inline constexpr std::int16_t telemetry_too_large = 118;
inline constexpr std::int16_t invalid_registration = 119;
inline constexpr std::int16_t transaction_abortable = 120;

// Kafka's name of a code ("REBALANCE_IN_PROGRESS"), for logs and test messages; "UNKNOWN" for a
// code this table does not hold.
constexpr std::string_view name(std::int16_t code) noexcept {
    switch (code) {
    case unknown_server_error: return "UNKNOWN_SERVER_ERROR";
    case none: return "NONE";
    case offset_out_of_range: return "OFFSET_OUT_OF_RANGE";
    case corrupt_message: return "CORRUPT_MESSAGE";
    case unknown_topic_or_partition: return "UNKNOWN_TOPIC_OR_PARTITION";
    case invalid_fetch_size: return "INVALID_FETCH_SIZE";
    case leader_not_available: return "LEADER_NOT_AVAILABLE";
    case not_leader_or_follower: return "NOT_LEADER_OR_FOLLOWER";
    case request_timed_out: return "REQUEST_TIMED_OUT";
    case broker_not_available: return "BROKER_NOT_AVAILABLE";
    case replica_not_available: return "REPLICA_NOT_AVAILABLE";
    case message_too_large: return "MESSAGE_TOO_LARGE";
    case stale_controller_epoch: return "STALE_CONTROLLER_EPOCH";
    case offset_metadata_too_large: return "OFFSET_METADATA_TOO_LARGE";
    case network_exception: return "NETWORK_EXCEPTION";
    case coordinator_load_in_progress: return "COORDINATOR_LOAD_IN_PROGRESS";
    case coordinator_not_available: return "COORDINATOR_NOT_AVAILABLE";
    case not_coordinator: return "NOT_COORDINATOR";
    case invalid_topic_exception: return "INVALID_TOPIC_EXCEPTION";
    case record_list_too_large: return "RECORD_LIST_TOO_LARGE";
    case not_enough_replicas: return "NOT_ENOUGH_REPLICAS";
    case not_enough_replicas_after_append: return "NOT_ENOUGH_REPLICAS_AFTER_APPEND";
    case invalid_required_acks: return "INVALID_REQUIRED_ACKS";
    case illegal_generation: return "ILLEGAL_GENERATION";
    case inconsistent_group_protocol: return "INCONSISTENT_GROUP_PROTOCOL";
    case invalid_group_id: return "INVALID_GROUP_ID";
    case unknown_member_id: return "UNKNOWN_MEMBER_ID";
    case invalid_session_timeout: return "INVALID_SESSION_TIMEOUT";
    case rebalance_in_progress: return "REBALANCE_IN_PROGRESS";
    case invalid_commit_offset_size: return "INVALID_COMMIT_OFFSET_SIZE";
    case topic_authorization_failed: return "TOPIC_AUTHORIZATION_FAILED";
    case group_authorization_failed: return "GROUP_AUTHORIZATION_FAILED";
    case cluster_authorization_failed: return "CLUSTER_AUTHORIZATION_FAILED";
    case invalid_timestamp: return "INVALID_TIMESTAMP";
    case unsupported_sasl_mechanism: return "UNSUPPORTED_SASL_MECHANISM";
    case illegal_sasl_state: return "ILLEGAL_SASL_STATE";
    case unsupported_version: return "UNSUPPORTED_VERSION";
    case topic_already_exists: return "TOPIC_ALREADY_EXISTS";
    case invalid_partitions: return "INVALID_PARTITIONS";
    case invalid_replication_factor: return "INVALID_REPLICATION_FACTOR";
    case invalid_replica_assignment: return "INVALID_REPLICA_ASSIGNMENT";
    case invalid_config: return "INVALID_CONFIG";
    case not_controller: return "NOT_CONTROLLER";
    case invalid_request: return "INVALID_REQUEST";
    case unsupported_for_message_format: return "UNSUPPORTED_FOR_MESSAGE_FORMAT";
    case policy_violation: return "POLICY_VIOLATION";
    case out_of_order_sequence_number: return "OUT_OF_ORDER_SEQUENCE_NUMBER";
    case duplicate_sequence_number: return "DUPLICATE_SEQUENCE_NUMBER";
    case invalid_producer_epoch: return "INVALID_PRODUCER_EPOCH";
    case invalid_txn_state: return "INVALID_TXN_STATE";
    case invalid_producer_id_mapping: return "INVALID_PRODUCER_ID_MAPPING";
    case invalid_transaction_timeout: return "INVALID_TRANSACTION_TIMEOUT";
    case concurrent_transactions: return "CONCURRENT_TRANSACTIONS";
    case transaction_coordinator_fenced: return "TRANSACTION_COORDINATOR_FENCED";
    case transactional_id_authorization_failed: return "TRANSACTIONAL_ID_AUTHORIZATION_FAILED";
    case security_disabled: return "SECURITY_DISABLED";
    case operation_not_attempted: return "OPERATION_NOT_ATTEMPTED";
    case kafka_storage_error: return "KAFKA_STORAGE_ERROR";
    case log_dir_not_found: return "LOG_DIR_NOT_FOUND";
    case sasl_authentication_failed: return "SASL_AUTHENTICATION_FAILED";
    case unknown_producer_id: return "UNKNOWN_PRODUCER_ID";
    case reassignment_in_progress: return "REASSIGNMENT_IN_PROGRESS";
    case delegation_token_auth_disabled: return "DELEGATION_TOKEN_AUTH_DISABLED";
    case delegation_token_not_found: return "DELEGATION_TOKEN_NOT_FOUND";
    case delegation_token_owner_mismatch: return "DELEGATION_TOKEN_OWNER_MISMATCH";
    case delegation_token_request_not_allowed: return "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED";
    case delegation_token_authorization_failed: return "DELEGATION_TOKEN_AUTHORIZATION_FAILED";
    case delegation_token_expired: return "DELEGATION_TOKEN_EXPIRED";
    case invalid_principal_type: return "INVALID_PRINCIPAL_TYPE";
    case non_empty_group: return "NON_EMPTY_GROUP";
    case group_id_not_found: return "GROUP_ID_NOT_FOUND";
    case fetch_session_id_not_found: return "FETCH_SESSION_ID_NOT_FOUND";
    case invalid_fetch_session_epoch: return "INVALID_FETCH_SESSION_EPOCH";
    case listener_not_found: return "LISTENER_NOT_FOUND";
    case topic_deletion_disabled: return "TOPIC_DELETION_DISABLED";
    case fenced_leader_epoch: return "FENCED_LEADER_EPOCH";
    case unknown_leader_epoch: return "UNKNOWN_LEADER_EPOCH";
    case unsupported_compression_type: return "UNSUPPORTED_COMPRESSION_TYPE";
    case stale_broker_epoch: return "STALE_BROKER_EPOCH";
    case offset_not_available: return "OFFSET_NOT_AVAILABLE";
    case member_id_required: return "MEMBER_ID_REQUIRED";
    case preferred_leader_not_available: return "PREFERRED_LEADER_NOT_AVAILABLE";
    case group_max_size_reached: return "GROUP_MAX_SIZE_REACHED";
    case fenced_instance_id: return "FENCED_INSTANCE_ID";
    case eligible_leaders_not_available: return "ELIGIBLE_LEADERS_NOT_AVAILABLE";
    case election_not_needed: return "ELECTION_NOT_NEEDED";
    case no_reassignment_in_progress: return "NO_REASSIGNMENT_IN_PROGRESS";
    case group_subscribed_to_topic: return "GROUP_SUBSCRIBED_TO_TOPIC";
    case invalid_record: return "INVALID_RECORD";
    case unstable_offset_commit: return "UNSTABLE_OFFSET_COMMIT";
    case throttling_quota_exceeded: return "THROTTLING_QUOTA_EXCEEDED";
    case producer_fenced: return "PRODUCER_FENCED";
    case resource_not_found: return "RESOURCE_NOT_FOUND";
    case duplicate_resource: return "DUPLICATE_RESOURCE";
    case unacceptable_credential: return "UNACCEPTABLE_CREDENTIAL";
    case inconsistent_voter_set: return "INCONSISTENT_VOTER_SET";
    case invalid_update_version: return "INVALID_UPDATE_VERSION";
    case feature_update_failed: return "FEATURE_UPDATE_FAILED";
    case principal_deserialization_failure: return "PRINCIPAL_DESERIALIZATION_FAILURE";
    case snapshot_not_found: return "SNAPSHOT_NOT_FOUND";
    case position_out_of_range: return "POSITION_OUT_OF_RANGE";
    case unknown_topic_id: return "UNKNOWN_TOPIC_ID";
    case duplicate_broker_registration: return "DUPLICATE_BROKER_REGISTRATION";
    case broker_id_not_registered: return "BROKER_ID_NOT_REGISTERED";
    case inconsistent_topic_id: return "INCONSISTENT_TOPIC_ID";
    case inconsistent_cluster_id: return "INCONSISTENT_CLUSTER_ID";
    case transactional_id_not_found: return "TRANSACTIONAL_ID_NOT_FOUND";
    case fetch_session_topic_id_error: return "FETCH_SESSION_TOPIC_ID_ERROR";
    case ineligible_replica: return "INELIGIBLE_REPLICA";
    case new_leader_elected: return "NEW_LEADER_ELECTED";
    case offset_moved_to_tiered_storage: return "OFFSET_MOVED_TO_TIERED_STORAGE";
    case fenced_member_epoch: return "FENCED_MEMBER_EPOCH";
    case unreleased_instance_id: return "UNRELEASED_INSTANCE_ID";
    case unsupported_assignor: return "UNSUPPORTED_ASSIGNOR";
    case stale_member_epoch: return "STALE_MEMBER_EPOCH";
    case mismatched_endpoint_type: return "MISMATCHED_ENDPOINT_TYPE";
    case unsupported_endpoint_type: return "UNSUPPORTED_ENDPOINT_TYPE";
    case unknown_controller_id: return "UNKNOWN_CONTROLLER_ID";
    case unknown_subscription_id: return "UNKNOWN_SUBSCRIPTION_ID";
    case telemetry_too_large: return "TELEMETRY_TOO_LARGE";
    case invalid_registration: return "INVALID_REGISTRATION";
    case transaction_abortable: return "TRANSACTION_ABORTABLE";
    default: return "UNKNOWN";
    }
}

// Whether Kafka's client treats the error as retriable (a RetriableException): the subset the
// broker and coordinator produce.
constexpr bool is_retriable(std::int16_t code) noexcept {
    switch (code) {
    case corrupt_message:
    case unknown_topic_or_partition:
    case leader_not_available:
    case not_leader_or_follower:
    case request_timed_out:
    case network_exception:
    case coordinator_load_in_progress:
    case coordinator_not_available:
    case not_coordinator:
    case not_enough_replicas:
    case not_enough_replicas_after_append:
    case kafka_storage_error:
    case offset_not_available:
    case fenced_leader_epoch:
    case unknown_leader_epoch:
    case concurrent_transactions:
    case unstable_offset_commit:
    case throttling_quota_exceeded:
    case unknown_topic_id:
    case inconsistent_topic_id:
        return true;
    default:
        return false;
    }
}

} // namespace skiff::broker::kerr
