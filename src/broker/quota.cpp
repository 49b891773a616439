#include <skiff/broker/quota.hpp>
#include <skiff/broker/client_quotas.hpp>

#include <skiff/core/parse_int.hpp>

#include <algorithm>
#include <cmath>

namespace skiff::broker {

bool quota_config::any() const noexcept {
    auto set = [](const quota_limits& l) { return l.produce_bytes_per_second > 0 || l.fetch_bytes_per_second > 0; };
    if (set(defaults)) return true;
    return std::any_of(clients.begin(), clients.end(), [&](const auto& kv) { return set(kv.second); });
}

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool parse_bytes(std::string_view v, double& out) {
    std::uint64_t mult = 1;
    if (!v.empty()) {
        switch (v.back()) {
        case 'k': case 'K': mult = 1024; break;
        case 'm': case 'M': mult = 1024 * 1024; break;
        case 'g': case 'G': mult = 1024ull * 1024 * 1024; break;
        default: break;
        }
        if (mult != 1) v.remove_suffix(1);
    }
    auto n = parse_u64(v);
    if (!n || *n == 0) return false;
    out = static_cast<double>(*n) * static_cast<double>(mult);
    return true;
}

} // namespace

std::string parse_client_quotas(std::string_view spec, quota_config& out) {
    while (!spec.empty()) {
        auto semi = spec.find(';');
        std::string_view part = trim(spec.substr(0, semi));
        spec = semi == std::string_view::npos ? std::string_view{} : spec.substr(semi + 1);
        if (part.empty()) continue;
        auto colon = part.rfind(':');
        if (colon == std::string_view::npos || colon == 0) {
            return "'" + std::string(part) + "' is not CLIENT_ID:produce=BYTES,fetch=BYTES";
        }
        std::string id(part.substr(0, colon));
        quota_limits l;
        std::string_view rates = part.substr(colon + 1);
        while (!rates.empty()) {
            auto comma = rates.find(',');
            std::string_view kv = trim(rates.substr(0, comma));
            rates = comma == std::string_view::npos ? std::string_view{} : rates.substr(comma + 1);
            auto eq = kv.find('=');
            std::string_view k = eq == std::string_view::npos ? kv : kv.substr(0, eq);
            std::string_view v = eq == std::string_view::npos ? std::string_view{} : kv.substr(eq + 1);
            double* dst = k == "produce" ? &l.produce_bytes_per_second
                        : k == "fetch"   ? &l.fetch_bytes_per_second
                                         : nullptr;
            if (!dst) return "unknown quota '" + std::string(k) + "' for client id '" + id + "' (produce or fetch)";
            if (!parse_bytes(v, *dst)) {
                return "quota " + std::string(k) + " for client id '" + id + "' must be a positive byte count, not '" +
                       std::string(v) + "'";
            }
        }
        out.clients[id] = l;
    }
    return {};
}

quota_meter::quota_meter(quota_config cfg) : _cfg(std::move(cfg)), _table(std::make_shared<client_quota_table>()) {
    std::lock_guard g(_mu);
    resolve(_overflow);
    refresh_limited();
}

void quota_meter::resolve(entity& e) const {
    // The overflow entity stands for ids past the bound: it gets what an unnamed id would.
    const auto l = &e == &_overflow ? resolve_quota(*_table, _cfg, anonymous_user, std::nullopt)
                                    : resolve_quota(*_table, _cfg, e.user, e.client_id);
    e.rate[0].store(l.produce_bytes_per_second, std::memory_order_relaxed);
    e.rate[1].store(l.fetch_bytes_per_second, std::memory_order_relaxed);
}

void quota_meter::refresh_limited() {
    // Whether any client can be limited, per kind: the hot path skips metering otherwise.
    bool any[2] = {_cfg.defaults.produce_bytes_per_second > 0, _cfg.defaults.fetch_bytes_per_second > 0};
    for (const auto& [id, l] : _cfg.clients) {
        any[0] = any[0] || l.produce_bytes_per_second > 0;
        any[1] = any[1] || l.fetch_bytes_per_second > 0;
    }
    for (const auto& [e, values] : _table->entries) {
        any[0] = any[0] || values.count(producer_byte_rate) > 0;
        any[1] = any[1] || values.count(consumer_byte_rate) > 0;
    }
    _limited[0].store(any[0], std::memory_order_relaxed);
    _limited[1].store(any[1], std::memory_order_relaxed);
}

void quota_meter::set_table(std::shared_ptr<const client_quota_table> t) {
    if (!t) t = std::make_shared<client_quota_table>();
    std::lock_guard g(_mu);
    if (_table == t || *_table == *t) {
        _table = std::move(t);
        return;
    }
    _table = std::move(t);
    for (auto& [id, e] : _entities) resolve(*e);
    resolve(_overflow);
    refresh_limited();
}

namespace {
// NUL cannot occur in a SASL user name (RFC 5802 saslname / PLAIN's separators).
std::string entity_key(std::string_view user, std::string_view client_id) {
    std::string k(user);
    k += '\0';
    k += client_id;
    return k;
}
} // namespace

quota_meter::entity& quota_meter::find(std::string_view user, std::string_view client_id) {
    const std::string key = entity_key(user, client_id);
    std::lock_guard g(_mu);
    if (auto it = _entities.find(key); it != _entities.end()) return *it->second;
    if (_entities.size() >= max_entities) return _overflow;
    auto e = std::make_unique<entity>();
    e->user = std::string(user);
    e->client_id = std::string(client_id);
    resolve(*e);
    auto& ref = *e;
    _entities.emplace(key, std::move(e));
    return ref;
}

std::size_t quota_meter::entities() const {
    std::lock_guard g(_mu);
    return _entities.size();
}

std::chrono::milliseconds quota_meter::record(entity& e, quota_kind k, std::size_t bytes,
                                              std::int64_t now_ns) const noexcept {
    const double rate = e.rate[static_cast<int>(k)].load(std::memory_order_relaxed);
    if (rate <= 0 || bytes == 0) return std::chrono::milliseconds(0);
    const auto cost = static_cast<std::int64_t>(std::ceil(static_cast<double>(bytes) * 1e9 / rate));
    auto& tat = e.tat[static_cast<int>(k)];
    std::int64_t cur = tat.load(std::memory_order_relaxed);
    std::int64_t next = 0;
    do {
        next = std::max(cur, now_ns) + cost;
    } while (!tat.compare_exchange_weak(cur, next, std::memory_order_relaxed));
    const std::int64_t window_ns = std::chrono::nanoseconds(_cfg.window).count();
    const std::int64_t ahead = next - now_ns - window_ns;
    if (ahead <= 0) return std::chrono::milliseconds(0);
    // Rounded up: a throttle of 0.3 ms is still a throttle.
    const auto ms = std::chrono::milliseconds((ahead + 999'999) / 1'000'000);
    return std::min(ms, _cfg.max_throttle);
}

quota_meter::entity& quota_cache::find(std::string_view user, std::string_view client_id) {
    const std::string key = entity_key(user, client_id);
    if (auto it = _cache.find(key); it != _cache.end()) return *it->second;
    auto& e = _meter.find(user, client_id);
    // The cache is bounded like the meter: ids past the bound all map to the overflow entity
    // and are looked up in the meter each time (rare: a client inventing ids).
    if (_cache.size() < quota_meter::max_entities) _cache.emplace(key, &e);
    return e;
}

} // namespace skiff::broker
