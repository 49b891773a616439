// `skiff serve`: the Kafka broker.
//
// One reactor per core. Every core accepts connections on the Kafka port (SO_REUSEPORT) and
// parses, dispatches and answers its connections' requests; every partition and every
// consumer group is owned by exactly one core, and work for it runs there through cross-core
// calls. Core 0 also owns the topics catalog and serves the observability endpoint.
//
// serve() blocks until stop is requested (SIGTERM/SIGINT in the CLI), then drains: stop
// accepting, answer the requests in flight, flush every partition, exit.
#pragma once

#include <skiff/broker/config.hpp>
#include <skiff/core/result.hpp>

#include <functional>
#include <stop_token>
#include <string>

namespace skiff::broker {

struct serve_hooks {
    serve_hooks() = default;
    // Called once the Kafka listener accepts and every partition is restored, with the
    // bound Kafka and HTTP addresses (useful with port 0 in tests).
    std::function<void(const std::string& kafka_addr, const std::string& http_addr)> on_ready;
};

// Runs the broker until `stop` fires. The error is one sentence (bad address, unreachable
// store, ...), suitable as the CLI's only output line.
result<void, std::string> serve(broker_config cfg, std::stop_token stop, serve_hooks hooks = {});

} // namespace skiff::broker
