// The consumer groups one core owns (Redpanda's group_manager): the group table, the
// membership transitions of Kafka's GroupCoordinator (membership.cpp) and the committed-offset
// store (offset_store.cpp). Answers are version-independent here; group_coordinator.cpp shapes
// them per Kafka version. Owning core only; nothing takes a stop_token: waits end through the
// group's timers or close().
#pragma once

#include "group.hpp"

#include <skiff/broker/group_coordinator.hpp>
#include <skiff/broker/kafka_errors.hpp>
#include <skiff/core/result.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/object_store.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::broker::groups {

// One group's offsets for OffsetFetch: (topic, partition) -> committed, in request order.
struct fetched_partition {
    std::int32_t partition = 0;
    std::int64_t offset = -1;
    std::int32_t leader_epoch = -1;
    std::string metadata;
    kafka::error_code error = kerr::none;
};
struct fetched_topic {
    std::string name;
    std::vector<fetched_partition> partitions;
};
struct fetched_group {
    kafka::error_code error = kerr::none;
    std::vector<fetched_topic> topics;
};
using topic_partitions = std::vector<std::pair<std::string, std::vector<std::int32_t>>>;

class group_manager {
public:
    using group_map = std::map<std::string, std::shared_ptr<group>, std::less<>>;

    group_manager(storage::object_store& store, group_config cfg);
    group_manager(const group_manager&) = delete;
    group_manager& operator=(const group_manager&) = delete;

    const group_config& cfg() const noexcept { return _cfg; }
    bool closed() const noexcept { return _closed; }
    const group_map& groups() const noexcept { return _groups; }
    runtime::time_point now() const { return runtime::reactor::local().now(); }
    // Wall-clock milliseconds for commit timestamps (the configured clock, else the system's).
    std::int64_t wall_ms() const;

    group* find_group(std::string_view id);
    group& create_group(const std::string& id);
    // Forgets groups that stayed Empty, without members or offsets, for the retention time
    // (at most once a second).
    void sweep();

    // ---- membership (membership.cpp) ----
    // Each returns a slot that is either filled already (errors, answers that need no wait) or
    // filled by a later transition; the façade awaits it.
    std::shared_ptr<oneshot<JoinGroupResponse>> handle_join(const kafka::JoinGroupRequest& req, std::int16_t version,
                                                             const std::string& client_id,
                                                             const std::string& client_host);
    std::shared_ptr<oneshot<SyncGroupResponse>> handle_sync(const kafka::SyncGroupRequest& req, std::int16_t version);
    kafka::error_code handle_heartbeat(const kafka::HeartbeatRequest& req, std::int16_t version);
    // One member (by id, or by instance id when the id is empty) leaves `g`.
    kafka::error_code leave_one(group& g, std::string mid, const std::optional<std::string>& instance);

    // Timer entry points (group.hpp's timers call these).
    void on_join_timer(group& g);
    void on_sync_timer(group& g);
    void on_session_expired(group& g, std::string mid);
    void on_pending_expired(group& g, std::string mid);

    // ---- committed offsets (offset_store.cpp) ----
    // Kafka's GroupMetadata.validateOffsetCommit: kerr::none with `out` set, or the error for
    // every partition. May create the group (a standalone commit).
    kafka::error_code validate_commit(const kafka::OffsetCommitRequest& req, std::int16_t version, group*& out);
    // Queues accepted entries for the group's next write; the slot gets the outcome.
    std::shared_ptr<oneshot<kafka::error_code>> enqueue_commit(group& g, offset_map entries);
    // Queues removals of committed offsets for the group's next write (OffsetDelete).
    std::shared_ptr<oneshot<kafka::error_code>> enqueue_delete(group& g, std::map<std::string, std::set<std::int32_t>> parts);
    // OffsetDelete for one group (Kafka's GroupCoordinator.handleDeleteOffsets): the group's
    // error (INVALID_GROUP_ID, NOT_COORDINATOR, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP for a
    // non-consumer group with members) or, per partition, GROUP_SUBSCRIBED_TO_TOPIC while a
    // member of a live group subscribes to its topic, else the outcome of the write that
    // removes its offset (none when it had none). Topics the broker does not know are
    // filtered out before.
    struct offset_delete_outcome {
        offset_delete_outcome() = default;
        kafka::error_code error = kerr::none;
        std::map<std::pair<std::string, std::int32_t>, kafka::error_code> partitions;
    };
    runtime::task<offset_delete_outcome> delete_offsets(std::string name, topic_partitions tps);
    // The topics the members of `g` subscribe to (their consumer-protocol subscriptions for
    // the group's protocol); empty for a group of another protocol type.
    std::set<std::string> subscribed_topics(const group& g) const;
    // DeleteGroups for one group: waits for its write in flight, then removes its object.
    runtime::task<kafka::error_code> delete_one(std::string name);
    // See group_coordinator::forget_topics.
    void forget_topics(const std::set<std::string>& gone);
    // `topics` null: everything committed.
    fetched_group fetch_group(const std::string& gid, const std::optional<topic_partitions>& topics);
    // See group_coordinator::load.
    runtime::task<result<void, storage::store_error>> load(std::function<bool(std::string_view)> owns);

    // See group_coordinator::close.
    runtime::task<void> close();
    group_stats stats() const noexcept;

private:
    std::string new_member_id(std::string_view prefix);

    void reset_session(member& m, std::optional<ms> timeout = std::nullopt);
    void erase_member(group& g, const std::string& mid, kafka::error_code code);
    void remove_member_and_update(group& g, const std::string& mid, std::string_view reason);
    void reset_and_propagate_assignment_error(group& g, kafka::error_code code);
    void propagate_assignment(group& g);
    void maybe_prepare_rebalance(group& g, std::string_view reason);
    void prepare_rebalance(group& g, std::string_view reason);
    void try_complete_join(group& g);
    bool elect_joined_leader(group& g);
    void complete_join(group& g);
    void add_member_and_rebalance(group& g, const std::string& mid, std::optional<std::string> instance,
                                  const kafka::JoinGroupRequest& req, std::int32_t rebalance_ms,
                                  std::vector<protocol> protocols, const std::string& client_id,
                                  const std::string& client_host, std::shared_ptr<oneshot<JoinGroupResponse>> slot);
    void update_member_and_rebalance(group& g, member& m, const kafka::JoinGroupRequest& req,
                                     std::int32_t rebalance_ms, std::vector<protocol> protocols,
                                     std::shared_ptr<oneshot<JoinGroupResponse>> slot, std::string_view reason);
    void static_member_rejoin(group& g, const std::string& old_id, const std::string& new_id, std::int16_t version,
                              const kafka::JoinGroupRequest& req, std::int32_t rebalance_ms,
                              std::vector<protocol> protocols, std::shared_ptr<oneshot<JoinGroupResponse>> slot);

    runtime::task<void> write_loop(std::shared_ptr<group> g);
    std::shared_ptr<oneshot<kafka::error_code>> start_write(group& g);

    storage::object_store& _store;
    group_config _cfg;
    group_map _groups;
    runtime::gate _writes{"group-offsets"};
    bool _closed = false;
    std::uint64_t _rebalances = 0;
    std::uint64_t _offset_commits = 0;
    std::mt19937_64 _rng;
    runtime::time_point _last_sweep{};
};

} // namespace skiff::broker::groups
