// The JSON of etcd's v3 gRPC gateway, both ways: request bodies from skiff's kv types, and
// answers back into them. Pure functions, no I/O; private to src/etcd.
//
// The gateway's conventions (protobuf's JSON mapping): bytes fields (keys, values, range
// ends) are base64; int64 fields are JSON strings; fields at their zero value are left out,
// so an absent number is 0 and an absent bool is false.
#pragma once

#include <skiff/etcd/kv.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace skiff::etcd::detail {

using json = nlohmann::json;

// Request bodies.
std::string range_body(std::string_view key, bool prefix);
std::string put_body(std::string_view key, std::string_view value, std::int64_t lease);
std::string delete_body(std::string_view key, bool prefix);
std::string txn_body(const txn_request& req);
std::string grant_body(std::chrono::seconds ttl);
std::string lease_id_body(std::int64_t lease);
std::string watch_body(std::string_view key, bool prefix, std::int64_t start_revision);

// Answers (the parsed body of a 200). errc::bad_response when a field has the wrong shape.
result<range_result, error> parse_range(const json& j);
result<std::int64_t, error> parse_revision(const json& j);
result<txn_result, error> parse_txn(const json& j);
result<lease_grant, error> parse_grant(const json& j);
// errc::lease_not_found when etcd answers without a TTL (or with 0): the lease is gone.
result<std::chrono::seconds, error> parse_keepalive(const json& j);

// One message of a watch stream: events (possibly none: "created", progress notifications),
// or the error that ends the stream (errc::compacted when etcd cancelled the watch).
result<std::vector<event>, error> parse_watch_message(const json& j);

// The error an answer other than 200 stands for. etcd's gateway sends
// {"error": ..., "code": <gRPC code>, "message": ...}; `what` names the call for the message.
error classify_failure(int status, std::string_view body, std::string_view what);

} // namespace skiff::etcd::detail
