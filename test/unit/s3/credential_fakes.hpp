// Fake credential endpoints for tests: an http::server on its own thread and reactor, on
// 127.0.0.1 with a free port, answering exact (method, path) routes with plain functions.
// Handlers run on the server's thread: they guard what they share with the test by a mutex.
#pragma once

#include "run_task.hpp"

#include <skiff/http/server.hpp>
#include <skiff/runtime/reactor.hpp>

#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace skiff::test {

using sync_handler = std::function<http::server::response(const http::server::request&)>;

struct fake_route {
    fake_route(std::string m, std::string p, sync_handler h) : method(std::move(m)), path(std::move(p)), fn(std::move(h)) {}
    std::string method;
    std::string path;
    sync_handler fn;
};

namespace detail {
inline runtime::task<http::server::response> call_sync(const sync_handler* h, const http::server::request* req) {
    co_return (*h)(*req);
}
} // namespace detail

class fake_endpoint {
public:
    explicit fake_endpoint(std::vector<fake_route> routes) : _routes(std::move(routes)) {
        std::promise<std::string> ready;
        auto fut = ready.get_future();
        _thread = std::thread([this, &ready] { main(ready); });
        _url = fut.get();
        if (_url.rfind("error:", 0) == 0) {
            _thread.join();
            throw std::runtime_error(_url);
        }
    }
    ~fake_endpoint() {
        if (_reactor) _reactor->post([this] { _stop.request_stop(); });
        _thread.join();
    }
    fake_endpoint(const fake_endpoint&) = delete;
    fake_endpoint& operator=(const fake_endpoint&) = delete;

    const std::string& url() const { return _url; } // "http://127.0.0.1:PORT"

private:
    void main(std::promise<std::string>& ready) {
        auto r = runtime::reactor::create(0);
        if (!r) {
            ready.set_value("error: " + r.error());
            return;
        }
        (*r)->run_until_complete(serve(ready));
        _reactor = nullptr;
    }
    runtime::task<void> serve(std::promise<std::string>& ready) {
        http::server_config cfg;
        cfg.addr = "127.0.0.1:0";
        auto srv = http::server::listen(cfg);
        if (!srv) {
            ready.set_value("error: " + srv.error());
            co_return;
        }
        for (const auto& rt : _routes) {
            const sync_handler* h = &rt.fn;
            (*srv)->route(rt.method, rt.path, [h](const http::server::request& req) { return detail::call_sync(h, &req); });
        }
        _reactor = &runtime::reactor::local();
        ready.set_value("http://127.0.0.1:" + std::to_string((*srv)->local_address().port()));
        co_await (*srv)->serve(_stop.get_token());
    }

    std::vector<fake_route> _routes;
    std::string _url;
    std::stop_source _stop;
    runtime::reactor* _reactor = nullptr;
    std::thread _thread;
};

} // namespace skiff::test
