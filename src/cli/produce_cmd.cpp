// skiff produce: writes records to a topic over the Kafka protocol (Produce, acks=all).
//
// Input is one record per line on stdin (or one --value); -K SEP splits a line into key and
// value at the first SEP (kcat's -K), -H NAME=VALUE adds a header to every record. A record
// goes to -p PARTITION, else to murmur2(key) % partitions as Kafka's default partitioner does
// (so the same key lands where a Java, librdkafka or kafkajs producer would put it), else
// round-robin. Records are sent in batches of at most --batch-bytes per partition, compressed
// with --compression, each batch acknowledged before the next is sent, so the order of lines is
// the order in each partition.
#include "commands.hpp"
#include "kafka_cli.hpp"
#include "produce_input.hpp"
#include "records_offsets.hpp"

#include <skiff/storage/compression.hpp>
#include <skiff/storage/record_batch.hpp>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <poll.h>
#include <unistd.h>

namespace skiff::cli {
namespace {

struct produce_options {
    produce_options() = default;
    kafka_options kafka;
    std::string topic;
    std::int32_t partition = -1;
    std::string key_separator;
    std::vector<std::string> headers;
    std::optional<std::string> value;
    std::optional<std::string> key;
    std::string compression = "none";
    // Under Kafka's default max.message.bytes (1 MiB + 12) with room to spare.
    std::size_t batch_bytes = 512 << 10;
    bool create = true;
};

std::optional<storage::compression_codec> codec_named(const std::string& s) {
    using storage::compression_codec;
    if (s == "none") return compression_codec::none;
    if (s == "gzip") return compression_codec::gzip;
    if (s == "snappy") return compression_codec::snappy;
    if (s == "lz4") return compression_codec::lz4;
    if (s == "zstd") return compression_codec::zstd;
    return std::nullopt;
}

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// One partition's pending records and what was written to it.
struct pending_batch {
    std::vector<storage::record> records;
    std::size_t bytes = 0;
};

struct written {
    written() = default;
    written(std::int32_t p, std::int64_t b, std::size_t n) : partition(p), base_offset(b), records(n) {}
    std::int32_t partition = 0;
    std::int64_t base_offset = 0;
    std::size_t records = 0;
};

// Lines of a file descriptor. It tells when no complete line is buffered and none is ready to
// read, so that what was typed so far is sent at once instead of at end of input (an
// interactive `skiff produce` behaves like kcat's), while piped input still fills batches.
class line_reader {
public:
    explicit line_reader(int fd) : _fd(fd) {}
    enum class status : std::uint8_t { line, eof, error };

    // The next line without its '\n'; the text after the last '\n' is a line too.
    status next(std::string& line) {
        for (;;) {
            auto nl = _buf.find('\n', _pos);
            if (nl != std::string::npos) {
                line.assign(_buf, _pos, nl - _pos);
                _pos = nl + 1;
                return status::line;
            }
            if (_eof) {
                if (_pos >= _buf.size()) return status::eof;
                line.assign(_buf, _pos);
                _pos = _buf.size();
                return status::line;
            }
            _buf.erase(0, _pos);
            _pos = 0;
            char chunk[65536];
            ssize_t n = ::read(_fd, chunk, sizeof chunk);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                _errno = errno;
                return status::error;
            }
            if (n == 0) _eof = true;
            _buf.append(chunk, static_cast<std::size_t>(n));
        }
    }
    // True when next() would have to wait for the writer.
    bool idle() const {
        if (_eof || _buf.find('\n', _pos) != std::string::npos) return false;
        pollfd p{_fd, POLLIN, 0};
        return ::poll(&p, 1, 0) == 0;
    }
    int error_number() const noexcept { return _errno; }

private:
    int _fd;
    std::string _buf;
    std::size_t _pos = 0;
    bool _eof = false;
    int _errno = 0;
};

struct produce_state {
    produce_state() = default;
    const produce_options* opts = nullptr;
    storage::compression_codec codec = storage::compression_codec::none;
    std::vector<storage::record_header> headers;
    std::vector<written> done;
    std::size_t total = 0;
};

// Sends one batch to the partition's leader; a leader change (NOT_LEADER_OR_FOLLOWER, nothing
// appended) is retried after refreshing the metadata.
runtime::task<int> send_batch(client::client& c, produce_state* st, std::int32_t partition, pending_batch* b) {
    const auto& o = *st->opts;
    storage::batch_options bo;
    bo.base_timestamp = now_ms();
    bo.compress = st->codec;
    std::string bytes = storage::build_batch(0, b->records, bo);
    for (int attempt = 0;; ++attempt) {
        kafka::ProduceRequest req;
        req.transactional_id.reset();
        req.acks = -1;
        req.timeout_ms = o.kafka.timeout_ms;
        kafka::ProduceRequest::TopicProduceData td;
        td.name = o.topic;
        kafka::ProduceRequest::PartitionProduceData pd;
        pd.index = partition;
        pd.records = bytes;
        td.partition_data.push_back(std::move(pd));
        req.topic_data.push_back(std::move(td));
        auto tgt = client::target::leader(o.topic, partition);
        auto t = c.send(std::move(req), tgt);
        auto r = co_await std::move(t);
        if (!r) co_return report("skiff produce", r.error());
        const kafka::ProduceResponse::PartitionProduceResponse* pr = nullptr;
        for (const auto& rt : r->responses)
            for (const auto& rp : rt.partition_responses)
                if (rp.index == partition) pr = &rp;
        if (!pr)
            co_return report("skiff produce", "the Produce answer lacks partition " + std::to_string(partition),
                             exit_protocol);
        if (pr->error_code == kafka::error_code::not_leader_or_follower && attempt < 5) {
            c.forget(tgt);
            auto mt = c.metadata(std::vector<std::string>{o.topic});
            (void)co_await std::move(mt);
            continue;
        }
        if (pr->error_code != kafka::error_code::none) {
            std::string what = kafka_error_sentence("partition " + o.topic + "-" + std::to_string(partition),
                                                    pr->error_code, pr->error_message);
            if (st->total > 0) what += " (" + std::to_string(st->total) + " records were written before)";
            co_return report("skiff produce", what, exit_broker_error);
        }
        st->done.emplace_back(partition, pr->base_offset, b->records.size());
        st->total += b->records.size();
        b->records.clear();
        b->bytes = 0;
        co_return exit_ok;
    }
}

runtime::task<int> produce(client::client& c, produce_state* st) {
    const auto& o = *st->opts;
    auto lt = describe_topic(c, o.topic, o.create);
    auto layout = co_await std::move(lt);
    if (!layout) co_return report("skiff produce", layout.error());
    const auto partitions = static_cast<std::int32_t>(layout->leaders.size());
    if (o.partition >= partitions)
        co_return report("skiff produce",
                         "topic '" + o.topic + "' has " + std::to_string(partitions) + " partitions, no partition " +
                             std::to_string(o.partition),
                         exit_usage);

    std::map<std::int32_t, pending_batch> pending;
    std::uint64_t next_round_robin = 0;
    auto place = [&](storage::record r) -> std::int32_t {
        std::int32_t p = o.partition >= 0      ? o.partition
                         : r.key.has_value() ? partition_for_key(*r.key, partitions)
                                             : static_cast<std::int32_t>(next_round_robin++ % static_cast<std::uint64_t>(partitions));
        auto& b = pending[p];
        b.bytes += (r.key ? r.key->size() : 0) + (r.value ? r.value->size() : 0) + 16;
        for (const auto& h : r.headers) b.bytes += h.key.size() + (h.value ? h.value->size() : 0) + 8;
        b.records.push_back(std::move(r));
        return p;
    };

    if (o.value) {
        storage::record r(o.key, o.value, st->headers);
        place(std::move(r));
    } else {
        std::string line;
        std::size_t line_no = 0;
        line_reader in(STDIN_FILENO);
        for (;;) {
            auto got = in.next(line);
            if (got == line_reader::status::eof) break;
            if (got == line_reader::status::error)
                co_return report("skiff produce", std::string("reading stdin: ") + std::strerror(in.error_number()),
                                 exit_usage);
            ++line_no;
            auto rec = parse_line(line, o.key_separator, st->headers);
            if (!rec) {
                int code = report("skiff produce", "line " + std::to_string(line_no) + ": " + rec.error(), exit_usage);
                if (st->total > 0)
                    std::fprintf(stderr, "skiff produce: %zu records were written before\n", st->total);
                co_return code;
            }
            std::int32_t p = place(std::move(*rec));
            if (pending[p].bytes >= o.batch_bytes) {
                auto bt = send_batch(c, st, p, &pending[p]);
                int rc = co_await std::move(bt);
                if (rc != exit_ok) co_return rc;
            }
            if (in.idle()) {
                for (auto& [q, b] : pending) {
                    if (b.records.empty()) continue;
                    auto bt = send_batch(c, st, q, &b);
                    int rc = co_await std::move(bt);
                    if (rc != exit_ok) co_return rc;
                }
            }
        }
    }
    for (auto& [p, b] : pending) {
        if (b.records.empty()) continue;
        auto bt = send_batch(c, st, p, &b);
        int rc = co_await std::move(bt);
        if (rc != exit_ok) co_return rc;
    }
    if (o.kafka.json) {
        nlohmann::json j;
        j["topic"] = o.topic;
        j["records"] = st->total;
        auto batches = nlohmann::json::array();
        for (const auto& w : st->done)
            batches.push_back({{"partition", w.partition}, {"base_offset", w.base_offset}, {"records", w.records}});
        j["batches"] = std::move(batches);
        print_json(j);
    }
    co_return exit_ok;
}

} // namespace

int produce_command(const std::vector<std::string>& args) {
    CLI::App app("Write records to a topic: one per line of stdin, or --value.", "skiff produce");
    produce_options o;
    add_kafka_options(app, o.kafka);
    app.get_option("--json")->description("print what was written: the batches, their partitions and offsets");
    app.add_option("-t,--topic", o.topic, "topic to write to")->required()->envname("SKIFF_TOPIC");
    app.add_option("-p,--partition", o.partition,
                   "partition (default: murmur2 of the key as Kafka's default partitioner, round-robin without a key)")
        ->envname("SKIFF_PARTITION")
        ->check(CLI::NonNegativeNumber);
    app.add_option("-K,--key-separator", o.key_separator,
                   "split each line at the first SEP into key and value (like kcat -K)")
        ->envname("SKIFF_KEY_SEPARATOR");
    app.add_option("-H,--header", o.headers, "header NAME=VALUE on every record (repeatable)")
        ->envname("SKIFF_HEADER");
    app.add_option("--value", o.value, "write this one record instead of reading stdin")->envname("SKIFF_VALUE");
    app.add_option("--key", o.key, "the key of the --value record")->envname("SKIFF_KEY");
    app.add_option("-z,--compression", o.compression, "none, gzip, snappy, lz4 or zstd")
        ->envname("SKIFF_COMPRESSION")
        ->check(CLI::IsMember({"none", "gzip", "snappy", "lz4", "zstd"}));
    app.add_option("--batch-bytes", o.batch_bytes, "records per partition are sent in batches of about this size")
        ->envname("SKIFF_BATCH_BYTES")
        ->check(CLI::Range(std::size_t{1}, std::size_t{64} << 20));
    app.add_flag("!--no-create", o.create, "do not ask the broker to create a missing topic")
        ->envname("SKIFF_NO_CREATE");
    app.footer(exit_codes_help);
    if (auto code = parse_args(app, args)) return *code;
    if (o.key && !o.value) {
        std::fputs("skiff produce: --key needs --value\n", stderr);
        return exit_usage;
    }

    produce_state st;
    st.opts = &o;
    st.codec = *codec_named(o.compression);
    for (const auto& h : o.headers) {
        auto parsed = parse_header(h);
        if (!parsed) {
            std::fprintf(stderr, "skiff produce: %s\n", parsed.error().c_str());
            return exit_usage;
        }
        st.headers.push_back(std::move(*parsed));
    }
    produce_state* sp = &st;
    return run_with_client(o.kafka, "skiff produce", [sp](client::client& c) { return produce(c, sp); });
}

} // namespace skiff::cli
