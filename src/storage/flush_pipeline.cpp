#include "flush_pipeline.hpp"
#include "hedged.hpp"

#include <skiff/core/log.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/put_rate.hpp>

#include <algorithm>
#include <cmath>

namespace skiff::storage::detail {

namespace {
runtime::time_point rnow() { return runtime::reactor::local().now(); }

// Before the first upload of a partition finished there is no round trip to go by; this
// stands in (a fast object store's) so the first waiters behind an upload are not held long.
constexpr std::int64_t default_rtt_ns = 4'000'000;
} // namespace

flush_pipeline::flush_pipeline(object_store& store, io_budget& budget, const std::string& ns, const partition_id& id,
                               const log_config& cfg, runtime::gate& gate, log_instruments& m, log_stats& stats,
                               commit_fn on_committed, fenced_fn on_fenced)
    : _store(store), _budget(budget), _ns(ns), _id(id), _cfg(cfg), _gate(gate), _m(m), _stats(stats),
      _on_committed(std::move(on_committed)), _on_fenced(std::move(on_fenced)), _flush_timer([this] { on_timer(); }), _upload_backoff(_cfg.retry_base, _cfg.retry_cap) {
    _buffered_g.bind(m.buffered_bytes);
    _uploading_g.bind(m.flushes_in_flight);
}

// ---- the active segment -------------------------------------------------------------------

void flush_pipeline::start_segment(std::int64_t next_offset, std::size_t set_bytes) {
    _builder.emplace(next_offset, _cfg.index_interval, _cfg.segment_bytes + set_bytes);
    if (_cfg.leader_epoch) _builder->stamp_leader_epoch(*_cfg.leader_epoch);
    _first_append = rnow();
}

result<buffered_range, append_error> flush_pipeline::buffer(std::span<const batch_view> batches,
                                                            std::size_t set_bytes, std::int64_t next_offset,
                                                            runtime::semaphore::units memory,
                                                            runtime::semaphore::units records,
                                                            std::optional<runtime::semaphore::units> shared) {
    if (_fenced) return failure{append_error(append_errc::fenced, "the partition log is fenced")};
    // Rotate first if this record set would push the buffer past the segment size.
    if (_builder && !_builder->empty() && _builder->body_bytes() + set_bytes > _cfg.segment_bytes) {
        flush_now();
    }
    if (!_builder) start_segment(next_offset, set_bytes);
    // All or nothing: a set the segment cannot take whole goes into a fresh segment, so a
    // failed request never leaves part of itself behind to be duplicated by a retry.
    if (!_builder->empty() && !_builder->can_append(batches)) {
        flush_now();
        start_segment(next_offset, set_bytes);
    }
    if (auto fits = _builder->can_append(batches); !fits) {
        return failure{append_error(append_errc::corrupt_message, fits.error().message)};
    }
    buffered_range out;
    out.base_offset = _builder->next_offset();
    for (auto& b : batches) {
        auto assigned = _builder->append(b);
        if (!assigned) {
            // Nothing of a rejected batch is kept; earlier batches of this set are (Kafka
            // validates whole sets first, and split_batches already did).
            _buffered_g.add(static_cast<std::int64_t>(_builder->body_bytes()) - _buffered_g.value());
            return failure{append_error(append_errc::corrupt_message, assigned.error().message)};
        }
    }
    out.last_offset = _builder->next_offset() - 1;
    _builder_records += out.last_offset - out.base_offset + 1;
    _builder_memory.push_back(std::move(memory));
    _builder_memory.push_back(std::move(records));
    if (shared) _builder_memory.push_back(std::move(*shared));
    _buffered_g.add(static_cast<std::int64_t>(_builder->body_bytes()) - _buffered_g.value());
    return out;
}

void flush_pipeline::add_waiter(std::shared_ptr<ack_latch> w) {
    _builder_waiters.push_back(std::move(w));
    if (!_first_waiter) _first_waiter = rnow();
}

// Seals the active buffer into a flush job (objects built once, here).
void flush_pipeline::seal() {
    if (_fenced || !_builder || _builder->empty()) return;
    auto job = std::make_unique<flush_job>();
    // The flush trace starts here: building the objects is its first step.
    auto trace = metrics::span::root("flush");
    auto build = trace.child("build");
    const auto body_bytes = _builder->body_bytes();
    auto built = std::move(*_builder).finish(_cfg.wall_ms());
    _builder.reset();
    build.end();
    job->base = built.meta.base_offset;
    job->last = built.meta.last_offset;
    job->records = built.meta.message_count;
    job->max_timestamp = built.meta.max_timestamp;
    job->created_ms = built.meta.created_ms;
    job->kfs = std::make_shared<const std::string>(std::move(built.kfs));
    job->index = std::make_shared<const std::string>(std::move(built.index));
    if (_cfg.time_index) {
        if (put_rate* rate = _budget.rate(); rate && rate->limited()) {
            _m.time_index_skipped.inc();
        } else {
            // From the min/max the builder kept while it copied the batches: no second pass.
            job->kfst = std::make_shared<const std::string>(encode_time_index(time_index_of(built.meta)));
            job->link = std::make_shared<sidecar_link>();
        }
    }
    if (trace.active()) {
        trace.set("topic", _id.topic);
        trace.set("partition", _id.partition);
        trace.set("segment", job->base);
        trace.set("records", job->records);
        trace.set("bytes", job->kfs->size());
        trace.set("index_bytes", job->index->size());
        job->flush_ctx = trace.context();
    }
    job->trace = std::move(trace);
    _buffered_g.clear();
    job->in_flight_bytes.bind(_m.in_flight_bytes);
    job->in_flight_bytes.add(static_cast<std::int64_t>(job->kfs->size() + job->index->size()));
    _expected_back = std::max<std::int64_t>(0, _expected_back - static_cast<std::int64_t>(_builder_waiters.size()));
    job->waiters = std::move(_builder_waiters);
    job->memory = std::move(_builder_memory);
    job->sealed_at = clock::now();
    job->first_append = _first_append.value_or(rnow());
    job->prepaid = std::exchange(_prepaid, 0);
    // The arrival rate: bytes sealed over the time since the previous seal (or since this
    // segment's first append), smoothed.
    {
        const auto now = rnow();
        const auto since = std::min(_last_seal.value_or(job->first_append), job->first_append);
        const double secs = std::max(1e-4, std::chrono::duration<double>(now - since).count());
        const double sample = static_cast<double>(body_bytes) / secs;
        _arrival_bps = _arrival_bps == 0 ? sample : 0.75 * _arrival_bps + 0.25 * sample;
        _last_seal = now;
    }
    _builder_waiters.clear();
    _builder_memory.clear();
    _builder_records = 0;
    _first_append.reset();
    _first_waiter.reset();
    _flush_timer.cancel();
    _jobs.push_back(std::move(job));
}

// Starts uploads for sealed jobs while the pipelining depth allows.
void flush_pipeline::pump() {
    if (_fenced) return;
    // Chosen first, spawned after: run_job starts eagerly, and a job that commits before
    // spawn returns is popped from _jobs, which would invalidate an iterator held over it.
    // The jobs chosen stay alive until they finish, and none of them has finished yet.
    std::vector<flush_job*> starting;
    for (auto& j : _jobs) {
        if (_uploading >= _cfg.max_inflight_flushes) break;
        if (j->started) continue;
        j->started = true;
        ++_uploading;
        _uploading_g.add(1);
        j->upload_started = _m.now();
        j->upload_began = rnow();
        _m.flush_wait.record(j->upload_began - j->first_append);
        ++_stats.flushes;
        _stats.flushed_bytes += j->kfs->size() + j->index->size();
        starting.push_back(j.get());
    }
    for (flush_job* j : starting) {
        // Taken before run_job starts: a job can commit (and go) before spawn returns.
        const std::int64_t base = j->base;
        std::shared_ptr<const std::string> kfst = j->kfst;
        std::shared_ptr<sidecar_link> link = j->link;
        auto spawned = _gate.spawn(run_job(j));
        if (!spawned) {
            --_uploading;
            _uploading_g.add(-1);
            j->failed = true;
            j->finished = true;
        } else if (kfst) {
            // Same turn as the pair, so the same round trip; not awaited by the commit.
            (void)_gate.spawn(upload_sidecar(base, std::move(kfst), std::move(link)));
        }
    }
}

void flush_pipeline::flush_now() {
    seal();
    pump();
}

runtime::duration flush_pipeline::wait_bound() const noexcept {
    if (_cfg.linger) return std::chrono::duration_cast<runtime::duration>(*_cfg.linger);
    // A waiter held back behind uploads in flight pays this on top of its own round trip: a
    // quarter of it keeps that within 1.25 round trips while everything that arrives in the
    // meantime shares one segment. Clamped so a very fast store still gathers a little and a
    // very slow one does not hold data for long.
    const std::int64_t rtt = _rtt_ns > 0 ? _rtt_ns : default_rtt_ns;
    return runtime::duration(std::clamp<std::int64_t>(rtt / 4, 100'000, 25'000'000));
}

int flush_pipeline::depth_limit() const noexcept {
    const int cap = std::max(1, _cfg.max_inflight_flushes);
    if (_cfg.linger) return cap;
    // Enough uploads to carry one round trip's worth of arriving bytes in full segments, plus
    // the time-bound flushes one round trip holds (one per wait_bound()), plus one.
    const std::int64_t rtt = _rtt_ns > 0 ? _rtt_ns : default_rtt_ns;
    const double in_rtt = _arrival_bps * static_cast<double>(rtt) / 1e9;
    const auto by_bytes = static_cast<int>(std::ceil(in_rtt / static_cast<double>(std::max<std::size_t>(1, _cfg.segment_bytes))));
    const auto bound = std::max<std::int64_t>(1, wait_bound().count());
    const auto by_time = static_cast<int>((rtt + bound - 1) / bound);
    return std::clamp(1 + by_bytes + by_time, 1, cap);
}

void flush_pipeline::on_timer() {
    _timer_firing = true;
    maybe_flush();
    _timer_firing = false;
}

// Decides whether the active buffer should become a segment now, or arms the timer for when
// it should. Called after every append, when the timer fires, and when an upload finishes
// (a slot freed).
void flush_pipeline::maybe_flush() {
    if (_fenced || !_builder || _builder->empty()) return;
    const bool size_due = _builder->body_bytes() >= _cfg.segment_bytes ||
                          _builder_records >= static_cast<std::int64_t>(_cfg.segment_records);
    if (size_due || _closing) {
        // A full buffer is sealed even when no slot is free (memory bounds the queue).
        flush_now();
        return;
    }
    if (_pacing) return; // a due flush waits for its PUT slots; this data joins it
    const auto now = rnow();
    const bool slot_free = _uploading < depth_limit();
    runtime::time_point due = *_first_append + std::chrono::duration_cast<runtime::duration>(_cfg.max_age);
    if (_first_waiter) {
        if (!_cfg.linger && _uploading == 0) {
            // Idle: flush at the end of this reactor turn, so every append of the turn joins.
            if (_timer_firing) {
                start_flush();
            } else if (!_flush_timer.armed() || _flush_timer.deadline() > now) {
                _flush_timer.arm(now);
            }
            return;
        }
        due = std::min(due, *_first_waiter + wait_bound());
        // Everyone the last commits released is back: nothing more to wait for.
        if (!_cfg.linger && _expected_back > 0 &&
            static_cast<std::int64_t>(_builder_waiters.size()) >= _expected_back) {
            due = now;
        }
    }
    if (now >= due) {
        // Time-due: it waits for a slot and meanwhile keeps gathering; run_job calls back here
        // when one frees.
        if (slot_free) start_flush();
        return;
    }
    if (!_flush_timer.armed() || _flush_timer.deadline() > due) _flush_timer.arm(due);
}

void flush_pipeline::start_flush() {
    put_rate* rate = _budget.rate();
    if (!rate || !rate->limited()) {
        flush_now();
        return;
    }
    _pacing = true;
    _flush_timer.cancel();
    auto spawned = _gate.spawn(paced_flush());
    if (!spawned) {
        _pacing = false;
        flush_now();
    }
}

// Under the request budget: reserve the segment's two PUTs, then seal what has gathered by
// the time they may start.
runtime::task<void> flush_pipeline::paced_flush() {
    const bool ok = co_await _budget.rate()->acquire(2, _gate.stop_token());
    _pacing = false;
    if (!ok || _fenced) co_return; // closing: close() flushes what is left, unpaced
    _prepaid = 2;
    flush_now();
    _prepaid = 0; // nothing was sealed: the slots are forfeited
    maybe_flush(); // more may have arrived behind a segment cut by size
}

// The round trip of a finished upload (both objects stored), for the adaptive schedule.
void flush_pipeline::note_upload_done(const flush_job& job) noexcept {
    const std::int64_t sample = (rnow() - job.upload_began).count();
    if (sample <= 0) return;
    _rtt_ns = _rtt_ns == 0 ? sample : (3 * _rtt_ns + sample) / 4;
}

// ---- uploads --------------------------------------------------------------------------------

// Uploads one object of a job until it is stored or the log shuts down. Retries use the
// same key and the same bytes: a segment never changes once built.
//
// This is the only retry loop of a flush upload (docs/retries.md): each attempt is one
// store request (put_once, so the S3 client does not retry underneath), under its own
// budget permit, with full-jitter backoff between attempts and no deadline: while the log
// is open, giving up would lose acknowledged-to-be data. The budget hears a throttled
// attempt from the store's throttle observer at that attempt, not from here: other
// transient failures (resets, 500s) must not shrink it, and counting here too would halve
// it twice for one SlowDown.
runtime::task<void> flush_pipeline::upload(flush_job* job, int which) {
    const std::string key = which == 0 ? segment_key(_ns, _id, job->base) : index_key(_ns, _id, job->base);
    std::shared_ptr<const std::string> body = which == 0 ? job->kfs : job->index;
    const auto kind = which == 0 ? key_kind::kfs : key_kind::index;
    std::stop_token st = _gate.stop_token();
    // One span per object, over all its attempts (ends when this coroutine returns).
    auto put_span = job->trace.child("put");
    if (put_span.active()) {
        put_span.set("kind", which == 0 ? "kfs" : "index");
        put_span.set("key", key);
        put_span.set("bytes", body->size());
    }
    for (int attempt = 0;; ++attempt) {
        put_span.set("retries", attempt);
        // The request budget: the first attempt's slot was reserved before sealing; every
        // other attempt reserves its own.
        if (job->prepaid > 0 && attempt == 0) {
            --job->prepaid;
        } else if (put_rate* rate = _budget.rate(); rate && rate->limited()) {
            if (!co_await rate->acquire(1, st)) {
                put_span.set("status", "cancelled");
                job->failed = true;
                co_return;
            }
        }
        if (_fenced) {
            put_span.set("status", "fenced");
            job->failed = true;
            co_return;
        }
        // One attempt: a permit, then one create-only PUT. Hedged: a PUT still unanswered after
        // the core's recent p99 is sent again (hedge.hpp); the first success wins. The attempt
        // may outlive this frame (the losing twin), so it shares the body and copies the key.
        hedge_attempt<void> put_one = [this, key, body, kind](std::stop_token ast) -> runtime::task<result<void, store_error>> {
            auto permit = co_await _budget.acquire(io_budget::priority::high, ast);
            if (!permit) co_return failure{store_error(errc::cancelled, "cancelled")};
            _m.flush_puts.inc();
            _m.put_size.record(body->size());
            if (put_rate* rate = _budget.rate()) rate->record_put(body->size());
            const auto t0 = _m.now();
            auto r = co_await _store.put_once(key, std::span<const char>(body->data(), body->size()), true, ast);
            _m.store_done(store_op::put, kind, t0, body->size(), 0, r ? nullptr : &r.error());
            permit->release();
            if (r) _budget.on_success();
            co_return r;
        };
        bool hedged = false;
        // Under a request budget every PUT is paid for in advance: no hedges there.
        hedge_policy* hedge = _budget.rate() && _budget.rate()->limited() ? nullptr : _budget.put_hedge();
        auto r = co_await run_hedged<void>(hedge, _gate, std::move(put_one), st, &hedged);
        if (hedged) {
            put_span.set("hedged", true);
            _m.hedges.inc();
        }
        if (r) {
            job->stored[which] = true;
            if (which == 0 && job->link) job->link->kfs = sidecar_link::kfs_state::stored;
            put_span.set("status", "ok");
            co_return;
        }
        put_span.set("status", to_string(r.error().code));
        if (r.error().code == errc::cancelled || st.stop_requested()) {
            job->failed = true;
            co_return;
        }
        if (r.error().code == errc::precondition_failed) {
            auto found = co_await compare_existing(key, *body, kind, st);
            if (found == existing::ours) {
                ++_stats.upload_already_landed;
                _m.upload_already_landed.inc();
                log::info("{}: an earlier attempt had landed (its answer was lost)", key);
                job->stored[which] = true;
                if (which == 0 && job->link) job->link->kfs = sidecar_link::kfs_state::stored;
                put_span.set("status", "already_landed");
                co_return;
            }
            if (found == existing::theirs) {
                log::warn("{}: another owner's segment is stored under our key; partition {}/{} is fenced", key,
                          _id.topic, _id.partition);
                put_span.set("status", "fenced");
                job->failed = true;
                job->theirs[which] = true;
                fence();
                co_return;
            }
            if (st.stop_requested()) {
                job->failed = true;
                co_return;
            }
            // unknown: the read-back failed; the next attempt asks again.
        }
        if (_fenced) {
            job->failed = true;
            co_return;
        }
        ++_stats.upload_retries;
        _m.upload_retries[static_cast<std::size_t>(which)].inc();
        if (attempt == 0 || attempt % 10 == 0) {
            log::warn("upload of {} failed ({}); retrying", key, r.error().message);
        }
        auto slept = co_await runtime::sleep(_upload_backoff.delay(attempt), st);
        if (!slept) {
            job->failed = true;
            co_return;
        }
    }
}

// What sits under `key` after a PUT refused as "already exists": our own bytes, another
// owner's, or unknown (the GET failed or the object is gone again; the caller retries).
runtime::task<flush_pipeline::existing> flush_pipeline::compare_existing(const std::string& key,
                                                                         const std::string& body, key_kind kind,
                                                                         std::stop_token st) {
    auto permit = co_await _budget.acquire(io_budget::priority::high, st);
    if (!permit) co_return existing::unknown;
    const auto t0 = _m.now();
    auto got = co_await _store.get(key, std::nullopt, st);
    _m.store_done(store_op::get, kind, t0, 0, got ? got->data.size() : 0, got ? nullptr : &got.error());
    permit->release();
    if (!got) {
        log::warn("{}: cannot read back the existing object ({}); retrying", key, got.error().message);
        co_return existing::unknown;
    }
    co_return got->data == body ? existing::ours : existing::theirs;
}

// A fenced job whose one object is ours and the other another owner's would pair them for
// readers (an index pointing into someone else's segment). Ours goes: what remains is a
// .kfs without .index (restore rebuilds it from the .kfs) or an orphan .index (ignored).
runtime::task<void> flush_pipeline::remove_half_pair(flush_job* job) {
    for (int which = 0; which < 2; ++which) {
        if (!job->stored[which] || !job->theirs[1 - which]) continue;
        const std::string key =
            which == 0 ? segment_key(_ns, _id, job->base) : index_key(_ns, _id, job->base);
        auto st = _gate.stop_token();
        auto permit = co_await _budget.acquire(io_budget::priority::high, st);
        if (!permit) co_return;
        auto r = co_await _store.remove(key, st);
        permit->release();
        if (r) {
            job->stored[which] = false;
            log::info("{}: removed; its pair under the same base is another owner's", key);
        } else {
            log::warn("{}: cannot remove ({}); its pair under the same base is another owner's", key,
                      r.error().message);
        }
    }
}

runtime::task<void> flush_pipeline::run_job(flush_job* job) {
    if (_cfg.mode == upload_mode::parallel) {
        // The idea skiff is built around: both objects in one round trip.
        co_await runtime::when_all(upload(job, 0), upload(job, 1));
    } else {
        co_await upload(job, 0);
        if (!job->failed) co_await upload(job, 1);
    }
    if (_fenced) co_await remove_half_pair(job);
    if (job->link && !job->stored[0]) {
        // Our .kfs is not under the key (another owner's is, or shutdown cut it short): a
        // sidecar we stored describes bytes nobody will read there.
        job->link->kfs = sidecar_link::kfs_state::lost;
        if (job->link->kfst_put) {
            const std::string key = time_index_key(_ns, _id, job->base);
            (void)co_await remove_sidecar(key, _gate.stop_token());
        }
    }
    if (job->done()) {
        job->commit_span = job->trace.child("commit");
        note_upload_done(*job);
    }
    job->finished = true;
    --_uploading;
    _uploading_g.add(-1);
    commit_ready();
    maybe_flush();
    pump();
}

// ---- commit ---------------------------------------------------------------------------------

// Commits finished jobs strictly in offset order and acknowledges their producers.
void flush_pipeline::commit_ready() {
    if (_fenced) {
        // Nothing is committed once fenced, not even our own segments that landed: the new
        // owner restored without them and does not serve them.
        drop_idle_jobs();
        return;
    }
    while (!_jobs.empty()) {
        auto& j = *_jobs.front();
        if (j.done()) {
            // The log first: its high watermark covers this job before anyone is told.
            _on_committed(j);
            for (auto& w : j.waiters) w->set(ack_outcome{std::nullopt, j.flush_ctx});
            _expected_back = std::min<std::int64_t>(_expected_back + static_cast<std::int64_t>(j.waiters.size()), 1 << 16);
            if (_m.enabled) {
                _m.flushes.inc();
                _m.flush_records.inc(static_cast<std::uint64_t>(j.records));
                _m.flush_bytes[0].inc(j.kfs->size());
                _m.flush_bytes[1].inc(j.index->size());
                _m.flush_size.record(j.kfs->size());
                _m.segment_records.record(static_cast<std::uint64_t>(j.records));
                _m.flush_duration.record(clock::now() - j.upload_started);
            }
            j.commit_span.end();
            j.trace.set("status", "ok");
            j.trace.end();
            _jobs.pop_front(); // releases the job's memory units
            continue;
        }
        if (j.failed && _closing) {
            // Shutdown cut this upload short: nothing from here on can be acknowledged.
            abandon_jobs();
        }
        break;
    }
}

// A sealed segment that will never be committed (shutdown cut it short).
void flush_pipeline::abandon(flush_job& j) noexcept {
    _m.flush_failures.inc();
    j.commit_span.end();
    j.trace.set("status", "abandoned");
    j.trace.end();
}

void flush_pipeline::abandon_jobs() {
    for (auto& j : _jobs) {
        for (auto& w : j->waiters) w->set(ack_outcome{append_errc::shutting_down, {}});
        abandon(*j);
    }
    _jobs.clear();
}

// Jobs whose uploads are not running go; a running one keeps its job (it holds a pointer)
// until run_job returns and calls commit_ready again.
void flush_pipeline::drop_idle_jobs() {
    std::erase_if(_jobs, [this](const std::unique_ptr<flush_job>& j) {
        if (j->started && !j->finished) return false;
        abandon(*j);
        return true;
    });
}

void flush_pipeline::fence() {
    if (_fenced) return;
    _fenced = true;
    _m.fences.inc();
    _flush_timer.cancel();
    for (auto& j : _jobs) {
        for (auto& w : j->waiters) w->set(ack_outcome{append_errc::fenced, {}});
        j->waiters.clear();
    }
    for (auto& w : _builder_waiters) w->set(ack_outcome{append_errc::fenced, {}});
    _builder_waiters.clear();
    // The buffered data was never uploaded and never will be.
    _builder.reset();
    _builder_memory.clear();
    _builder_records = 0;
    _first_append.reset();
    _first_waiter.reset();
    _buffered_g.clear();
    drop_idle_jobs();
    if (_on_fenced) _on_fenced();
}

void flush_pipeline::abandon_all() {
    abandon_jobs();
    for (auto& w : _builder_waiters) w->set(ack_outcome{append_errc::shutting_down, {}});
    _builder_waiters.clear();
}

} // namespace skiff::storage::detail
