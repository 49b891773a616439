// response_t<Request>: the generated response type that answers a generated request type,
// so that `send(req)` can return the right message. Header-only, any core.
#pragma once

#include <skiff/kafka/frame.hpp>

namespace skiff::client {

template <typename Request>
struct response_for; // only the pairs below exist: a request type without one does not compile

#define SKIFF_CLIENT_PAIR(name)                                                                    \
    template <>                                                                                    \
    struct response_for<kafka::name##Request> {                                                    \
        using type = kafka::name##Response;                                                        \
    };
SKIFF_CLIENT_PAIR(Produce)
SKIFF_CLIENT_PAIR(Fetch)
SKIFF_CLIENT_PAIR(ListOffsets)
SKIFF_CLIENT_PAIR(Metadata)
SKIFF_CLIENT_PAIR(OffsetCommit)
SKIFF_CLIENT_PAIR(OffsetFetch)
SKIFF_CLIENT_PAIR(FindCoordinator)
SKIFF_CLIENT_PAIR(JoinGroup)
SKIFF_CLIENT_PAIR(Heartbeat)
SKIFF_CLIENT_PAIR(LeaveGroup)
SKIFF_CLIENT_PAIR(SyncGroup)
SKIFF_CLIENT_PAIR(DescribeGroups)
SKIFF_CLIENT_PAIR(ListGroups)
SKIFF_CLIENT_PAIR(SaslHandshake)
SKIFF_CLIENT_PAIR(ApiVersions)
SKIFF_CLIENT_PAIR(CreateTopics)
SKIFF_CLIENT_PAIR(DeleteTopics)
SKIFF_CLIENT_PAIR(DeleteRecords)
SKIFF_CLIENT_PAIR(InitProducerId)
SKIFF_CLIENT_PAIR(OffsetForLeaderEpoch)
SKIFF_CLIENT_PAIR(AddPartitionsToTxn)
SKIFF_CLIENT_PAIR(AddOffsetsToTxn)
SKIFF_CLIENT_PAIR(EndTxn)
SKIFF_CLIENT_PAIR(WriteTxnMarkers)
SKIFF_CLIENT_PAIR(TxnOffsetCommit)
SKIFF_CLIENT_PAIR(DescribeConfigs)
SKIFF_CLIENT_PAIR(AlterConfigs)
SKIFF_CLIENT_PAIR(DescribeLogDirs)
SKIFF_CLIENT_PAIR(SaslAuthenticate)
SKIFF_CLIENT_PAIR(CreatePartitions)
SKIFF_CLIENT_PAIR(DeleteGroups)
SKIFF_CLIENT_PAIR(ElectLeaders)
SKIFF_CLIENT_PAIR(IncrementalAlterConfigs)
SKIFF_CLIENT_PAIR(AlterPartitionReassignments)
SKIFF_CLIENT_PAIR(ListPartitionReassignments)
SKIFF_CLIENT_PAIR(OffsetDelete)
SKIFF_CLIENT_PAIR(DescribeClientQuotas)
SKIFF_CLIENT_PAIR(DescribeUserScramCredentials)
SKIFF_CLIENT_PAIR(AlterUserScramCredentials)
SKIFF_CLIENT_PAIR(DescribeAcls)
SKIFF_CLIENT_PAIR(CreateAcls)
SKIFF_CLIENT_PAIR(DeleteAcls)
SKIFF_CLIENT_PAIR(AlterClientQuotas)
SKIFF_CLIENT_PAIR(DescribeCluster)
SKIFF_CLIENT_PAIR(DescribeProducers)
SKIFF_CLIENT_PAIR(DescribeTransactions)
SKIFF_CLIENT_PAIR(ListTransactions)
#undef SKIFF_CLIENT_PAIR

template <typename Request>
using response_t = typename response_for<Request>::type;

} // namespace skiff::client
