// gateway_kv's state, shared by gateway_kv.cpp (unary calls) and gateway_watch.cpp (streams).
// Private to src/etcd.
#pragma once

#include "gateway_json.hpp"

#include <skiff/etcd/gateway_kv.hpp>
#include <skiff/http/client.hpp>
#include <skiff/runtime/gate.hpp>

#include <cstddef>
#include <stop_token>
#include <string>

namespace skiff::etcd {

class gateway_kv::impl {
public:
    explicit impl(gateway_config cfg);

    // How far a failed call may move on to the next endpoint (see gateway_kv.hpp).
    enum class resend { if_unsent, always };

    // POSTs `body` to `path` on the endpoints in turn; the parsed JSON of a 200, or the error.
    runtime::task<result<detail::json, error>> call(const char* path, std::string body, resend policy,
                                                    std::stop_token st);

    std::unique_ptr<watcher> watch(std::string key, bool prefix, std::int64_t start_revision);

    // Where the next request starts, and the bookkeeping of which endpoint answered.
    std::size_t current() const noexcept { return _current; }
    void answered(std::size_t i) noexcept { _current = i; }
    void failed(std::size_t i) noexcept {
        if (_current == i) _current = (i + 1) % cfg.endpoints.size();
    }

    gateway_config cfg;
    http::client http;
    // Every watch stream runs under this gate; close() ends them.
    runtime::gate streams{"etcd-watch"};

private:
    std::size_t _current = 0;
};

} // namespace skiff::etcd
