#include "idempotence.hpp"
#include "txn/abort_index.hpp"

#include <skiff/core/log.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/storage/log_walk.hpp>

#include <algorithm>
#include <chrono>

namespace skiff::broker {

namespace {

using namespace std::chrono_literals;

std::uint64_t now_ms() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

std::int32_t last_seq_of(const storage::batch_view& b) {
    return producer_table::next_seq(b.base_sequence, std::max(b.record_count, 1) - 1);
}

// The aborted transactions that began before the window below, from the partition's abort
// index (txn/abort_index.hpp): one LIST, no GET. Entries below the log start are forgotten and
// their objects deleted (retention or DeleteRecords took the data they described).
runtime::task<void> load_abort_index(partition_slot* slot, shard* sh, const std::string& topic, std::int32_t partition,
                                     std::int64_t log_start, std::int64_t from) {
    const std::string prefix = storage::partition_prefix(sh->cfg().ns, storage::partition_id(topic, partition));
    std::string token;
    std::vector<std::string> stale;
    std::size_t restored = 0;
    for (;;) {
        std::string pfx = txn::abort_index_prefix(prefix);
        auto page = co_await sh->store->list(std::move(pfx), std::string(), std::move(token), 1000, {});
        if (!page) {
            log::warn("partition {}/{}: listing its abort index failed: {}; read_committed consumers may see aborted "
                      "records older than the last {} offsets",
                      topic, partition, page.error().message, sh->cfg().producer_state_window);
            break;
        }
        for (auto& obj : page->objects) {
            auto t = txn::parse_abort_index_key(prefix, obj.key);
            if (!t) continue;
            if (t->last_offset < log_start) {
                stale.push_back(obj.key);
            } else if (t->first_offset < from) {
                // Begun before the window: the replay cannot rebuild it, even when its marker
                // is inside the window (the replay ignores a marker of a transaction it did not
                // see open). Those begun inside the window the replay finds itself.
                slot->txns.restore_aborted(*t);
                ++restored;
            }
        }
        if (page->next_token.empty()) break;
        token = std::move(page->next_token);
    }
    if (restored) log::info("partition {}/{}: {} aborted transaction(s) from its abort index", topic, partition, restored);
    // A failed delete only leaves an entry the next load skips again.
    if (!stale.empty()) (void)co_await sh->store->remove_many(std::move(stale), {});
}

// Rebuilds the partition's producer table from the batch headers of its last offsets (up to
// `window` of them), so that a batch stored just before a crash and retried after it is
// recognised as a duplicate.
runtime::task<void> load_producers(partition_slot* slot, shard* sh, std::string topic, std::int32_t partition) {
    const std::int64_t window = sh->cfg().producer_state_window;
    const std::int64_t log_start = slot->log->log_start_offset();
    const std::int64_t from = std::max(log_start, slot->log->high_watermark() - window);
    co_await load_abort_index(slot, sh, topic, partition, log_start, from);
    std::size_t batches = 0;
    auto walked = co_await storage::walk_committed(*slot->log, from, [slot, &batches](const storage::batch_view& b) {
        // Transactions: open ones and aborted ones come back with the producers (a window of
        // the log's tail; docs/transactions.md says what is older).
        slot->txns.on_batch(b);
        if (b.is_control()) {
            if (b.producer_id >= 0) slot->producers.fence(b.producer_id, b.producer_epoch);
            return true;
        }
        if (b.producer_id >= 0) {
            slot->producers.replay(b.producer_id, b.producer_epoch, b.base_sequence, last_seq_of(b), b.base_offset,
                                   b.last_offset(), now_ms(), b.max_timestamp);
            ++batches;
        }
        return true;
    });
    if (!walked) {
        log::warn("partition {}/{}: rebuilding idempotent-producer state stopped early: {}", topic, partition,
                  walked.error().message);
    }
    if (batches) log::info("partition {}/{}: producer state rebuilt from {} batches", topic, partition, batches);
}

} // namespace

runtime::task<void> ensure_producers_loaded(shard* sh, partition_slot* slot, std::string topic, std::int32_t partition) {
    while (!slot->producers_loaded) {
        if (auto loading = slot->producers_loading) {
            // Waiters resume in arrival order, so their appends keep the order of their requests.
            auto done = co_await loading->wait();
            (void)done; // set or broken: look again
            continue;
        }
        auto loading = std::make_shared<runtime::oneshot<void>>();
        slot->producers_loading = loading;
        co_await load_producers(slot, sh, topic, partition);
        slot->producers_loaded = true;
        slot->producers_loading.reset();
        loading->set();
    }
}

idempotence_guard::idempotence_guard(shard& sh, partition_slot& slot, std::string topic, std::int32_t partition,
                                     const storage::batch_view& batch)
    : _sh(sh), _slot(slot), _topic(std::move(topic)), _partition(partition), _pid(batch.producer_id),
      _epoch(batch.producer_epoch), _base_seq(batch.base_sequence), _last_seq(last_seq_of(batch)),
      _max_timestamp(batch.max_timestamp) {}

idempotence_guard::~idempotence_guard() { abort(); }

runtime::task<producer_table::check_result> idempotence_guard::reserve() {
    if (!idempotent()) co_return producer_table::check_result{};
    if (!_slot.producers_loaded) co_await ensure_producers_loaded(&_sh, &_slot, _topic, _partition);
    using v = producer_table::verdict;
    for (int attempt = 0;; ++attempt) {
        auto chk = _slot.producers.check_and_reserve(_pid, _epoch, _base_seq, _last_seq, now_ms());
        if (chk.v == v::accept) _reserved = true;
        // The original is being appended right now: its outcome decides this answer.
        if (chk.v != v::duplicate_pending || attempt >= 2000) co_return chk;
        (void)co_await runtime::sleep(5ms);
    }
}

void idempotence_guard::complete(std::int64_t base, std::int64_t last) {
    if (!_reserved) return;
    _reserved = false;
    _slot.producers.complete(_pid, _epoch, _base_seq, base, last, _max_timestamp);
}

void idempotence_guard::abort() {
    if (!_reserved) return;
    _reserved = false;
    _slot.producers.abort(_pid, _epoch, _base_seq);
}

void idempotence_guard::complete_when_durable(std::int64_t base, std::int64_t last) {
    if (!_reserved) return;
    _reserved = false;
    // The log calls back exactly once: durable, or closed first (topic deleted, shutdown), when
    // the table is of no further use and the slot may be half destroyed (its producer table
    // goes before its log), so it is not touched then.
    producer_table* table = &_slot.producers;
    const std::int64_t pid = _pid;
    const std::int16_t epoch = _epoch;
    const std::int32_t base_seq = _base_seq;
    const std::int64_t max_ts = _max_timestamp;
    _slot.log->on_durable(last, [table, pid, epoch, base_seq, base, last, max_ts](bool durable) {
        if (durable) table->complete(pid, epoch, base_seq, base, last, max_ts);
    });
}

} // namespace skiff::broker
