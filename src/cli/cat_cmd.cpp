// `skiff cat s3://BUCKET[/NS]/TOPIC | DIR/NS/TOPIC`: prints a topic's records straight from
// the bucket (no broker), with the segment reader (docs/reader.md). For operators and tests.
#include "commands.hpp"
#include "records_format.hpp"
#include "records_time.hpp"
#include "s3_config.hpp"
#include "store_target.hpp"

#include <skiff/core/log.hpp>
#include <skiff/core/printable.hpp>
#include <skiff/reader/segment_reader.hpp>
#include <skiff/runtime/reactor.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace skiff::cli {

namespace {

constexpr const char* cat_usage =
    "usage: skiff cat s3://BUCKET[/NAMESPACE]/TOPIC [options] [--s3-endpoint URL] [--s3-region R] [--s3-path-style]\n"
    "       skiff cat DIR/NAMESPACE/TOPIC [options]\n"
    "\n"
    "Prints the records of a topic read straight from the bucket (or a local data directory), in\n"
    "offset order per partition. The namespace defaults to \"default\" for s3:// targets.\n"
    "\n"
    "  --partition N        only this partition (repeatable)\n"
    "  --from-offset N      first offset (inclusive)     --to-offset N   last offset (inclusive)\n"
    "  --from-time T        first timestamp (inclusive)  --to-time T     last timestamp (inclusive)\n"
    "                       T: Unix ms or ISO 8601 (2024-05-01T12:00:00Z)\n"
    "  --json               one JSON object per line: topic, partition, offset, timestamp, key, value, headers\n"
    "  --max-records N      stop after N records\n"
    "  --parallel N         GETs in flight at once (default 16)\n"
    "  --stats              print read statistics to stderr\n"
    "\n"
    "Exit status: 0 success, 1 store or corrupt-data error, 2 usage. Problems found in the\n"
    "bucket (orphan indexes, stray keys) are printed to stderr as warnings.\n";

struct cat_options {
    cat_options() = default;
    std::string target;
    std::vector<std::int32_t> partitions;
    reader::scan_bounds bounds;
    bool json = false;
    bool stats = false;
    std::optional<std::uint64_t> max_records;
    std::size_t parallel = 16;
    s3_flags flags;
};

std::string text_line(const std::string& topic, const reader::record_row& r) {
    (void)topic;
    constexpr auto all = std::numeric_limits<std::size_t>::max();
    std::string line = fmt::format("{}\t{}\t{}\t{}\t{}", r.partition, r.offset, format_time_ms(r.timestamp),
                                   r.key ? printable(*r.key, all) : "(null)", r.value ? printable(*r.value, all) : "(null)");
    if (r.headers && !r.headers->empty()) {
        line += '\t';
        bool first = true;
        for (auto& h : *r.headers) {
            if (!first) line += ',';
            first = false;
            line += printable(h.key, all);
            line += '=';
            line += h.value ? printable(*h.value, all) : "(null)";
        }
    }
    return line;
}

std::string json_line(const std::string& topic, const reader::record_row& r) {
    consumed_record c;
    c.topic = topic;
    c.partition = r.partition;
    c.offset = r.offset;
    c.timestamp = r.timestamp;
    if (r.key) c.key = std::string(*r.key);
    if (r.value) c.value = std::string(*r.value);
    if (r.headers)
        for (auto& h : *r.headers)
            c.headers.emplace_back(std::string(h.key), h.value ? std::optional<std::string>(std::string(*h.value)) : std::nullopt);
    return to_json_line(c);
}

runtime::task<int> run_cat(const cat_options* o) {
    std::string ns, topic;
    std::string target = o->target;
    while (!target.empty() && target.back() == '/') target.pop_back();
    std::string store_part; // what open_store_target takes: s3://BUCKET[/NS] or DIR
    if (target.rfind("s3://", 0) == 0) {
        // s3://BUCKET/TOPIC or s3://BUCKET/NS.../TOPIC
        auto rest = target.substr(5);
        auto slash = rest.find('/');
        if (slash == std::string::npos || slash + 1 >= rest.size()) {
            std::fprintf(stderr, "skiff: %s names no topic\n%s", o->target.c_str(), cat_usage);
            co_return 2;
        }
        auto last = target.rfind('/');
        topic = target.substr(last + 1);
        store_part = target.substr(0, last);
        ns = "default";
    } else {
        // DIR/NS/TOPIC: the local store's root is DIR.
        auto t = target.rfind('/');
        auto n = t == std::string::npos || t == 0 ? std::string::npos : target.rfind('/', t - 1);
        if (t == std::string::npos || n == std::string::npos) {
            std::fprintf(stderr, "skiff: %s: expected DIR/NAMESPACE/TOPIC\n%s", o->target.c_str(), cat_usage);
            co_return 2;
        }
        topic = target.substr(t + 1);
        ns = target.substr(n + 1, t - n - 1);
        store_part = n == 0 ? std::string("/") : target.substr(0, n);
    }
    auto opened = open_store_target(store_part, ns, o->flags);
    if (!opened) {
        std::fprintf(stderr, "skiff: %s\n", opened.error().message.c_str());
        co_return opened.error().status;
    }
    auto& store = opened->store;
    ns = opened->ns;

    reader::topic_discovery d(*store, ns, topic);
    std::stop_token no_stop;
    auto r = co_await d.refresh(no_stop);
    if (!r) {
        std::fprintf(stderr, "skiff: %s\n", r.error().message.c_str());
        co_return r.error().code == reader::errc::invalid_argument ? 2 : 1;
    }
    for (auto& f : d.findings())
        std::fprintf(stderr, "skiff: warning: %s %s: %s\n", reader::to_string(f.what), printable(f.key).c_str(),
                     f.detail.c_str());
    if (d.partitions().empty()) {
        std::fprintf(stderr, "skiff: no segments of topic '%s' in %s namespace '%s'\n", printable(topic).c_str(),
                     store->describe().c_str(), printable(ns).c_str());
        co_return 1;
    }
    reader::scan_config cfg;
    cfg.parallel_gets = o->parallel;
    reader::segment_scan scan(*store, ns, reader::plan(d.partitions(), o->bounds, o->partitions), o->bounds, cfg);
    std::uint64_t printed = 0;
    int status = 0;
    std::string out;
    while (!o->max_records || printed < *o->max_records) {
        std::stop_token no_stop;
        auto c = co_await scan.next(no_stop);
        if (!c) {
            std::fflush(stdout);
            std::fprintf(stderr, "skiff: %s\n", c.error().message.c_str());
            status = 1;
            break;
        }
        if (*c == nullptr) break;
        const auto& ch = **c;
        out.clear();
        for (auto& row : ch.rows) {
            if (o->max_records && printed >= *o->max_records) break;
            out += o->json ? json_line(ch.topic, row) : text_line(ch.topic, row);
            out += '\n';
            ++printed;
        }
        std::fwrite(out.data(), 1, out.size(), stdout);
    }
    std::fflush(stdout);
    co_await scan.close(); // --max-records or an error leaves read-ahead GETs in flight
    if (o->stats) {
        auto& s = scan.stats();
        auto& ds = d.stats();
        std::fprintf(stderr,
                     "skiff: stats: lists=%llu keys=%llu segments_planned=%llu segments_read=%llu segments_pruned=%llu "
                     "gets=%llu bytes_read=%llu read_ahead_hits=%llu max_gets_in_flight=%llu batches=%llu records=%llu\n",
                     (unsigned long long)ds.list_requests, (unsigned long long)ds.keys_listed,
                     (unsigned long long)s.segments_planned, (unsigned long long)s.segments_read,
                     (unsigned long long)s.segments_pruned, (unsigned long long)s.gets, (unsigned long long)s.bytes_read,
                     (unsigned long long)s.read_ahead_hits, (unsigned long long)s.max_gets_in_flight,
                     (unsigned long long)s.batches, (unsigned long long)s.records);
    }
    co_return status;
}

} // namespace

int cat_command(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(cat_usage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    cat_options o;
    bool help = false;
    std::string endpoint, region, from_time, to_time;
    std::optional<std::int64_t> from_offset, to_offset;
    std::optional<std::uint64_t> max_records;
    std::size_t parallel = 16;
    std::vector<std::string> pos;
    CLI::App app{"skiff cat"};
    app.set_help_flag();
    app.allow_extras(true);
    app.add_flag("-h,--help", help);
    app.add_option("--partition", o.partitions)->check(CLI::NonNegativeNumber);
    app.add_option("--from-offset", from_offset)->check(CLI::NonNegativeNumber);
    app.add_option("--to-offset", to_offset)->check(CLI::NonNegativeNumber);
    auto* from_time_opt = app.add_option("--from-time", from_time);
    auto* to_time_opt = app.add_option("--to-time", to_time);
    app.add_flag("--json", o.json);
    app.add_flag("--stats", o.stats);
    app.add_option("--max-records", max_records);
    app.add_option("--parallel", parallel)->check(CLI::Range(1, 256));
    auto* endpoint_opt = app.add_option("--s3-endpoint", endpoint)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    auto* region_opt = app.add_option("--s3-region", region)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_flag("--s3-path-style", o.flags.path_style);
    app.add_option("target", pos);
    if (auto code = parse_s3_style_args(app, args)) return *code;
    if (help) {
        std::fputs(cat_usage, stdout);
        return 0;
    }
    if (auto extra = app.remaining(); !extra.empty()) {
        std::fprintf(stderr, "skiff: unknown option '%s'\n%s", extra.front().c_str(), cat_usage);
        return 2;
    }
    if (pos.size() != 1) {
        std::fputs(pos.empty() ? cat_usage : "skiff: cat takes one target\n", stderr);
        return 2;
    }
    o.target = pos[0];
    o.bounds.min_offset = from_offset;
    o.bounds.max_offset = to_offset;
    std::string why;
    if (from_time_opt->count()) {
        o.bounds.min_timestamp = parse_time_ms(from_time, &why);
        if (!o.bounds.min_timestamp) {
            std::fprintf(stderr, "skiff: --from-time %s: %s\n", from_time.c_str(), why.c_str());
            return 2;
        }
    }
    if (to_time_opt->count()) {
        o.bounds.max_timestamp = parse_time_ms(to_time, &why);
        if (!o.bounds.max_timestamp) {
            std::fprintf(stderr, "skiff: --to-time %s: %s\n", to_time.c_str(), why.c_str());
            return 2;
        }
    }
    o.max_records = max_records;
    o.parallel = parallel;
    if (endpoint_opt->count()) o.flags.endpoint = endpoint;
    if (region_opt->count()) o.flags.region = region;
    log::set_level(log::level::warn);
    auto r = runtime::reactor::create(0);
    if (!r) {
        std::fprintf(stderr, "skiff: %s\n", r.error().c_str());
        return 1;
    }
    return (*r)->run_until_complete(run_cat(&o));
}

} // namespace skiff::cli
