// One Kafka connection: what it knows about itself, and the loop that serves it. Private to
// the broker module.
#pragma once

#include "sasl_session.hpp"
#include "shard.hpp"

#include <skiff/broker/listener.hpp>

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
    // The listener it came in on (broker_shared::listeners; null in handler unit tests, which
    // then act as PLAINTEXT).
    const listener_config* listener = nullptr;
    bool needs_sasl() const noexcept { return listener && uses_sasl(listener->protocol); }
    // SASL listeners: the authentication (sasl_session.hpp), written by the SASL handlers.
    mutable sasl_session sasl;
    // Kafka's principal: "User:ANONYMOUS" until SASL authenticates a user (or a client
    // certificate names one).
    mutable std::string principal = "User:ANONYMOUS";
    // Set by a handler whose answer must be the last one (a failed authentication): the
    // connection writes it and closes.
    mutable bool close_after_answer = false;
    // Quotas: the connection reads no new request before this (steady clock). The one field a
    // handler writes (a throttled answer sets it); the reader honours it.
    mutable runtime::time_point muted_until{};
};

// Runs one Kafka connection on this core until the peer closes, a protocol error, or shutdown
// (sh.stop). Requests are handled concurrently and answered in arrival order.
// `listener` is the broker's (it outlives every connection).
runtime::task<void> serve_connection(shard& sh, runtime::tcp_stream stream, const listener_config* listener);

} // namespace skiff::broker
