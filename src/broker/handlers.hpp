// Request handlers, split by concern: handlers.cpp (dispatch, ApiVersions, Metadata, topic
// admin, configs, coordinators, producer ids), data_path.cpp (Produce, Fetch, ListOffsets),
// group_handlers.cpp (consumer groups, routed to the owning core). Private to the module.
#pragma once

#include "shard.hpp"

#include <skiff/core/log.hpp>

#include <stdexcept>
#include <string>

namespace skiff::broker {

// Thrown by a handler when the connection cannot go on (undecodable body, unknown API,
// unencodable answer). The connection logs it and closes, as Kafka does.
struct connection_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct request_ctx {
    shard& sh;
    const conn_info& ci;
    std::int16_t version;
    std::int32_t correlation_id;
    std::string client_id;
};

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

template <typename Req>
Req decode_body(std::span<const char> body, std::int16_t version) {
    kafka::reader rd(body);
    auto r = Req::decode(rd, version);
    if (!r) throw connection_error(std::string(Req::message_name) + " v" + std::to_string(version) +
                                   " is malformed: " + r.error().message);
    return std::move(*r);
}

// The address put in Metadata and FindCoordinator.
std::pair<std::string, std::int32_t> advertised(const request_ctx& ctx);

runtime::task<std::string> handle_produce(request_ctx ctx, kafka::ProduceRequest req, bool& no_response);
runtime::task<std::string> handle_fetch(request_ctx ctx, kafka::FetchRequest req);
runtime::task<std::string> handle_list_offsets(request_ctx ctx, kafka::ListOffsetsRequest req);

runtime::task<std::string> handle_join_group(request_ctx ctx, kafka::JoinGroupRequest req);
runtime::task<std::string> handle_sync_group(request_ctx ctx, kafka::SyncGroupRequest req);
runtime::task<std::string> handle_heartbeat(request_ctx ctx, kafka::HeartbeatRequest req);
runtime::task<std::string> handle_leave_group(request_ctx ctx, kafka::LeaveGroupRequest req);
runtime::task<std::string> handle_offset_commit(request_ctx ctx, kafka::OffsetCommitRequest req);
runtime::task<std::string> handle_offset_fetch(request_ctx ctx, kafka::OffsetFetchRequest req);
runtime::task<std::string> handle_list_groups(request_ctx ctx, kafka::ListGroupsRequest req);
runtime::task<std::string> handle_describe_groups(request_ctx ctx, kafka::DescribeGroupsRequest req);
runtime::task<std::string> handle_delete_groups(request_ctx ctx, kafka::DeleteGroupsRequest req);

// The APIs and versions this broker serves (ApiVersions lists exactly these).
struct served_api {
    kafka::api_key key;
    std::int16_t min_version;
    std::int16_t max_version;
};
std::span<const served_api> served_apis() noexcept;

} // namespace skiff::broker
