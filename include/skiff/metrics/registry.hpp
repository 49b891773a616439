// Named metrics with labels, one registry per core.
//
// Each reactor thread has its own registry (thread_local), so the hot path never locks or
// shares a cache line: instrumented code registers a metric once (setup time: name and label
// lookup, allocation) and keeps the returned handle, whose operations are a pointer
// dereference and an add.
//
//   auto& reg = metrics::registry::local();
//   metrics::counter puts = reg.counter("skiff_s3_requests_total", "S3 requests sent.",
//                                       {{"op", "put"}});
//   metrics::histogram lat = reg.histogram("skiff_s3_request_duration_seconds",
//                                          "S3 request latency.", metrics::unit::seconds,
//                                          {{"op", "put"}});
//   puts.inc();
//   lat.record(std::chrono::nanoseconds(elapsed));
//
// Names are snake_case with base units (seconds, bytes) and these suffixes, checked at
// registration: counters end in `_total`; histograms and gauges with a unit end in
// `_seconds` / `_bytes`; counters in bytes end in `_bytes_total`. Only histograms may be in
// seconds (counters and gauges hold integers). Label names are snake_case; `core` and `le` are reserved (the
// exposition adds them). Registering the same name and labels again returns a handle to the
// same cell; the same name with another type or unit throws std::invalid_argument (a
// programming error, found at startup). Handles and cells stay valid as long as the core's
// thread lives; callback metrics are removed when their registration object is destroyed.
//
// All calls must happen on the thread that owns the registry (its reactor). Scrapes read
// every core's registry on that core (see collect.hpp).
#pragma once

#include <skiff/metrics/histogram.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::metrics {

enum class metric_type : std::uint8_t { counter, gauge, histogram };
// Base unit of a metric. Histograms in seconds record nanoseconds internally and expose
// seconds; bytes and plain numbers are recorded and exposed as they are.
enum class unit : std::uint8_t { none, seconds, bytes };

const char* to_string(metric_type t) noexcept;
const char* to_string(unit u) noexcept;

// Label pairs as given at registration; the registry stores them sorted by name.
using labels = std::vector<std::pair<std::string, std::string>>;

namespace detail {
struct series;
}

// A monotonically increasing count. Default-constructed handles are inert (no-ops), so a
// component can hold one before it registers.
class counter {
public:
    counter() = default;
    void inc(std::uint64_t n = 1) noexcept {
        if (_v) *_v += n;
    }
    std::uint64_t value() const noexcept { return _v ? *_v : 0; }
    explicit operator bool() const noexcept { return _v != nullptr; }

private:
    friend class registry;
    explicit counter(std::uint64_t* v) noexcept : _v(v) {}
    std::uint64_t* _v = nullptr;
};

// A value that goes up and down (queue depth, buffered bytes).
class gauge {
public:
    gauge() = default;
    void set(std::int64_t v) noexcept {
        if (_v) *_v = v;
    }
    void add(std::int64_t d) noexcept {
        if (_v) *_v += d;
    }
    void sub(std::int64_t d) noexcept {
        if (_v) *_v -= d;
    }
    std::int64_t value() const noexcept { return _v ? *_v : 0; }
    explicit operator bool() const noexcept { return _v != nullptr; }

private:
    friend class registry;
    explicit gauge(std::int64_t* v) noexcept : _v(v) {}
    std::int64_t* _v = nullptr;
};

// A latency or size distribution. record() never allocates, locks or throws.
class histogram {
public:
    histogram() = default;
    // Raw value: nanoseconds for unit::seconds, bytes for unit::bytes.
    void record(std::uint64_t v) noexcept {
        if (_cell) _cell->record(v);
    }
    template <typename Rep, typename Period>
    void record(std::chrono::duration<Rep, Period> d) noexcept {
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
        record(ns > 0 ? static_cast<std::uint64_t>(ns) : 0);
    }
    std::uint64_t count() const noexcept { return _cell ? _cell->count() : 0; }
    histogram_snapshot snapshot() const { return _cell ? _cell->snapshot() : histogram_snapshot{}; }
    explicit operator bool() const noexcept { return _cell != nullptr; }

    // `auto t = lat.time();` records the scope's duration (steady clock).
    [[nodiscard]] class histogram_timer time() const noexcept;

private:
    friend class registry;
    explicit histogram(histogram_cell* c) noexcept : _cell(c) {}
    histogram_cell* _cell = nullptr;
};

// Records the time from construction to destruction into a histogram.
class histogram_timer {
public:
    explicit histogram_timer(histogram h) noexcept : _h(h), _start(std::chrono::steady_clock::now()) {}
    histogram_timer(const histogram_timer&) = delete;
    histogram_timer& operator=(const histogram_timer&) = delete;
    ~histogram_timer() { _h.record(std::chrono::steady_clock::now() - _start); }

private:
    histogram _h;
    std::chrono::steady_clock::time_point _start;
};

inline histogram_timer histogram::time() const noexcept { return histogram_timer(*this); }

// Keeps a callback metric registered; destroying it (on the registry's thread) removes the
// series. Move-only. Safe to destroy after the thread's registry is gone (then a no-op).
class registry;

class registration {
public:
    registration() = default;
    registration(registration&& o) noexcept
        : _owner(std::move(o._owner)), _s(std::exchange(o._s, nullptr)) {}
    registration& operator=(registration&& o) noexcept;
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;
    ~registration() { reset(); }
    void reset() noexcept;
    explicit operator bool() const noexcept { return _s != nullptr; }

private:
    friend class registry;
    registration(std::weak_ptr<registry*> owner, detail::series* s) noexcept : _owner(std::move(owner)), _s(s) {}
    std::weak_ptr<registry*> _owner;
    detail::series* _s = nullptr;
};

// ---- snapshots: plain values, safe to move between cores ----

struct series_snapshot {
    metrics::labels labels;     // sorted by name
    std::uint64_t counter = 0;  // metric_type::counter
    std::int64_t gauge = 0;     // metric_type::gauge
    histogram_snapshot hist;    // metric_type::histogram
};

struct family_snapshot {
    std::string name;
    std::string help;
    metric_type type = metric_type::counter;
    metrics::unit unit = unit::none;
    std::vector<series_snapshot> series; // sorted by labels
};

struct core_snapshot {
    unsigned core = 0;
    std::vector<family_snapshot> families; // sorted by name
};

// Sums over cores: counters and gauges add up, histograms merge bucket-wise.
core_snapshot merge_cores(const std::vector<core_snapshot>& cores);

// Process-wide switch for instrumented components (any thread; a relaxed atomic). Components
// read it once, when they register their metrics (the S3 client at create(), io_budget at
// construction, partition_log at open()): created while it is off, they keep inert handles,
// so their hot path costs one null test per update. It does not affect metrics registered
// directly, the registry or the scrape. On by default. Tracing has its own switch
// (set_tracing_enabled in trace.hpp).
void set_metrics_enabled(bool on) noexcept;
bool metrics_enabled() noexcept;

namespace detail {
struct family;
}

class registry {
public:
    registry();
    ~registry();
    registry(const registry&) = delete;
    registry& operator=(const registry&) = delete;

    // The calling thread's registry (created on first use).
    static registry& local();

    metrics::counter counter(std::string_view name, std::string_view help, const metrics::labels& l = {},
                             metrics::unit u = unit::none);
    metrics::gauge gauge(std::string_view name, std::string_view help, const metrics::labels& l = {},
                         metrics::unit u = unit::none);
    metrics::histogram histogram(std::string_view name, std::string_view help, metrics::unit u,
                                 const metrics::labels& l = {});

    // Sampled at scrape time on this core. The callback must be cheap and must not throw;
    // it runs while the scrape walks the registry, so it must not register or remove
    // metrics. Registering the same name and labels again while the first registration is
    // alive throws std::invalid_argument.
    [[nodiscard]] registration gauge_fn(std::string_view name, std::string_view help, const metrics::labels& l,
                                        std::function<std::int64_t()> fn, metrics::unit u = unit::none);
    [[nodiscard]] registration counter_fn(std::string_view name, std::string_view help, const metrics::labels& l,
                                          std::function<std::uint64_t()> fn, metrics::unit u = unit::none);

    // This core's values. Also reports the reactor's own counters (skiff_reactor_*) and the
    // trace ring's (skiff_trace_*) when a reactor / tracer lives on this thread.
    core_snapshot snapshot() const;

    std::size_t series_count() const noexcept;

    // Throws std::invalid_argument unless the name follows the conventions above.
    static void check_name(std::string_view name, metric_type t, metrics::unit u);

private:
    friend class registration;
    detail::series& find_or_add(std::string_view name, std::string_view help, metric_type t, metrics::unit u,
                                const metrics::labels& l, bool callback);
    void remove(detail::series* s) noexcept;

    std::map<std::string, std::unique_ptr<detail::family>, std::less<>> _families;
    std::shared_ptr<registry*> _self; // registrations hold a weak_ptr to it
};

} // namespace skiff::metrics
