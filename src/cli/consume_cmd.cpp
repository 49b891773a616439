// skiff consume: reads records of a topic's partitions with Fetch (no group membership) and
// prints them: values (keys too with -K), or one JSON object per record with --json.
//
// --from picks each partition's first offset (beginning, end, OFFSET, -N before the end, or
// @TIME through ListOffsets by timestamp); --to an exclusive end (an offset, or @TIME: the
// first offset at or after that time, so exactly the records before it); -n stops after N
// records; -e stops at the end of every partition. Compressed batches are decoded with the
// storage module's codecs; control batches (transaction markers) are skipped.
#include "commands.hpp"
#include "kafka_cli.hpp"
#include "records_format.hpp"
#include "records_offsets.hpp"
#include "records_time.hpp"

#include <skiff/storage/compression.hpp>
#include <skiff/storage/record_batch.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace skiff::cli {
namespace {

struct consume_options {
    consume_options() = default;
    kafka_options kafka;
    std::string topic;
    std::vector<std::int32_t> partitions;
    std::string from = "beginning";
    std::optional<std::string> to;
    std::optional<std::int64_t> count;
    bool exit_at_end = false;
    std::optional<std::string> key_separator;
    int max_wait_ms = 500;
    std::int32_t fetch_bytes = 4 << 20;
};

struct partition_cursor {
    std::int64_t next = 0;
    std::optional<std::int64_t> stop;  // exclusive
    std::int64_t high_watermark = -1; // from the last Fetch answer
    bool done = false;
};

struct consume_state {
    consume_state() = default;
    const consume_options* opts = nullptr;
    std::optional<position> from;
    std::optional<position> to;
    std::map<std::int32_t, partition_cursor> cursors;
    std::int64_t printed = 0;
};

// Each partition's start and stop offsets from --from/--to.
runtime::task<result<void, client::error>> place_cursors(client::client& c, consume_state* st,
                                                         const topic_layout* layout) {
    std::vector<std::int32_t> parts;
    for (const auto& [p, cur] : st->cursors) parts.push_back(p);
    auto et = list_offsets(c, layout, parts, earliest_timestamp);
    auto earliest = co_await std::move(et);
    if (!earliest) co_return failure{earliest.error()};
    auto lt = list_offsets(c, layout, parts, latest_timestamp);
    auto latest = co_await std::move(lt);
    if (!latest) co_return failure{latest.error()};
    // A time resolves to the first offset at or after it; no such record means the log end.
    auto resolve = [&](const position& pos, std::int32_t p,
                       const std::map<std::int32_t, std::int64_t>& by_time) -> std::int64_t {
        const std::int64_t lo = earliest->at(p), hi = latest->at(p);
        switch (pos.what) {
        case position::kind::beginning: return lo;
        case position::kind::end: return hi;
        case position::kind::offset: return pos.value;
        case position::kind::from_end: return std::max(lo, hi - pos.value);
        case position::kind::time: {
            auto it = by_time.find(p);
            return it != by_time.end() && it->second >= 0 ? it->second : hi;
        }
        }
        return lo;
    };
    std::map<std::int32_t, std::int64_t> from_time, to_time;
    if (st->from->what == position::kind::time) {
        auto ft = list_offsets(c, layout, parts, st->from->value);
        auto r = co_await std::move(ft);
        if (!r) co_return failure{r.error()};
        from_time = std::move(*r);
    }
    if (st->to && st->to->what == position::kind::time) {
        auto tt = list_offsets(c, layout, parts, st->to->value);
        auto r = co_await std::move(tt);
        if (!r) co_return failure{r.error()};
        to_time = std::move(*r);
    }
    for (auto& [p, cur] : st->cursors) {
        cur.next = resolve(*st->from, p, from_time);
        if (st->to) cur.stop = resolve(*st->to, p, to_time);
        cur.high_watermark = latest->at(p);
        if (cur.stop && cur.next >= *cur.stop) cur.done = true;
        if (st->opts->exit_at_end && cur.next >= cur.high_watermark) cur.done = true;
    }
    co_return ok();
}

// Prints the records of one partition's answer from cur.next on; false once -n is reached.
result<bool, std::string> take_records(consume_state* st, std::int32_t partition, partition_cursor& cur,
                                       std::string_view bytes) {
    const auto& o = *st->opts;
    std::span<const char> rest(bytes.data(), bytes.size());
    while (!rest.empty() && !cur.done) {
        auto b = storage::parse_batch(rest);
        if (!b) {
            // A Fetch answer may end inside a batch (it is cut at the byte limit): the next
            // Fetch starts at that batch again.
            if (b.error().code == storage::format_errc::truncated) break;
            return failure{std::string("partition ") + std::to_string(partition) + ": " + b.error().message};
        }
        rest = rest.subspan(b->size());
        if (b->next_offset() <= cur.next) continue;
        if (b->is_control()) {
            cur.next = b->next_offset();
            continue;
        }
        auto decoded = storage::decode_records(*b, std::size_t{256} << 20);
        if (!decoded)
            return failure{std::string("partition ") + std::to_string(partition) + " offset " +
                           std::to_string(b->base_offset) + ": " + decoded.error().message};
        for (const auto& rv : decoded->records) {
            const std::int64_t off = b->base_offset + rv.offset_delta;
            if (off < cur.next) continue;
            if (cur.stop && off >= *cur.stop) {
                cur.done = true;
                break;
            }
            consumed_record r;
            r.topic = o.topic;
            r.partition = partition;
            r.offset = off;
            r.log_append_time = b->log_append_time();
            r.timestamp = r.log_append_time ? b->max_timestamp : b->base_timestamp + rv.timestamp_delta;
            if (rv.key) r.key.emplace(*rv.key);
            if (rv.value) r.value.emplace(*rv.value);
            for (const auto& h : rv.headers)
                r.headers.emplace_back(std::string(h.key),
                                       h.value ? std::optional<std::string>(std::string(*h.value)) : std::nullopt);
            std::string line = o.kafka.json ? to_json_line(r) : to_text(r, o.key_separator);
            line.push_back('\n');
            std::fwrite(line.data(), 1, line.size(), stdout);
            cur.next = off + 1;
            ++st->printed;
            if (o.count && st->printed >= *o.count) return false;
        }
        if (!cur.done) cur.next = std::max(cur.next, b->next_offset());
    }
    if (cur.stop && cur.next >= *cur.stop) cur.done = true;
    return true;
}

runtime::task<int> consume(client::client& c, consume_state* st) {
    const auto& o = *st->opts;
    auto lt = describe_topic(c, o.topic, false);
    auto layout = co_await std::move(lt);
    if (!layout) co_return report("skiff consume", layout.error());
    if (o.partitions.empty()) {
        for (const auto& [p, leader] : layout->leaders) st->cursors[p] = partition_cursor();
    } else {
        for (auto p : o.partitions) {
            if (!layout->leaders.count(p))
                co_return report("skiff consume",
                                 "topic '" + o.topic + "' has " + std::to_string(layout->leaders.size()) +
                                     " partitions, no partition " + std::to_string(p),
                                 exit_usage);
            st->cursors[p] = partition_cursor();
        }
    }
    auto pt = place_cursors(c, st, &*layout);
    auto placed = co_await std::move(pt);
    if (!placed) co_return report("skiff consume", placed.error());
    if (o.count && *o.count == 0) co_return exit_ok;

    for (;;) {
        std::map<std::int32_t, std::vector<std::int32_t>> by_leader;
        for (const auto& [p, cur] : st->cursors)
            if (!cur.done) by_leader[layout->leaders.at(p)].push_back(p);
        if (by_leader.empty()) break;
        for (const auto& [leader, parts] : by_leader) {
            kafka::FetchRequest req;
            req.cluster_id.reset();
            req.replica_id = -1;
            req.max_wait_ms = o.max_wait_ms;
            req.min_bytes = 1;
            req.max_bytes = o.fetch_bytes;
            req.isolation_level = 0;
            req.session_id = 0;
            req.session_epoch = -1; // no fetch session: every request names its partitions
            req.rack_id = "";
            kafka::FetchRequest::FetchTopic ft;
            ft.topic = o.topic;
            for (auto p : parts) {
                kafka::FetchRequest::FetchPartition fp;
                fp.partition = p;
                fp.fetch_offset = st->cursors[p].next;
                fp.partition_max_bytes = o.fetch_bytes;
                ft.partitions.push_back(fp);
            }
            req.topics.push_back(std::move(ft));
            client::request_options ro;
            ro.max_version = 12; // v13+ names topics by id only
            ro.timeout = std::chrono::milliseconds(o.kafka.timeout_ms + o.max_wait_ms);
            auto tgt = leader >= 0 ? client::target::node(leader) : client::target::leader(o.topic, parts.front());
            auto t = c.send(std::move(req), std::move(tgt), ro);
            auto r = co_await std::move(t);
            if (!r) co_return report("skiff consume", r.error());
            if (r->error_code != kafka::error_code::none)
                co_return report("skiff consume", kafka_error_sentence("fetch", r->error_code), exit_broker_error);
            for (const auto& rt : r->responses) {
                for (const auto& rp : rt.partitions) {
                    auto it = st->cursors.find(rp.partition_index);
                    if (it == st->cursors.end()) continue;
                    auto& cur = it->second;
                    if (rp.error_code == kafka::error_code::not_leader_or_follower ||
                        rp.error_code == kafka::error_code::leader_not_available) {
                        auto rl = describe_topic(c, o.topic, false);
                        auto relaid = co_await std::move(rl);
                        if (relaid) *layout = std::move(*relaid);
                        continue;
                    }
                    if (rp.error_code != kafka::error_code::none)
                        co_return report("skiff consume",
                                         kafka_error_sentence("partition " + o.topic + "-" +
                                                                  std::to_string(rp.partition_index) + " at offset " +
                                                                  std::to_string(cur.next),
                                                              rp.error_code),
                                         exit_broker_error);
                    cur.high_watermark = rp.high_watermark;
                    std::string_view bytes = rp.records ? std::string_view(*rp.records) : std::string_view();
                    auto more = take_records(st, rp.partition_index, cur, bytes);
                    if (!more) co_return report("skiff consume", more.error(), exit_protocol);
                    if (!*more) {
                        std::fflush(stdout);
                        co_return exit_ok;
                    }
                    if (o.exit_at_end && cur.next >= cur.high_watermark) cur.done = true;
                }
            }
            std::fflush(stdout);
        }
    }
    co_return exit_ok;
}

} // namespace

int consume_command(const std::vector<std::string>& args) {
    CLI::App app("Read records of a topic (simple partition fetch, no consumer group) and print them.",
                 "skiff consume");
    consume_options o;
    std::optional<std::string> key_sep;
    add_kafka_options(app, o.kafka);
    app.get_option("--json")->description("print one JSON object per record, one per line");
    app.add_option("-t,--topic", o.topic, "topic to read")->required()->envname("SKIFF_TOPIC");
    app.add_option("-p,--partition", o.partitions, "partition(s) to read (default: all; repeat or comma-separate)")
        ->envname("SKIFF_PARTITIONS")
        ->delimiter(',')
        ->check(CLI::NonNegativeNumber);
    app.add_option("-o,--from", o.from,
                   "where to start: beginning, end, OFFSET, -N (N before the end), @UNIX_MS or @YYYY-MM-DDTHH:MM:SS[Z]")
        ->envname("SKIFF_FROM")
        ->capture_default_str();
    app.add_option("--to", o.to, "stop before this offset, or before the first record at or after @TIME (also end)")
        ->envname("SKIFF_TO");
    app.add_option("-n,--count", o.count, "stop after this many records")
        ->envname("SKIFF_COUNT")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("-e,--exit", o.exit_at_end, "stop at the end of every partition instead of waiting for more")
        ->envname("SKIFF_EXIT");
    app.add_option("-K,--key-separator", key_sep, "print KEY SEP VALUE instead of the value only")
        ->envname("SKIFF_KEY_SEPARATOR");
    app.add_option("--max-wait-ms", o.max_wait_ms, "how long a Fetch waits for new records")
        ->envname("SKIFF_MAX_WAIT_MS")
        ->check(CLI::Range(0, 60000));
    app.footer(exit_codes_help);
    if (auto code = parse_args(app, args)) return *code;
    o.key_separator = key_sep;

    consume_state st;
    st.opts = &o;
    std::string why;
    st.from = parse_position(o.from, &why);
    if (!st.from) {
        std::fprintf(stderr, "skiff consume: --from %s: %s\n", o.from.c_str(), why.c_str());
        return exit_usage;
    }
    if (o.to) {
        st.to = parse_position(*o.to, &why);
        if (!st.to || st.to->what == position::kind::beginning) {
            std::fprintf(stderr, "skiff consume: --to %s: %s\n", o.to->c_str(),
                         st.to ? "the end cannot be the beginning" : why.c_str());
            return exit_usage;
        }
    }
    consume_state* sp = &st;
    return run_with_client(o.kafka, "skiff consume", [sp](client::client& c) { return consume(c, sp); });
}

} // namespace skiff::cli
