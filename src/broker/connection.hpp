// One Kafka connection: what it knows about itself, and the loop that serves it. Private to
// the broker module.
#pragma once

#include "shard.hpp"

#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/task.hpp>

#include <cstdint>
#include <string>

namespace skiff::broker {

// What a connection knows about itself, for handlers.
struct conn_info {
    std::string client_host;
    std::string local_host; // the address the client connected to (advertised when unset)
    std::uint16_t local_port = 0;
    // Quotas: the connection reads no new request before this (steady clock). The one field a
    // handler writes (a throttled answer sets it); the reader honours it.
    mutable runtime::time_point muted_until{};
};

// Runs one Kafka connection on this core until the peer closes, a protocol error, or shutdown
// (sh.stop). Requests are handled concurrently and answered in arrival order.
runtime::task<void> serve_connection(shard& sh, runtime::tcp_stream stream);

} // namespace skiff::broker
