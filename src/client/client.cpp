// Routing on top of connections: Metadata for brokers, leaders and the controller,
// FindCoordinator for coordinators, one connection per broker address.
#include <skiff/client/client.hpp>
#include <skiff/runtime/timer.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace skiff::client {

std::string broker_info::address() const {
    if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
    return host + ":" + std::to_string(port);
}

client::client(client_config cfg) : _cfg(std::move(cfg)) {}

client::~client() {
    for (const auto& [addr, c] : _conns) {
        if (c->is_open()) {
            std::fprintf(stderr, "skiff: client destroyed with an open connection to %s (close() first)\n", addr.c_str());
            std::abort();
        }
    }
}

runtime::task<result<connection*, error>> client::connect_to(std::string address) {
    auto it = _conns.find(address);
    if (it != _conns.end()) {
        if (it->second->is_open()) co_return it->second.get();
        // Requests may still hold the broken one: keep it until close().
        _retired.push_back(std::move(it->second));
        _conns.erase(it);
    }
    auto ot = connection::open(address, _cfg.conn);
    auto c = co_await std::move(ot);
    if (!c) co_return failure{c.error()};
    connection* raw = c->get();
    _conns[address] = std::move(*c);
    co_return raw;
}

runtime::task<result<void, error>> client::connect(std::stop_token st) {
    if (_cfg.bootstrap.empty()) co_return failure{error(errc::bad_address, "no broker address given")};
    std::optional<error> last;
    for (const auto& address : _cfg.bootstrap) {
        if (st.stop_requested()) co_return failure{error(errc::cancelled, "connecting was cancelled")};
        auto ct = connect_to(address);
        auto c = co_await std::move(ct);
        if (!c) {
            // Refused credentials or certificates would be refused by every broker: stop here
            // rather than hammer the cluster (and its failed-login delays) with them.
            if (c.error().is_security()) co_return failure{c.error()};
            last = c.error();
            continue;
        }
        _any = address;
        std::optional<std::vector<std::string>> none(std::vector<std::string>{});
        auto mt = metadata(std::move(none));
        auto md = co_await std::move(mt);
        if (!md) {
            error e = md.error();
            // A SASL listener answers ApiVersions, then closes on any request before SASL.
            if (e.code == errc::disconnected && !_cfg.security().uses_sasl()) {
                e.message += " instead of answering Metadata: does the listener require SASL (SASL_PLAINTEXT or SASL_SSL)?";
            }
            co_return failure{e};
        }
        co_return ok();
    }
    co_return failure{*last};
}

runtime::task<result<connection*, error>> client::any_connection() {
    if (!_any.empty()) {
        auto it = _conns.find(_any);
        if (it != _conns.end() && it->second->is_open()) co_return it->second.get();
    }
    // Reconnect: the bootstrap list first, then every broker the metadata named.
    std::vector<std::string> candidates;
    if (!_any.empty()) candidates.push_back(_any);
    for (const auto& b : _cfg.bootstrap) candidates.push_back(b);
    for (const auto& [id, b] : _brokers) candidates.push_back(b.address());
    std::optional<error> last;
    for (const auto& address : candidates) {
        auto ct = connect_to(address);
        auto c = co_await std::move(ct);
        if (c) {
            _any = address;
            co_return *c;
        }
        if (c.error().is_security()) co_return failure{c.error()};
        last = c.error();
    }
    co_return failure{last.value_or(error(errc::bad_address, "no broker address given"))};
}

runtime::task<result<kafka::MetadataResponse, error>> client::metadata(std::optional<std::vector<std::string>> topics,
                                                                       request_options o) {
    kafka::MetadataRequest req;
    if (topics) {
        req.topics.emplace();
        for (auto& t : *topics) {
            kafka::MetadataRequest::MetadataRequestTopic rt;
            rt.name = std::move(t);
            req.topics->push_back(std::move(rt));
        }
    } else {
        req.topics.reset(); // null: every topic (v1+)
    }
    req.allow_auto_topic_creation = false;
    auto ct = any_connection();
    auto c = co_await std::move(ct);
    if (!c) co_return failure{c.error()};
    // v0 reads an empty list as "every topic": never ask v0 for none.
    auto st = (*c)->send(std::move(req), o);
    auto md = co_await std::move(st);
    if (!md) co_return failure{md.error()};
    absorb(*md);
    co_return std::move(*md);
}

void client::absorb(const kafka::MetadataResponse& md) {
    if (!md.brokers.empty()) {
        _brokers.clear();
        for (const auto& b : md.brokers) {
            broker_info info;
            info.node_id = b.node_id;
            info.host = b.host;
            info.port = b.port;
            info.rack = b.rack;
            _brokers[b.node_id] = std::move(info);
        }
    }
    _controller_id = md.controller_id;
    _cluster_id = md.cluster_id;
    for (const auto& t : md.topics) {
        if (!t.name) continue;
        // A topic's answer replaces what was cached for it (a deleted topic's leaders go).
        auto first = _leaders.lower_bound({*t.name, std::numeric_limits<std::int32_t>::min()});
        auto last = _leaders.upper_bound({*t.name, std::numeric_limits<std::int32_t>::max()});
        _leaders.erase(first, last);
        if (t.error_code != kafka::error_code::none) continue;
        for (const auto& p : t.partitions) _leaders[{*t.name, p.partition_index}] = p.leader_id;
    }
}

runtime::task<result<connection*, error>> client::node_connection(std::int32_t id) {
    auto it = _brokers.find(id);
    if (it == _brokers.end()) {
        auto mt = metadata(std::vector<std::string>{});
        auto md = co_await std::move(mt);
        if (!md) co_return failure{md.error()};
        it = _brokers.find(id);
        if (it == _brokers.end()) {
            co_return failure{error(errc::not_found, "broker " + std::to_string(id) + " is not in the cluster's metadata")};
        }
    }
    auto ct = connect_to(it->second.address());
    co_return co_await std::move(ct);
}

runtime::task<result<connection*, error>> client::leader_connection(const std::string& topic, std::int32_t partition) {
    auto it = _leaders.find({topic, partition});
    if (it == _leaders.end() || it->second < 0) {
        auto mt = metadata(std::vector<std::string>{topic});
        auto md = co_await std::move(mt);
        if (!md) co_return failure{md.error()};
        for (const auto& t : md->topics) {
            if (t.name == topic && t.error_code != kafka::error_code::none) {
                co_return failure{broker_error(t.error_code, "topic '" + topic + "'")};
            }
        }
        it = _leaders.find({topic, partition});
        if (it == _leaders.end()) {
            co_return failure{error(errc::not_found, "topic '" + topic + "' has no partition " + std::to_string(partition))};
        }
        if (it->second < 0) {
            co_return failure{broker_error(kafka::error_code::leader_not_available,
                                           "partition " + topic + "/" + std::to_string(partition))};
        }
    }
    auto nt = node_connection(it->second);
    co_return co_await std::move(nt);
}

runtime::task<result<connection*, error>> client::coordinator_connection(const std::string& key, std::int8_t key_type) {
    auto cached = _coordinators.find({key_type, key});
    if (cached != _coordinators.end()) {
        auto ct = connect_to(cached->second);
        auto c = co_await std::move(ct);
        if (c) co_return *c;
        if (c.error().is_security()) co_return failure{c.error()};
        _coordinators.erase(cached);
    }
    const std::string what = std::string(key_type == 0 ? "group" : "transactional id") + " '" + key + "'";
    // A coordinator that is still loading (or being elected) answers with a retriable error;
    // Kafka's clients retry FindCoordinator, and so does this, for about a second.
    for (int attempt = 0;; ++attempt) {
        kafka::FindCoordinatorRequest req;
        req.key = key; // v0-3
        req.key_type = key_type;
        req.coordinator_keys = {key}; // v4+
        auto st = send(std::move(req), target::any());
        auto r = co_await std::move(st);
        if (!r) co_return failure{r.error()};
        kafka::error_code code = r->error_code;
        std::optional<std::string> message = r->error_message;
        std::string host = r->host;
        std::int32_t port = r->port;
        if (!r->coordinators.empty()) {
            const auto& c = r->coordinators.front();
            code = c.error_code;
            message = c.error_message;
            host = c.host;
            port = c.port;
        }
        if (code != kafka::error_code::none) {
            if (kafka::is_retriable(code) && attempt < 10) {
                auto slept = co_await runtime::sleep(std::chrono::milliseconds(100));
                (void)slept; // no stop token: the sleep always runs out
                continue;
            }
            co_return failure{broker_error(code, "no coordinator for " + what, message)};
        }
        broker_info b;
        b.host = host;
        b.port = port;
        const std::string address = b.address();
        _coordinators[{key_type, key}] = address;
        auto ct = connect_to(address);
        co_return co_await std::move(ct);
    }
}

runtime::task<result<connection*, error>> client::connection_for(target to) {
    switch (to.where) {
    case target::kind::any: {
        auto t = any_connection();
        co_return co_await std::move(t);
    }
    case target::kind::node: {
        auto t = node_connection(to.node_id);
        co_return co_await std::move(t);
    }
    case target::kind::controller: {
        if (_controller_id < 0) {
            auto mt = metadata(std::vector<std::string>{});
            auto md = co_await std::move(mt);
            if (!md) co_return failure{md.error()};
        }
        // No controller known (some brokers report -1): any broker forwards admin requests.
        if (_controller_id < 0 || !_brokers.contains(_controller_id)) {
            auto t = any_connection();
            co_return co_await std::move(t);
        }
        auto t = node_connection(_controller_id);
        co_return co_await std::move(t);
    }
    case target::kind::leader: {
        auto t = leader_connection(to.name, to.partition);
        co_return co_await std::move(t);
    }
    case target::kind::coordinator: {
        auto t = coordinator_connection(to.name, static_cast<std::int8_t>(to.partition));
        co_return co_await std::move(t);
    }
    }
    co_return failure{error(errc::not_found, "unknown target")};
}

void client::forget(const target& to) {
    switch (to.where) {
    case target::kind::leader: _leaders.erase({to.name, to.partition}); break;
    case target::kind::coordinator: _coordinators.erase({static_cast<std::int8_t>(to.partition), to.name}); break;
    case target::kind::controller: _controller_id = -1; break;
    default: break;
    }
}

runtime::task<void> client::close() {
    for (auto& [addr, c] : _conns) co_await c->close();
    for (auto& c : _retired) co_await c->close();
    _conns.clear();
    _retired.clear();
    _any.clear();
}

} // namespace skiff::client
