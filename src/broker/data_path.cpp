// Produce, Fetch and ListOffsets: the requests that touch partition logs. Each partition's
// work runs on its owning core; a request fans out to the owners and gathers the answers.
#include "handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/metrics/trace.hpp>
#include <skiff/runtime/smp.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/record_batch.hpp>

#include <chrono>
#include <functional>

namespace skiff::broker {

namespace {

using namespace std::chrono_literals;

std::uint64_t now_ms() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
}

// The owning core's partition, or the Kafka error a request for it gets: unknown partition,
// or a restore that failed (retriable; NOT_LEADER while shutting down). Completes without
// suspending when the partition is open, which the produce ordering relies on.
struct owned_partition {
    partition_slot* slot = nullptr;
    std::int16_t error = kerr::none;
    std::string message;
};

runtime::task<owned_partition> find_owned(shard* sh, std::string topic, std::int32_t partition) {
    owned_partition out;
    auto r = co_await local_partition(*sh, std::move(topic), partition);
    if (!r) {
        out.error = r.error().code == storage::errc::cancelled ? kerr::not_leader_or_follower
                                                               : kerr::leader_not_available;
        out.message = r.error().message;
    } else if (!*r) {
        out.error = kerr::unknown_topic_or_partition;
    } else {
        out.slot = *r;
    }
    co_return out;
}

// Calls visit(batch) for the committed batches from offset `from` on, in order, until it
// returns false or the high watermark is reached. A read returns whole batches, so the first
// one may start before `from`. Fails only if a read fails.
runtime::task<result<void, storage::store_error>> walk_log(storage::partition_log& log, std::int64_t from,
                                                           std::function<bool(const storage::batch_view&)> visit) {
    std::int64_t pos = from;
    while (pos < log.high_watermark()) {
        auto r = co_await log.read(pos, 4u << 20);
        if (!r) co_return failure{r.error()};
        if (r->records.empty()) break;
        std::span<const char> rest(r->records);
        std::int64_t next = pos;
        while (!rest.empty()) {
            auto b = storage::parse_batch(rest, false);
            if (!b) break;
            if (!visit(*b)) co_return ok();
            next = b->next_offset();
            rest = rest.subspan(b->size());
        }
        if (next <= pos) break;
        pos = next;
    }
    co_return ok();
}

// ---- Produce ------------------------------------------------------------------------------

struct produce_outcome {
    std::int16_t error = kerr::none;
    std::string message;
    std::int64_t base_offset = -1;
    std::int64_t log_start_offset = -1;
    std::int64_t log_append_time_ms = -1;
    std::vector<record_error> record_errors;
};

std::int64_t wall_now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::int16_t append_error_code(storage::append_errc c) {
    switch (c) {
    case storage::append_errc::corrupt_message: return kerr::corrupt_message;
    case storage::append_errc::unsupported_version: return kerr::unsupported_for_message_format;
    case storage::append_errc::timed_out: return kerr::request_timed_out;
    case storage::append_errc::shutting_down: return kerr::not_leader_or_follower;
    case storage::append_errc::cancelled: return kerr::request_timed_out;
    }
    return kerr::unknown_server_error;
}

// Waits until [.., last] is committed: a duplicate is acknowledged like its original.
runtime::task<bool> durable_through(storage::partition_log& log, std::int64_t last, std::chrono::milliseconds timeout) {
    if (log.high_watermark() > last) co_return true;
    co_return co_await log.wait_for_data(last, timeout);
}

// A timed-out idempotent append: when its data does become durable, record its offsets so
// the producer's retry is answered as a duplicate instead of waiting forever on a reservation.
// The slot is looked up again after every wait: a deleted topic takes its partitions away.
runtime::task<void> complete_when_durable(shard* sh, std::string topic, std::int32_t partition, std::int64_t pid,
                                          std::int16_t epoch, std::int32_t base_seq, std::int64_t base,
                                          std::int64_t last) {
    auto st = sh->background.stop_token();
    const auto key = std::pair{std::move(topic), partition};
    while (!st.stop_requested()) {
        auto it = sh->parts.find(key);
        if (it == sh->parts.end()) co_return;
        partition_slot* slot = it->second.get();
        if (slot->log->high_watermark() > last) {
            slot->producers.complete(pid, epoch, base_seq, base, last);
            co_return;
        }
        auto slept = co_await runtime::sleep(std::chrono::milliseconds(50), st);
        (void)slept;
    }
}

// Rebuilds the partition's producer table from the batch headers of its last offsets (up to
// `window` of them), so that a batch stored just before a crash and retried after it is
// recognised as a duplicate. Runs once per opened partition, before its first idempotent
// append; concurrent idempotent appends wait for it and then proceed in arrival order.
runtime::task<void> load_producers(partition_slot* slot, std::string topic, std::int32_t partition) {
    constexpr std::int64_t window = 50000;
    const std::int64_t from = std::max(slot->log->log_start_offset(), slot->log->high_watermark() - window);
    std::size_t batches = 0;
    auto walked = co_await walk_log(*slot->log, from, [slot, &batches](const storage::batch_view& b) {
        if (b.producer_id >= 0) {
            slot->producers.replay(b.producer_id, b.producer_epoch, b.base_sequence,
                                   producer_table::next_seq(b.base_sequence, std::max(b.record_count, 1) - 1),
                                   b.base_offset, b.last_offset(), now_ms());
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

runtime::task<void> ensure_producers_loaded(partition_slot* slot, std::string topic, std::int32_t partition) {
    while (!slot->producers_loaded) {
        if (auto sem = slot->producers_loading) {
            auto u = co_await sem->acquire(1); // broken() when the load is done: wakes all, FIFO
            continue;
        }
        auto sem = std::make_shared<runtime::semaphore>(0, "producers-load");
        slot->producers_loading = sem;
        co_await load_producers(slot, topic, partition);
        slot->producers_loaded = true;
        slot->producers_loading.reset();
        sem->broken();
    }
}

// Runs on the partition's core. No suspension before the append is issued when the
// partition is open, so appends keep the order in which requests were read.
runtime::task<produce_outcome> append_on_owner(shard* sh, std::string topic, std::int32_t partition,
                                               std::span<const char> records, std::int16_t acks) {
    produce_outcome out;
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        out.error = owned.error;
        out.message = std::move(owned.message);
        co_return out;
    }
    partition_slot* slot = owned.slot;
    auto& log = *slot->log;
    out.log_start_offset = log.log_start_offset();
    const auto mode = acks == -1 ? storage::ack_mode::durable
                                 : (acks == 1 ? storage::ack_mode::leader : storage::ack_mode::none);

    // Kafka's produce rules (produce_validation.hpp); `validated` may own a rewritten batch and
    // lives until the append below has completed.
    const topic_policy policy = policy_of(*sh, topic); // a copy: the map changes with the catalog
    auto validated = validate_produce(records, policy, wall_now_ms());
    if (!validated) {
        out.error = static_cast<std::int16_t>(validated.error().code);
        out.message = std::move(validated.error().message);
        out.record_errors = std::move(validated.error().record_errors);
        co_return out;
    }
    const storage::batch_view* first = &validated->view;
    const bool idempotent = first->producer_id >= 0;
    if (idempotent && !slot->producers_loaded) co_await ensure_producers_loaded(slot, topic, partition);
    const std::int64_t pid = first->producer_id;
    const std::int16_t epoch = first->producer_epoch;
    const std::int32_t base_seq = first->base_sequence;
    if (idempotent) {
        const std::int32_t last_seq = producer_table::next_seq(base_seq, std::max(first->record_count, 1) - 1);
        for (int attempt = 0;; ++attempt) {
            auto chk = slot->producers.check_and_reserve(pid, epoch, base_seq, last_seq, now_ms());
            using v = producer_table::verdict;
            if (chk.v == v::accept) break;
            if (chk.v == v::duplicate) {
                // Already written: answer with the original offsets, once they are durable
                // if the producer asked for that.
                if (mode == storage::ack_mode::durable &&
                    !co_await durable_through(log, chk.last_offset, sh->cfg().log.append_timeout)) {
                    out.error = kerr::request_timed_out;
                    co_return out;
                }
                out.base_offset = chk.base_offset;
                co_return out;
            }
            if (chk.v == v::duplicate_pending && attempt < 2000) {
                // The original is being appended right now: its outcome decides this answer.
                (void)co_await runtime::sleep(5ms);
                continue;
            }
            out.error = chk.v == v::stale_epoch ? kerr::invalid_producer_epoch
                        : chk.v == v::out_of_order ? kerr::out_of_order_sequence_number
                                                   : kerr::request_timed_out;
            co_return out;
        }
    }
    // A produce trace per partition append, linked to the flush that made it durable, so an
    // operator sees in /traces how much of a produce's latency each upload took.
    auto span = metrics::span::root("produce", metrics::volume::high);
    if (span.active()) {
        span.set("topic", topic);
        span.set("partition", partition);
        span.set("acks", static_cast<std::int64_t>(acks));
        span.set("bytes", static_cast<std::int64_t>(records.size()));
    }
    auto r = co_await log.append(first->bytes, mode);
    if (span.active()) {
        if (r) {
            span.set("base_offset", r->base_offset);
            span.link(r->flush_span);
        } else {
            span.set("error", static_cast<std::int64_t>(append_error_code(r.error().code)));
        }
    }
    if (!r) {
        out.error = append_error_code(r.error().code);
        out.message = r.error().message;
        // A timed-out append is still being written: its sequence stays reserved, so a retry
        // is not written twice, and once it is durable the retry is answered as a duplicate
        // with these offsets. Anything else was not written.
        if (idempotent) {
            if (r.error().code == storage::append_errc::timed_out && r.error().last_offset >= 0) {
                (void)sh->background.spawn(complete_when_durable(sh, topic, partition, pid, epoch, base_seq,
                                                                 r.error().base_offset, r.error().last_offset));
            } else {
                slot->producers.abort(pid, epoch, base_seq);
            }
        }
        co_return out;
    }
    if (idempotent) slot->producers.complete(pid, epoch, base_seq, r->base_offset, r->last_offset);
    out.base_offset = r->base_offset;
    if (policy.log_append_time) out.log_append_time_ms = first->max_timestamp; // the broker time it stored
    co_return out;
}

runtime::task<produce_outcome> produce_partition(shard* local, std::string topic, std::int32_t partition,
                                                 const std::string* records, std::int16_t acks) {
    const unsigned owner = partition_owner(topic, partition, local->shared->cores);
    shard* target = local->shared->shards[owner];
    // Pointer captures only (see handlers.cpp on g++ 12 and lambda temporaries in co_await).
    const std::string* tp = &topic;
    co_return co_await runtime::submit_to(owner, [target, tp, partition, records, acks] {
        return append_on_owner(target, *tp, partition, std::span<const char>(*records), acks);
    });
}

} // namespace

runtime::task<std::string> handle_produce(request_ctx ctx, kafka::ProduceRequest req, bool& no_response) {
    no_response = req.acks == 0;
    const auto started = std::chrono::steady_clock::now();
    auto& m = ctx.sh.produce[req.acks == 0 ? 0 : (req.acks == 1 ? 1 : 2)];
    kafka::ProduceResponse r;
    std::int16_t blanket = kerr::none;
    if (req.acks != 0 && req.acks != 1 && req.acks != -1) blanket = kerr::invalid_required_acks;
    if (req.transactional_id) blanket = kerr::transactional_id_authorization_failed;

    // Every partition is issued before the first suspension (see connection.cpp).
    struct where {
        std::size_t topic, partition;
    };
    std::vector<where> issued;
    std::vector<runtime::task<produce_outcome>> work;
    for (std::size_t ti = 0; ti < req.topic_data.size(); ++ti) {
        auto& td = req.topic_data[ti];
        kafka::ProduceResponse::TopicProduceResponse tr;
        tr.name = td.name;
        const topic_info* info = ctx.sh.cat->find(td.name);
        for (std::size_t pi = 0; pi < td.partition_data.size(); ++pi) {
            auto& pd = td.partition_data[pi];
            kafka::ProduceResponse::PartitionProduceResponse pr;
            pr.index = pd.index;
            pr.base_offset = -1;
            pr.log_append_time_ms = -1;
            pr.log_start_offset = -1;
            if (blanket != kerr::none) {
                pr.error_code = blanket;
            } else if (!info || pd.index < 0 || pd.index >= info->partitions) {
                pr.error_code = kerr::unknown_topic_or_partition;
            } else if (!pd.records || pd.records->empty()) {
                pr.error_code = kerr::invalid_record;
                pr.error_message = "the partition has no records";
            } else {
                ctx.sh.produce_bytes.inc(pd.records->size());
                issued.push_back(where{ti, pi});
                work.push_back(produce_partition(&ctx.sh, td.name, pd.index, &*pd.records, req.acks));
            }
            tr.partition_responses.push_back(std::move(pr));
        }
        r.responses.push_back(std::move(tr));
    }
    auto results = co_await runtime::when_all(std::move(work));
    for (std::size_t i = 0; i < issued.size(); ++i) {
        auto& pr = r.responses[issued[i].topic].partition_responses[issued[i].partition];
        produce_outcome& o = results[i];
        pr.error_code = o.error;
        pr.base_offset = o.base_offset;
        pr.log_start_offset = o.log_start_offset;
        if (!o.message.empty() && o.error != kerr::none) pr.error_message = o.message;
        pr.log_append_time_ms = o.log_append_time_ms;
        for (auto& e : o.record_errors) {
            kafka::ProduceResponse::BatchIndexAndErrorMessage be;
            be.batch_index = e.batch_index;
            be.batch_index_error_message = std::move(e.message);
            pr.record_errors.push_back(std::move(be));
        }
    }
    for (auto& tr : r.responses) {
        for (auto& pr : tr.partition_responses) {
            if (pr.error_code != kerr::none) m.errors.inc();
        }
    }
    m.requests.inc();
    m.latency.record(std::chrono::steady_clock::now() - started);
    co_return respond(r, ctx);
}

// ---- Fetch --------------------------------------------------------------------------------

namespace {

struct read_outcome {
    std::int16_t error = kerr::none;
    std::int64_t high_watermark = -1;
    std::int64_t log_start_offset = -1;
    std::string records;
};

runtime::task<read_outcome> read_on_owner(shard* sh, std::string topic, std::int32_t partition, std::int64_t offset,
                                          std::size_t max_bytes) {
    read_outcome out;
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        out.error = owned.error;
        co_return out;
    }
    auto& log = *owned.slot->log;
    out.high_watermark = log.high_watermark();
    out.log_start_offset = log.log_start_offset();
    if (max_bytes == 0 || offset == out.high_watermark) co_return out;
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
    co_return out;
}

runtime::task<read_outcome> read_partition(shard* local, std::string topic, std::int32_t partition, std::int64_t offset,
                                           std::size_t max_bytes) {
    const unsigned owner = partition_owner(topic, partition, local->shared->cores);
    shard* target = local->shared->shards[owner];
    const std::string* tp = &topic;
    co_return co_await runtime::submit_to(owner, [target, tp, partition, offset, max_bytes] {
        return read_on_owner(target, *tp, partition, offset, max_bytes);
    });
}

// Long poll across cores: one waiter per partition on its owner; the first that sees data
// wakes the fetch, which then stops the others through their owners' reactors (a stop
// callback must run on the core whose state it touches).
struct wait_any {
    runtime::semaphore fired{0, "fetch-wait"};
};

runtime::task<bool> wait_on_owner(shard* sh, std::string topic, std::int32_t partition, std::int64_t offset,
                                  std::chrono::milliseconds timeout, std::shared_ptr<std::stop_source> ss) {
    auto owned = co_await find_owned(sh, std::move(topic), partition);
    if (!owned.slot) co_return false;
    co_return co_await owned.slot->log->wait_for_data(offset, timeout, ss->get_token());
}

runtime::task<void> remote_wait(std::shared_ptr<wait_any> w, unsigned owner, shard* target, std::string topic,
                                std::int32_t partition, std::int64_t offset, std::chrono::milliseconds timeout,
                                std::shared_ptr<std::stop_source> ss) {
    const std::string* tp = &topic;
    const std::shared_ptr<std::stop_source>* sp = &ss;
    const bool got = co_await runtime::submit_to(owner, [target, tp, partition, offset, timeout, sp] {
        return wait_on_owner(target, *tp, partition, offset, timeout, *sp);
    });
    if (got) w->fired.signal(1);
}

struct fetch_item {
    std::size_t topic = 0, partition = 0; // indexes into the response
    std::string name;
    std::int32_t index = 0;
    std::int64_t offset = 0;
    std::size_t max_bytes = 0;
};

} // namespace

runtime::task<std::string> handle_fetch(request_ctx ctx, kafka::FetchRequest req) {
    kafka::FetchResponse r;
    r.session_id = 0; // sessionless: every fetch names its partitions
    std::vector<fetch_item> items;
    for (auto& ft : req.topics) {
        kafka::FetchResponse::FetchableTopicResponse tr;
        tr.topic = ft.topic;
        tr.topic_id = ft.topic_id;
        const topic_info* info = ctx.sh.cat->find(ft.topic);
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
                items.push_back(std::move(it));
            }
            tr.partitions.push_back(std::move(pd));
        }
        r.responses.push_back(std::move(tr));
    }

    const std::size_t response_max =
        req.max_bytes > 0 ? static_cast<std::size_t>(req.max_bytes) : std::numeric_limits<std::int32_t>::max();
    const std::size_t min_bytes = req.min_bytes > 0 ? static_cast<std::size_t>(req.min_bytes) : 0;
    const auto started = std::chrono::steady_clock::now();
    const auto max_wait = std::chrono::milliseconds(std::clamp(req.max_wait_ms, 0, 300000));
    std::vector<read_outcome> got;
    for (;;) {
        std::vector<runtime::task<read_outcome>> reads;
        for (auto& it : items) {
            reads.push_back(read_partition(&ctx.sh, it.name, it.index, it.offset, std::min(it.max_bytes, response_max)));
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
            ctx.sh.stop.stop_requested()) {
            break;
        }
        // Nothing (enough) yet: wait for any partition to pass its fetch offset.
        auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(max_wait - waited);
        auto w = std::make_shared<wait_any>();
        std::vector<std::pair<unsigned, std::shared_ptr<std::stop_source>>> stops;
        for (std::size_t i = 0; i < items.size(); ++i) {
            auto& it = items[i];
            const unsigned owner = partition_owner(it.name, it.index, ctx.sh.shared->cores);
            auto ss = std::make_shared<std::stop_source>();
            stops.emplace_back(owner, ss);
            auto spawned = ctx.sh.background.spawn(
                remote_wait(w, owner, ctx.sh.shared->shards[owner], it.name, it.index, it.offset, remaining, ss));
            (void)spawned;
        }
        {
            runtime::deadline_scope scope(runtime::reactor::local().now() + remaining, ctx.sh.stop.get_token());
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
    ctx.sh.fetch.requests.inc();
    for (std::size_t i = 0; i < items.size() && i < got.size(); ++i) {
        auto& it = items[i];
        auto& o = got[i];
        auto& pd = r.responses[it.topic].partitions[it.partition];
        pd.error_code = o.error;
        pd.high_watermark = o.high_watermark;
        pd.last_stable_offset = o.high_watermark; // no transactions: everything is stable
        pd.log_start_offset = o.log_start_offset;
        if (o.error != kerr::none) ctx.sh.fetch.errors.inc();
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
    ctx.sh.fetch_bytes.inc(used);
    ctx.sh.fetch.latency.record(std::chrono::steady_clock::now() - started);
    co_return respond(r, ctx);
}

// ---- ListOffsets ----------------------------------------------------------------------------

namespace {

struct offset_outcome {
    std::int16_t error = kerr::none;
    std::int64_t offset = -1;
    std::int64_t timestamp = -1;
};

// The earliest offset whose record timestamp is >= ts. There is no time index yet, so this
// walks the log from its start; batches whose max timestamp is below ts are skipped whole.
runtime::task<offset_outcome> offset_for_time(storage::partition_log& log, std::int64_t ts) {
    offset_outcome out;
    const std::int64_t start = log.log_start_offset();
    auto walked = co_await walk_log(log, start, [&out, ts, start](const storage::batch_view& b) {
        if (b.next_offset() <= start || b.max_timestamp < ts) return true;
        out.offset = std::max(b.base_offset, start);
        out.timestamp = b.max_timestamp;
        if (!b.is_compressed()) {
            if (auto recs = storage::parse_records(b)) {
                for (auto& rec : *recs) {
                    const std::int64_t t = b.base_timestamp + rec.timestamp_delta;
                    const std::int64_t o = b.base_offset + rec.offset_delta;
                    if (o >= start && t >= ts) {
                        out.offset = o;
                        out.timestamp = t;
                        break;
                    }
                }
            }
        }
        return false;
    });
    if (!walked) out = offset_outcome{kerr::kafka_storage_error, -1, -1};
    co_return out; // none found: offset -1, as Kafka answers
}

runtime::task<offset_outcome> list_offset_on_owner(shard* sh, std::string topic, std::int32_t partition,
                                                   std::int64_t ts) {
    offset_outcome out;
    auto owned = co_await find_owned(sh, topic, partition);
    if (!owned.slot) {
        out.error = owned.error;
        co_return out;
    }
    auto& log = *owned.slot->log;
    if (ts == -2) {
        out.offset = log.log_start_offset();
    } else if (ts == -1) {
        out.offset = log.high_watermark();
    } else if (ts < 0) {
        out.error = kerr::invalid_request;
    } else {
        co_return co_await offset_for_time(log, ts);
    }
    co_return out;
}

} // namespace

runtime::task<std::string> handle_list_offsets(request_ctx ctx, kafka::ListOffsetsRequest req) {
    kafka::ListOffsetsResponse r;
    struct where {
        std::size_t topic, partition;
    };
    std::vector<where> issued;
    std::vector<runtime::task<offset_outcome>> work;
    for (auto& t : req.topics) {
        kafka::ListOffsetsResponse::ListOffsetsTopicResponse tr;
        tr.name = t.name;
        const topic_info* info = ctx.sh.cat->find(t.name);
        for (auto& p : t.partitions) {
            kafka::ListOffsetsResponse::ListOffsetsPartitionResponse pr;
            pr.partition_index = p.partition_index;
            pr.offset = -1;
            pr.timestamp = -1;
            if (ctx.version >= 4) pr.leader_epoch = 0;
            if (!info || p.partition_index < 0 || p.partition_index >= info->partitions) {
                pr.error_code = kerr::unknown_topic_or_partition;
            } else {
                issued.push_back(where{r.topics.size(), tr.partitions.size()});
                const unsigned owner = partition_owner(t.name, p.partition_index, ctx.sh.shared->cores);
                shard* target = ctx.sh.shared->shards[owner];
                std::string name = t.name;
                const std::int32_t part = p.partition_index;
                const std::int64_t ts = p.timestamp;
                work.push_back(runtime::submit_to(owner, [target, name, part, ts] {
                    return list_offset_on_owner(target, name, part, ts);
                }));
            }
            tr.partitions.push_back(std::move(pr));
        }
        r.topics.push_back(std::move(tr));
    }
    auto results = co_await runtime::when_all(std::move(work));
    for (std::size_t i = 0; i < issued.size(); ++i) {
        auto& pr = r.topics[issued[i].topic].partitions[issued[i].partition];
        pr.error_code = results[i].error;
        pr.offset = results[i].offset;
        pr.timestamp = results[i].timestamp;
    }
    co_return respond(r, ctx);
}

} // namespace skiff::broker
