#include <skiff/metrics/trace.hpp>
#include <skiff/core/hex.hpp>
#include <skiff/runtime/reactor.hpp>

#include <atomic>
#include <charconv>
#include <chrono>
#include <memory>

namespace skiff::metrics {

namespace {

struct epoch_t {
    std::chrono::steady_clock::time_point steady;
    std::int64_t unix_ns;
};

const epoch_t& epoch() noexcept {
    static const epoch_t e{std::chrono::steady_clock::now(),
                           std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count()};
    return e;
}

std::atomic<bool> g_enabled{true};
std::atomic<std::uint32_t> g_high_every{1};
std::atomic<std::uint64_t> g_next_thread{1};

// Ids are (thread number << 40) | per-thread sequence: unique in the process without any
// shared counter on the hot path, never 0.
struct id_source {
    std::uint64_t prefix = g_next_thread.fetch_add(1, std::memory_order_relaxed) << 40;
    std::uint64_t seq = 0;
    std::uint64_t high_roots = 0;
    std::uint64_t next() noexcept {
        seq = (seq + 1) & ((std::uint64_t{1} << 40) - 1);
        if (seq == 0) seq = 1;
        return prefix | seq;
    }
};

id_source& ids() noexcept {
    static thread_local id_source s;
    return s;
}

unsigned current_core() noexcept {
    auto* r = runtime::reactor::try_local();
    return r ? r->core_id() : 0;
}

// Owns the calling thread's buffer; created on first use.
thread_local std::unique_ptr<trace_buffer> t_buffer;

} // namespace

std::int64_t trace_now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch().steady)
        .count();
}

std::int64_t trace_epoch_unix_ns() noexcept { return epoch().unix_ns; }

std::string format_id(std::uint64_t id) {
    if (id == 0) return {};
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i) {
        s[static_cast<std::size_t>(i)] = hex_digit(static_cast<unsigned>(id & 0xf));
        id >>= 4;
    }
    return s;
}

std::uint64_t parse_id(std::string_view hex) noexcept {
    if (hex.empty() || hex.size() > 16) return 0;
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), v, 16);
    if (ec != std::errc{} || p != hex.data() + hex.size()) return 0;
    return v;
}

const span_attribute* span_record::attribute(std::string_view key) const noexcept {
    for (const auto& a : attributes)
        if (a.key == key) return &a;
    return nullptr;
}

void set_tracing_enabled(bool on) noexcept { g_enabled.store(on, std::memory_order_relaxed); }
bool tracing_enabled() noexcept { return g_enabled.load(std::memory_order_relaxed); }
void set_high_volume_sampling(std::uint32_t every) noexcept { g_high_every.store(every, std::memory_order_relaxed); }

span& span::operator=(span&& o) noexcept {
    if (this != &o) {
        end();
        _rec = std::move(o._rec);
        _live = std::exchange(o._live, false);
    }
    return *this;
}

void span::start(std::string_view name, std::uint64_t trace_id, std::uint64_t parent, volume v) {
    _rec.trace_id = trace_id;
    _rec.span_id = ids().next();
    _rec.parent_id = parent;
    _rec.name.assign(name);
    _rec.core = current_core();
    _rec.vol = v;
    _rec.start_ns = trace_now_ns();
    _rec.end_ns = _rec.start_ns;
    _live = true;
}

span span::root(std::string_view name, volume v) {
    span s;
    if (!tracing_enabled()) return s;
    if (v == volume::high) {
        const std::uint32_t every = g_high_every.load(std::memory_order_relaxed);
        if (every == 0) return s;
        if (ids().high_roots++ % every != 0) return s;
    }
    s.start(name, ids().next(), 0, v);
    return s;
}

span span::child_of(std::string_view name, span_context parent) {
    span s;
    if (!parent.valid()) return s;
    s.start(name, parent.trace_id, parent.span_id, parent.vol);
    return s;
}

span_attribute& span::slot(std::string_view key) {
    for (auto& a : _rec.attributes)
        if (a.key == key) return a;
    if (_rec.attributes.empty()) _rec.attributes.reserve(6);
    auto& a = _rec.attributes.emplace_back();
    a.key.assign(key);
    return a;
}

void span::set(std::string_view key, std::string_view value) {
    if (!_live) return;
    auto& a = slot(key);
    a.is_int = false;
    a.num = 0;
    a.str.assign(value);
}

void span::set_int(std::string_view key, std::int64_t value) {
    if (!_live) return;
    auto& a = slot(key);
    a.is_int = true;
    a.num = value;
    a.str.clear();
}

void span::link(span_context other) {
    if (!_live || !other.valid()) return;
    _rec.links.push_back(other);
}

span_context span::context() const noexcept {
    if (!_live) return {};
    return span_context{_rec.trace_id, _rec.span_id, _rec.vol};
}

void span::end_at(std::int64_t t) noexcept {
    if (!_live) return;
    _live = false;
    _rec.end_ns = t < _rec.start_ns ? _rec.start_ns : t;
    trace_buffer::local().push(std::move(_rec));
    _rec = span_record{};
}

void span::end() noexcept {
    if (!_live) return;
    end_at(trace_now_ns());
}

trace_buffer& trace_buffer::local() {
    if (!t_buffer) t_buffer = std::make_unique<trace_buffer>();
    return *t_buffer;
}

trace_buffer* trace_buffer::existing() noexcept { return t_buffer.get(); }

trace_buffer::trace_buffer() {
    for (auto& r : _rings) r.slots.resize(default_capacity);
}

void trace_buffer::push(span_record&& rec) noexcept {
    ring& r = _rings[rec.vol == volume::high ? 1 : 0];
    ++r.recorded;
    if (r.slots.empty()) {
        ++r.dropped;
        return;
    }
    r.slots[r.head] = std::move(rec);
    r.head = (r.head + 1) % r.slots.size();
    if (r.size < r.slots.size()) ++r.size;
    else ++r.dropped;
}

std::vector<span_record> trace_buffer::snapshot() const {
    std::vector<span_record> out;
    out.reserve(_rings[0].size + _rings[1].size);
    for (const auto& r : _rings) {
        const std::size_t cap = r.slots.size();
        for (std::size_t i = 0; i < r.size; ++i) out.push_back(r.slots[(r.head + cap - r.size + i) % cap]);
    }
    return out;
}

void trace_buffer::set_capacity(volume v, std::size_t n) {
    ring& r = _rings[static_cast<int>(v)];
    r.slots.clear();
    r.slots.shrink_to_fit();
    r.slots.resize(n);
    r.head = 0;
    r.size = 0;
}

void trace_buffer::clear() noexcept {
    for (auto& r : _rings) {
        for (auto& s : r.slots) s = span_record{};
        r.head = 0;
        r.size = 0;
        r.dropped = 0;
        r.recorded = 0;
    }
}

} // namespace skiff::metrics
