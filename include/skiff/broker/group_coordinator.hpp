// Consumer groups: Kafka's classic group protocol (JoinGroup / SyncGroup / Heartbeat /
// LeaveGroup) and committed offsets, for the groups one core owns.
//
// Every group is owned by exactly one core (the broker routes by a hash of the group id), so a
// coordinator is single-threaded: all calls on the core that created it. Each call takes the
// decoded request and its version and returns the response for that version; the broker does
// the framing. Calls never take a cross-core stop_token: a pending JoinGroup/SyncGroup is
// completed by the group's own timers (rebalance and session timeouts) or by close().
//
// Committed offsets are kept in the object store, one object per group,
// `{ns}/skiff~meta/groups/{escaped group id}/offsets.json` ('~' cannot occur in a Kafka topic
// name, so these keys never collide with a topic's segments). An OffsetCommit is answered only
// once that object is stored, so an acknowledged commit survives a broker restart.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/kafka/frame.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/object_store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace skiff::broker {

struct group_config {
    group_config() = default;
    // The bucket namespace the offsets objects live under: the broker passes its own
    // (broker_config::ns, the one default); no default here, so it cannot silently differ.
    std::string ns;
    // A new (empty) group waits this long for more members before the first rebalance
    // completes (Kafka's group.initial.rebalance.delay.ms).
    std::chrono::milliseconds initial_rebalance_delay{3000};
    std::chrono::milliseconds min_session_timeout{6000};
    std::chrono::milliseconds max_session_timeout{1800000};
    // A member that joined for the first time must complete that join within this time, else it
    // is dropped (Kafka's NewMemberJoinTimeoutMs; it cannot heartbeat before it has an id).
    std::chrono::milliseconds new_member_join_timeout{300000};
    // Bound on one offsets-object PUT; a commit whose write exceeds it is answered
    // REQUEST_TIMED_OUT (retriable) and not reported as committed.
    std::chrono::milliseconds offset_write_timeout{30000};
    // OffsetCommit metadata longer than this is refused with OFFSET_METADATA_TOO_LARGE
    // (Kafka's offset.metadata.max.bytes).
    std::size_t max_metadata_bytes = 4096;
    // A group left with no members and no committed offsets is forgotten after this long.
    std::chrono::milliseconds empty_group_retention{600000};
    // Wall-clock milliseconds for commit timestamps (null: the system clock). Tests inject one.
    std::function<std::int64_t()> wall_ms;
};

struct group_stats {
    std::size_t groups = 0;          // groups held in memory (with members or offsets)
    std::size_t members = 0;         // members over all groups (not pending MEMBER_ID_REQUIRED ones)
    std::uint64_t rebalances = 0;    // generations completed
    std::uint64_t offset_commits = 0; // OffsetCommit requests acknowledged after their write landed
};

class group_coordinator {
public:
    group_coordinator(storage::object_store& store, group_config cfg);
    ~group_coordinator();
    group_coordinator(const group_coordinator&) = delete;
    group_coordinator& operator=(const group_coordinator&) = delete;

    // Lists the stored groups and loads the committed offsets of those `owns` accepts (the
    // broker passes "hashes to this core"; an empty function accepts all). Called once at
    // start-up, before any request. Fails only when the store cannot be listed or read; a
    // corrupt offsets object is logged and skipped.
    runtime::task<result<void, storage::store_error>> load(std::function<bool(std::string_view)> owns);

    // Errors are Kafka error codes in the response (include/skiff/broker/kafka_errors.hpp),
    // never exceptions: an empty group id is INVALID_GROUP_ID (for every call, also the offset
    // and admin ones, where Kafka would accept ""), any call after close() answers
    // COORDINATOR_NOT_AVAILABLE, and no field value can crash the coordinator.

    // JoinGroup. Completes when the group's rebalance does (every known member rejoined, or
    // the rebalance timeout / initial delay passed), or at once for errors, for v4+ members
    // without an id (MEMBER_ID_REQUIRED with the id to use) and for members that need no
    // rebalance. The leader's answer lists all members with their metadata.
    // Static members (v5+ group_instance_id): a known instance joining with no member id takes
    // over the old member's place; in a Stable group whose protocol would not change this
    // needs no rebalance (the old id is then FENCED_INSTANCE_ID).
    runtime::task<kafka::JoinGroupResponse> join(kafka::JoinGroupRequest req, std::int16_t version,
                                                 std::string client_id, std::string client_host);
    // SyncGroup. A follower's call in CompletingRebalance waits for the leader's; the leader's
    // assignment completes the generation (Stable). REBALANCE_IN_PROGRESS when the group
    // rebalanced meanwhile.
    runtime::task<kafka::SyncGroupResponse> sync(kafka::SyncGroupRequest req, std::int16_t version);
    // Heartbeat: NONE (Stable, CompletingRebalance), REBALANCE_IN_PROGRESS (rejoin needed),
    // ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID. Keeps the session alive.
    kafka::HeartbeatResponse heartbeat(const kafka::HeartbeatRequest& req, std::int16_t version);
    // LeaveGroup: v0-2 one member (error at top level), v3+ a batch with per-member errors.
    kafka::LeaveGroupResponse leave(const kafka::LeaveGroupRequest& req, std::int16_t version);

    // OffsetCommit. Generation -1 without a member id commits for an Empty (or unknown) group;
    // otherwise the member and generation must be current (not during CompletingRebalance).
    // Answered once the group's offsets object is stored: commits of one group are written one
    // PUT at a time, commits arriving meanwhile share the next PUT. A failed or timed-out write
    // answers COORDINATOR_NOT_AVAILABLE / REQUEST_TIMED_OUT (both retriable) and leaves the
    // committed offsets as they were. The coordinator does not know the topics: the broker
    // answers UNKNOWN_TOPIC_OR_PARTITION for unknown ones before calling.
    runtime::task<kafka::OffsetCommitResponse> commit_offsets(kafka::OffsetCommitRequest req, std::int16_t version);
    // A committed transaction's offsets (TxnOffsetCommit, applied by the transaction
    // coordinator when the transaction commits): no member or generation check (the producer's
    // epoch was checked when they were staged), written like any commit; the group is created
    // when unknown. Entries: topic -> partition -> (offset, leader epoch, metadata).
    // COORDINATOR_NOT_AVAILABLE / REQUEST_TIMED_OUT when the write fails (the caller retries).
    runtime::task<kafka::error_code> commit_txn_offsets(
        std::string group, std::map<std::string, std::map<std::int32_t, std::tuple<std::int64_t, std::int32_t, std::string>>> entries);
    // TxnOffsetCommit v3+ (KIP-447): the consumer-group metadata a transactional producer sends
    // with its offsets must be the group's current member and generation, so a producer whose
    // consumer lost its partitions in a rebalance cannot commit offsets for them. Kafka's
    // GroupMetadata checks: COORDINATOR_NOT_AVAILABLE (dead), FENCED_INSTANCE_ID,
    // UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION; generation -1 with no member passes (a producer
    // outside group management). Reads only; no suspension.
    kafka::error_code validate_txn_member(std::string_view group, std::string_view member_id, std::int32_t generation,
                                          const std::optional<std::string>& group_instance_id);
    // Versions 0-7 name one group; from v8 the request may name several: the broker passes
    // only the groups this core owns and merges the `groups` arrays of the answers.
    runtime::task<kafka::OffsetFetchResponse> fetch_offsets(kafka::OffsetFetchRequest req, std::int16_t version);

    // The groups this core owns (the broker merges the answers of all cores). Groups that only
    // have committed offsets are listed as Empty with an empty protocol type.
    kafka::ListGroupsResponse list_groups(const kafka::ListGroupsRequest& req, std::int16_t version);
    // Only groups this core owns are passed in; results in request order. An unknown group is
    // described as "Dead" with no error (Kafka's behaviour up to v5).
    kafka::DescribeGroupsResponse describe_groups(const kafka::DescribeGroupsRequest& req, std::int16_t version);
    // OffsetDelete: the group's committed offsets of the partitions asked, removed with the
    // group's next write (GROUP_SUBSCRIBED_TO_TOPIC for topics a live member subscribes to;
    // group errors at the top). The broker answers unknown topics before calling.
    runtime::task<kafka::OffsetDeleteResponse> delete_offsets(kafka::OffsetDeleteRequest req, std::int16_t version);
    // Deletes Empty groups and their offsets object (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND
    // otherwise); waits for the group's write in flight first.
    runtime::task<kafka::DeleteGroupsResponse> delete_groups(kafka::DeleteGroupsRequest req, std::int16_t version);
    // Topics that were deleted: every group drops their committed offsets with its next write
    // (Kafka's GroupCoordinator.onPartitionsDeleted), so a topic created again under the same
    // name starts with none. Returns at once; a failed write leaves them stored, and the broker
    // keeps them out of OffsetFetch answers while no such topic exists.
    void forget_topics(const std::set<std::string>& gone);

    // Completes pending joins and syncs with COORDINATOR_NOT_AVAILABLE, stops the timers and
    // waits for offset writes (and deletes) in flight; commits accepted before close() are
    // still written and answered. Call it before destroying the coordinator, on its core.
    runtime::task<void> close();

    group_stats stats() const noexcept;

    struct state;

private:
    std::unique_ptr<state> _s;
};

// The store key of a group's committed offsets (see above): group ids may hold any character,
// so everything outside [A-Za-z0-9._-] is %XX-escaped, and ids whose escaped form exceeds 200
// bytes are shortened to a prefix plus a hash.
std::string group_offsets_key(std::string_view ns, std::string_view group_id);

// An OffsetCommit answer naming every partition of `req`, in its order, each answered `code`.
kafka::OffsetCommitResponse offset_commit_answer(const kafka::OffsetCommitRequest& req, kafka::error_code code);

} // namespace skiff::broker
