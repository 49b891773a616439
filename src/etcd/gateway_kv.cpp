#include "gateway_impl.hpp"

#include <skiff/core/log.hpp>
#include <skiff/core/printable.hpp>

#include <curl/curl.h>
#include <fmt/format.h>

#include <utility>

namespace skiff::etcd {

using detail::json;

namespace {

failure<error> fail(errc c, std::string msg) { return failure{error{c, std::move(msg)}}; }

http::client_config http_config(const gateway_config& cfg) {
    http::client_config h;
    h.max_response_bytes = cfg.max_response_bytes;
    return h;
}

// The request certainly never reached etcd: safe to send anywhere else, even a write.
bool never_sent(const http::transport_error& e) {
    return e.curl_code == CURLE_COULDNT_CONNECT || e.curl_code == CURLE_COULDNT_RESOLVE_HOST ||
           e.curl_code == CURLE_COULDNT_RESOLVE_PROXY;
}

} // namespace

result<std::vector<std::string>, error> gateway_config::parse_endpoints(std::string_view list) {
    std::vector<std::string> out;
    while (!list.empty()) {
        const auto comma = list.find(',');
        auto item = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && (item.back() == ' ' || item.back() == '/')) item.remove_suffix(1);
        if (item.empty()) continue;
        if (!item.starts_with("http://") && !item.starts_with("https://")) {
            return fail(errc::invalid_argument,
                        fmt::format("etcd endpoint {} is not an http:// or https:// URL", printable(item, 100)));
        }
        out.emplace_back(item);
    }
    if (out.empty()) return fail(errc::invalid_argument, "no etcd endpoint given");
    return out;
}

gateway_kv::impl::impl(gateway_config c) : cfg(std::move(c)), http(http_config(cfg)) {}

runtime::task<result<json, error>> gateway_kv::impl::call(const char* path, std::string body, resend policy,
                                                          std::stop_token st) {
    const std::size_t n = cfg.endpoints.size();
    const std::size_t first = _current;
    error last{errc::unavailable, "no etcd endpoint tried"};
    for (std::size_t attempt = 0; attempt < n; ++attempt) {
        const std::size_t i = (first + attempt) % n;
        const std::string& endpoint = cfg.endpoints[i];
        http::request req;
        req.method = "POST";
        req.url = endpoint + path;
        req.headers = {{"Content-Type", "application/json"}};
        req.body = std::span<const char>(body.data(), body.size());
        req.timeout = cfg.request_timeout;
        req.connect_timeout = cfg.connect_timeout;
        auto sending = http.send(std::move(req), st);
        auto r = co_await std::move(sending);
        if (!r) {
            const auto& te = r.error();
            if (te.cancelled) co_return fail(errc::cancelled, fmt::format("etcd request {} cancelled", path));
            last = error{te.timed_out ? errc::timeout : errc::unavailable,
                         fmt::format("etcd at {} ({}): {}", endpoint, path, te.message)};
            if (te.curl_code == CURLE_FILESIZE_EXCEEDED) co_return fail(errc::bad_response, last.message);
            failed(i);
            if (policy == resend::always || never_sent(te)) continue;
            co_return failure{std::move(last)};
        }
        if (r->status >= 500) {
            last = detail::classify_failure(r->status, r->body, path);
            failed(i);
            if (policy == resend::always) continue;
            co_return failure{std::move(last)};
        }
        answered(i);
        if (r->status != 200) co_return failure{detail::classify_failure(r->status, r->body, path)};
        try {
            co_return json::parse(r->body);
        } catch (const std::exception& e) {
            co_return fail(errc::bad_response, fmt::format("etcd's answer to {} is not JSON: {}", path, e.what()));
        }
    }
    co_return failure{std::move(last)};
}

// ---- gateway_kv --------------------------------------------------------------------------

result<std::unique_ptr<gateway_kv>, error> gateway_kv::create(gateway_config cfg) {
    if (cfg.endpoints.empty()) return fail(errc::invalid_argument, "no etcd endpoint given");
    std::string joined;
    for (const auto& e : cfg.endpoints) joined += (joined.empty() ? "" : ",") + e;
    auto parsed = gateway_config::parse_endpoints(joined);
    if (!parsed) return failure{std::move(parsed).error()};
    if (parsed->size() != cfg.endpoints.size()) return fail(errc::invalid_argument, "an etcd endpoint is empty");
    cfg.endpoints = std::move(*parsed);
    return std::unique_ptr<gateway_kv>(new gateway_kv(std::make_unique<impl>(std::move(cfg))));
}

gateway_kv::gateway_kv(std::unique_ptr<impl> i) : _impl(std::move(i)) {}

gateway_kv::~gateway_kv() {
    if (_impl->streams.count() != 0) {
        log::error("etcd gateway_kv destroyed with {} watch streams still running: await close() first",
                   _impl->streams.count());
    }
}

const std::string& gateway_kv::current_endpoint() const noexcept { return _impl->cfg.endpoints[_impl->current()]; }

runtime::task<void> gateway_kv::close() {
    auto closing = _impl->streams.close();
    co_await std::move(closing);
}

runtime::task<result<range_result, error>> gateway_kv::get(std::string key, std::stop_token st) {
    auto calling = _impl->call("/v3/kv/range", detail::range_body(key, false), impl::resend::always, std::move(st));
    auto r = co_await std::move(calling);
    if (!r) co_return failure{std::move(r).error()};
    co_return detail::parse_range(*r);
}

runtime::task<result<range_result, error>> gateway_kv::get_prefix(std::string prefix, std::stop_token st) {
    auto calling = _impl->call("/v3/kv/range", detail::range_body(prefix, true), impl::resend::always, std::move(st));
    auto r = co_await std::move(calling);
    if (!r) co_return failure{std::move(r).error()};
    co_return detail::parse_range(*r);
}

runtime::task<result<std::int64_t, error>> gateway_kv::put(std::string key, std::string value, std::int64_t lease,
                                                           std::stop_token st) {
    auto calling =
        _impl->call("/v3/kv/put", detail::put_body(key, value, lease), impl::resend::if_unsent, std::move(st));
    auto r = co_await std::move(calling);
    if (!r) co_return failure{std::move(r).error()};
    co_return detail::parse_revision(*r);
}

runtime::task<result<std::int64_t, error>> gateway_kv::del(std::string key, std::stop_token st) {
    auto calling =
        _impl->call("/v3/kv/deleterange", detail::delete_body(key, false), impl::resend::if_unsent, std::move(st));
    auto r = co_await std::move(calling);
    if (!r) co_return failure{std::move(r).error()};
    co_return detail::parse_revision(*r);
}

runtime::task<result<txn_result, error>> gateway_kv::txn(txn_request req, std::stop_token st) {
    auto calling = _impl->call("/v3/kv/txn", detail::txn_body(req), impl::resend::if_unsent, std::move(st));
    auto r = co_await std::move(calling);
    if (!r) co_return failure{std::move(r).error()};
    co_return detail::parse_txn(*r);
}

runtime::task<result<lease_grant, error>> gateway_kv::grant(std::chrono::seconds ttl, std::stop_token st) {
    // Resent freely: a lease granted by a lost attempt is never used and expires on its own.
    auto calling = _impl->call("/v3/lease/grant", detail::grant_body(ttl), impl::resend::always, std::move(st));
    auto r = co_await std::move(calling);
    if (!r) co_return failure{std::move(r).error()};
    co_return detail::parse_grant(*r);
}

runtime::task<result<std::chrono::seconds, error>> gateway_kv::keepalive(std::int64_t lease, std::stop_token st) {
    auto calling =
        _impl->call("/v3/lease/keepalive", detail::lease_id_body(lease), impl::resend::always, std::move(st));
    auto r = co_await std::move(calling);
    if (!r) co_return failure{std::move(r).error()};
    co_return detail::parse_keepalive(*r);
}

runtime::task<result<void, error>> gateway_kv::revoke(std::int64_t lease, std::stop_token st) {
    auto calling = _impl->call("/v3/lease/revoke", detail::lease_id_body(lease), impl::resend::always, std::move(st));
    auto r = co_await std::move(calling);
    if (!r) co_return failure{std::move(r).error()};
    co_return ok();
}

std::unique_ptr<watcher> gateway_kv::watch(std::string key, bool prefix, std::int64_t start_revision) {
    return _impl->watch(std::move(key), prefix, start_revision);
}

} // namespace skiff::etcd
