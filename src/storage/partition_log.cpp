// The partition log's façade: offsets, the high watermark, the memory bound and the
// waiters, over the flush pipeline (write side), the segment cache (read side) and restore.
// The produce path in three files: append() here buffers and waits on its ack latch;
// flush_pipeline.cpp seals, uploads both objects at once (run_job), commits in offset order
// and sets the acks; on_committed() here moves the high watermark first.
#include "log_state.hpp"

#include <skiff/storage/manifest_format.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

namespace skiff::storage {

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
    s.durable_callbacks.push_back(detail::durable_callback{offset, std::move(fn)});
}

runtime::task<result<std::unique_ptr<partition_log>, store_error>> partition_log::open(object_store& store,
                                                                                      io_budget& budget,
                                                                                      std::string ns,
                                                                                      partition_id id,
                                                                                      log_config cfg) {
    auto s = std::make_unique<state>(store, budget, std::move(ns), std::move(id), std::move(cfg));
    const auto t0 = s->m.now();
    auto r = co_await detail::restore(s->store, s->ns, s->id, s->m, s->cfg.manifests);
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
    s->persisted_log_start = r->log_start;
    s->persisted_covered_end = r->manifest_covered_end;
    s->retired_below = r->log_start;
    s->manifest_keys = std::move(r->manifest_keys);
    s->manifest_epoch = s->cfg.leader_epoch.value_or(0);
    s->manifests_on = s->cfg.manifests;
    if (r->manifest_covered_end >= 0) s->verify_below = r->manifest_covered_end;
    // Our keys continue after every key of our epoch, readable or not: a key is never offered
    // twice.
    const auto mprefix = manifest_prefix(s->ns, s->id);
    for (const auto& k : s->manifest_keys) {
        auto n = parse_manifest_name(std::string_view(k).substr(mprefix.size()));
        if (!n) continue;
        if (n->epoch == s->manifest_epoch) s->manifest_seq = std::max(s->manifest_seq, n->seq + 1);
        if (n->epoch > s->manifest_epoch && s->manifests_on) {
            // A newer owner's checkpoint: ours would sort below it and never be read.
            s->manifests_on = false;
            log::warn("partition {}/{}: a manifest of epoch {} exists, above ours ({}); not writing manifests",
                      s->id.topic, s->id.partition, n->epoch, s->manifest_epoch);
        }
    }
    // Restored without a manifest (or with segments past it): checkpoint soon, so the next
    // restore is cheap.
    if (s->manifests_on && (r->manifest_covered_end < 0 ? r->report.segments > 0 : r->next_offset > r->manifest_covered_end)) {
        s->changed();
        s->manifest_urgent = true;
    }
    for (auto base : r->to_repair) s->spawn_repair(base);
    if (s->m.enabled) {
        auto& m = s->m;
        m.restores.inc();
        m.restore_duration.record(std::chrono::steady_clock::now() - t0);
        m.restored_segments.inc(s->report.segments);
        m.orphans[0].inc(s->report.orphan_kfs);
        m.orphans[1].inc(s->report.orphan_index);
        m.corrupt_segments.inc(s->report.corrupt);
    }
    if (s->m.enabled) {
        if (s->report.from_manifest) s->m.restores_from_manifest.inc();
        s->m.manifests_unusable.inc(s->report.manifests_unusable);
    }
    s->verified = s->verify_below < 0;
    s->lifecycle_timer.arm_after(s->cfg.lifecycle_tick);
    s->register_partition_gauges();
    // A new, empty partition is not news; one with data (or damage) is.
    const auto& rep = s->report;
    log::emit(rep.segments || rep.orphan_kfs || rep.orphan_index || rep.corrupt ? log::level::info : log::level::debug,
              "restored partition {}/{} from {}: {} segments, next offset {}, {} orphan .kfs, {} orphan .index, "
              "{} corrupt, {} list pages{}; new data from offset {}",
              s->id.topic, s->id.partition, store.describe(), rep.segments, rep.next_offset, rep.orphan_kfs,
              rep.orphan_index, rep.corrupt, rep.list_pages,
              rep.from_manifest ? fmt::format(" (manifest with {} segments)", rep.manifest_segments) : "",
              s->next_offset);
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
    // Large segments are read in windows (segment_cache::slice_for): about what this read
    // returns, more when one batch is larger.
    std::size_t window = std::clamp<std::size_t>(max_bytes, 64 << 10, 8 << 20);
    while (cur < s.hwm && (out.records.empty() || out.records.size() < max_bytes)) {
        auto* seg = s.cache.covering(cur);
        if (!seg) break;
        if (seg->base > cur) cur = seg->base; // skip a gap
        if (seg->corrupt) {
            co_return failure{store_error(errc::corrupt, fmt::format("segment {} is corrupt", seg->base))};
        }
        const std::int64_t base = seg->base;
        const bool was_cached = static_cast<bool>(seg->bytes);
        auto slice = co_await s.cache.slice_for(base, cur, st, window);
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
        // Where the batch after the last one taken starts in the object (for remember()).
        std::uint64_t resume = slice->position + walked->consumed;
        for (auto& b : walked->batches) {
            if (b.base_offset >= s.hwm) break;
            if (!out.records.empty() && out.records.size() + b.size() > max_bytes) {
                full = true;
                resume = slice->position + static_cast<std::uint64_t>(b.bytes.data() - slice->body_part.data());
                break;
            }
            out.records.append(b.bytes.data(), b.bytes.size());
            next = b.next_offset();
        }
        // The batch cut off at the window's end would not fit either: done, without a GET for it.
        if (!full && !slice->to_end && !out.records.empty() && walked->pending_batch_size > 0 &&
            out.records.size() + walked->pending_batch_size > max_bytes) {
            full = true;
        }
        if ((full || !slice->to_end) && next > offset) s.cache.remember(base, next, resume);
        if (full) break;
        if (!slice->to_end) {
            // A window of a large segment: go on after its last whole batch, or, when not even
            // one batch fitted, again with a window that holds it.
            if (next > cur) {
                cur = next;
            } else if (walked->pending_batch_size > window) {
                window = walked->pending_batch_size + (64 << 10);
            } else {
                window *= 2;
            }
            continue;
        }
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
    s.data_waiters.push_back(detail::data_waiter{offset, latch});
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
    // Time-index sidecars too: one small PUT each, each attempt bounded, no retry once closing.
    const auto busy = [&s] { return !s.pipeline.idle() || s.pipeline.sidecars_in_flight() > 0; };
    if (busy()) {
        // Bounded: a store that never answers must not hold shutdown forever.
        runtime::deadline_scope scope(runtime::reactor::local().now() + s.cfg.close_timeout);
        while (busy() && !scope.expired()) {
            auto slept = co_await runtime::sleep(std::chrono::milliseconds(2), scope.token());
            (void)slept;
        }
    }
    s.pipeline.stop_timer();
    s.lifecycle_timer.cancel();
    s.memory.broken();
    // A last checkpoint, so the next owner restores with one GET and a short LIST.
    if (!s.fenced && s.manifests_on && s.manifest_dirty()) {
        runtime::deadline_scope scope(runtime::reactor::local().now() + s.cfg.close_timeout);
        (void)co_await s.write_manifest(scope.token());
    }
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

void partition_log::set_retention(std::int64_t retention_ms, std::int64_t retention_bytes) {
    _s->cfg.retention_ms = retention_ms;
    _s->cfg.retention_bytes = retention_bytes;
}

void partition_log::set_compaction(bool compact, std::int64_t delete_retention_ms, std::int64_t min_compaction_lag_ms) {
    auto& c = _s->cfg;
    if (compact != c.compact) {
        _s->compacted_end = -1;
        _s->compacted_producers.clear();
    }
    c.compact = compact;
    c.delete_retention_ms = delete_retention_ms;
    c.min_compaction_lag_ms = min_compaction_lag_ms;
}

runtime::task<result<std::int64_t, store_error>> partition_log::delete_records(std::int64_t offset,
                                                                                std::stop_token st) {
    auto& s = *_s;
    if (offset == -1) offset = s.hwm;
    if (offset < 0 || offset > s.hwm) {
        co_return failure{store_error(errc::invalid_argument,
                                      fmt::format("offset {} is outside [0, {}]", offset, s.hwm))};
    }
    if (s.fenced) co_return failure{store_error(errc::precondition_failed, "the partition log is fenced")};
    if (offset <= s.log_start) co_return s.log_start;
    s.retire_below(offset);
    if (s.manifests_on) {
        auto holder = s.gate.enter();
        if (!holder) co_return failure{store_error(errc::cancelled, "the partition is closing")};
        // The answer says the records are gone: only once a restart would agree.
        if (!co_await s.write_manifest(st)) {
            co_return failure{store_error(errc::transient,
                                          "the new log start offset could not be stored; it is tried again")};
        }
    }
    co_return s.log_start;
}

runtime::task<bool> partition_log::checkpoint(std::stop_token st) {
    auto& s = *_s;
    if (!s.manifests_on || s.fenced) co_return false;
    if (!s.manifest_dirty()) co_return true;
    auto holder = s.gate.enter();
    if (!holder) co_return false;
    co_return co_await s.write_manifest(st);
}

std::int64_t partition_log::high_watermark() const noexcept { return _s->hwm; }
std::int64_t partition_log::log_start_offset() const noexcept { return _s->log_start; }
std::int64_t partition_log::next_offset() const noexcept { return _s->next_offset; }
bool partition_log::fenced() const noexcept { return _s->fenced; }
void partition_log::on_fenced(std::function<void()> fn) { _s->on_fenced = std::move(fn); }
void partition_log::set_owner_check(std::function<bool()> fn) { _s->owner_check = std::move(fn); }
const restore_report& partition_log::restored() const noexcept { return _s->report; }
const partition_id& partition_log::id() const noexcept { return _s->id; }

std::uint64_t partition_log::stored_bytes() const noexcept {
    std::uint64_t total = 0;
    for (const auto& [base, e] : _s->cache.segments()) {
        if (base >= _s->hwm) break;
        if (_s->retired(e)) continue;
        total += e.kfs_size + e.index_size;
    }
    return total;
}

log_stats partition_log::stats() const noexcept {
    log_stats st = _s->stats;
    st.inflight_flushes = static_cast<std::size_t>(_s->pipeline.uploading());
    st.buffered_bytes = _s->pipeline.buffered_bytes();
    st.pending_bytes = _s->pending_bytes();
    return st;
}

} // namespace skiff::storage
