// Client quotas (docs/quotas.md): Kafka's producer_byte_rate and consumer_byte_rate, per
// client id, for the whole broker (every core counts into one meter).
//
// A client over its rate is not refused: its request is served, and the answer carries
// throttle_time_ms, the time the client must stay quiet for its rate to fall back to the quota
// (KIP-219). The broker also stops reading that connection for as long, so a client that
// ignores the hint (or speaks a version from before KIP-219) is held to the rate anyway.
//
// The rate is measured as a GCRA (a virtual scheduling clock per client id and kind): each
// request advances the client's clock by bytes / rate; the throttle is how far that clock runs
// ahead of now beyond the burst window (Kafka's quota.window.size, 1 s). Lock-free per request:
// one compare-and-swap on an atomic; a client id seen for the first time takes a mutex once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace skiff::broker {

struct client_quota_table; // client_quotas.hpp

struct quota_limits {
    double produce_bytes_per_second = 0; // 0: unlimited
    double fetch_bytes_per_second = 0;
    bool operator==(const quota_limits&) const = default;
};

struct quota_config {
    quota_limits defaults;                                    // every client id without its own
    std::map<std::string, quota_limits, std::less<>> clients; // by client id
    std::chrono::milliseconds window{1000};                   // the burst a client may send at once
    std::chrono::milliseconds max_throttle{30000};            // no single answer asks for more
    bool any() const noexcept;
};

// "ID:produce=BYTES,fetch=BYTES;ID2:produce=BYTES" (either rate may be left out; BYTES takes
// K/M/G suffixes, powers of 1024) into `out.clients`. An error names the part it could not read.
std::string parse_client_quotas(std::string_view spec, quota_config& out);

enum class quota_kind : std::uint8_t { produce = 0, fetch = 1 };

class quota_meter {
public:
    explicit quota_meter(quota_config cfg);
    quota_meter(const quota_meter&) = delete;
    quota_meter& operator=(const quota_meter&) = delete;

    struct entity {
        std::string user; // Kafka's user principal name (ANONYMOUS without SASL)
        std::string client_id;
        // Bytes per second by kind (0: unlimited); atomics because a quota change through the
        // Kafka API rewrites them while other cores are measuring.
        std::atomic<double> rate[2]{};
        std::atomic<std::int64_t> tat[2]{}; // theoretical arrival time (ns, steady clock)
        quota_limits limits() const noexcept {
            return {rate[0].load(std::memory_order_relaxed), rate[1].load(std::memory_order_relaxed)};
        }
    };

    // The client id's meter (created on first sight). Stable for the meter's life. Beyond
    // max_entities distinct client ids, new ones share one meter with the default limits, so
    // a client that invents ids cannot grow the broker's memory.
    // Meters are per (user, client id): a user-level quota limits each of the user's client ids
    // on its own (Kafka shares it between them; docs/quotas.md).
    entity& find(std::string_view user, std::string_view client_id);
    entity& find(std::string_view client_id) { return find("ANONYMOUS", client_id); }
    // Counts `bytes` against the entity's quota at `now_ns`; the throttle time it earned (zero
    // when within the quota or unlimited).
    std::chrono::milliseconds record(entity& e, quota_kind k, std::size_t bytes, std::int64_t now_ns) const noexcept;

    const quota_config& config() const noexcept { return _cfg; }
    bool limits(quota_kind k) const noexcept { return _limited[static_cast<int>(k)].load(std::memory_order_relaxed); }
    std::size_t entities() const;

    // Installs the quotas set through the Kafka API (client_quotas.hpp; they rank above the
    // command-line ones) and re-resolves every client id's limits. Any thread; a client keeps
    // its measured clock across the change, so a lowered quota throttles at once.
    void set_table(std::shared_ptr<const client_quota_table> t);

    static constexpr std::size_t max_entities = 10000;

private:
    void resolve(entity& e) const; // under _mu
    void refresh_limited();        // under _mu

    quota_config _cfg;
    std::shared_ptr<const client_quota_table> _table; // under _mu
    std::atomic<bool> _limited[2]{};
    mutable std::mutex _mu; // a client id's first sight, and quota changes
    std::unordered_map<std::string, std::unique_ptr<entity>> _entities;
    entity _overflow;
};

// One core's cache of client id → meter entity, so the hot path never takes the mutex.
class quota_cache {
public:
    explicit quota_cache(quota_meter& m) : _meter(m) {}
    quota_meter::entity& find(std::string_view user, std::string_view client_id);
    quota_meter::entity& find(std::string_view client_id) { return find("ANONYMOUS", client_id); }
    quota_meter& meter() const noexcept { return _meter; }

private:
    quota_meter& _meter;
    std::unordered_map<std::string, quota_meter::entity*> _cache;
};

} // namespace skiff::broker
