// Hedged store requests (docs/retries.md, "Hedging"): a request still unanswered after the
// recent p99 of its kind is sent again; the first success wins and the other is cancelled.
//
// One policy per core and request kind (segment PUTs, segment GETs), shared by the core's
// partitions. It learns the kind's latency from a window of recent successes, and bounds the
// extra requests: each request earns `max_ratio` of a hedge, a hedge spends one, so at most
// that share of requests (5% by default) is ever sent twice. Single-core.
#pragma once

#include <skiff/runtime/clock.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace skiff::storage {

struct hedge_config {
    bool enabled = true;
    // Unset: hedge after the recent p99 (and not before min_delay). Set: after exactly this.
    std::optional<std::chrono::milliseconds> after;
    std::chrono::milliseconds min_delay{5};
    double max_ratio = 0.05; // hedges per request, at most
};

struct hedge_stats {
    std::uint64_t requests = 0;
    std::uint64_t hedges = 0; // second requests sent
    std::uint64_t wins = 0;   // ... that answered first
};

class hedge_policy {
public:
    explicit hedge_policy(hedge_config cfg = {}) : _cfg(cfg) {}

    // How long to wait for the first request before hedging; nullopt: do not hedge (off, or too
    // few samples yet to know the kind's p99).
    std::optional<runtime::duration> delay() const noexcept;
    // A request of this kind is starting: earns max_ratio of a hedge.
    void on_request() noexcept;
    // A success took `d` (first request or hedge, whichever answered).
    void record(runtime::duration d) noexcept;
    // Spends one hedge if the budget has one.
    bool try_hedge() noexcept;
    void on_win() noexcept { ++_stats.wins; }

    const hedge_stats& stats() const noexcept { return _stats; }
    const hedge_config& config() const noexcept { return _cfg; }

private:
    static constexpr std::size_t window = 512;
    static constexpr std::size_t min_samples = 32;
    hedge_config _cfg;
    std::array<std::int64_t, window> _samples{};
    std::size_t _count = 0;  // samples recorded (the ring holds the last `window`)
    std::int64_t _p99_ns = 0; // recomputed every 32 samples
    double _tokens = 1.0;
    hedge_stats _stats;
};

} // namespace skiff::storage
