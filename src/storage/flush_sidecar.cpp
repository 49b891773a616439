// The time-index sidecar of a flush (flush_pipeline.hpp, "The time-index sidecar"): one
// bounded, unhedged, optional PUT beside the pair, and the cleanup that keeps a sidecar from
// describing bytes other than the .kfs under its key.
#include "flush_pipeline.hpp"

#include <skiff/core/log.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/put_rate.hpp>

#include <algorithm>
#include <utility>

namespace skiff::storage::detail {

namespace {
runtime::time_point rnow() { return runtime::reactor::local().now(); }
// As in flush_pipeline.cpp: the round trip assumed before the first upload finished.
constexpr std::int64_t default_rtt_ns = 4'000'000;
// First attempt plus three retries: enough for a transient error, few enough that a store
// refusing sidecars costs little.
constexpr int sidecar_attempts = 4;
} // namespace

runtime::task<void> flush_pipeline::upload_sidecar(std::int64_t base, std::shared_ptr<const std::string> body,
                                                   std::shared_ptr<sidecar_link> link) {
    ++_sidecars;
    struct in_flight {
        int& n;
        ~in_flight() { --n; }
    } counted{_sidecars};
    using kfs_state = sidecar_link::kfs_state;
    const std::string key = time_index_key(_ns, _id, base);
    const std::stop_token gate_st = _gate.stop_token();
    std::string why = "not stored";
    for (int attempt = 0; attempt < sidecar_attempts; ++attempt) {
        if (attempt > 0) {
            if (_closing) break; // close() waits for sidecars: no backoff now
            auto slept = co_await runtime::sleep(_upload_backoff.delay(attempt - 1), gate_st);
            if (!slept) {
                why = "cancelled";
                break;
            }
        }
        // Not our segment after all (fenced, or cut short): nothing to describe.
        if (_fenced || link->kfs == kfs_state::lost) co_return;
        // Each attempt is bounded: a sidecar the store sits on must not hold close() for long.
        const auto rtt = std::clamp<std::int64_t>(8 * (_rtt_ns > 0 ? _rtt_ns : default_rtt_ns), 1'000'000'000,
                                                  10'000'000'000);
        runtime::deadline_scope attempt_deadline(rnow() + runtime::duration(rtt), gate_st);
        const std::stop_token st = attempt_deadline.token();
        auto permit = co_await _budget.acquire(io_budget::priority::normal, st);
        if (!permit) {
            why = attempt_deadline.expired() ? "timed out waiting for a permit" : "cancelled";
            if (gate_st.stop_requested()) break;
            continue;
        }
        if (put_rate* rate = _budget.rate()) rate->record_put(body->size());
        auto t0 = _m.now();
        auto r = co_await _store.put_once(key, std::span<const char>(body->data(), body->size()), true, st);
        _m.store_done(store_op::put, key_kind::kfst, t0, body->size(), 0, r ? nullptr : &r.error());
        permit->release();
        if (r) {
            link->kfst_put = true;
            if (link->kfs == kfs_state::lost || _fenced) {
                (void)co_await remove_sidecar(key, gate_st);
                co_return;
            }
            _m.time_index_writes.inc();
            co_return;
        }
        why = r.error().message;
        if (gate_st.stop_requested()) break;
        if (r.error().code != errc::precondition_failed) continue;
        // Something is stored under the key already: our own earlier attempt (its answer was
        // lost), or a sidecar of other bytes (another owner's, or a stale one).
        auto again = co_await _budget.acquire(io_budget::priority::normal, st);
        if (!again) continue;
        t0 = _m.now();
        auto got = co_await _store.get(key, std::nullopt, st);
        _m.store_done(store_op::get, key_kind::kfst, t0, 0, got ? got->data.size() : 0, got ? nullptr : &got.error());
        again->release();
        if (got && got->data == *body) {
            _m.time_index_writes.inc();
            co_return;
        }
        if (!got) {
            why = got.error().message;
            continue; // gone again (not_found), or unreadable: ask again
        }
        why = "another sidecar is stored under the key";
        // Replaced only once our .kfs is known to be the one under the key; while it is
        // pending, the other sidecar may be the new owner's, describing the new owner's .kfs.
        if (link->kfs == kfs_state::stored && !_fenced) {
            log::info("{}: describes other bytes than the segment under its key; replacing it", key);
            if (!co_await remove_sidecar(key, st)) why = "cannot remove the stale sidecar";
        }
    }
    sidecar_failed(key, why);
}

runtime::task<bool> flush_pipeline::remove_sidecar(const std::string& key, std::stop_token st) {
    auto permit = co_await _budget.acquire(io_budget::priority::normal, st);
    if (!permit) co_return false;
    const auto t0 = _m.now();
    auto r = co_await _store.remove(key, st);
    _m.store_done(store_op::del, key_kind::none, t0, 0, 0, r ? nullptr : &r.error());
    if (!r) log::warn("{}: cannot remove ({})", key, r.error().message);
    co_return static_cast<bool>(r);
}

void flush_pipeline::sidecar_failed(const std::string& key, std::string_view why) {
    _m.time_index_failures.inc();
    if (std::exchange(_sidecar_failure_logged, true)) return;
    log::warn("{}: time-index sidecar not stored ({}); readers fall back to the segment. Further failures of "
              "{}/{} are only counted (skiff_store_time_index_failures_total)",
              key, why, _id.topic, _id.partition);
}

} // namespace skiff::storage::detail
