#include "http_probe.hpp"
#include "run_task.hpp"
#include "schema_check.hpp"

#include <skiff/metrics/collect.hpp>
#include <skiff/metrics/endpoint.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/metrics/service.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <set>
#include <stdexcept>

using namespace skiff;
using namespace skiff::runtime;
using namespace std::chrono_literals;
using skiff::test::probe;

namespace {

const std::string schema_path = std::string(SKIFF_DOCS_DIR) + "/metrics.schema.json";

task<metrics::readiness> hanging_check(std::stop_token st) {
    auto slept = co_await sleep(10s, st);
    co_return metrics::readiness(false, slept ? "slept" : "store did not answer");
}
task<metrics::readiness> throwing_check(std::stop_token) {
    throw std::runtime_error("bucket vanished");
    co_return metrics::readiness{};
}
task<metrics::readiness> store_ok(std::stop_token) { co_return metrics::readiness::yes("HEAD bucket: 200"); }

struct endpoint_results {
    std::vector<std::string> schema_errors;
    nlohmann::json metrics;
    std::string prometheus, prometheus_agg;
    nlohmann::json traces, chrome, health;
    std::string view;
    std::string view_type;
    int bad_format = 0, not_found = 0, not_allowed = 0;
    int ready_none = 0, ready_flag = 0, ready_ok = 0, ready_hang = 0, ready_throw = 0;
    nlohmann::json ready_none_body, ready_flag_body, ready_hang_body, ready_throw_body;
};

task<void> exercise(socket_address addr, endpoint_results* out, metrics::service* svc) {
    auto m = co_await probe(addr, test::get_request("/metrics"));
    out->metrics = nlohmann::json::parse(m.body);
    out->schema_errors = test::schema_checker::from_file(schema_path).validate(out->metrics);
    auto p = co_await probe(addr, test::get_request("/metrics/prometheus"));
    out->prometheus = p.header("content-type") + "\n" + p.body;
    auto pa = co_await probe(addr, test::get_request("/metrics/prometheus?aggregate=1"));
    out->prometheus_agg = pa.body;
    auto t = co_await probe(addr, test::get_request("/traces?root=flush&limit=10"));
    out->traces = nlohmann::json::parse(t.body);
    auto c = co_await probe(addr, test::get_request("/traces?format=chrome"));
    out->chrome = nlohmann::json::parse(c.body);
    auto bf = co_await probe(addr, test::get_request("/traces?format=xml"));
    out->bad_format = bf.status;
    auto v = co_await probe(addr, test::get_request("/traces/view"));
    out->view = v.body;
    out->view_type = v.header("content-type");
    auto h = co_await probe(addr, test::get_request("/health"));
    out->health = nlohmann::json::parse(h.body);
    auto nf = co_await probe(addr, test::get_request("/metrics/nope"));
    out->not_found = nf.status;
    auto na = co_await probe(addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    out->not_allowed = na.status;

    auto r0 = co_await probe(addr, test::get_request("/ready"));
    out->ready_none = r0.status;
    out->ready_none_body = nlohmann::json::parse(r0.body);
    svc->set_ready_flag("partitions", false, "restoring 3 of 8");
    svc->set_readiness_check("store", [](std::stop_token st) { return store_ok(st); });
    auto r1 = co_await probe(addr, test::get_request("/ready"));
    out->ready_flag = r1.status;
    out->ready_flag_body = nlohmann::json::parse(r1.body);
    svc->set_ready_flag("partitions", true);
    auto r2 = co_await probe(addr, test::get_request("/ready"));
    out->ready_ok = r2.status;
    svc->set_readiness_check("store", [](std::stop_token st) { return hanging_check(st); });
    auto r3 = co_await probe(addr, test::get_request("/ready"));
    out->ready_hang = r3.status;
    out->ready_hang_body = nlohmann::json::parse(r3.body);
    svc->set_readiness_check("store", [](std::stop_token st) { return throwing_check(st); });
    auto r4 = co_await probe(addr, test::get_request("/ready"));
    out->ready_throw = r4.status;
    out->ready_throw_body = nlohmann::json::parse(r4.body);
    svc->remove_readiness_check("store");
}

} // namespace

TEST_CASE("the endpoints over HTTP on a single reactor", "[metrics][endpoint]") {
    endpoint_results res;
    auto t = [](endpoint_results* out) -> task<void> {
        auto& reg = metrics::registry::local();
        auto puts = reg.counter("skiff_test_endpoint_puts_total", "PUTs.", {{"kind", "kfs"}});
        auto lat = reg.histogram("skiff_test_endpoint_put_duration_seconds", "PUT latency.", metrics::unit::seconds,
                                 {{"kind", "kfs"}});
        puts.inc(3);
        lat.record(12ms);
        lat.record(30ms);
        {
            auto flush = metrics::span::root("flush");
            flush.set("partition", 7);
            auto put = flush.child("put");
            put.set("kind", "kfs");
            auto produce = metrics::span::root("produce", metrics::volume::high);
            produce.link(flush.context());
        }
        metrics::service_options opts;
        opts.readiness_timeout = 50ms;
        metrics::service svc(opts);
        auto srv = http::server::listen();
        REQUIRE(srv.has_value());
        metrics::add_routes(**srv, svc);
        std::stop_source stop;
        auto client = [](socket_address addr, endpoint_results* o, metrics::service* s,
                         std::stop_source* st) -> task<void> {
            co_await exercise(addr, o, s);
            st->request_stop();
        };
        auto serving = (*srv)->serve(stop.get_token());
        auto driving = client((*srv)->local_address(), out, &svc, &stop);
        co_await when_all(std::move(serving), std::move(driving));
    };
    run_task(t(&res));

    INFO(test::join(res.schema_errors));
    CHECK(res.schema_errors.empty());
    CHECK(res.metrics["cores"] == nlohmann::json::array({0}));
    const auto& puts = res.metrics["counters"]["skiff_test_endpoint_puts_total"]["series"][0];
    CHECK(puts["value"] == 3);
    CHECK(puts["per_core"]["0"] == 3);
    const auto& lat = res.metrics["histograms"]["skiff_test_endpoint_put_duration_seconds"]["series"][0]["total"];
    CHECK(lat["count"] == 2);
    CHECK(lat["max"].get<double>() == Approx(0.030));
    CHECK(res.metrics["counters"].contains("skiff_reactor_loop_turns_total"));

    CHECK(res.prometheus.rfind("text/plain; version=0.0.4", 0) == 0);
    CHECK(res.prometheus.find("# TYPE skiff_test_endpoint_puts_total counter\n") != std::string::npos);
    CHECK(res.prometheus.find("skiff_test_endpoint_puts_total{core=\"0\",kind=\"kfs\"} 3\n") != std::string::npos);
    CHECK(res.prometheus_agg.find("skiff_test_endpoint_puts_total{kind=\"kfs\"} 3\n") != std::string::npos);

    REQUIRE(res.traces["traces"].size() >= 1);
    CHECK(res.traces["traces"][0]["root"] == "flush");
    CHECK(res.traces["traces"][0]["spans"].size() == 2);
    bool has_x = false;
    for (const auto& e : res.chrome["traceEvents"]) has_x = has_x || (e["ph"] == "X" && e["name"] == "put");
    CHECK(has_x);
    CHECK(res.bad_format == 400);

    CHECK(res.view_type == "text/html; charset=utf-8");
    CHECK(res.view.find("id=\"skiff-traces\"") != std::string::npos);
    CHECK(res.view.find("\"root\":\"flush\"") != std::string::npos);
    CHECK(res.view.find("\"root\":\"produce\"") != std::string::npos); // linked produce embedded
    CHECK(res.view.find("http://") == std::string::npos);
    CHECK(res.view.find("https://") == std::string::npos);

    CHECK(res.health["status"] == "up");
    CHECK(res.not_found == 404);
    CHECK(res.not_allowed == 405);

    CHECK(res.ready_none == 503);
    CHECK(res.ready_none_body["status"] == "not_ready");
    CHECK(res.ready_flag == 503);
    CHECK(res.ready_flag_body["not_ready"] == nlohmann::json::array({"partitions"}));
    CHECK(res.ready_flag_body["checks"]["partitions"]["detail"] == "restoring 3 of 8");
    CHECK(res.ready_flag_body["checks"]["store"]["ready"] == true);
    CHECK(res.ready_ok == 200);
    CHECK(res.ready_hang == 503);
    CHECK(res.ready_hang_body["checks"]["store"]["detail"] == "no answer within 50 ms: store did not answer");
    CHECK(res.ready_throw == 503);
    CHECK(res.ready_throw_body["checks"]["store"]["detail"] == "check failed: bucket vanished");
}

TEST_CASE("service::handle routes without a socket", "[metrics][endpoint]") {
    auto t = []() -> task<void> {
        metrics::service svc;
        auto h = co_await svc.handle("GET", "/health");
        CHECK(h.status == 200);
        auto nf = co_await svc.handle("GET", "/nothing");
        CHECK(nf.status == 404);
        auto na = co_await svc.handle("PUT", "/metrics");
        CHECK(na.status == 405);
        auto tr = co_await svc.handle("GET", "/traces?format=chrome");
        CHECK(tr.status == 200);
        CHECK(tr.content_type == "application/json");
        auto v = co_await svc.handle("HEAD", "/traces/view?limit=3");
        CHECK(v.status == 200);
        CHECK(metrics::query_value("a=1&format=chrome&b", "format") == "chrome");
        bool found = false;
        CHECK(metrics::query_value("a=1&b", "b", &found).empty());
        CHECK(found);
        CHECK(metrics::query_value("a=1", "zz", &found).empty());
        CHECK_FALSE(found);
    };
    run_task(t());
}

namespace {

struct xcore_state {
    std::atomic<int> recorded{0};
    nlohmann::json doc, traces;
    std::string prom;
    int http_cores = 0;
};

task<void> xcore_client(socket_address addr, int* n, std::stop_source* st) {
    auto r = co_await probe(addr, test::get_request("/metrics"));
    if (r.ok) *n = static_cast<int>(nlohmann::json::parse(r.body)["cores"].size());
    st->request_stop();
}

task<void> xcore_main(unsigned core, xcore_state* st) {
    // Each core records into its own registry and ring.
    auto& reg = metrics::registry::local();
    reg.counter("skiff_test_xcore_total", "x", {{"op", "put"}}).inc(core == 0 ? 10 : 32);
    auto h = reg.histogram("skiff_test_xcore_seconds", "x", metrics::unit::seconds);
    for (int i = 1; i <= 100; ++i) h.record(std::chrono::milliseconds(core == 0 ? i : 100 + i));
    reg.gauge("skiff_test_xcore_queue", "x").set(core == 0 ? -1 : 5);
    {
        auto s = metrics::span::root("flush");
        s.set("core_seen", static_cast<int>(core));
    }
    st->recorded.fetch_add(1);
    if (core != 0) co_return; // core 1 keeps serving cross-core calls until core 0 is done
    while (st->recorded.load() < 2) (void)co_await sleep(1ms);

    auto cores = co_await metrics::collect_metrics();
    st->doc = nlohmann::json::parse(metrics::metrics_json(cores, 1));
    st->prom = metrics::metrics_prometheus(cores);
    auto tc = co_await metrics::collect_traces();
    st->traces = nlohmann::json::parse(metrics::traces_json(tc, metrics::trace_query{}));

    // The same through the HTTP endpoint served by core 0.
    metrics::service svc;
    auto srv = http::server::listen();
    if (!srv) co_return;
    metrics::add_routes(**srv, svc);
    std::stop_source stop;
    auto serving = (*srv)->serve(stop.get_token());
    auto driving = xcore_client((*srv)->local_address(), &st->http_cores, &stop);
    co_await when_all(std::move(serving), std::move(driving));
}

} // namespace

TEST_CASE("a scrape on core 0 gathers both cores of an smp group and sums them", "[metrics][endpoint][smp]") {
    auto group = make_test_smp(2);
    xcore_state st;
    group->run([&st](unsigned core) { return xcore_main(core, &st); });
    const auto& doc = st.doc;
    const auto schema_errors = test::schema_checker::from_file(schema_path).validate(doc);
    INFO(test::join(schema_errors));
    CHECK(schema_errors.empty());
    CHECK(doc["cores"] == nlohmann::json::array({0, 1}));
    const auto& c = doc["counters"]["skiff_test_xcore_total"]["series"][0];
    CHECK(c["value"] == 42);
    CHECK(c["per_core"]["0"] == 10);
    CHECK(c["per_core"]["1"] == 32);
    CHECK(doc["gauges"]["skiff_test_xcore_queue"]["series"][0]["value"] == 4);
    const auto& h = doc["histograms"]["skiff_test_xcore_seconds"]["series"][0];
    CHECK(h["total"]["count"] == 200);
    CHECK(h["total"]["min"].get<double>() == Approx(0.001));
    CHECK(h["total"]["max"].get<double>() == Approx(0.2));
    CHECK(h["per_core"]["1"]["min"].get<double>() == Approx(0.101));
    CHECK(h["total"]["p50"].get<double>() == Approx(0.1).epsilon(0.02));
    CHECK(st.prom.find("skiff_test_xcore_total{core=\"0\",op=\"put\"} 10\n") != std::string::npos);
    CHECK(st.prom.find("skiff_test_xcore_total{core=\"1\",op=\"put\"} 32\n") != std::string::npos);
    CHECK(st.http_cores == 2);
    std::set<int> span_cores;
    for (const auto& t : st.traces["traces"]) {
        for (const auto& s : t["spans"]) {
            if (s["attributes"].contains("core_seen")) {
                CHECK(s["attributes"]["core_seen"] == s["core"]);
                span_cores.insert(s["core"].get<int>());
            }
        }
    }
    CHECK(span_cores == std::set<int>{0, 1});
}
