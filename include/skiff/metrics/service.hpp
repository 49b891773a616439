// The observability endpoints as plain request → reply functions, independent of any
// transport: endpoint.hpp mounts them on an http::server. Every reply is complete (status,
// content type, body); nothing here throws to the caller.
//
//   GET /metrics             JSON (docs/metrics.schema.json), per core and summed
//   GET /metrics/prometheus  Prometheus text format (?aggregate=1: sums only, no core label)
//   GET /traces              recent traces as JSON (?limit=N&root=flush&linked=1),
//                            ?format=chrome: Chrome trace-event JSON (Perfetto, chrome://tracing)
//   GET /traces/view         self-contained HTML timeline of recent flushes
//   GET /health              200 {"status":"up"} while the process serves
//   GET /ready               200 or 503 from the registered readiness checks
//
// Use a service on the reactor thread that serves it. Readiness checks are coroutines so
// they may do I/O (e.g. a HEAD on the bucket); they get a stop token that fires after
// `readiness_timeout`, and a check that does not answer in time is reported not ready.
#pragma once

#include <skiff/runtime/clock.hpp>
#include <skiff/runtime/task.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::metrics {

// The default --http-addr.
inline constexpr std::string_view default_http_addr = "127.0.0.1:9644";

struct reply {
    int status = 200;
    std::string content_type;
    std::string body;

    reply() = default;
    reply(int s, std::string ct, std::string b) : status(s), content_type(std::move(ct)), body(std::move(b)) {}
};

struct readiness {
    bool ready = false;
    std::string detail; // why not (or what was checked), shown in the /ready body

    readiness() = default;
    readiness(bool r, std::string d = {}) : ready(r), detail(std::move(d)) {} // NOLINT(implicit)
    static readiness yes(std::string d = {}) { return readiness(true, std::move(d)); }
    static readiness no(std::string d) { return readiness(false, std::move(d)); }
};

// A readiness check. Prefer a plain function or a lambda without captures that returns the
// task of a coroutine function taking its state as parameters (coroutine lambdas must not
// capture); the std::function is copied before it is called, so removing a check while it
// runs is safe.
using readiness_check = std::function<runtime::task<readiness>(std::stop_token)>;

struct service_options {
    // Traces the timeline page shows (most recent flush traces, plus their linked produces).
    std::size_t view_flushes = 30;
    std::string view_root = "flush";
    runtime::duration readiness_timeout = std::chrono::seconds(2);
};

class service {
public:
    explicit service(service_options opts = {});
    ~service();
    service(const service&) = delete;
    service& operator=(const service&) = delete;

    // Registers (or replaces) a named check. /ready is 200 when every check is ready and 503
    // otherwise — also while no check is registered, so a broker is never reported ready
    // before it has said what "ready" means.
    void set_readiness_check(std::string name, readiness_check fn);
    // Convenience for a check that is a flag flipped by the broker (e.g. partitions restored).
    void set_ready_flag(std::string name, bool ready, std::string detail = {});
    void remove_readiness_check(std::string_view name);

    // The endpoints. `query` is the raw query string (after '?', still percent-encoded).
    runtime::task<reply> metrics_json();
    runtime::task<reply> metrics_prometheus(std::string query);
    runtime::task<reply> traces(std::string query);
    runtime::task<reply> traces_view(std::string query);
    reply health() const;
    runtime::task<reply> ready();

    // Dispatch by method and target ("/traces?format=chrome"); 404/405 for anything else.
    runtime::task<reply> handle(std::string method, std::string target);

private:
    struct check_entry {
        std::string name;
        readiness_check fn;
    };
    service_options _opts;
    std::vector<check_entry> _checks;
    std::chrono::steady_clock::time_point _started;
};

// Decoded value of `key` in a query string ("a=1&format=chrome"), or "" when absent.
// `found` (if given) tells an empty value from a missing key.
std::string query_value(std::string_view query, std::string_view key, bool* found = nullptr);

} // namespace skiff::metrics
