// Traces: spans kept in a bounded per-core ring of the most recent ones.
//
// A span is an RAII object: it starts when created and is written into the ring of the core
// that ends it when end() runs or it is destroyed. Until then it lives with its owner (usually
// a coroutine frame), so the ring only holds finished spans and recording needs no lock.
//
//   auto flush = metrics::span::root("flush");            // new trace
//   flush.set("partition", 3);
//   {
//       auto build = flush.child("build");
//       ...                                                // ends with the scope
//   }
//   auto put = flush.child("put");
//   put.set("kind", "kfs"); put.set("bytes", n); put.set("retries", r); put.set("status", 200);
//   put.end();
//   ...
//   // A produce request acknowledged by that flush:
//   auto produce = metrics::span::root("produce", metrics::volume::high);
//   ...
//   produce.link(flush.context());                         // "acknowledged by this flush"
//
// Contexts (span_context) are two integers: pass them across coroutines and cores to parent
// or link spans created elsewhere. A child of an inert span (tracing off, or a high-volume
// root not sampled) is inert too, so a whole trace is either recorded or skipped.
//
// Each core keeps two rings: one for low-volume traces (flushes, restores) and one for
// high-volume traces (one per produce/fetch request), so a burst of produce spans cannot evict
// the flushes the timeline draws. When a ring is full the oldest span is dropped (counted).
//
// Times are steady-clock nanoseconds since the process's trace epoch (the same on every
// core, so spans from different cores line up). Use a span on one thread at a time; the
// ring belongs to the thread that ends the span.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace skiff::metrics {

enum class volume : std::uint8_t { low = 0, high = 1 };

struct span_context {
    std::uint64_t trace_id = 0;
    std::uint64_t span_id = 0;
    volume vol = volume::low;
    bool valid() const noexcept { return trace_id != 0 && span_id != 0; }
};

struct span_attribute {
    std::string key;
    std::string str;          // when !is_int
    std::int64_t num = 0;     // when is_int
    bool is_int = false;
};

// A finished span as stored in the ring and shipped by a scrape.
struct span_record {
    std::uint64_t trace_id = 0;
    std::uint64_t span_id = 0;
    std::uint64_t parent_id = 0; // 0 for a root
    std::string name;
    unsigned core = 0;           // where it started
    std::int64_t start_ns = 0;   // since the trace epoch
    std::int64_t end_ns = 0;
    volume vol = volume::low;
    std::vector<span_attribute> attributes;
    std::vector<span_context> links;

    const span_attribute* attribute(std::string_view key) const noexcept;
};

// Nanoseconds since the process's trace epoch (steady clock).
std::int64_t trace_now_ns() noexcept;
// The trace epoch as Unix time in nanoseconds (to turn span times into wall-clock times).
std::int64_t trace_epoch_unix_ns() noexcept;
// 16 lowercase hex digits; "" for 0.
std::string format_id(std::uint64_t id);
// Inverse of format_id; 0 when malformed.
std::uint64_t parse_id(std::string_view hex) noexcept;

class span {
public:
    span() = default; // inert
    span(span&& o) noexcept : _rec(std::move(o._rec)), _live(std::exchange(o._live, false)) {}
    span& operator=(span&& o) noexcept;
    span(const span&) = delete;
    span& operator=(const span&) = delete;
    ~span() { end(); }

    // Starts a new trace. High-volume roots are subject to the sampling rate
    // (set_high_volume_sampling); unsampled or disabled roots are inert.
    static span root(std::string_view name, volume v = volume::low);
    // Starts a span under `parent` (which may live on another core). Inert if parent is not valid.
    static span child_of(std::string_view name, span_context parent);
    span child(std::string_view name) const { return child_of(name, context()); }

    // Attributes: a small list of key → string or integer. Setting a key again replaces it.
    void set(std::string_view key, std::string_view value);
    void set(std::string_view key, const char* value) { set(key, std::string_view(value)); }
    void set(std::string_view key, const std::string& value) { set(key, std::string_view(value)); }
    template <typename Int>
        requires(std::is_integral_v<Int> && !std::is_same_v<Int, bool>)
    void set(std::string_view key, Int value) {
        set_int(key, static_cast<std::int64_t>(value));
    }
    void set(std::string_view key, bool value) { set_int(key, value ? 1 : 0); }
    // Links this span to a span of another trace (a produce to the flush that made it durable).
    void link(span_context other);

    // Records the span into this thread's ring. Idempotent; the destructor calls it.
    void end() noexcept;
    // For replays and tests: explicit times (ns since the trace epoch).
    void set_start_ns(std::int64_t t) noexcept { _rec.start_ns = t; }
    void end_at(std::int64_t t) noexcept;

    // Context for children and links; invalid when inert.
    span_context context() const noexcept;
    bool active() const noexcept { return _live; }
    std::uint64_t trace_id() const noexcept { return _live ? _rec.trace_id : 0; }

private:
    void start(std::string_view name, std::uint64_t trace_id, std::uint64_t parent, volume v);
    void set_int(std::string_view key, std::int64_t value);
    span_attribute& slot(std::string_view key);

    span_record _rec;
    bool _live = false;
};

// Process-wide switches (any thread; relaxed atomics read when a root starts).
void set_tracing_enabled(bool on) noexcept;
bool tracing_enabled() noexcept;
// Record one in `every` high-volume roots (1 = all, the default; 0 = none).
void set_high_volume_sampling(std::uint32_t every) noexcept;

// This thread's (core's) rings of finished spans.
class trace_buffer {
public:
    static constexpr std::size_t default_capacity = 4096;

    // The calling thread's buffer (created on first use).
    static trace_buffer& local();
    // The calling thread's buffer if it was created, else null (never allocates).
    static trace_buffer* existing() noexcept;

    trace_buffer();
    void push(span_record&& r) noexcept;
    // Every stored span, oldest first (low-volume ring, then high-volume ring).
    std::vector<span_record> snapshot() const;
    // Resizing drops what is stored.
    void set_capacity(volume v, std::size_t n);
    std::size_t capacity(volume v) const noexcept { return _rings[static_cast<int>(v)].slots.size(); }
    std::size_t size(volume v) const noexcept { return _rings[static_cast<int>(v)].size; }
    std::uint64_t dropped(volume v) const noexcept { return _rings[static_cast<int>(v)].dropped; }
    std::uint64_t recorded(volume v) const noexcept { return _rings[static_cast<int>(v)].recorded; }
    void clear() noexcept;

private:
    struct ring {
        std::vector<span_record> slots;
        std::size_t head = 0; // next slot to write
        std::size_t size = 0;
        std::uint64_t dropped = 0;
        std::uint64_t recorded = 0;
    };
    ring _rings[2];
};

} // namespace skiff::metrics
