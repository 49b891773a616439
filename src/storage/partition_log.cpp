#include "log_instruments.hpp"

#include <skiff/core/log.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <deque>
#include <map>
#include <random>

namespace skiff::storage {

std::string partition_prefix(const std::string& ns, const partition_id& p) {
    return fmt::format("{}/{}/{}/", ns, p.topic, p.partition);
}
std::string segment_key(const std::string& ns, const partition_id& p, std::int64_t base) {
    return fmt::format("{}segment-{:020}.kfs", partition_prefix(ns, p), base);
}
std::string index_key(const std::string& ns, const partition_id& p, std::int64_t base) {
    return fmt::format("{}segment-{:020}.index", partition_prefix(ns, p), base);
}

namespace {

using clock_t_ = std::chrono::steady_clock;

// One producer waiting for its data to become durable. Shared between the append coroutine
// and the flush that carries the data, so either side may finish first.
struct ack_state {
    std::coroutine_handle<> h;
    bool resolved = false;
    std::optional<append_errc> error;
    metrics::span_context flush; // the flush that carries the data (set when it is sealed)
    void resolve(std::optional<append_errc> e) {
        if (resolved) return;
        resolved = true;
        error = e;
        if (h) runtime::reactor::local().schedule(h);
    }
};

// Suspends until the ack is resolved, the timeout passes or the stop token fires. A
// timeout or stop resolves the ack as failed: the data stays in its flush and is still
// uploaded, but this producer is never told "success".
class ack_awaiter {
public:
    ack_awaiter(std::shared_ptr<ack_state> s, std::chrono::milliseconds timeout, std::stop_token st)
        : _s(std::move(s)), _timeout(timeout), _st(std::move(st)),
          _timer([s = _s.get()] { s->resolve(append_errc::timed_out); }) {}
    bool await_ready() const noexcept { return _s->resolved; }
    void await_suspend(std::coroutine_handle<> h) {
        _s->h = h;
        _timer.arm_after(_timeout);
        if (_st.stop_possible()) _cb.emplace(_st, stopper{_s.get()});
    }
    void await_resume() {
        _timer.cancel();
        _cb.reset();
    }

private:
    struct stopper {
        ack_state* s;
        void operator()() noexcept { s->resolve(append_errc::cancelled); }
    };
    std::shared_ptr<ack_state> _s;
    std::chrono::milliseconds _timeout;
    std::stop_token _st;
    runtime::timer _timer;
    std::optional<std::stop_callback<stopper>> _cb;
};

struct data_waiter {
    std::int64_t offset;
    std::shared_ptr<ack_state> state;
};

std::optional<std::int64_t> parse_segment_name(std::string_view name, std::string_view ext) {
    constexpr std::string_view pre = "segment-";
    if (name.size() != pre.size() + 20 + ext.size()) return std::nullopt;
    if (name.substr(0, pre.size()) != pre || name.substr(pre.size() + 20) != ext) return std::nullopt;
    std::int64_t v = 0;
    auto digits = name.substr(pre.size(), 20);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc{} || p != digits.data() + digits.size() || v < 0) return std::nullopt;
    return v;
}

} // namespace

// A committed or restored segment as readers know it.
struct segment_entry {
    std::int64_t base = 0;
    std::int64_t last = -1;          // -1: not known (restored, not the newest)
    std::uint64_t kfs_size = 0;
    bool has_index = false;
    bool corrupt = false;
    std::shared_ptr<const std::string> bytes; // whole .kfs when cached
    std::shared_ptr<const std::string> index; // whole .index when loaded
};

// A sealed segment on its way to the store.
struct flush_job {
    std::int64_t base = 0;
    std::int64_t last = 0;
    std::int32_t records = 0;
    std::shared_ptr<const std::string> kfs;
    std::shared_ptr<const std::string> index;
    bool started = false;
    bool stored[2] = {false, false}; // kfs, index
    bool failed = false;
    std::vector<std::shared_ptr<ack_state>> waiters;
    std::vector<runtime::semaphore::units> memory;
    clock_t_::time_point sealed_at;
    clock_t_::time_point upload_started; // only read when metrics are on
    metrics::span trace;                 // root "flush": build, put ×2, commit
    metrics::span commit_span;           // both objects stored → committed in offset order
    detail::gauge_share in_flight_bytes; // skiff_log_in_flight_bytes, taken back when the job goes
    bool done() const noexcept { return stored[0] && stored[1]; }
};

struct partition_log::state {
    state(object_store& st, io_budget& b, partition_id i, log_config c)
        : store(st), budget(b), id(std::move(i)), cfg(std::move(c)),
          memory(cfg.max_pending_bytes, "log-memory"),
          flush_timer([this] { on_flush_timer(); }),
          rng(std::random_device{}()),
          m(detail::log_instruments::make()) {
        buffered_g.bind(m.buffered_bytes);
        uploading_g.bind(m.flushes_in_flight);
        cache_g.bind(m.cache_bytes);
        if (!cfg.wall_ms) {
            cfg.wall_ms = [] {
                return std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                    .count();
            };
        }
        if (cfg.max_inflight_flushes < 1) cfg.max_inflight_flushes = 1;
    }

    object_store& store;
    io_budget& budget;
    partition_id id;
    log_config cfg;
    runtime::gate gate{"partition-log"};
    runtime::semaphore memory;
    runtime::timer flush_timer;
    std::mt19937_64 rng;

    std::int64_t next_offset = 0;
    std::int64_t hwm = 0;
    std::int64_t log_start = 0;

    // The active buffer is the segment being built: appends copy their batches straight
    // into the bytes that will become the .kfs.
    std::optional<segment_builder> builder;
    std::int64_t builder_records = 0;
    std::optional<clock_t_::time_point> builder_first_append;
    std::optional<clock_t_::time_point> builder_first_waiter;
    std::vector<std::shared_ptr<ack_state>> builder_waiters;
    std::vector<runtime::semaphore::units> builder_memory;

    std::deque<std::unique_ptr<flush_job>> jobs; // sealed, in offset order
    int uploading = 0;

    std::map<std::int64_t, segment_entry> segments;
    std::deque<std::int64_t> cache_lru; // bases whose bytes are cached, oldest first
    std::size_t cache_used = 0;

    std::vector<data_waiter> data_waiters;
    struct durable_callback {
        std::int64_t offset;
        std::function<void(bool)> fn;
    };
    std::vector<durable_callback> durable_callbacks;
    std::vector<std::coroutine_handle<>> drain_waiters;

    // One request in flight per object range: readers (and prefetch) asking for the same
    // (segment, position) while a GET is out wait for it instead of sending their own.
    struct fetch_slot {
        bool done = false;
        std::optional<result<std::pair<std::shared_ptr<const std::string>, std::size_t>, store_error>> value;
        std::vector<std::coroutine_handle<>> waiters;
    };
    std::map<std::pair<std::int64_t, std::uint64_t>, std::shared_ptr<fetch_slot>> fetches;
    std::uint64_t prefetches = 0;

    restore_report report;
    log_stats stats;
    bool closing = false;

    // Metrics (inert when metrics were off at open) and this partition's shares of the core's
    // gauges; the partition's own callback gauges are the last members (removed first).
    detail::log_instruments m;
    detail::gauge_share buffered_g, uploading_g, cache_g;
    metrics::span_context restore_ctx;
    metrics::registration hwm_reg, start_reg;

    void register_partition_gauges() {
        if (!m.enabled) return;
        auto& reg = metrics::registry::local();
        const metrics::labels l{{"topic", id.topic}, {"partition", std::to_string(id.partition)}};
        try {
            hwm_reg = reg.gauge_fn("skiff_partition_high_watermark",
                                   "Offset after the last committed record of the partition.", l, [this] { return hwm; });
            start_reg = reg.gauge_fn("skiff_partition_log_start_offset", "First offset of the partition.", l,
                                     [this] { return log_start; });
        } catch (const std::invalid_argument&) {
            // The same partition is already open on this core (only tests do that: a second
            // instance on the same bucket). The first one keeps reporting.
            hwm_reg.reset();
            log::debug("partition {}/{} is open twice on this core; its gauges report the first", id.topic,
                       id.partition);
        }
    }

    // A sealed segment that will never be committed (shutdown cut it short).
    void abandon(flush_job& j) noexcept {
        m.flush_failures.inc();
        j.commit_span.end();
        j.trace.set("status", "abandoned");
        j.trace.end();
    }

    // ---- write path ---------------------------------------------------------------------

    std::size_t pending_bytes() const noexcept {
        return static_cast<std::size_t>(static_cast<std::int64_t>(memory.capacity()) - memory.available());
    }

    // Seals the active buffer into a flush job (objects built once, here).
    void seal() {
        if (!builder || builder->empty()) return;
        auto job = std::make_unique<flush_job>();
        // The flush trace starts here: building the objects is its first step.
        auto trace = metrics::span::root("flush");
        auto build = trace.child("build");
        auto built = std::move(*builder).finish(cfg.wall_ms());
        builder.reset();
        build.end();
        job->base = built.meta.base_offset;
        job->last = built.meta.last_offset;
        job->records = built.meta.message_count;
        job->kfs = std::make_shared<const std::string>(std::move(built.kfs));
        job->index = std::make_shared<const std::string>(std::move(built.index));
        if (trace.active()) {
            trace.set("topic", id.topic);
            trace.set("partition", id.partition);
            trace.set("segment", job->base);
            trace.set("records", job->records);
            trace.set("bytes", job->kfs->size());
            trace.set("index_bytes", job->index->size());
            const auto ctx = trace.context();
            for (auto& w : builder_waiters) w->flush = ctx;
        }
        job->trace = std::move(trace);
        buffered_g.clear();
        job->in_flight_bytes.bind(m.in_flight_bytes);
        job->in_flight_bytes.add(static_cast<std::int64_t>(job->kfs->size() + job->index->size()));
        job->waiters = std::move(builder_waiters);
        job->memory = std::move(builder_memory);
        job->sealed_at = clock_t_::now();
        builder_waiters.clear();
        builder_memory.clear();
        builder_records = 0;
        builder_first_append.reset();
        builder_first_waiter.reset();
        flush_timer.cancel();
        jobs.push_back(std::move(job));
    }

    // Starts uploads for sealed jobs while the pipelining depth allows.
    void pump() {
        for (auto& j : jobs) {
            if (uploading >= cfg.max_inflight_flushes) break;
            if (j->started) continue;
            j->started = true;
            ++uploading;
            uploading_g.add(1);
            j->upload_started = m.now();
            ++stats.flushes;
            stats.flushed_bytes += j->kfs->size() + j->index->size();
            auto spawned = gate.spawn(run_job(j.get()));
            if (!spawned) {
                --uploading;
                uploading_g.add(-1);
                j->failed = true;
            }
        }
    }

    // Decides whether the active buffer should become a segment now, or arms the timer.
    void maybe_flush() {
        if (!builder || builder->empty()) return;
        const bool size_due = builder->body_bytes() >= cfg.segment_bytes ||
                              builder_records >= static_cast<std::int64_t>(cfg.segment_records);
        const bool slot_free = uploading < cfg.max_inflight_flushes;
        auto now = clock_t_::now();
        auto due = *builder_first_append + cfg.max_age;
        if (builder_first_waiter) due = std::min(due, *builder_first_waiter + cfg.linger);
        if (size_due || closing || (slot_free && now >= due)) {
            // A size-due buffer is sealed even when no slot is free (memory bounds the
            // queue); a time-due one waits for a slot and meanwhile keeps gathering.
            if (size_due || slot_free || closing) {
                seal();
                pump();
                return;
            }
        }
        if (now < due) {
            auto rnow = runtime::reactor::local().now();
            flush_timer.arm(rnow + std::chrono::duration_cast<runtime::duration>(due - now));
        }
    }

    void on_flush_timer() { maybe_flush(); }

    std::chrono::nanoseconds backoff(int attempt) {
        auto cap = std::chrono::duration_cast<std::chrono::nanoseconds>(cfg.retry_cap);
        auto base = std::chrono::duration_cast<std::chrono::nanoseconds>(cfg.retry_base);
        auto window = base * (std::int64_t{1} << std::min(attempt, 20));
        if (window > cap || window.count() <= 0) window = cap;
        std::uniform_int_distribution<std::int64_t> d(0, std::max<std::int64_t>(window.count(), 1));
        return std::chrono::nanoseconds(d(rng));
    }

    // Uploads one object of a job until it is stored or the log shuts down. Retries use the
    // same key and the same bytes: a segment never changes once built.
    runtime::task<void> upload(flush_job* job, int which) {
        const std::string key = which == 0 ? segment_key(cfg.ns, id, job->base) : index_key(cfg.ns, id, job->base);
        std::shared_ptr<const std::string> body = which == 0 ? job->kfs : job->index;
        const auto kind = which == 0 ? detail::key_kind::kfs : detail::key_kind::index;
        std::stop_token st = gate.stop_token();
        // One span per object, over all its attempts (ends when this coroutine returns).
        auto put_span = job->trace.child("put");
        if (put_span.active()) {
            put_span.set("kind", which == 0 ? "kfs" : "index");
            put_span.set("key", key);
            put_span.set("bytes", body->size());
        }
        for (int attempt = 0;; ++attempt) {
            put_span.set("retries", attempt);
            auto permit = co_await budget.acquire(io_budget::priority::high, st);
            if (!permit) {
                put_span.set("status", "cancelled");
                job->failed = true;
                co_return;
            }
            std::span<const char> bytes(body->data(), body->size());
            const auto t0 = m.now();
            auto r = co_await store.put(key, bytes, false, st);
            m.store_done(detail::store_op::put, kind, t0, body->size(), 0, r ? nullptr : &r.error());
            permit->release();
            if (r) {
                budget.on_success();
                job->stored[which] = true;
                put_span.set("status", "ok");
                co_return;
            }
            put_span.set("status", to_string(r.error().code));
            if (r.error().code == errc::cancelled || st.stop_requested()) {
                job->failed = true;
                co_return;
            }
            if (r.error().code == errc::transient) budget.on_throttled();
            ++stats.upload_retries;
            m.upload_retries[static_cast<std::size_t>(which)].inc();
            if (attempt == 0 || attempt % 10 == 0) {
                log::warn("upload of {} failed ({}); retrying", key, r.error().message);
            }
            auto slept = co_await runtime::sleep(backoff(attempt), st);
            if (!slept) {
                job->failed = true;
                co_return;
            }
        }
    }

    runtime::task<void> run_job(flush_job* job) {
        if (cfg.mode == upload_mode::parallel) {
            // The idea skiff is built around: both objects in one round trip.
            co_await runtime::when_all(upload(job, 0), upload(job, 1));
        } else {
            co_await upload(job, 0);
            if (!job->failed) co_await upload(job, 1);
        }
        if (job->done()) job->commit_span = job->trace.child("commit");
        --uploading;
        uploading_g.add(-1);
        commit_ready();
        maybe_flush();
        pump();
    }

    // Commits finished jobs strictly in offset order and acknowledges their producers.
    void commit_ready() {
        bool moved = false;
        while (!jobs.empty()) {
            auto& j = *jobs.front();
            if (j.done()) {
                segment_entry e;
                e.base = j.base;
                e.last = j.last;
                e.kfs_size = j.kfs->size();
                e.has_index = true;
                e.bytes = j.kfs;
                e.index = j.index;
                segments[e.base] = std::move(e);
                cache_insert(j.base, j.kfs->size());
                hwm = j.last + 1;
                moved = true;
                for (auto& w : j.waiters) w->resolve(std::nullopt);
                if (m.enabled) {
                    m.flushes.inc();
                    m.flush_records.inc(static_cast<std::uint64_t>(j.records));
                    m.flush_bytes[0].inc(j.kfs->size());
                    m.flush_bytes[1].inc(j.index->size());
                    m.flush_size.record(j.kfs->size());
                    m.flush_duration.record(clock_t_::now() - j.upload_started);
                }
                j.commit_span.end();
                j.trace.set("status", "ok");
                j.trace.end();
                jobs.pop_front(); // releases the job's memory units
                continue;
            }
            if (j.failed && closing) {
                // Shutdown cut this upload short: nothing from here on can be acknowledged.
                for (auto& job : jobs) {
                    for (auto& w : job->waiters) w->resolve(append_errc::shutting_down);
                    abandon(*job);
                }
                jobs.clear();
            }
            break;
        }
        if (moved) wake_readers();
        if (jobs.empty() && (!builder || builder->empty())) {
            for (auto h : std::exchange(drain_waiters, {})) runtime::reactor::local().schedule(h);
        }
    }

    void wake_readers() {
        auto it = std::remove_if(data_waiters.begin(), data_waiters.end(), [this](data_waiter& w) {
            if (w.state->resolved) return true;
            if (hwm > w.offset) {
                w.state->resolve(std::nullopt);
                return true;
            }
            return false;
        });
        data_waiters.erase(it, data_waiters.end());
        notify_durable();
    }

    // Calls the on_durable callbacks the high watermark has passed. They are taken out of the
    // list before any runs, so a callback that registers another cannot invalidate the walk.
    void notify_durable() {
        if (durable_callbacks.empty()) return;
        std::vector<durable_callback> due;
        auto keep = std::stable_partition(durable_callbacks.begin(), durable_callbacks.end(),
                                   [this](const durable_callback& c) { return hwm <= c.offset; });
        std::move(keep, durable_callbacks.end(), std::back_inserter(due));
        durable_callbacks.erase(keep, durable_callbacks.end());
        for (auto& c : due) c.fn(true);
    }

    // The log closes: whoever still waits is told its data did not become durable here.
    void fail_durable() {
        auto all = std::exchange(durable_callbacks, {});
        for (auto& c : all) c.fn(false);
    }

    void cache_insert(std::int64_t base, std::size_t size) {
        cache_lru.push_back(base);
        cache_used += size;
        cache_g.add(static_cast<std::int64_t>(size));
        while (cache_used > cfg.cache_bytes && cache_lru.size() > 1) {
            auto victim = cache_lru.front();
            cache_lru.pop_front();
            auto it = segments.find(victim);
            if (it != segments.end() && it->second.bytes) {
                cache_used -= it->second.bytes->size();
                cache_g.add(-static_cast<std::int64_t>(it->second.bytes->size()));
                m.cache_evictions.inc();
                it->second.bytes.reset();
            }
        }
    }

    // ---- read path ----------------------------------------------------------------------

    runtime::task<result<std::shared_ptr<const std::string>, store_error>> load_index(segment_entry& e,
                                                                                      std::stop_token st) {
        if (e.index) co_return e.index;
        auto permit = co_await budget.acquire(io_budget::priority::normal, st);
        if (!permit) co_return failure{store_error(errc::cancelled, "cancelled")};
        const auto t0 = m.now();
        auto r = co_await store.get(index_key(cfg.ns, id, e.base), std::nullopt, st);
        m.store_done(detail::store_op::get, detail::key_kind::index, t0, 0, r ? r->data.size() : 0,
                     r ? nullptr : &r.error());
        if (!r) co_return failure{std::move(r).error()};
        auto idx = decode_index(r->data);
        if (!idx) co_return failure{store_error(errc::corrupt, idx.error().message)};
        e.index = std::make_shared<const std::string>(std::move(r->data));
        co_return e.index;
    }

    // Bytes of a segment from the batch that holds `offset` to the end of the body, and the
    // absolute position they start at.
    struct segment_slice {
        std::shared_ptr<const std::string> owner;
        std::span<const char> body_part;
    };

    runtime::task<result<segment_slice, store_error>> slice_for(std::int64_t base, std::int64_t offset,
                                                                std::stop_token st) {
        auto& e = segments.at(base);
        if (e.bytes) {
            ++stats.cache_hits;
            m.cache_hits.inc();
            const auto& b = *e.bytes;
            co_return segment_slice{e.bytes, std::span<const char>(b.data() + segment_header_size,
                                                                   b.size() - segment_header_size - segment_footer_size)};
        }
        ++stats.cache_misses;
        m.cache_misses.inc();
        std::uint64_t pos = segment_header_size;
        if (e.has_index) {
            auto idx = co_await load_index(e, st);
            if (idx) {
                auto view = decode_index(**idx);
                if (view) pos = static_cast<std::uint64_t>(std::max<std::int32_t>(lookup(*view, offset),
                                                                                  static_cast<std::int32_t>(segment_header_size)));
            } else if (idx.error().code == errc::cancelled) {
                co_return failure{std::move(idx).error()};
            } else {
                // A missing or unreadable index falls back to walking the whole segment.
                log::warn("{}: index of segment {} unusable ({}); walking the segment", store.describe(), base,
                          idx.error().message);
                e.has_index = false;
            }
        }
        co_return co_await slice_for_position(base, pos);
    }

    // The bytes from `pos` to the end of segment `base`: from the cache, from a GET already in
    // flight for the same range, or from a new GET. The GET runs under the log's gate, not the
    // caller's stop token, since other readers may be waiting on it; it is bounded by the
    // store's own deadline.
    runtime::task<result<segment_slice, store_error>> slice_for_position(std::int64_t base, std::uint64_t pos) {
        auto it_seg = segments.find(base);
        if (it_seg == segments.end()) co_return failure{store_error(errc::not_found, fmt::format("no segment {}", base))};
        if (it_seg->second.bytes) co_return make_slice(it_seg->second.bytes, 0, true);
        const bool whole = pos == segment_header_size;
        const auto key = std::make_pair(base, pos);
        if (auto it = fetches.find(key); it != fetches.end()) {
            auto slot = it->second;
            struct wait_slot {
                fetch_slot* s;
                bool await_ready() const noexcept { return s->done; }
                void await_suspend(std::coroutine_handle<> h) { s->waiters.push_back(h); }
                void await_resume() const noexcept {}
            };
            co_await wait_slot{slot.get()};
            if (!slot->value->has_value()) co_return failure{slot->value->error()};
            auto [owner, start] = slot->value->value();
            co_return make_slice(owner, start, whole);
        }
        auto slot = std::make_shared<fetch_slot>();
        fetches[key] = slot;
        auto fetched = co_await fetch(base, pos, whole, gate.stop_token());
        slot->done = true;
        slot->value = fetched;
        fetches.erase(key);
        for (auto h : std::exchange(slot->waiters, {})) runtime::reactor::local().schedule(h);
        if (!fetched) co_return failure{std::move(fetched).error()};
        co_return make_slice(fetched->first, fetched->second, whole);
    }

    static segment_slice make_slice(const std::shared_ptr<const std::string>& owner, std::size_t start, bool whole) {
        if (whole) {
            return segment_slice{owner, std::span<const char>(owner->data() + segment_header_size,
                                                              owner->size() - segment_header_size - segment_footer_size)};
        }
        return segment_slice{owner, std::span<const char>(owner->data() + start, owner->size() - start)};
    }

    // One GET: the whole segment (validated, then cached) or a range from an index position.
    runtime::task<result<std::pair<std::shared_ptr<const std::string>, std::size_t>, store_error>> fetch(
        std::int64_t base, std::uint64_t pos, bool whole, std::stop_token st) {
        auto permit = co_await budget.acquire(io_budget::priority::normal, st);
        if (!permit) co_return failure{store_error(errc::cancelled, "cancelled")};
        std::optional<byte_range> range;
        if (!whole) range = byte_range::from(pos);
        const auto t0 = m.now();
        auto r = co_await store.get(segment_key(cfg.ns, id, base), range, st);
        m.store_done(whole ? detail::store_op::get : detail::store_op::get_range, detail::key_kind::kfs, t0, 0,
                     r ? r->data.size() : 0, r ? nullptr : &r.error());
        permit->release();
        if (!r) co_return failure{std::move(r).error()};
        auto data = std::make_shared<std::string>(std::move(r->data));
        auto it = segments.find(base);
        if (whole) {
            // Validate what we cache: a segment with a wrong footer is never served.
            auto seg = decode_segment(*data);
            if (!seg) {
                if (it != segments.end()) it->second.corrupt = true;
                co_return failure{store_error(errc::corrupt, fmt::format("segment {} of {}/{} is corrupt: {}", base,
                                                                         id.topic, id.partition, seg.error().message))};
            }
            std::shared_ptr<const std::string> shared = data;
            if (it != segments.end() && !it->second.bytes) {
                it->second.last = seg->last_offset();
                it->second.kfs_size = data->size();
                it->second.bytes = shared;
                cache_insert(base, data->size());
            }
            co_return std::make_pair(shared, std::size_t{0});
        }
        std::shared_ptr<const std::string> shared = data;
        co_return std::make_pair(shared, std::size_t{0});
    }

    // Read-ahead for sequential readers: fetch the segment after `base` into the cache.
    void prefetch_after(std::int64_t base) {
        auto next = segments.upper_bound(base);
        if (next == segments.end() || next->second.bytes || next->second.corrupt) return;
        if (next->first >= hwm) return;
        if (fetches.count({next->first, segment_header_size})) return;
        ++prefetches;
        m.prefetches.inc();
        (void)gate.spawn(prefetch(next->first));
    }

    runtime::task<void> prefetch(std::int64_t base) {
        auto r = co_await fetch_cached_whole(base);
        (void)r;
    }

    runtime::task<result<segment_slice, store_error>> fetch_cached_whole(std::int64_t base) {
        co_return co_await slice_for_position(base, segment_header_size);
    }

    // ---- restore ------------------------------------------------------------------------

    runtime::task<result<void, store_error>> restore() {
        const std::string prefix = partition_prefix(cfg.ns, id);
        std::map<std::int64_t, std::uint64_t> kfs;
        std::map<std::int64_t, bool> idx;
        std::string token;
        auto trace = metrics::span::root("restore");
        if (trace.active()) {
            trace.set("topic", id.topic);
            trace.set("partition", id.partition);
        }
        restore_ctx = trace.context();
        auto list_span = trace.child("list");
        for (;;) {
            const auto t0 = m.now();
            auto page = co_await store.list(prefix, "", token, 1000, {});
            m.store_done(detail::store_op::list, detail::key_kind::none, t0, 0, 0, page ? nullptr : &page.error());
            if (!page) {
                list_span.set("status", to_string(page.error().code));
                trace.set("status", to_string(page.error().code));
                co_return failure{std::move(page).error()};
            }
            ++report.list_pages;
            for (auto& o : page->objects) {
                std::string_view name(o.key);
                name.remove_prefix(prefix.size());
                if (auto b = parse_segment_name(name, ".kfs")) kfs[*b] = o.size;
                else if (auto b2 = parse_segment_name(name, ".index")) idx[*b2] = true;
            }
            if (page->next_token.empty()) break;
            token = page->next_token;
        }
        list_span.set("pages", report.list_pages);
        list_span.set("objects", kfs.size() + idx.size());
        list_span.end();
        std::int64_t orphan_floor = 0;
        for (auto& [base, _] : idx) {
            if (!kfs.count(base)) {
                ++report.orphan_index;
                // Never build a new segment at this base: its new .kfs could be paired with
                // this stale .index if the new .index upload failed.
                orphan_floor = std::max(orphan_floor, base + 1);
                log::warn("{}{}: .index of segment {} has no .kfs; ignored", store.describe(), prefix, base);
            }
        }
        std::vector<std::int64_t> to_repair;
        for (auto& [base, size] : kfs) {
            segment_entry e;
            e.base = base;
            e.kfs_size = size;
            e.has_index = idx.count(base) > 0;
            if (!e.has_index) {
                ++report.orphan_kfs;
                to_repair.push_back(base);
                log::warn("{}{}: segment {} has no .index; it is served by walking it", store.describe(), prefix, base);
            }
            segments[base] = std::move(e);
        }
        // The next offset comes from the newest valid segment's footer: one 16-byte GET.
        while (!segments.empty()) {
            auto& newest = segments.rbegin()->second;
            ++report.gets;
            auto footer_span = trace.child("footer");
            footer_span.set("segment", newest.base);
            const auto t0 = m.now();
            auto tail = co_await store.get(segment_key(cfg.ns, id, newest.base), byte_range::suffix(segment_footer_size), {});
            m.store_done(detail::store_op::get_range, detail::key_kind::kfs, t0, 0, tail ? tail->data.size() : 0,
                         tail ? nullptr : &tail.error());
            footer_span.set("status", tail ? "ok" : to_string(tail.error().code));
            if (!tail) {
                if (tail.error().code == errc::not_found) {
                    segments.erase(newest.base);
                    continue;
                }
                trace.set("status", to_string(tail.error().code));
                co_return failure{std::move(tail).error()};
            }
            auto footer = parse_segment_footer(tail->data);
            if (!footer || footer->last_offset < newest.base) {
                ++report.corrupt;
                log::error("{}{}: segment {} has a missing or wrong footer; it is not served", store.describe(), prefix,
                           newest.base);
                newest.corrupt = true;
                // A corrupt newest segment still reserves its base offset: new segments start
                // after it so its key is never reused for different bytes.
                next_offset = std::max(next_offset, newest.base + 1);
                auto base = newest.base;
                segments.erase(base);
                continue;
            }
            newest.last = footer->last_offset;
            next_offset = std::max(next_offset, footer->last_offset + 1);
            break;
        }
        // Interior segments end where the next one begins (an upper bound if there is a gap).
        std::int64_t prev_base = -1;
        for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
            if (prev_base >= 0 && it->second.last < 0) it->second.last = prev_base - 1;
            prev_base = it->first;
        }
        next_offset = std::max(next_offset, orphan_floor);
        hwm = next_offset;
        log_start = segments.empty() ? next_offset : segments.begin()->first;
        report.segments = segments.size();
        report.next_offset = next_offset;
        if (trace.active()) {
            trace.set("segments", report.segments);
            trace.set("orphan_kfs", report.orphan_kfs);
            trace.set("orphan_index", report.orphan_index);
            trace.set("corrupt", report.corrupt);
            trace.set("next_offset", next_offset);
            trace.set("status", "ok");
        }
        if (cfg.repair_orphans) {
            for (auto base : to_repair) {
                if (segments.count(base)) (void)gate.spawn(repair(base));
            }
        }
        co_return ok();
    }

    // Rebuilds a missing .index from its .kfs and uploads it.
    runtime::task<void> repair(std::int64_t base) {
        std::stop_token st = gate.stop_token();
        // A child of the restore trace, although it ends after the restore did.
        auto span = metrics::span::child_of("repair", restore_ctx);
        span.set("segment", base);
        auto permit = co_await budget.acquire(io_budget::priority::normal, st);
        if (!permit) {
            span.set("status", "cancelled");
            co_return;
        }
        auto t0 = m.now();
        auto whole = co_await store.get(segment_key(cfg.ns, id, base), std::nullopt, st);
        m.store_done(detail::store_op::get, detail::key_kind::kfs, t0, 0, whole ? whole->data.size() : 0,
                     whole ? nullptr : &whole.error());
        if (!whole) {
            if (whole.error().code != errc::cancelled) m.repair_failures.inc();
            span.set("status", to_string(whole.error().code));
            co_return;
        }
        auto rebuilt = rebuild_index(whole->data, cfg.index_interval);
        if (!rebuilt) {
            m.repair_failures.inc();
            span.set("status", "corrupt");
            log::error("cannot rebuild the index of segment {}: {}", base, rebuilt.error().message);
            co_return;
        }
        std::string index = std::move(*rebuilt);
        t0 = m.now();
        auto put = co_await store.put(index_key(cfg.ns, id, base), std::span<const char>(index.data(), index.size()),
                                      true, st);
        m.store_done(detail::store_op::put, detail::key_kind::index, t0, index.size(), 0, put ? nullptr : &put.error());
        span.set("status", put ? "ok" : to_string(put.error().code));
        if (!put && put.error().code != errc::precondition_failed && put.error().code != errc::cancelled) {
            m.repair_failures.inc();
        }
        if (put || put.error().code == errc::precondition_failed) {
            ++report.repaired;
            m.repairs.inc();
            auto it = segments.find(base);
            if (it != segments.end()) {
                it->second.has_index = true;
                it->second.index = std::make_shared<const std::string>(std::move(index));
            }
            log::info("rebuilt the index of segment {} of {}/{}", base, id.topic, id.partition);
        }
    }
};

partition_log::partition_log(std::unique_ptr<state> s) : _s(std::move(s)) {}

partition_log::~partition_log() {
    if (_s && _s->gate.count() != 0) {
        log::error("partition {}/{} destroyed without close(); background uploads abandoned", _s->id.topic,
                   _s->id.partition);
    }
    if (_s) _s->fail_durable();
}

void partition_log::on_durable(std::int64_t offset, std::function<void(bool durable)> fn) {
    auto& s = *_s;
    if (s.hwm > offset) {
        fn(true);
        return;
    }
    if (s.closing && s.gate.is_closed()) {
        fn(false);
        return;
    }
    s.durable_callbacks.push_back(state::durable_callback{offset, std::move(fn)});
}

runtime::task<result<std::unique_ptr<partition_log>, store_error>> partition_log::open(object_store& store,
                                                                                      io_budget& budget,
                                                                                      partition_id id,
                                                                                      log_config cfg) {
    auto s = std::make_unique<state>(store, budget, std::move(id), std::move(cfg));
    const auto t0 = s->m.now();
    auto r = co_await s->restore();
    if (!r) {
        s->m.restore_failures.inc();
        co_return failure{std::move(r).error()};
    }
    if (s->m.enabled) {
        auto& m = s->m;
        m.restores.inc();
        m.restore_duration.record(std::chrono::steady_clock::now() - t0);
        m.restored_segments.inc(s->report.segments);
        m.orphans[0].inc(s->report.orphan_kfs);
        m.orphans[1].inc(s->report.orphan_index);
        m.corrupt_segments.inc(s->report.corrupt);
    }
    s->register_partition_gauges();
    // A new, empty partition is not news; one with data (or damage) is.
    const auto& rep = s->report;
    log::emit(rep.segments || rep.orphan_kfs || rep.orphan_index || rep.corrupt ? log::level::info : log::level::debug,
              "restored partition {}/{} from {}: {} segments, next offset {}, {} orphan .kfs, {} orphan .index, "
              "{} corrupt, {} list pages",
              s->id.topic, s->id.partition, store.describe(), rep.segments, rep.next_offset, rep.orphan_kfs,
              rep.orphan_index, rep.corrupt, rep.list_pages);
    co_return std::unique_ptr<partition_log>(new partition_log(std::move(s)));
}

runtime::task<result<append_result, append_error>> partition_log::append(std::span<const char> record_set,
                                                                         ack_mode acks, std::stop_token st) {
    if (_s->closing) co_return failure{append_error(append_errc::shutting_down, "the partition is closing")};
    auto batches = split_batches(record_set);
    if (!batches) {
        const bool old = batches.error().code == format_errc::old_message_format;
        co_return failure{append_error(old ? append_errc::unsupported_version : append_errc::corrupt_message,
                                       batches.error().message)};
    }
    const std::span<const batch_view> views(*batches);
    auto appended = append(views, acks, std::move(st));
    co_return co_await std::move(appended);
}

runtime::task<result<append_result, append_error>> partition_log::append(std::span<const batch_view> batches,
                                                                         ack_mode acks, std::stop_token st) {
    auto& s = *_s;
    if (s.closing) co_return failure{append_error(append_errc::shutting_down, "the partition is closing")};
    if (batches.empty()) co_return failure{append_error(append_errc::corrupt_message, "empty record set")};
    std::size_t set_bytes = 0;
    for (const auto& b : batches) set_bytes += b.size();

    // Memory bound: buffered + in flight. At the bound the producer waits here.
    const std::size_t need = std::min(set_bytes, s.cfg.max_pending_bytes);
    auto units = co_await s.memory.acquire(need, st);
    if (!units) {
        co_return failure{append_error(runtime::is_cancelled(units.error()) ? append_errc::cancelled
                                                                             : append_errc::shutting_down,
                                       "no room for the append")};
    }
    if (s.closing) co_return failure{append_error(append_errc::shutting_down, "the partition is closing")};

    // Rotate first if this record set would push the buffer past the segment size.
    if (s.builder && !s.builder->empty() && s.builder->body_bytes() + set_bytes > s.cfg.segment_bytes) {
        s.seal();
        s.pump();
    }
    if (!s.builder) {
        s.builder.emplace(s.next_offset, s.cfg.index_interval, s.cfg.segment_bytes + set_bytes);
        s.builder_first_append = clock_t_::now();
    }
    // All or nothing: a set the segment cannot take whole goes into a fresh segment, so a
    // failed request never leaves part of itself behind to be duplicated by a retry.
    if (!s.builder->empty() && !s.builder->can_append(batches)) {
        s.seal();
        s.pump();
        s.builder.emplace(s.next_offset, s.cfg.index_interval, s.cfg.segment_bytes + set_bytes);
        s.builder_first_append = clock_t_::now();
    }
    if (auto fits = s.builder->can_append(batches); !fits) {
        co_return failure{append_error(append_errc::corrupt_message, fits.error().message)};
    }
    append_result out;
    out.base_offset = s.next_offset;
    for (auto& b : batches) {
        auto assigned = s.builder->append(b);
        if (!assigned) {
            // Nothing of a rejected batch is kept; earlier batches of this set are (Kafka
            // validates whole sets first, and split_batches already did).
            s.buffered_g.add(static_cast<std::int64_t>(s.builder->body_bytes()) - s.buffered_g.value());
            co_return failure{append_error(append_errc::corrupt_message, assigned.error().message)};
        }
    }
    out.last_offset = s.builder->next_offset() - 1;
    s.next_offset = s.builder->next_offset();
    s.builder_records += out.last_offset - out.base_offset + 1;
    s.builder_memory.push_back(std::move(*units));
    ++s.stats.appends;
    s.stats.appended_records += static_cast<std::uint64_t>(out.last_offset - out.base_offset + 1);
    s.buffered_g.add(static_cast<std::int64_t>(s.builder->body_bytes()) - s.buffered_g.value());
    s.m.appends.inc();
    s.m.appended_records.inc(static_cast<std::uint64_t>(out.last_offset - out.base_offset + 1));
    s.m.appended_bytes.inc(set_bytes);

    if (acks != ack_mode::durable) {
        s.maybe_flush();
        co_return out;
    }
    auto ack = std::make_shared<ack_state>();
    s.builder_waiters.push_back(ack);
    if (!s.builder_first_waiter) s.builder_first_waiter = clock_t_::now();
    s.maybe_flush();
    co_await ack_awaiter(ack, s.cfg.append_timeout, st);
    if (ack->error) {
        if (*ack->error == append_errc::timed_out) {
            ++s.stats.timed_out_appends;
            s.m.append_timeouts.inc();
        }
        append_error err(*ack->error, *ack->error == append_errc::timed_out
                                          ? "not durable within the append timeout; still retrying"
                                          : "not acknowledged");
        err.base_offset = out.base_offset;
        err.last_offset = out.last_offset;
        co_return failure{std::move(err)};
    }
    out.flush_span = ack->flush;
    co_return out;
}

runtime::task<result<read_result, store_error>> partition_log::read(std::int64_t offset, std::size_t max_bytes,
                                                                    std::stop_token st) {
    auto& s = *_s;
    read_result out;
    out.high_watermark = s.hwm;
    out.log_start_offset = s.log_start;
    if (offset < s.log_start || offset > s.hwm) {
        co_return failure{store_error(errc::invalid_argument,
                                      fmt::format("offset {} is outside [{}, {}]", offset, s.log_start, s.hwm))};
    }
    std::int64_t cur = offset;
    while (cur < s.hwm && (out.records.empty() || out.records.size() < max_bytes)) {
        auto it = s.segments.upper_bound(cur);
        if (it != s.segments.begin()) {
            auto prev = std::prev(it);
            if (prev->second.last < 0 || prev->second.last >= cur) it = prev;
        }
        if (it == s.segments.end()) break;
        if (it->first > cur) cur = it->first; // skip a gap
        if (it->second.corrupt) {
            co_return failure{store_error(errc::corrupt, fmt::format("segment {} is corrupt", it->first))};
        }
        const std::int64_t base = it->first;
        const bool was_cached = static_cast<bool>(it->second.bytes);
        auto slice = co_await s.slice_for(base, cur, st);
        if (!slice) co_return failure{std::move(slice).error()};
        if (!was_cached) s.prefetch_after(base);
        walk_options wo;
        wo.verify_crc = false; // the body CRC or the writer already covered these bytes
        auto walked = walk_batches(slice->body_part, cur, wo);
        if (!walked) {
            auto seg = s.segments.find(base);
            if (seg != s.segments.end()) seg->second.corrupt = true;
            co_return failure{store_error(errc::corrupt, fmt::format("segment {}: {}", base, walked.error().message))};
        }
        bool full = false;
        std::int64_t next = cur;
        for (auto& b : walked->batches) {
            if (b.base_offset >= s.hwm) break;
            if (!out.records.empty() && out.records.size() + b.size() > max_bytes) {
                full = true;
                break;
            }
            out.records.append(b.bytes.data(), b.bytes.size());
            next = b.next_offset();
        }
        if (full) break;
        // Past the last batch of this segment: continue in the next one.
        auto after = s.segments.upper_bound(base);
        if (after == s.segments.end()) break;
        cur = std::max(next, after->first);
    }
    co_return out;
}

runtime::task<bool> partition_log::wait_for_data(std::int64_t offset, std::chrono::milliseconds timeout,
                                                 std::stop_token st) {
    auto& s = *_s;
    if (s.hwm > offset) co_return true;
    if (s.closing) co_return false;
    auto w = std::make_shared<ack_state>();
    s.data_waiters.push_back(data_waiter{offset, w});
    co_await ack_awaiter(w, timeout, st);
    co_return !w->error.has_value();
}

runtime::task<void> partition_log::flush() {
    auto& s = *_s;
    const std::int64_t target = s.next_offset;
    if (s.hwm >= target) co_return;
    s.seal();
    s.pump();
    while (s.hwm < target && !(s.closing && s.jobs.empty())) {
        auto ok = co_await wait_for_data(target - 1, std::chrono::milliseconds(1000), s.gate.stop_token());
        if (!ok && s.gate.stop_token().stop_requested()) co_return;
    }
}

runtime::task<void> partition_log::close() {
    auto& s = *_s;
    if (s.closing && s.gate.is_closed()) co_return;
    s.closing = true;
    s.seal();
    s.pump();
    if (!s.jobs.empty()) {
        // Bounded: a store that never answers must not hold shutdown forever.
        runtime::deadline_scope scope(runtime::reactor::local().now() + s.cfg.close_timeout);
        while (!s.jobs.empty() && !scope.expired()) {
            auto slept = co_await runtime::sleep(std::chrono::milliseconds(2), scope.token());
            (void)slept;
        }
    }
    s.flush_timer.cancel();
    s.memory.broken();
    co_await s.gate.close();
    // Uploads cut short by the gate: their producers were never acknowledged.
    for (auto& j : s.jobs) {
        for (auto& w : j->waiters) w->resolve(append_errc::shutting_down);
        s.abandon(*j);
    }
    s.jobs.clear();
    for (auto& w : s.builder_waiters) w->resolve(append_errc::shutting_down);
    s.builder_waiters.clear();
    for (auto& w : s.data_waiters) w.state->resolve(append_errc::shutting_down);
    s.data_waiters.clear();
    s.fail_durable();
    // The partition is gone from this core's point of view: its own series go too.
    s.hwm_reg.reset();
    s.start_reg.reset();
}

std::int64_t partition_log::high_watermark() const noexcept { return _s->hwm; }
std::int64_t partition_log::log_start_offset() const noexcept { return _s->log_start; }
std::int64_t partition_log::next_offset() const noexcept { return _s->next_offset; }
const restore_report& partition_log::restored() const noexcept { return _s->report; }
const partition_id& partition_log::id() const noexcept { return _s->id; }

log_stats partition_log::stats() const noexcept {
    log_stats st = _s->stats;
    st.inflight_flushes = static_cast<std::size_t>(_s->uploading);
    st.buffered_bytes = _s->builder ? _s->builder->body_bytes() : 0;
    st.pending_bytes = _s->pending_bytes();
    return st;
}

} // namespace skiff::storage
