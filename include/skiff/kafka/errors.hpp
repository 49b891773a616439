// Kafka's protocol error codes (org.apache.kafka.common.protocol.Errors), typed. The generated
// messages' ErrorCode fields carry this type; on the wire it is the int16 Kafka defines.
// Kafka errors are data in a response, never a dropped connection. Names are Kafka's in
// snake_case; values must never change (they are the wire protocol). Header-only; any core.
#pragma once

#include <cstdint>
#include <string_view>

namespace skiff::kafka {

enum class error_code : std::int16_t {
    unknown_server_error = -1,
    none = 0,
    offset_out_of_range = 1,
    corrupt_message = 2,
    unknown_topic_or_partition = 3,
    invalid_fetch_size = 4,
    leader_not_available = 5,
    not_leader_or_follower = 6,
    request_timed_out = 7,
    broker_not_available = 8,
    replica_not_available = 9,
    message_too_large = 10,
    stale_controller_epoch = 11,
    offset_metadata_too_large = 12,
    network_exception = 13,
    coordinator_load_in_progress = 14,
    coordinator_not_available = 15,
    not_coordinator = 16,
    invalid_topic_exception = 17,
    record_list_too_large = 18,
    not_enough_replicas = 19,
    not_enough_replicas_after_append = 20,
    invalid_required_acks = 21,
    illegal_generation = 22,
    inconsistent_group_protocol = 23,
    invalid_group_id = 24,
    unknown_member_id = 25,
    invalid_session_timeout = 26,
    rebalance_in_progress = 27,
    invalid_commit_offset_size = 28,
    topic_authorization_failed = 29,
    group_authorization_failed = 30,
    cluster_authorization_failed = 31,
    invalid_timestamp = 32,
    unsupported_sasl_mechanism = 33,
    illegal_sasl_state = 34,
    unsupported_version = 35,
    topic_already_exists = 36,
    invalid_partitions = 37,
    invalid_replication_factor = 38,
    invalid_replica_assignment = 39,
    invalid_config = 40,
    not_controller = 41,
    invalid_request = 42,
    unsupported_for_message_format = 43,
    policy_violation = 44,
    out_of_order_sequence_number = 45,
    duplicate_sequence_number = 46,
    invalid_producer_epoch = 47,
    invalid_txn_state = 48,
    invalid_producer_id_mapping = 49,
    invalid_transaction_timeout = 50,
    concurrent_transactions = 51,
    transaction_coordinator_fenced = 52,
    transactional_id_authorization_failed = 53,
    security_disabled = 54,
    operation_not_attempted = 55,
    kafka_storage_error = 56,
    log_dir_not_found = 57,
    sasl_authentication_failed = 58,
    unknown_producer_id = 59,
    reassignment_in_progress = 60,
    delegation_token_auth_disabled = 61,
    delegation_token_not_found = 62,
    delegation_token_owner_mismatch = 63,
    delegation_token_request_not_allowed = 64,
    delegation_token_authorization_failed = 65,
    delegation_token_expired = 66,
    invalid_principal_type = 67,
    non_empty_group = 68,
    group_id_not_found = 69,
    fetch_session_id_not_found = 70,
    invalid_fetch_session_epoch = 71,
    listener_not_found = 72,
    topic_deletion_disabled = 73,
    fenced_leader_epoch = 74,
    unknown_leader_epoch = 75,
    unsupported_compression_type = 76,
    stale_broker_epoch = 77,
    offset_not_available = 78,
    member_id_required = 79,
    preferred_leader_not_available = 80,
    group_max_size_reached = 81,
    fenced_instance_id = 82,
    eligible_leaders_not_available = 83,
    election_not_needed = 84,
    no_reassignment_in_progress = 85,
    group_subscribed_to_topic = 86,
    invalid_record = 87,
    unstable_offset_commit = 88,
    throttling_quota_exceeded = 89,
    producer_fenced = 90,
    resource_not_found = 91,
    duplicate_resource = 92,
    unacceptable_credential = 93,
    inconsistent_voter_set = 94,
    invalid_update_version = 95,
    feature_update_failed = 96,
    principal_deserialization_failure = 97,
    snapshot_not_found = 98,
    position_out_of_range = 99,
    unknown_topic_id = 100,
    duplicate_broker_registration = 101,
    broker_id_not_registered = 102,
    inconsistent_topic_id = 103,
    inconsistent_cluster_id = 104,
    transactional_id_not_found = 105,
    fetch_session_topic_id_error = 106,
    ineligible_replica = 107,
    new_leader_elected = 108,
    offset_moved_to_tiered_storage = 109,
    fenced_member_epoch = 110,
    unreleased_instance_id = 111,
    unsupported_assignor = 112,
    stale_member_epoch = 113,
    mismatched_endpoint_type = 114,
    unsupported_endpoint_type = 115,
    unknown_controller_id = 116,
    unknown_subscription_id = 117,
    telemetry_too_large = 118,
    invalid_registration = 119,
    transaction_abortable = 120,
};

// Kafka's name of a code ("REBALANCE_IN_PROGRESS"), for logs and test messages; "UNKNOWN" for a
// code this table does not hold (a newer broker's code read off the wire).
constexpr std::string_view name(error_code code) noexcept {
    switch (code) {
    case error_code::unknown_server_error: return "UNKNOWN_SERVER_ERROR";
    case error_code::none: return "NONE";
    case error_code::offset_out_of_range: return "OFFSET_OUT_OF_RANGE";
    case error_code::corrupt_message: return "CORRUPT_MESSAGE";
    case error_code::unknown_topic_or_partition: return "UNKNOWN_TOPIC_OR_PARTITION";
    case error_code::invalid_fetch_size: return "INVALID_FETCH_SIZE";
    case error_code::leader_not_available: return "LEADER_NOT_AVAILABLE";
    case error_code::not_leader_or_follower: return "NOT_LEADER_OR_FOLLOWER";
    case error_code::request_timed_out: return "REQUEST_TIMED_OUT";
    case error_code::broker_not_available: return "BROKER_NOT_AVAILABLE";
    case error_code::replica_not_available: return "REPLICA_NOT_AVAILABLE";
    case error_code::message_too_large: return "MESSAGE_TOO_LARGE";
    case error_code::stale_controller_epoch: return "STALE_CONTROLLER_EPOCH";
    case error_code::offset_metadata_too_large: return "OFFSET_METADATA_TOO_LARGE";
    case error_code::network_exception: return "NETWORK_EXCEPTION";
    case error_code::coordinator_load_in_progress: return "COORDINATOR_LOAD_IN_PROGRESS";
    case error_code::coordinator_not_available: return "COORDINATOR_NOT_AVAILABLE";
    case error_code::not_coordinator: return "NOT_COORDINATOR";
    case error_code::invalid_topic_exception: return "INVALID_TOPIC_EXCEPTION";
    case error_code::record_list_too_large: return "RECORD_LIST_TOO_LARGE";
    case error_code::not_enough_replicas: return "NOT_ENOUGH_REPLICAS";
    case error_code::not_enough_replicas_after_append: return "NOT_ENOUGH_REPLICAS_AFTER_APPEND";
    case error_code::invalid_required_acks: return "INVALID_REQUIRED_ACKS";
    case error_code::illegal_generation: return "ILLEGAL_GENERATION";
    case error_code::inconsistent_group_protocol: return "INCONSISTENT_GROUP_PROTOCOL";
    case error_code::invalid_group_id: return "INVALID_GROUP_ID";
    case error_code::unknown_member_id: return "UNKNOWN_MEMBER_ID";
    case error_code::invalid_session_timeout: return "INVALID_SESSION_TIMEOUT";
    case error_code::rebalance_in_progress: return "REBALANCE_IN_PROGRESS";
    case error_code::invalid_commit_offset_size: return "INVALID_COMMIT_OFFSET_SIZE";
    case error_code::topic_authorization_failed: return "TOPIC_AUTHORIZATION_FAILED";
    case error_code::group_authorization_failed: return "GROUP_AUTHORIZATION_FAILED";
    case error_code::cluster_authorization_failed: return "CLUSTER_AUTHORIZATION_FAILED";
    case error_code::invalid_timestamp: return "INVALID_TIMESTAMP";
    case error_code::unsupported_sasl_mechanism: return "UNSUPPORTED_SASL_MECHANISM";
    case error_code::illegal_sasl_state: return "ILLEGAL_SASL_STATE";
    case error_code::unsupported_version: return "UNSUPPORTED_VERSION";
    case error_code::topic_already_exists: return "TOPIC_ALREADY_EXISTS";
    case error_code::invalid_partitions: return "INVALID_PARTITIONS";
    case error_code::invalid_replication_factor: return "INVALID_REPLICATION_FACTOR";
    case error_code::invalid_replica_assignment: return "INVALID_REPLICA_ASSIGNMENT";
    case error_code::invalid_config: return "INVALID_CONFIG";
    case error_code::not_controller: return "NOT_CONTROLLER";
    case error_code::invalid_request: return "INVALID_REQUEST";
    case error_code::unsupported_for_message_format: return "UNSUPPORTED_FOR_MESSAGE_FORMAT";
    case error_code::policy_violation: return "POLICY_VIOLATION";
    case error_code::out_of_order_sequence_number: return "OUT_OF_ORDER_SEQUENCE_NUMBER";
    case error_code::duplicate_sequence_number: return "DUPLICATE_SEQUENCE_NUMBER";
    case error_code::invalid_producer_epoch: return "INVALID_PRODUCER_EPOCH";
    case error_code::invalid_txn_state: return "INVALID_TXN_STATE";
    case error_code::invalid_producer_id_mapping: return "INVALID_PRODUCER_ID_MAPPING";
    case error_code::invalid_transaction_timeout: return "INVALID_TRANSACTION_TIMEOUT";
    case error_code::concurrent_transactions: return "CONCURRENT_TRANSACTIONS";
    case error_code::transaction_coordinator_fenced: return "TRANSACTION_COORDINATOR_FENCED";
    case error_code::transactional_id_authorization_failed: return "TRANSACTIONAL_ID_AUTHORIZATION_FAILED";
    case error_code::security_disabled: return "SECURITY_DISABLED";
    case error_code::operation_not_attempted: return "OPERATION_NOT_ATTEMPTED";
    case error_code::kafka_storage_error: return "KAFKA_STORAGE_ERROR";
    case error_code::log_dir_not_found: return "LOG_DIR_NOT_FOUND";
    case error_code::sasl_authentication_failed: return "SASL_AUTHENTICATION_FAILED";
    case error_code::unknown_producer_id: return "UNKNOWN_PRODUCER_ID";
    case error_code::reassignment_in_progress: return "REASSIGNMENT_IN_PROGRESS";
    case error_code::delegation_token_auth_disabled: return "DELEGATION_TOKEN_AUTH_DISABLED";
    case error_code::delegation_token_not_found: return "DELEGATION_TOKEN_NOT_FOUND";
    case error_code::delegation_token_owner_mismatch: return "DELEGATION_TOKEN_OWNER_MISMATCH";
    case error_code::delegation_token_request_not_allowed: return "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED";
    case error_code::delegation_token_authorization_failed: return "DELEGATION_TOKEN_AUTHORIZATION_FAILED";
    case error_code::delegation_token_expired: return "DELEGATION_TOKEN_EXPIRED";
    case error_code::invalid_principal_type: return "INVALID_PRINCIPAL_TYPE";
    case error_code::non_empty_group: return "NON_EMPTY_GROUP";
    case error_code::group_id_not_found: return "GROUP_ID_NOT_FOUND";
    case error_code::fetch_session_id_not_found: return "FETCH_SESSION_ID_NOT_FOUND";
    case error_code::invalid_fetch_session_epoch: return "INVALID_FETCH_SESSION_EPOCH";
    case error_code::listener_not_found: return "LISTENER_NOT_FOUND";
    case error_code::topic_deletion_disabled: return "TOPIC_DELETION_DISABLED";
    case error_code::fenced_leader_epoch: return "FENCED_LEADER_EPOCH";
    case error_code::unknown_leader_epoch: return "UNKNOWN_LEADER_EPOCH";
    case error_code::unsupported_compression_type: return "UNSUPPORTED_COMPRESSION_TYPE";
    case error_code::stale_broker_epoch: return "STALE_BROKER_EPOCH";
    case error_code::offset_not_available: return "OFFSET_NOT_AVAILABLE";
    case error_code::member_id_required: return "MEMBER_ID_REQUIRED";
    case error_code::preferred_leader_not_available: return "PREFERRED_LEADER_NOT_AVAILABLE";
    case error_code::group_max_size_reached: return "GROUP_MAX_SIZE_REACHED";
    case error_code::fenced_instance_id: return "FENCED_INSTANCE_ID";
    case error_code::eligible_leaders_not_available: return "ELIGIBLE_LEADERS_NOT_AVAILABLE";
    case error_code::election_not_needed: return "ELECTION_NOT_NEEDED";
    case error_code::no_reassignment_in_progress: return "NO_REASSIGNMENT_IN_PROGRESS";
    case error_code::group_subscribed_to_topic: return "GROUP_SUBSCRIBED_TO_TOPIC";
    case error_code::invalid_record: return "INVALID_RECORD";
    case error_code::unstable_offset_commit: return "UNSTABLE_OFFSET_COMMIT";
    case error_code::throttling_quota_exceeded: return "THROTTLING_QUOTA_EXCEEDED";
    case error_code::producer_fenced: return "PRODUCER_FENCED";
    case error_code::resource_not_found: return "RESOURCE_NOT_FOUND";
    case error_code::duplicate_resource: return "DUPLICATE_RESOURCE";
    case error_code::unacceptable_credential: return "UNACCEPTABLE_CREDENTIAL";
    case error_code::inconsistent_voter_set: return "INCONSISTENT_VOTER_SET";
    case error_code::invalid_update_version: return "INVALID_UPDATE_VERSION";
    case error_code::feature_update_failed: return "FEATURE_UPDATE_FAILED";
    case error_code::principal_deserialization_failure: return "PRINCIPAL_DESERIALIZATION_FAILURE";
    case error_code::snapshot_not_found: return "SNAPSHOT_NOT_FOUND";
    case error_code::position_out_of_range: return "POSITION_OUT_OF_RANGE";
    case error_code::unknown_topic_id: return "UNKNOWN_TOPIC_ID";
    case error_code::duplicate_broker_registration: return "DUPLICATE_BROKER_REGISTRATION";
    case error_code::broker_id_not_registered: return "BROKER_ID_NOT_REGISTERED";
    case error_code::inconsistent_topic_id: return "INCONSISTENT_TOPIC_ID";
    case error_code::inconsistent_cluster_id: return "INCONSISTENT_CLUSTER_ID";
    case error_code::transactional_id_not_found: return "TRANSACTIONAL_ID_NOT_FOUND";
    case error_code::fetch_session_topic_id_error: return "FETCH_SESSION_TOPIC_ID_ERROR";
    case error_code::ineligible_replica: return "INELIGIBLE_REPLICA";
    case error_code::new_leader_elected: return "NEW_LEADER_ELECTED";
    case error_code::offset_moved_to_tiered_storage: return "OFFSET_MOVED_TO_TIERED_STORAGE";
    case error_code::fenced_member_epoch: return "FENCED_MEMBER_EPOCH";
    case error_code::unreleased_instance_id: return "UNRELEASED_INSTANCE_ID";
    case error_code::unsupported_assignor: return "UNSUPPORTED_ASSIGNOR";
    case error_code::stale_member_epoch: return "STALE_MEMBER_EPOCH";
    case error_code::mismatched_endpoint_type: return "MISMATCHED_ENDPOINT_TYPE";
    case error_code::unsupported_endpoint_type: return "UNSUPPORTED_ENDPOINT_TYPE";
    case error_code::unknown_controller_id: return "UNKNOWN_CONTROLLER_ID";
    case error_code::unknown_subscription_id: return "UNKNOWN_SUBSCRIPTION_ID";
    case error_code::telemetry_too_large: return "TELEMETRY_TOO_LARGE";
    case error_code::invalid_registration: return "INVALID_REGISTRATION";
    case error_code::transaction_abortable: return "TRANSACTION_ABORTABLE";
    }
    return "UNKNOWN";
}

constexpr std::int16_t to_wire(error_code c) noexcept { return static_cast<std::int16_t>(c); }
constexpr error_code from_wire(std::int16_t v) noexcept { return static_cast<error_code>(v); }

// Whether Kafka's client treats the error as retriable (a RetriableException): the subset the
// broker and coordinator produce.
constexpr bool is_retriable(error_code code) noexcept {
    switch (code) {
    case error_code::corrupt_message:
    case error_code::unknown_topic_or_partition:
    case error_code::leader_not_available:
    case error_code::not_leader_or_follower:
    case error_code::request_timed_out:
    case error_code::network_exception:
    case error_code::coordinator_load_in_progress:
    case error_code::coordinator_not_available:
    case error_code::not_coordinator:
    case error_code::not_enough_replicas:
    case error_code::not_enough_replicas_after_append:
    case error_code::kafka_storage_error:
    case error_code::offset_not_available:
    case error_code::fenced_leader_epoch:
    case error_code::unknown_leader_epoch:
    case error_code::concurrent_transactions:
    case error_code::unstable_offset_commit:
    case error_code::throttling_quota_exceeded:
    case error_code::unknown_topic_id:
    case error_code::inconsistent_topic_id:
        return true;
    default:
        return false;
    }
}

} // namespace skiff::kafka
