// Watch streams: one POST /v3/watch per watcher, its endless chunked answer parsed as it
// arrives (one JSON object per line) into the watcher's buffer.
//
// The transfer runs in a task under the kv's gate (the "pump"), not in next(): events arrive
// whether or not the caller is waiting. The pump and the watcher share one stream_state;
// the watcher's destructor only signals the pump's stop token, and the pump finishes on a
// later loop turn touching nothing but that shared state and the kv (which close() keeps
// alive until then).
#include "gateway_impl.hpp"

#include <skiff/runtime/oneshot.hpp>

#include <curl/curl.h>
#include <fmt/format.h>

#include <optional>
#include <utility>

namespace skiff::etcd {

using detail::json;

namespace {

struct stream_state {
    std::string request_body;
    std::size_t max_message = 0;
    std::string partial; // bytes of the message not yet ended by '\n'
    std::vector<event> pending;
    std::optional<error> failed;
    std::unique_ptr<runtime::oneshot<void>> signal; // set while next() waits
    std::stop_source stop;

    void wake() {
        if (signal) signal->set(); // schedules next(): never resumes it from inside curl
    }
    void fail(error e) {
        if (failed) return;
        failed = std::move(e);
        wake();
    }

    // The body sink: runs inside libcurl's write callback, so it only parses and buffers.
    // False ends the transfer (the stream failed or a message is too large).
    bool on_chunk(std::string_view chunk) noexcept {
        if (failed) return false;
        try {
            partial.append(chunk);
            std::size_t start = 0;
            bool any = false;
            for (std::size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
                const std::string_view line = std::string_view(partial).substr(start, nl - start);
                if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
                auto parsed = detail::parse_watch_message(json::parse(line));
                if (!parsed) {
                    fail(std::move(parsed).error());
                    return false;
                }
                for (auto& ev : *parsed) pending.push_back(std::move(ev));
                any = any || !parsed->empty();
            }
            partial.erase(0, start);
            if (partial.size() > max_message) {
                fail(error{errc::bad_response,
                           fmt::format("a watch message exceeds {} bytes (max_response_bytes)", max_message)});
                return false;
            }
            if (any) wake();
            return true;
        } catch (const std::exception& e) {
            fail(error{errc::bad_response, fmt::format("etcd's watch stream is malformed: {}", e.what())});
            return false;
        }
    }
};

struct forward_stop {
    stream_state* s;
    void operator()() noexcept { s->stop.request_stop(); }
};

class gateway_watcher final : public watcher {
public:
    explicit gateway_watcher(std::shared_ptr<stream_state> s) : _s(std::move(s)) {}
    ~gateway_watcher() override { _s->stop.request_stop(); }

    runtime::task<result<std::vector<event>, error>> next(std::stop_token st) override {
        for (;;) {
            if (!_s->pending.empty()) co_return std::exchange(_s->pending, {});
            if (_s->failed) co_return failure{*_s->failed};
            _s->signal = std::make_unique<runtime::oneshot<void>>();
            auto waiting = _s->signal->wait(st);
            auto woke = co_await waiting;
            _s->signal.reset();
            if (!woke) {
                _s->fail(error{errc::cancelled, "etcd watch cancelled"});
                _s->stop.request_stop();
                co_return failure{*_s->failed};
            }
        }
    }

private:
    std::shared_ptr<stream_state> _s;
};

// Runs the stream until etcd ends it, it breaks, or it is cancelled; the outcome lands in `s`.
runtime::task<void> pump(gateway_kv::impl& kv, std::shared_ptr<stream_state> s) {
    // close() stops every stream through the gate's token.
    std::stop_callback<forward_stop> on_close(kv.streams.stop_token(), forward_stop{s.get()});
    const std::size_t n = kv.cfg.endpoints.size();
    const std::size_t first = kv.current();
    for (std::size_t attempt = 0; attempt < n && !s->failed; ++attempt) {
        const std::size_t i = (first + attempt) % n;
        const std::string& endpoint = kv.cfg.endpoints[i];
        http::request req;
        req.method = "POST";
        req.url = endpoint + "/v3/watch";
        req.headers = {{"Content-Type", "application/json"}};
        req.body = std::span<const char>(s->request_body.data(), s->request_body.size());
        req.timeout = std::chrono::milliseconds(0); // none: a watch may idle for hours
        req.connect_timeout = kv.cfg.connect_timeout;
        stream_state* raw = s.get();
        req.body_sink = [raw](std::string_view chunk) { return raw->on_chunk(chunk); };
        auto sending = kv.http.send(std::move(req), s->stop.get_token());
        auto r = co_await std::move(sending);
        if (!r) {
            const auto& te = r.error();
            if (te.cancelled) {
                s->fail(error{errc::cancelled, "etcd watch cancelled"});
            } else if (!s->failed) {
                kv.failed(i);
                // Never connected: the next endpoint may take the watch. Once the stream ran,
                // the caller re-creates it from its last revision instead.
                if (te.curl_code == CURLE_COULDNT_CONNECT && attempt + 1 < n) continue;
                s->fail(error{errc::unavailable, fmt::format("etcd watch stream at {} broke: {}", endpoint, te.message)});
            }
            co_return;
        }
        if (r->status != 200) {
            if (r->status >= 500) kv.failed(i);
            s->fail(detail::classify_failure(r->status, r->body, "/v3/watch"));
            co_return;
        }
        kv.answered(i);
        s->fail(error{errc::unavailable, fmt::format("etcd at {} ended the watch stream", endpoint)});
        co_return;
    }
}

} // namespace

std::unique_ptr<watcher> gateway_kv::impl::watch(std::string key, bool prefix, std::int64_t start_revision) {
    auto s = std::make_shared<stream_state>();
    s->request_body = detail::watch_body(key, prefix, start_revision);
    s->max_message = cfg.max_response_bytes;
    auto w = std::make_unique<gateway_watcher>(s);
    auto spawned = streams.spawn(pump(*this, s));
    if (!spawned) s->fail(error{errc::cancelled, "etcd client is closed"});
    return w;
}

} // namespace skiff::etcd
