// Fetch: reads on each partition's owning core, and a long poll across cores when there is
// not enough data yet.
#include "../handlers.hpp"
#include "../idempotence.hpp"
#include "../routing.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <algorithm>
#include <chrono>
#include <limits>

namespace skiff::broker {

namespace {

struct read_outcome {
    kafka::error_code error = kerr::none;
    std::int64_t high_watermark = -1;
    std::int64_t last_stable_offset = -1;
    // read_committed: the aborted transactions in what was read (null otherwise, as Kafka).
    std::optional<std::vector<txn::aborted_txn>> aborted;
    std::int64_t log_start_offset = -1;
    std::string records;
};

// The offset after the last whole batch of `records` (`from` when there is none).
std::int64_t records_end(const std::string& records, std::int64_t from) {
    std::int64_t end = from;
    std::size_t at = 0;
    while (at < records.size()) {
        auto b = storage::parse_batch(std::span<const char>(records.data() + at, records.size() - at), false);
        if (!b) break;
        end = b->next_offset();
        at += b->size();
    }
    return end;
}

runtime::task<read_outcome> read_on_owner(shard& sh, std::string topic, std::int32_t partition, std::int64_t offset,
                                          std::size_t max_bytes, std::int32_t current_leader_epoch,
                                          bool read_committed) {
    read_outcome out;
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        // A partition still restoring: Kafka's Fetch never answers LEADER_NOT_AVAILABLE (a
        // Metadata error; the Java consumer and kafka-python fail the poll on it) but
        // NOT_LEADER_OR_FOLLOWER for a partition it does not serve yet
        // (ReplicaManager.getPartitionOrError), which consumers answer by refreshing metadata.
        out.error = owned.error == kerr::leader_not_available ? kerr::not_leader_or_follower : owned.error;
        co_return out;
    }
    if (auto e = leader_epoch_error(*owned.slot, current_leader_epoch); e != kerr::none) {
        out.error = e;
        co_return out;
    }
    auto& log = *owned.slot->log;
    partition_slot* slot = owned.slot;
    // The partition's transactions come back with its producers after a restart; a
    // read_committed fetch needs them before it can say where the stable part ends.
    if (read_committed && !slot->producers_loaded) co_await ensure_producers_loaded(&sh, slot, topic, partition);
    out.high_watermark = log.high_watermark();
    out.log_start_offset = log.log_start_offset();
    out.last_stable_offset = slot->producers_loaded ? slot->txns.last_stable_offset(out.high_watermark) : out.high_watermark;
    const std::int64_t end = read_committed ? out.last_stable_offset : out.high_watermark;
    if (read_committed) out.aborted.emplace();
    if (max_bytes == 0 || offset == out.high_watermark) co_return out;
    if (read_committed && offset >= end && offset <= out.high_watermark) co_return out; // waiting on an open transaction
    auto r = co_await log.read(offset, max_bytes);
    if (!r) {
        switch (r.error().code) {
        case storage::errc::invalid_argument: out.error = kerr::offset_out_of_range; break;
        default:
            log::warn("fetch {}/{} at {}: {}", topic, partition, offset, r.error().message);
            out.error = kerr::kafka_storage_error;
        }
        co_return out;
    }
    out.high_watermark = r->high_watermark;
    out.log_start_offset = r->log_start_offset;
    out.records = std::move(r->records);
    if (read_committed) {
        // Only what lies below the LSO, with the aborted transactions found in it.
        // Both walks of the records are skipped in the common case (librdkafka reads committed
        // by default): nothing open, so nothing to cut, and nothing aborted to list.
        const std::int64_t lso = slot->txns.last_stable_offset(out.high_watermark);
        out.last_stable_offset = lso;
        if (lso < out.high_watermark) out.records.resize(txn::cut_records_before(out.records, lso));
        if (!out.records.empty() && slot->txns.aborted_count() > 0) {
            for (auto& a : slot->txns.aborted_between(offset, records_end(out.records, offset))) out.aborted->push_back(a);
        }
    }
    co_return out;
}

// Long poll across cores: one waiter per partition on its owner; the first that sees data
// wakes the fetch, which then stops the others through their owners' reactors (a stop
// callback must run on the core whose state it touches).
struct wait_any {
    runtime::semaphore fired{0, "fetch-wait"};
};

runtime::task<bool> wait_on_owner(shard& sh, std::string topic, std::int32_t partition, std::int64_t offset,
                                  std::chrono::milliseconds timeout, std::shared_ptr<std::stop_source> ss,
                                  bool read_committed) {
    auto owned = co_await find_owned(sh, std::move(topic), partition);
    if (!owned.slot) co_return false;
    if (read_committed && owned.slot->log->high_watermark() > offset) {
        // There is data, held back by an open transaction: the LSO moves without a wake-up of
        // its own (a marker or a timeout abort), so look again shortly.
        auto slept = co_await runtime::sleep(std::min<std::chrono::milliseconds>(timeout, std::chrono::milliseconds(20)),
                                             ss->get_token());
        co_return static_cast<bool>(slept);
    }
    co_return co_await owned.slot->log->wait_for_data(offset, timeout, ss->get_token());
}

runtime::task<void> remote_wait(shard* local, std::shared_ptr<wait_any> w, std::string topic, std::int32_t partition,
                                std::int64_t offset, std::chrono::milliseconds timeout,
                                std::shared_ptr<std::stop_source> ss, bool read_committed) {
    const bool got = co_await on_partition_owner(*local, topic, partition, [&](shard& o) {
        return wait_on_owner(o, topic, partition, offset, timeout, ss, read_committed);
    });
    if (got) w->fired.signal(1);
}

struct fetch_item {
    std::size_t topic = 0, partition = 0; // indexes into the response
    std::string name;
    std::int32_t index = 0;
    std::int64_t offset = 0;
    std::size_t max_bytes = 0;
    std::int32_t current_leader_epoch = -1;
};

} // namespace

runtime::task<kafka::FetchResponse> fetch(shard& sh, kafka::FetchRequest req) {
    kafka::FetchResponse r;
    r.session_id = 0; // sessionless: every fetch names its partitions
    std::vector<fetch_item> items;
    for (auto& ft : req.topics) {
        kafka::FetchResponse::FetchableTopicResponse tr;
        tr.topic = ft.topic;
        tr.topic_id = ft.topic_id;
        const topic_info* info = sh.cat->find(ft.topic);
        for (auto& fp : ft.partitions) {
            kafka::FetchResponse::PartitionData pd;
            pd.partition_index = fp.partition;
            pd.high_watermark = -1;
            pd.last_stable_offset = -1;
            pd.log_start_offset = -1;
            pd.preferred_read_replica = -1;
            if (!info || fp.partition < 0 || fp.partition >= info->partitions) {
                pd.error_code = kerr::unknown_topic_or_partition;
            } else if (fp.partition_max_bytes < 0) {
                pd.error_code = kerr::invalid_fetch_size;
            } else {
                fetch_item it;
                it.topic = r.responses.size();
                it.partition = tr.partitions.size();
                it.name = ft.topic;
                it.index = fp.partition;
                it.offset = fp.fetch_offset;
                it.max_bytes = static_cast<std::size_t>(fp.partition_max_bytes);
                it.current_leader_epoch = fp.current_leader_epoch;
                items.push_back(std::move(it));
            }
            tr.partitions.push_back(std::move(pd));
        }
        r.responses.push_back(std::move(tr));
    }

    // KIP-98: isolation_level 1 reads only below each partition's last stable offset.
    const bool read_committed = req.isolation_level == 1;
    const std::size_t response_max =
        req.max_bytes > 0 ? static_cast<std::size_t>(req.max_bytes) : std::numeric_limits<std::int32_t>::max();
    const std::size_t min_bytes = req.min_bytes > 0 ? static_cast<std::size_t>(req.min_bytes) : 0;
    const auto started = std::chrono::steady_clock::now();
    const auto max_wait = std::chrono::milliseconds(std::clamp(req.max_wait_ms, 0, 300000));
    std::vector<read_outcome> got;
    for (;;) {
        std::vector<runtime::task<read_outcome>> reads;
        for (auto& it : items) {
            const fetch_item* ip = &it;
            const std::size_t max = std::min(it.max_bytes, response_max);
            reads.push_back(on_partition_owner(sh, it.name, it.index, [ip, max, read_committed](shard& o) {
                return read_on_owner(o, ip->name, ip->index, ip->offset, max, ip->current_leader_epoch, read_committed);
            }));
        }
        auto results = co_await runtime::when_all(std::move(reads));
        got.clear();
        std::size_t total = 0;
        bool any_error = false;
        for (auto& s : results) {
            got.push_back(std::move(s));
            total += got.back().records.size();
            any_error = any_error || got.back().error != kerr::none;
        }
        const auto waited = std::chrono::steady_clock::now() - started;
        if (items.empty() || total >= min_bytes || any_error || waited >= max_wait ||
            sh.stop.stop_requested()) {
            break;
        }
        // Nothing (enough) yet: wait for any partition to pass its fetch offset.
        auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(max_wait - waited);
        auto w = std::make_shared<wait_any>();
        std::vector<std::pair<unsigned, std::shared_ptr<std::stop_source>>> stops;
        for (std::size_t i = 0; i < items.size(); ++i) {
            auto& it = items[i];
            const unsigned owner = partition_owner(it.name, it.index, sh.shared->cores);
            auto ss = std::make_shared<std::stop_source>();
            stops.emplace_back(owner, ss);
            auto spawned =
                sh.background.spawn(remote_wait(&sh, w, it.name, it.index, it.offset, remaining, ss, read_committed));
            (void)spawned;
        }
        {
            runtime::deadline_scope scope(runtime::reactor::local().now() + remaining, sh.stop.get_token());
            auto fired = co_await w->fired.acquire(1, scope.token());
            if (fired) fired->consume();
        }
        for (auto& [owner, ss] : stops) {
            if (auto* re = runtime::smp::reactor_of(owner)) {
                re->post([ss = ss] { ss->request_stop(); });
            } else {
                ss->request_stop();
            }
        }
        // Read again: the loop answers what is there now, or waits on if it is still too little
        // and time remains.
    }

    // The response's byte budget: partitions in request order; the first one with data is
    // always served whole (Kafka's "at least one batch" rule), later ones while they fit.
    std::size_t used = 0;
    bool served_one = false;
    sh.fetch.requests.inc();
    for (std::size_t i = 0; i < items.size() && i < got.size(); ++i) {
        auto& it = items[i];
        auto& o = got[i];
        auto& pd = r.responses[it.topic].partitions[it.partition];
        pd.error_code = o.error;
        pd.high_watermark = o.high_watermark;
        pd.last_stable_offset = o.last_stable_offset;
        if (o.aborted) {
            std::vector<kafka::FetchResponse::AbortedTransaction> list;
            for (auto& a : *o.aborted) {
                kafka::FetchResponse::AbortedTransaction at;
                at.producer_id = a.producer_id;
                at.first_offset = a.first_offset;
                list.push_back(at);
            }
            pd.aborted_transactions = std::move(list);
        } else {
            pd.aborted_transactions.reset();
        }
        pd.log_start_offset = o.log_start_offset;
        if (o.error != kerr::none) sh.fetch.errors.inc();
        if (o.records.empty()) continue;
        if (served_one && used + o.records.size() > response_max) continue;
        used += o.records.size();
        served_one = true;
        pd.records = std::move(o.records);
    }
    for (auto& tr : r.responses) {
        for (auto& pd : tr.partitions) {
            if (!pd.records) pd.records = std::string();
        }
    }
    sh.fetch_bytes.inc(used);
    sh.fetch.latency.record(std::chrono::steady_clock::now() - started);
    co_return r;
}

} // namespace skiff::broker
