// A Kafka client for a cluster: bootstraps from a list of brokers, reads Metadata, and routes
// each request to a broker: any one, a node id, the controller, a partition's leader or a
// group's (or transaction's) coordinator, with one connection per broker opened on first use
// and reopened after it broke.
//
//   client::client c(client::client_config({"127.0.0.1:9092"}));
//   if (auto r = co_await c.connect(); !r) ... r.error().message
//   kafka::CreateTopicsRequest req;  ...                                   // fill every field
//   auto ans = co_await c.send(std::move(req), target::controller());      // result<CreateTopicsResponse>
//   co_await c.close();                                                    // always, at the end
//
// Security: set config.security() (security.hpp) before connect(); every connection then runs
// TLS and/or SASL. An authentication or TLS failure (error::is_security()) is returned at once,
// never retried on another broker.
//
// Errors are result<T, client::error>; a Kafka error code inside an answer is the caller's to
// read (broker_error() in errc.hpp turns one into an error). Routing errors: not_found (no
// such partition or broker in the metadata), broker_error (the topic's or coordinator's
// error code, leader_not_available for a partition without a leader). Leaders, the controller
// and coordinators are cached; forget() drops the cache after a NOT_LEADER/NOT_COORDINATOR
// answer, so the next send() asks again.
//
// Reactor thread only: every call on the reactor that created the client.
#pragma once

#include <skiff/client/connection.hpp>
#include <skiff/client/errc.hpp>
#include <skiff/client/response_for.hpp>
#include <skiff/core/result.hpp>
#include <skiff/kafka/frame.hpp>
#include <skiff/runtime/task.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace skiff::client {

struct client_config {
    client_config() = default;
    client_config(std::vector<std::string> b, connection_options c = {})
        : bootstrap(std::move(b)), conn(std::move(c)) {}
    std::vector<std::string> bootstrap{"127.0.0.1:9092"}; // "host:port" each
    connection_options conn;
    // TLS and SASL settings (security.hpp), used by every connection the client opens: the
    // bootstrap ones and those to leaders, the controller and coordinators.
    security_config& security() noexcept { return conn.security; }
    const security_config& security() const noexcept { return conn.security; }
};

// A broker as Metadata describes it.
struct broker_info {
    std::int32_t node_id = -1;
    std::string host;
    std::int32_t port = 0;
    std::optional<std::string> rack;
    std::string address() const; // "host:port" ("[::1]:9092" for an IPv6 literal)
};

// Where a request goes.
struct target {
    enum class kind : std::uint8_t { any, node, controller, leader, coordinator };
    static target any() { return target{}; }
    static target node(std::int32_t id) { return target(kind::node, id, {}, 0); }
    static target controller() { return target(kind::controller, -1, {}, 0); }
    static target leader(std::string topic, std::int32_t partition) {
        return target(kind::leader, -1, std::move(topic), partition);
    }
    // key_type 0: a consumer group; 1: a transactional id (FindCoordinator's KeyType).
    static target group_coordinator(std::string group) { return target(kind::coordinator, -1, std::move(group), 0); }
    static target txn_coordinator(std::string id) { return target(kind::coordinator, -1, std::move(id), 1); }

    target() = default;
    kind where = kind::any;
    std::int32_t node_id = -1;
    std::string name;            // topic, or coordinator key
    std::int32_t partition = 0;  // leader: the partition; coordinator: the key type

private:
    target(kind k, std::int32_t id, std::string n, std::int32_t p)
        : where(k), node_id(id), name(std::move(n)), partition(p) {}
};

class client {
public:
    explicit client(client_config cfg);
    // Aborts if connections opened by this client were not closed (close()).
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    // Opens a connection to the first bootstrap broker that answers ApiVersions, then reads
    // the cluster's Metadata (brokers, controller, no topics). The error of the last broker
    // tried is returned when none answers ("cannot connect to 127.0.0.1:9092: connection refused").
    runtime::task<result<void, error>> connect(std::stop_token st = {});

    // Sends `req` to `to` and returns the answer (see connection::send for the errors).
    template <typename Req>
    runtime::task<result<response_t<Req>, error>> send(Req req, target to = target::any(),
                                                       request_options o = {});

    // Metadata for `topics` (nullopt: every topic) without auto-creation; updates the broker
    // list, the controller and the leaders of the topics in the answer.
    runtime::task<result<kafka::MetadataResponse, error>>
    metadata(std::optional<std::vector<std::string>> topics = std::nullopt, request_options o = {});

    // The connection a request for `to` would use (opened or reopened as needed), e.g. to
    // read its versions(). Valid until close(); a broken one is replaced on the next call.
    runtime::task<result<connection*, error>> connection_for(target to);

    // What the last Metadata said.
    const std::map<std::int32_t, broker_info>& brokers() const noexcept { return _brokers; }
    std::int32_t controller_id() const noexcept { return _controller_id; }
    const std::optional<std::string>& cluster_id() const noexcept { return _cluster_id; }

    // Drops what is cached for `to` (a leader, a coordinator, the controller).
    void forget(const target& to);

    // Closes every connection. Idempotent; the client can connect() again afterwards.
    runtime::task<void> close();

    const client_config& config() const noexcept { return _cfg; }

private:
    runtime::task<result<connection*, error>> connect_to(std::string address);
    runtime::task<result<connection*, error>> any_connection();
    runtime::task<result<connection*, error>> leader_connection(const std::string& topic, std::int32_t partition);
    runtime::task<result<connection*, error>> coordinator_connection(const std::string& key, std::int8_t key_type);
    runtime::task<result<connection*, error>> node_connection(std::int32_t id);
    void absorb(const kafka::MetadataResponse& md);

    client_config _cfg;
    std::map<std::string, std::unique_ptr<connection>> _conns; // by address
    std::vector<std::unique_ptr<connection>> _retired;         // broken, closed in close()
    std::string _any;                                          // address used for target::any()
    std::map<std::int32_t, broker_info> _brokers;
    std::int32_t _controller_id = -1;
    std::optional<std::string> _cluster_id;
    std::map<std::pair<std::string, std::int32_t>, std::int32_t> _leaders;
    std::map<std::pair<std::int8_t, std::string>, std::string> _coordinators; // → address
};

template <typename Req>
runtime::task<result<response_t<Req>, error>> client::send(Req req, target to, request_options o) {
    auto ct = connection_for(std::move(to));
    auto c = co_await std::move(ct);
    if (!c) co_return failure{c.error()};
    auto t = (*c)->send(std::move(req), o);
    auto r = co_await std::move(t);
    co_return r;
}

} // namespace skiff::client
