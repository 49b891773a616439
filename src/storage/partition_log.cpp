// The partition log's façade: offsets, the high watermark, the memory bound and the
// waiters, over the flush pipeline (write side), the segment cache (read side) and restore.
// The produce path in three files: append() here buffers and waits on its ack latch;
// flush_pipeline.cpp seals, uploads both objects at once (run_job), commits in offset order
// and sets the acks; on_committed() here moves the high watermark first.
#include "flush_pipeline.hpp"
#include "log_instruments.hpp"
#include "log_restore.hpp"
#include "segment_cache.hpp"

#include <skiff/core/log.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/semaphore.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace skiff::storage {

namespace {

// A reader waiting for the high watermark to pass `offset`: true once it has, false when
// the log closes. A timed-out reader leaves its latch with nobody waiting on it.
struct data_waiter {
    std::int64_t offset;
    std::shared_ptr<runtime::oneshot<bool>> latch;
};

struct durable_callback {
    std::int64_t offset;
    std::function<void(bool)> fn;
};

} // namespace

struct partition_log::state {
    state(object_store& st, io_budget& b, std::string n, partition_id i, log_config c)
        : store(st), budget(b), ns(std::move(n)), id(std::move(i)), cfg(std::move(c)), memory(cfg.max_pending_bytes, "log-memory"),
          records(std::max<std::size_t>(cfg.max_pending_records, 1), "log-records"), m(detail::log_instruments::make()) {
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
    std::string ns;
    partition_id id;
    log_config cfg;
    runtime::gate gate{"partition-log"};
    runtime::semaphore memory;
    runtime::semaphore records; // offsets buffered + in flight (max_pending_records)

    std::int64_t next_offset = 0;
    std::int64_t hwm = 0;
    // The end of what was appended here (flush() waits for it). Below next_offset only
    // while a takeover gap is still unused.
    std::int64_t appended_end = 0;
    std::int64_t log_start = 0;

    std::vector<data_waiter> data_waiters;
    std::vector<durable_callback> durable_callbacks;

    restore_report report;
    log_stats stats;
    bool closing = false;
    bool fenced = false;
    std::function<void()> on_fenced;

    // Metrics (inert when metrics were off at open); the parts below hold shares of its
    // gauges. The partition's own callback gauges are the last members (removed first).
    detail::log_instruments m;
    detail::segment_cache cache{store, budget, ns, id, cfg, gate, m, stats};
    detail::flush_pipeline pipeline{store, budget, ns, id, cfg, gate, m, stats,
                                    [this](const detail::flush_job& j) { on_committed(j); },
                                    [this] { on_pipeline_fenced(); }};
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

    std::size_t pending_bytes() const noexcept {
        return static_cast<std::size_t>(static_cast<std::int64_t>(memory.capacity()) - memory.available());
    }

    // The flush pipeline committed a segment (in offset order): readers may have it now.
    void on_committed(const detail::flush_job& j) {
        cache.add_committed(j.base, j.last, j.kfs, j.index);
        hwm = j.last + 1;
        wake_readers();
    }

    void wake_readers() {
        auto it = std::remove_if(data_waiters.begin(), data_waiters.end(), [this](data_waiter& w) {
            if (w.latch->waiters() == 0) return true; // timed out or stopped
            if (hwm > w.offset) {
                w.latch->set(true);
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

    // The pipeline found another owner's object under our key (it already failed its
    // producers). Appends waiting for room fail too; nothing pending will become durable.
    void on_pipeline_fenced() {
        fenced = true;
        memory.broken();
        records.broken();
        fail_durable();
        log::warn("partition {}/{} is fenced: another owner writes it; appends fail until it is reopened", id.topic,
                  id.partition);
        if (on_fenced) on_fenced();
    }

    // The log closes: whoever still waits is told its data did not become durable here.
    void fail_durable() {
        auto all = std::exchange(durable_callbacks, {});
        for (auto& c : all) c.fn(false);
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
    if (s.fenced || (s.closing && s.gate.is_closed())) {
        fn(false);
        return;
    }
    s.durable_callbacks.push_back(durable_callback{offset, std::move(fn)});
}

runtime::task<result<std::unique_ptr<partition_log>, store_error>> partition_log::open(object_store& store,
                                                                                      io_budget& budget,
                                                                                      std::string ns,
                                                                                      partition_id id,
                                                                                      log_config cfg) {
    auto s = std::make_unique<state>(store, budget, std::move(ns), std::move(id), std::move(cfg));
    const auto t0 = s->m.now();
    auto r = co_await detail::restore(s->store, s->ns, s->id, s->m);
    if (!r) {
        s->m.restore_failures.inc();
        co_return failure{std::move(r).error()};
    }
    s->cache.adopt(std::move(r->segments));
    // The gap: offsets a deposed owner may still upload segments at stay unused here. The
    // high watermark stays at what is committed, so readers wait at it instead of polling
    // an empty range.
    s->next_offset = std::max(r->next_offset + std::max<std::int64_t>(s->cfg.takeover_gap, 0), s->cfg.min_next_offset);
    s->hwm = r->next_offset;
    s->appended_end = r->next_offset;
    s->log_start = r->log_start;
    s->report = r->report;
    s->restore_ctx = r->trace;
    if (s->cfg.repair_orphans) {
        state* sp = s.get();
        for (auto base : r->to_repair) {
            auto on_repaired = [sp, base](std::shared_ptr<const std::string> index) {
                ++sp->report.repaired;
                sp->cache.set_index(base, std::move(index));
            };
            (void)s->gate.spawn(detail::repair(s->store, s->budget, s->ns, s->id, s->cfg, s->m, base, s->restore_ctx,
                                               s->gate.stop_token(), std::move(on_repaired)));
        }
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
              "{} corrupt, {} list pages; new data from offset {}",
              s->id.topic, s->id.partition, store.describe(), rep.segments, rep.next_offset, rep.orphan_kfs,
              rep.orphan_index, rep.corrupt, rep.list_pages, s->next_offset);
    co_return std::unique_ptr<partition_log>(new partition_log(std::move(s)));
}

runtime::task<result<append_result, append_error>> partition_log::append(std::span<const char> record_set,
                                                                         ack_mode acks, std::stop_token st) {
    if (_s->fenced) co_return failure{append_error(append_errc::fenced, "the partition log is fenced")};
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
                                                                         ack_mode acks, std::stop_token st,
                                                                         std::optional<std::chrono::milliseconds> room_timeout) {
    auto& s = *_s;
    if (s.fenced) co_return failure{append_error(append_errc::fenced, "the partition log is fenced")};
    if (s.closing) co_return failure{append_error(append_errc::shutting_down, "the partition is closing")};
    if (batches.empty()) co_return failure{append_error(append_errc::corrupt_message, "empty record set")};
    std::size_t set_bytes = 0;
    std::size_t set_offsets = 0;
    for (const auto& b : batches) {
        set_bytes += b.size();
        set_offsets += static_cast<std::size_t>(b.last_offset_delta) + 1;
    }

    // Memory and offset bounds: buffered + in flight, the partition's and the shared one. At a
    // bound the producer waits here, up to room_timeout. A set larger than a bound waits until
    // nothing else is pending. Order: partition bytes, shared bytes, offsets — every append
    // takes them in this order, and nobody waits on one while a waiter of an earlier one holds
    // a later one, so no two appends wait on each other.
    const std::size_t need = std::min(set_bytes, s.cfg.max_pending_bytes);
    const std::size_t need_offsets = std::min(set_offsets, s.records.capacity());
    runtime::semaphore* shared = s.cfg.shared_memory.get();
    const std::size_t need_shared = shared ? std::min(set_bytes, shared->capacity()) : 0;
    std::optional<runtime::semaphore::units> units = s.memory.try_acquire(need);
    std::optional<runtime::semaphore::units> shared_units;
    if (units && shared) shared_units = shared->try_acquire(need_shared);
    std::optional<runtime::semaphore::units> offset_units;
    if (units && (!shared || shared_units)) offset_units = s.records.try_acquire(need_offsets);
    std::chrono::nanoseconds waited{0};
    if (!offset_units) {
        // The slow path: the store is behind. Only here is a deadline armed.
        const auto t0 = runtime::reactor::local().now();
        std::optional<runtime::deadline_scope> deadline;
        std::stop_token wait_st = st;
        if (room_timeout) {
            deadline.emplace(t0 + *room_timeout, st);
            wait_st = deadline->token();
        }
        std::optional<std::error_code> failed;
        if (!units) {
            auto u = co_await s.memory.acquire(need, wait_st);
            if (u) units = std::move(*u);
            else failed = u.error();
        }
        if (!failed && shared && !shared_units) {
            auto u = co_await shared->acquire(need_shared, wait_st);
            if (u) shared_units = std::move(*u);
            else failed = u.error();
        }
        if (!failed) {
            auto u = co_await s.records.acquire(need_offsets, wait_st);
            if (u) offset_units = std::move(*u);
            else failed = u.error();
        }
        waited = runtime::reactor::local().now() - t0;
        s.m.room_waits.inc();
        s.m.room_wait.record(waited);
        if (failed) {
            append_error e;
            if (deadline && deadline->expired() && !st.stop_requested()) {
                s.m.room_timeouts.inc();
                e = append_error(append_errc::no_room,
                                 "no room for the append within the request timeout: the store is behind; nothing "
                                 "was written");
            } else if (runtime::is_cancelled(*failed)) {
                e = append_error(append_errc::cancelled, "no room for the append");
            } else if (s.fenced) {
                e = append_error(append_errc::fenced, "the partition log is fenced");
            } else {
                e = append_error(append_errc::shutting_down, "no room for the append");
            }
            e.room_wait = waited;
            co_return failure{std::move(e)};
        }
    }
    if (s.fenced) co_return failure{append_error(append_errc::fenced, "the partition log is fenced")};
    if (s.closing) co_return failure{append_error(append_errc::shutting_down, "the partition is closing")};
    auto range = s.pipeline.buffer(batches, set_bytes, s.next_offset, std::move(*units), std::move(*offset_units),
                                   std::move(shared_units));
    if (!range) co_return failure{std::move(range).error()};
    append_result out;
    out.room_wait = waited;
    out.base_offset = range->base_offset;
    out.last_offset = range->last_offset;
    s.next_offset = out.last_offset + 1;
    s.appended_end = s.next_offset;
    ++s.stats.appends;
    s.stats.appended_records += static_cast<std::uint64_t>(out.last_offset - out.base_offset + 1);
    s.m.appends.inc();
    s.m.appended_records.inc(static_cast<std::uint64_t>(out.last_offset - out.base_offset + 1));
    s.m.appended_bytes.inc(set_bytes);

    if (acks != ack_mode::durable) {
        s.pipeline.maybe_flush();
        co_return out;
    }
    // The ack: set by the commit (or by close), unless the timeout or a stop comes first — the
    // data then stays in its flush and is still uploaded, but this producer is never told
    // "success".
    auto ack = std::make_shared<detail::ack_latch>();
    s.pipeline.add_waiter(ack);
    s.pipeline.maybe_flush();
    auto acked = co_await ack->wait(s.cfg.append_timeout, st);
    std::optional<append_errc> error;
    if (!acked) {
        error = acked.error() == make_error_code(runtime::errc::timed_out) ? append_errc::timed_out
                                                                           : append_errc::cancelled;
    } else {
        error = acked->error;
    }
    if (error) {
        if (*error == append_errc::timed_out) {
            ++s.stats.timed_out_appends;
            s.m.append_timeouts.inc();
        }
        append_error err(*error, *error == append_errc::timed_out
                                     ? "not durable within the append timeout; still retrying"
                                     : "not acknowledged");
        err.base_offset = out.base_offset;
        err.room_wait = waited;
        err.last_offset = out.last_offset;
        co_return failure{std::move(err)};
    }
    out.flush_span = acked->flush;
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
        auto* seg = s.cache.covering(cur);
        if (!seg) break;
        if (seg->base > cur) cur = seg->base; // skip a gap
        if (seg->corrupt) {
            co_return failure{store_error(errc::corrupt, fmt::format("segment {} is corrupt", seg->base))};
        }
        const std::int64_t base = seg->base;
        const bool was_cached = static_cast<bool>(seg->bytes);
        auto slice = co_await s.cache.slice_for(base, cur, st);
        if (!slice) co_return failure{std::move(slice).error()};
        if (!was_cached) s.cache.prefetch_after(base, s.hwm);
        walk_options wo;
        wo.verify_crc = false; // the body CRC or the writer already covered these bytes
        auto walked = walk_batches(slice->body_part, cur, wo);
        if (!walked) {
            s.cache.mark_corrupt(base);
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
        auto after = s.cache.next_base(base);
        if (!after) break;
        cur = std::max(next, *after);
    }
    co_return out;
}

runtime::task<bool> partition_log::wait_for_data(std::int64_t offset, std::chrono::milliseconds timeout,
                                                 std::stop_token st) {
    auto& s = *_s;
    if (s.hwm > offset) co_return true;
    if (s.closing) co_return false;
    auto latch = std::make_shared<runtime::oneshot<bool>>();
    s.data_waiters.push_back(data_waiter{offset, latch});
    auto woken = co_await latch->wait(timeout, st);
    co_return woken && *woken;
}

runtime::task<void> partition_log::flush() {
    auto& s = *_s;
    const std::int64_t target = s.appended_end;
    if (s.hwm >= target || s.fenced) co_return;
    s.pipeline.flush_now();
    while (s.hwm < target && !s.fenced && !(s.closing && s.pipeline.idle())) {
        auto ok = co_await wait_for_data(target - 1, std::chrono::milliseconds(1000), s.gate.stop_token());
        if (!ok && s.gate.stop_token().stop_requested()) co_return;
    }
}

runtime::task<void> partition_log::close() {
    auto& s = *_s;
    if (s.closing && s.gate.is_closed()) co_return;
    s.closing = true;
    s.pipeline.start_closing();
    s.pipeline.flush_now();
    if (!s.pipeline.idle()) {
        // Bounded: a store that never answers must not hold shutdown forever.
        runtime::deadline_scope scope(runtime::reactor::local().now() + s.cfg.close_timeout);
        while (!s.pipeline.idle() && !scope.expired()) {
            auto slept = co_await runtime::sleep(std::chrono::milliseconds(2), scope.token());
            (void)slept;
        }
    }
    s.pipeline.stop_timer();
    s.memory.broken();
    co_await s.gate.close();
    // Uploads cut short by the gate: their producers were never acknowledged.
    s.pipeline.abandon_all();
    for (auto& w : s.data_waiters) w.latch->set(false);
    s.data_waiters.clear();
    s.fail_durable();
    // The partition is gone from this core's point of view: its own series go too.
    s.hwm_reg.reset();
    s.start_reg.reset();
}

std::int64_t partition_log::high_watermark() const noexcept { return _s->hwm; }
std::int64_t partition_log::log_start_offset() const noexcept { return _s->log_start; }
std::int64_t partition_log::next_offset() const noexcept { return _s->next_offset; }
bool partition_log::fenced() const noexcept { return _s->fenced; }
void partition_log::on_fenced(std::function<void()> fn) { _s->on_fenced = std::move(fn); }
const restore_report& partition_log::restored() const noexcept { return _s->report; }
const partition_id& partition_log::id() const noexcept { return _s->id; }

log_stats partition_log::stats() const noexcept {
    log_stats st = _s->stats;
    st.inflight_flushes = static_cast<std::size_t>(_s->pipeline.uploading());
    st.buffered_bytes = _s->pipeline.buffered_bytes();
    st.pending_bytes = _s->pending_bytes();
    return st;
}

} // namespace skiff::storage
