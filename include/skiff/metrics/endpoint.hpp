// Mounts the observability endpoints (service.hpp) on an http::server.
//
// Header-only on purpose: the metrics library must not depend on the http library (whose
// client is itself instrumented with metrics). Whoever includes this links http_dep too.
//
//   auto srv = http::server::listen({.addr = std::string(metrics::default_http_addr)});
//   if (!srv) { log::error("{}", srv.error()); ... }        // "cannot listen on ...: ..."
//   metrics::service obs;
//   obs.set_readiness_check("store", check_store);           // task<readiness>(std::stop_token)
//   obs.set_ready_flag("partitions", false, "restoring");    // flip later with the same name
//   metrics::add_routes(**srv, obs);
//   co_await (*srv)->serve(stop_token);                       // on one core (usually core 0)
//
// `svc` must outlive serve().
#pragma once

#include <skiff/http/server.hpp>
#include <skiff/metrics/service.hpp>

#include <string>
#include <utility>

namespace skiff::metrics {

namespace detail {
// Coroutines with their state as parameters (no lambda captures across suspension).
inline runtime::task<http::server::response> to_http(runtime::task<reply> t) {
    reply r = co_await std::move(t);
    co_return http::server::response(r.status, std::move(r.content_type), std::move(r.body));
}
inline runtime::task<http::server::response> health_http(service* svc) {
    reply r = svc->health();
    co_return http::server::response(r.status, std::move(r.content_type), std::move(r.body));
}
} // namespace detail

inline void add_routes(http::server& srv, service& svc) {
    service* s = &svc;
    srv.route("GET", "/metrics", [s](const http::server::request&) { return detail::to_http(s->metrics_json()); });
    srv.route("GET", "/metrics/prometheus", [s](const http::server::request& r) {
        return detail::to_http(s->metrics_prometheus(r.query));
    });
    srv.route("GET", "/traces", [s](const http::server::request& r) { return detail::to_http(s->traces(r.query)); });
    srv.route("GET", "/traces/view",
              [s](const http::server::request& r) { return detail::to_http(s->traces_view(r.query)); });
    srv.route("GET", "/health", [s](const http::server::request&) { return detail::health_http(s); });
    srv.route("GET", "/ready", [s](const http::server::request&) { return detail::to_http(s->ready()); });
}

} // namespace skiff::metrics
