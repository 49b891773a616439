#include "peers.hpp"

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

runtime::task<result<client::connection*, std::string>> peer_connection(shard& sh, std::int32_t id) {
    const cluster::view* v = sh.cview.get();
    const cluster::member* m = v ? v->find_member(id) : nullptr;
    if (!m) co_return failure{fmt::format("broker {} is not a live member", id)};
    auto address = peer_address(*m);
    if (!address) co_return failure{address.error()};
    auto it = sh.peers.find(*address);
    if (it != sh.peers.end() && it->second->is_open()) co_return it->second.get();
    if (it != sh.peers.end()) {
        // Broken: closed here (its reader must finish before it is destroyed).
        auto old = std::move(it->second);
        sh.peers.erase(it);
        co_await old->close();
    }
    client::connection_options opts;
    opts.client_id = fmt::format("skiff-broker-{}", sh.cfg().node_id);
    opts.connect_timeout = std::chrono::seconds(5);
    auto c = co_await client::connection::open(*address, opts, sh.stop.get_token());
    if (!c) co_return failure{fmt::format("broker {}: {}", id, c.error().message)};
    // Another request of this core may have opened one meanwhile: keep the first.
    auto [slot, fresh] = sh.peers.try_emplace(*address, nullptr);
    if (!fresh && slot->second && slot->second->is_open()) {
        co_await (*c)->close();
        co_return slot->second.get();
    }
    if (!fresh && slot->second) co_await slot->second->close();
    slot->second = std::move(*c);
    co_return slot->second.get();
}

runtime::task<void> close_peers(shard& sh) {
    auto peers = std::move(sh.peers);
    sh.peers.clear();
    for (auto& [_, c] : peers) co_await c->close();
}

} // namespace skiff::broker
