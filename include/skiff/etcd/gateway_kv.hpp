// gateway_kv: etcd::kv over etcd's v3 JSON gateway (POST /v3/kv/range, /v3/kv/txn,
// /v3/lease/*, /v3/watch), on this core's libcurl-multi client: no thread, no blocking call.
//
// Endpoints are tried round robin, starting from the last one that answered. A call moves on
// to the next endpoint when the one it tried cannot be reached; a read (get, get_prefix),
// keepalive, grant or revoke also moves on after a timeout or a 5xx. A write (put, del, txn)
// whose request may have reached etcd is not resent: a txn applied on the first try would
// report "compare failed" on the second, so the caller gets errc::unavailable / timeout and
// reads back instead. When every endpoint failed the last error is returned.
//
// A watch is one streaming POST /v3/watch per watcher (no whole-request deadline), cancelled
// when the watcher is destroyed or its next() is cancelled. A broken stream (etcd restarted)
// gives errc::unavailable from next() after the events already received; the caller watches
// again from the last revision + 1, and the new stream starts at the next endpoint.
//
// Create, use and destroy on one reactor thread. Await close() before destroying a
// gateway_kv that had watchers: their streams end asynchronously (the destructor aborts,
// like a gate, when one is still running).
#pragma once

#include <skiff/etcd/kv.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::etcd {

struct gateway_config {
    // Base URLs, e.g. "http://127.0.0.1:2379"; at least one.
    std::vector<std::string> endpoints;
    // Per request and per endpoint tried (not for watch streams).
    std::chrono::milliseconds request_timeout{5000};
    std::chrono::milliseconds connect_timeout{1000};
    // Largest answer accepted, and largest single message of a watch stream.
    std::size_t max_response_bytes = std::size_t{64} << 20;

    // "http://a:2379,http://b:2379" (spaces around commas allowed, trailing '/' dropped).
    // errc::invalid_argument for an empty list or a URL that is not http:// or https://.
    static result<std::vector<std::string>, error> parse_endpoints(std::string_view list);
};

class gateway_kv final : public kv {
public:
    // errc::invalid_argument when the config has no endpoint or a malformed one. Must be
    // called on a reactor thread.
    static result<std::unique_ptr<gateway_kv>, error> create(gateway_config cfg);
    ~gateway_kv() override;

    runtime::task<result<range_result, error>> get(std::string key, std::stop_token st = {}) override;
    runtime::task<result<range_result, error>> get_prefix(std::string prefix, std::stop_token st = {}) override;
    runtime::task<result<std::int64_t, error>> put(std::string key, std::string value, std::int64_t lease = 0,
                                                   std::stop_token st = {}) override;
    runtime::task<result<std::int64_t, error>> del(std::string key, std::stop_token st = {}) override;
    runtime::task<result<txn_result, error>> txn(txn_request req, std::stop_token st = {}) override;
    runtime::task<result<lease_grant, error>> grant(std::chrono::seconds ttl, std::stop_token st = {}) override;
    runtime::task<result<std::chrono::seconds, error>> keepalive(std::int64_t lease,
                                                                 std::stop_token st = {}) override;
    runtime::task<result<void, error>> revoke(std::int64_t lease, std::stop_token st = {}) override;
    std::unique_ptr<watcher> watch(std::string key, bool prefix, std::int64_t start_revision) override;
    runtime::task<void> close() override;

    // The endpoint the next call tries first (the last one that answered).
    const std::string& current_endpoint() const noexcept;

    class impl;

private:
    explicit gateway_kv(std::unique_ptr<impl> i);
    std::unique_ptr<impl> _impl;
};

} // namespace skiff::etcd
