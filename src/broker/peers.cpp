#include "peers.hpp"

#include <skiff/cluster/assignment.hpp>

#include <fmt/format.h>

namespace skiff::broker {

namespace {
// The peer's PLAINTEXT listener: its only one when it has no --listeners.
result<std::string, std::string> peer_address(const cluster::member& m) {
    if (m.listeners.empty()) return fmt::format("{}:{}", m.host, m.port);
    if (auto it = m.listeners.find("PLAINTEXT"); it != m.listeners.end()) return it->second;
    return failure{fmt::format("broker {} has no PLAINTEXT listener for requests between brokers", m.id)};
}
} // namespace

std::int32_t remote_coordinator(const shard& sh, std::string_view key) {
    if (!sh.cfg().clustered()) return -1;
    const cluster::view* v = sh.cview.get();
    const cluster::owner* o = v ? v->owner_of(cluster::groups_topic, cluster::group_slot(key)) : nullptr;
    if (!o || o->broker == sh.cfg().node_id) return -1;
    return o->broker;
}

runtime::task<result<client::connection*, std::string>> peer_connection(shard& sh, std::int32_t id,
                                                                       std::string_view client_id) {
    const cluster::view* v = sh.cview.get();
    const cluster::member* m = v ? v->find_member(id) : nullptr;
    if (!m) co_return failure{fmt::format("broker {} is not a live member", id)};
    auto address = peer_address(*m);
    if (!address) co_return failure{address.error()};
    const std::string key = fmt::format("{} {}", *address, client_id);
    auto it = sh.peers.find(key);
    if (it != sh.peers.end() && it->second->is_open()) co_return it->second.get();
    if (it != sh.peers.end()) {
        // Broken. Kept until shutdown, as the client module keeps its own: a request that
        // failed on it may not have resumed yet, and it still touches the connection when it does.
        sh.retired_peers.push_back(std::move(it->second));
        sh.peers.erase(it);
    }
    client::connection_options opts;
    opts.client_id = std::string(client_id);
    opts.connect_timeout = std::chrono::seconds(5);
    auto c = co_await client::connection::open(*address, opts, sh.stop.get_token());
    if (!c) co_return failure{fmt::format("broker {}: {}", id, c.error().message)};
    // Another request of this core may have opened one meanwhile: keep the first.
    auto [slot, fresh] = sh.peers.try_emplace(key, nullptr);
    if (!fresh && slot->second && slot->second->is_open()) {
        co_await (*c)->close();
        co_return slot->second.get();
    }
    if (!fresh && slot->second) sh.retired_peers.push_back(std::move(slot->second));
    slot->second = std::move(*c);
    co_return slot->second.get();
}

runtime::task<void> close_peers(shard& sh) {
    for (auto& [_, c] : sh.peers) co_await c->close();
    for (auto& c : sh.retired_peers) co_await c->close();
}

} // namespace skiff::broker
