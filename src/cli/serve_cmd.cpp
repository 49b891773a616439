// `skiff serve`: flags (each with a SKIFF_<FLAG> environment equivalent; the flag wins),
// validation with one-sentence errors, signal handling, and the broker.
#include "commands.hpp"
#include "s3_config.hpp"

#include <skiff/broker/broker.hpp>
#include <skiff/core/log.hpp>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <charconv>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace skiff::cli {

namespace {

enum class kind { text, number, boolean };

using defaults_fn = std::string (*)(const broker::broker_config&);

struct flag {
    const char* name; // without "--"
    kind k;
    const char* meta;
    const char* help;
    // The default shown by --help, read from a default-constructed broker_config so the text
    // cannot drift from what the broker does; null where the help sentence says it.
    defaults_fn default_of = nullptr;
};

std::string ms(std::chrono::milliseconds v) { return std::to_string(v.count()); }
std::string yes_no(bool v) { return v ? "true" : "false"; }
std::string quoted(const std::string& v) { return "\"" + v + "\""; }

using cfg_t = broker::broker_config;
const flag flags[] = {
    {"kafka-addr", kind::text, "HOST:PORT", "Kafka listener", [](const cfg_t& c) { return c.kafka_addr; }},
    {"advertised-addr", kind::text, "HOST:PORT",
     "address put in Metadata (default: the address each client connected to)"},
    {"http-addr", kind::text, "HOST:PORT", "metrics/traces/health endpoint (\"off\" disables)",
     [](const cfg_t& c) { return c.http_addr; }},
    {"data-dir", kind::text, "DIR", "local directory store, the embedded default",
     [](const cfg_t& c) { return c.data_dir; }},
    {"s3-bucket", kind::text, "BUCKET[/PREFIX]", "keep the log in S3 instead of --data-dir"},
    {"s3-endpoint", kind::text, "URL", "S3 endpoint (also AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL)"},
    {"s3-region", kind::text, "NAME", "S3 region (also AWS_REGION, AWS_DEFAULT_REGION; default us-east-1)"},
    {"s3-path-style", kind::boolean, "", "path-style S3 addressing (automatic for IP endpoints)"},
    {"namespace", kind::text, "NS", "namespace (key prefix) in the store", [](const cfg_t& c) { return quoted(c.ns); }},
    {"upload-mode", kind::text, "parallel|sequential", "upload a segment and its index together or one after the other",
     [](const cfg_t& c) {
         return std::string(c.log.mode == storage::upload_mode::parallel ? "parallel" : "sequential");
     }},
    {"flush-linger-ms", kind::text, "MS|adaptive",
     "adaptive: flush at once when idle, group commit under load; MS: wait this long for more data after an "
     "acks=all produce (fewer PUTs, more latency)",
     [](const cfg_t& c) { return c.log.linger ? ms(*c.log.linger) : std::string("adaptive"); }},
    {"flush-interval-ms", kind::number, "MS", "flush buffered data at least this often",
     [](const cfg_t& c) { return ms(c.log.max_age); }},
    {"segment-bytes", kind::number, "N", "flush when a partition buffers this much",
     [](const cfg_t& c) { return std::to_string(c.log.segment_bytes); }},
    {"max-inflight-flushes", kind::number, "N", "most segments of one partition uploading at once",
     [](const cfg_t& c) { return std::to_string(c.log.max_inflight_flushes); }},
    {"max-puts-per-second", kind::number, "N",
     "request budget: segment-upload PUTs per second for the whole broker (0: unlimited)",
     [](const cfg_t& c) { return fmt::format("{}", c.max_puts_per_second); }},
    {"hedge-after-ms", kind::text, "MS|adaptive|off",
     "send a segment PUT or GET again when unanswered after this (adaptive: the recent p99; at most 5% of requests)",
     [](const cfg_t& c) {
         if (!c.hedge.enabled) return std::string("off");
         return c.hedge.after ? ms(*c.hedge.after) : std::string("adaptive");
     }},
    {"put-price-per-1000", kind::text, "USD", "price per 1,000 PUTs the request-cost metric uses",
     [](const cfg_t& c) { return fmt::format("{}", c.put_price_per_1000); }},
    {"max-buffered-bytes", kind::number, "N",
     "produced bytes not yet stored, for the whole broker; beyond, produces wait (throttle_time_ms)",
     [](const cfg_t& c) { return std::to_string(c.max_buffered_bytes); }},
    {"max-partition-buffered-bytes", kind::number, "N", "the same bound for one partition",
     [](const cfg_t& c) { return std::to_string(c.log.max_pending_bytes); }},
    {"max-cache-bytes", kind::number, "N", "committed segments kept in memory for readers, for the whole broker",
     [](const cfg_t& c) { return std::to_string(c.max_cache_bytes); }},
    {"quota-produce-bytes-per-second", kind::number, "N",
     "produce quota of every client id without its own (0: none; docs/quotas.md)",
     [](const cfg_t& c) { return fmt::format("{}", c.quotas.defaults.produce_bytes_per_second); }},
    {"quota-fetch-bytes-per-second", kind::number, "N", "fetch quota of every client id without its own (0: none)",
     [](const cfg_t& c) { return fmt::format("{}", c.quotas.defaults.fetch_bytes_per_second); }},
    {"client-quotas", kind::text, "ID:produce=N,fetch=N;...",
     "quotas of named client ids, bytes per second (K/M/G suffixes)"},
    {"auto-create-topics", kind::boolean, "", "create topics on first Metadata request",
     [](const cfg_t& c) { return yes_no(c.auto_create_topics); }},
    {"default-partitions", kind::number, "N", "partitions of auto-created topics",
     [](const cfg_t& c) { return std::to_string(c.default_partitions); }},
    {"etcd", kind::text, "URL[,URL...]", "cluster mode: etcd client URLs (docs/cluster.md); none: a single broker"},
    {"node-id", kind::number, "N",
     "this broker's id (Kafka's node.id), shown in Metadata, FindCoordinator and DescribeCluster; unique in "
     "a cluster",
     [](const cfg_t& c) { return std::to_string(c.node_id); }},
    {"broker-id", kind::number, "N", "the same as --node-id (Kafka's older name, broker.id)"},
    {"lease-ttl-s", kind::number, "S", "cluster mode: a dead broker's partitions move after this many seconds",
     [](const cfg_t& c) { return std::to_string(c.lease_ttl.count()); }},
    {"rack", kind::text, "NAME", "cluster mode: this broker's rack, reported in Metadata"},
    {"cores", kind::number, "N", "reactor threads, one per core",
     [](const cfg_t& c) { return c.cores == 0 ? std::string("all cores") : std::to_string(c.cores); }},
    {"max-frame-bytes", kind::number, "N", "largest request accepted; larger ones close the connection",
     [](const cfg_t& c) { return std::to_string(c.max_frame_bytes); }},
    {"message-max-bytes", kind::number, "N",
     "largest record batch a topic takes unless its max.message.bytes says otherwise",
     [](const cfg_t& c) { return std::to_string(c.message_max_bytes); }},
    {"retention-ms", kind::number, "MS",
     "what a topic without retention.ms keeps, by the records' time (-1: everything)",
     [](const cfg_t& c) { return std::to_string(c.retention_ms); }},
    {"retention-bytes", kind::number, "N",
     "what a partition of a topic without retention.bytes keeps, in bytes (-1: everything)",
     [](const cfg_t& c) { return std::to_string(c.retention_bytes); }},
    {"file-delete-delay-ms", kind::number, "MS",
     "objects of segments that left a log are deleted this long after (a fetch reading one finishes)",
     [](const cfg_t& c) { return ms(c.log.delete_delay); }},
    {"manifest-every-segments", kind::number, "N",
     "a partition's manifest is rewritten after this many new segments (0: never)",
     [](const cfg_t& c) { return std::to_string(c.log.manifest_every_segments); }},
    {"merge-target-bytes", kind::number, "N",
     "adjacent small segments are merged into segments of about this size (0: no merging)",
     [](const cfg_t& c) { return std::to_string(c.log.merge_target_bytes); }},
    {"merge-age-ms", kind::number, "MS",
     "small segments are merged once the newest of a run is this old, even below half the target",
     [](const cfg_t& c) { return ms(c.log.merge_age); }},
    {"compaction-interval-ms", kind::number, "MS",
     "a compacted topic's partition is compacted at most this often (when it has new segments)",
     [](const cfg_t& c) { return ms(c.log.compaction_interval); }},
    {"compaction-map-bytes", kind::number, "N",
     "memory for a compaction pass's key map, per core; more distinct keys are compacted in rounds",
     [](const cfg_t& c) { return std::to_string(c.log.compaction_map_bytes); }},
    {"group-initial-rebalance-delay-ms", kind::number, "MS", "a new group waits this long for more members",
     [](const cfg_t& c) { return ms(c.group_initial_rebalance_delay); }},
    {"log-level", kind::text, "LEVEL", "trace|debug|info|warn|error (default info)"},
};

std::string env_name(std::string_view flag) {
    std::string out = "SKIFF_";
    for (char c : flag) out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    return out;
}

void usage(std::FILE* out) {
    std::fputs("usage: skiff serve [flags]\n"
               "\n"
               "Runs the Kafka broker. With no flags it keeps its log in ./skiff-data and listens on\n"
               "0.0.0.0:9092, so `kcat -b 127.0.0.1:9092 -P -t demo` just works. Every flag can also be\n"
               "set with an environment variable: --segment-bytes is SKIFF_SEGMENT_BYTES (the flag wins).\n"
               "S3 credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN or\n"
               "~/.aws (AWS_PROFILE). SIGTERM or SIGINT drains: stop accepting, answer what was read,\n"
               "flush every partition, exit 0.\n"
               "\n"
               "flags:\n",
               out);
    const broker::broker_config defaults;
    for (auto& f : flags) {
        std::string left = std::string("  --") + f.name + (f.meta[0] ? std::string(" ") + f.meta : "");
        std::string help = f.help;
        if (f.default_of) help += " (default " + f.default_of(defaults) + ")";
        std::fprintf(out, "%-44s %s\n", left.c_str(), help.c_str());
    }
}

const flag* find_flag(std::string_view name) {
    for (auto& f : flags) {
        if (name == f.name) return &f;
    }
    return nullptr;
}

std::optional<bool> parse_bool(std::string_view v) {
    if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
    if (v == "false" || v == "0" || v == "no" || v == "off") return false;
    return std::nullopt;
}

std::optional<std::int64_t> parse_int(std::string_view v) {
    std::int64_t out = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
    return out;
}

struct settings {
    std::map<std::string, std::string, std::less<>> values; // flag name -> raw value
    std::set<std::string, std::less<>> on_command_line;     // (the rest came from SKIFF_*)
};

// The first error, as one sentence.
std::optional<std::string> collect(const std::vector<std::string>& args, settings& s, bool& help) {
    // Environment first; flags override.
    for (auto& f : flags) {
        if (const char* v = std::getenv(env_name(f.name).c_str()); v && *v) s.values[f.name] = v;
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string_view a = args[i];
        if (a == "--help" || a == "-h") {
            help = true;
            return std::nullopt;
        }
        if (!a.starts_with("--")) return "unexpected argument '" + std::string(a) + "'";
        std::string_view body = a.substr(2);
        std::optional<std::string> value;
        if (auto eq = body.find('='); eq != std::string_view::npos) {
            value = std::string(body.substr(eq + 1));
            body = body.substr(0, eq);
        }
        const flag* f = find_flag(body);
        if (!f) return "unknown flag --" + std::string(body) + " (see skiff serve --help)";
        if (!value) {
            if (f->k == kind::boolean) {
                if (i + 1 < args.size() && parse_bool(args[i + 1])) {
                    value = args[++i];
                } else {
                    value = "true";
                }
            } else {
                if (i + 1 >= args.size()) return "--" + std::string(body) + " needs a value (" + f->meta + ")";
                value = args[++i];
            }
        }
        s.values[f->name] = *value;
        s.on_command_line.insert(f->name);
    }
    return std::nullopt;
}

std::optional<std::string> number(const settings& s, const char* name, std::int64_t lo, std::int64_t hi,
                                  std::int64_t& out) {
    auto it = s.values.find(name);
    if (it == s.values.end()) return std::nullopt;
    auto v = parse_int(it->second);
    if (!v || *v < lo || *v > hi) {
        return "--" + std::string(name) + " must be an integer from " + std::to_string(lo) + " to " +
               std::to_string(hi) + ", not '" + it->second + "'";
    }
    out = *v;
    return std::nullopt;
}

std::optional<std::string> boolean(const settings& s, const char* name, bool& out) {
    auto it = s.values.find(name);
    if (it == s.values.end()) return std::nullopt;
    auto v = parse_bool(it->second);
    if (!v) return "--" + std::string(name) + " must be true or false, not '" + it->second + "'";
    out = *v;
    return std::nullopt;
}

result<broker::broker_config, std::string> make_config(const settings& s) {
    broker::broker_config cfg;
    auto text = [&](const char* name) -> const std::string* {
        auto it = s.values.find(name);
        return it == s.values.end() ? nullptr : &it->second;
    };
    if (auto* v = text("kafka-addr")) cfg.kafka_addr = *v;
    if (auto* v = text("advertised-addr")) {
        auto colon = v->rfind(':');
        if (colon == std::string::npos || colon == 0 || !parse_int(v->substr(colon + 1)) ||
            *parse_int(v->substr(colon + 1)) <= 0 || *parse_int(v->substr(colon + 1)) > 65535) {
            return failure{"--advertised-addr must be HOST:PORT, not '" + *v + "'"};
        }
        cfg.advertised_addr = *v;
    }
    if (auto* v = text("http-addr")) cfg.http_addr = (*v == "off" || v->empty()) ? "" : *v;
    if (auto* v = text("data-dir")) {
        if (v->empty()) return failure{std::string("--data-dir must not be empty")};
        cfg.data_dir = *v;
    }
    if (auto* v = text("namespace")) {
        if (v->empty() || v->find('/') != std::string::npos || *v == "." || *v == "..") {
            return failure{"--namespace must be one non-empty path component, not '" + *v + "'"};
        }
        cfg.ns = *v;
    }
    if (auto* v = text("upload-mode")) {
        if (*v == "parallel") {
            cfg.log.mode = storage::upload_mode::parallel;
        } else if (*v == "sequential") {
            cfg.log.mode = storage::upload_mode::sequential;
        } else {
            return failure{"--upload-mode must be parallel or sequential, not '" + *v + "'"};
        }
    }
    std::int64_t n = 0;
    if (auto* v = text("flush-linger-ms"); v && *v != "adaptive") {
        if (auto e = number(s, "flush-linger-ms", 0, 60000, n)) {
            return failure{"--flush-linger-ms must be 'adaptive' or a number of milliseconds from 0 to 60000, not '" +
                           *v + "'"};
        }
        cfg.log.linger = std::chrono::milliseconds(n);
    }
    if (auto* v = text("hedge-after-ms"); v && *v != "adaptive") {
        if (*v == "off") {
            cfg.hedge.enabled = false;
        } else if (auto e = number(s, "hedge-after-ms", 1, 600000, n)) {
            return failure{"--hedge-after-ms must be 'adaptive', 'off' or milliseconds from 1 to 600000, not '" + *v +
                           "'"};
        } else {
            cfg.hedge.after = std::chrono::milliseconds(n);
        }
    }
    if (auto e = number(s, "max-puts-per-second", 0, 10000000, n)) return failure{*e};
    if (s.values.count("max-puts-per-second")) cfg.max_puts_per_second = static_cast<double>(n);
    if (auto* v = text("put-price-per-1000")) {
        double price = -1;
        const char* b = v->data();
        auto [end, ec] = std::from_chars(b, b + v->size(), price);
        if (ec != std::errc() || end != b + v->size() || !(price >= 0) || price > 1000) {
            return failure{"--put-price-per-1000 must be a price in USD from 0 to 1000, not '" + *v + "'"};
        }
        cfg.put_price_per_1000 = price;
    }
    if (auto e = number(s, "max-buffered-bytes", 1 << 20, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.values.count("max-buffered-bytes")) cfg.max_buffered_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "max-partition-buffered-bytes", 1 << 16, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.values.count("max-partition-buffered-bytes")) cfg.log.max_pending_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "max-cache-bytes", 1 << 20, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.values.count("max-cache-bytes")) cfg.max_cache_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "quota-produce-bytes-per-second", 0, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.values.count("quota-produce-bytes-per-second")) {
        cfg.quotas.defaults.produce_bytes_per_second = static_cast<double>(n);
    }
    if (auto e = number(s, "quota-fetch-bytes-per-second", 0, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.values.count("quota-fetch-bytes-per-second")) {
        cfg.quotas.defaults.fetch_bytes_per_second = static_cast<double>(n);
    }
    if (auto* v = text("client-quotas")) {
        if (auto e = broker::parse_client_quotas(*v, cfg.quotas); !e.empty()) return failure{"--client-quotas: " + e};
    }
    if (auto e = number(s, "flush-interval-ms", 1, 3600000, n)) return failure{*e};
    if (s.values.count("flush-interval-ms")) cfg.log.max_age = std::chrono::milliseconds(n);
    if (auto e = number(s, "segment-bytes", 1024, 1 << 30, n)) return failure{*e};
    if (s.values.count("segment-bytes")) cfg.log.segment_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "max-inflight-flushes", 1, 64, n)) return failure{*e};
    if (s.values.count("max-inflight-flushes")) cfg.log.max_inflight_flushes = static_cast<int>(n);
    if (auto e = boolean(s, "auto-create-topics", cfg.auto_create_topics)) return failure{*e};
    if (auto e = number(s, "default-partitions", 1, 10000, n)) return failure{*e};
    if (s.values.count("default-partitions")) cfg.default_partitions = static_cast<std::int32_t>(n);
    if (auto e = number(s, "cores", 1, 1024, n)) return failure{*e};
    if (s.values.count("cores")) cfg.cores = static_cast<unsigned>(n);
    if (auto e = number(s, "max-frame-bytes", 1024, 1 << 30, n)) return failure{*e};
    if (s.values.count("max-frame-bytes")) cfg.max_frame_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "message-max-bytes", 0, 2147483647, n)) return failure{*e};
    if (s.values.count("message-max-bytes")) cfg.message_max_bytes = n;
    if (auto e = number(s, "retention-ms", -1, std::numeric_limits<std::int64_t>::max(), n)) return failure{*e};
    if (s.values.count("retention-ms")) cfg.retention_ms = n;
    if (auto e = number(s, "retention-bytes", -1, std::numeric_limits<std::int64_t>::max(), n)) return failure{*e};
    if (s.values.count("retention-bytes")) cfg.retention_bytes = n;
    if (auto e = number(s, "file-delete-delay-ms", 0, 86400000, n)) return failure{*e};
    if (s.values.count("file-delete-delay-ms")) cfg.log.delete_delay = std::chrono::milliseconds(n);
    if (auto e = number(s, "manifest-every-segments", 0, 1000000, n)) return failure{*e};
    if (s.values.count("manifest-every-segments")) {
        cfg.log.manifest_every_segments = static_cast<std::size_t>(n);
        cfg.log.manifests = n > 0;
    }
    if (auto e = number(s, "merge-target-bytes", 0, 1ll << 30, n)) return failure{*e};
    if (s.values.count("merge-target-bytes")) cfg.log.merge_target_bytes = static_cast<std::uint64_t>(n);
    if (auto e = number(s, "merge-age-ms", 0, 7ll * 86400000, n)) return failure{*e};
    if (s.values.count("merge-age-ms")) cfg.log.merge_age = std::chrono::milliseconds(n);
    if (auto e = number(s, "compaction-interval-ms", 0, 86400000, n)) return failure{*e};
    if (s.values.count("compaction-interval-ms")) cfg.log.compaction_interval = std::chrono::milliseconds(n);
    if (auto e = number(s, "compaction-map-bytes", 1 << 16, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.values.count("compaction-map-bytes")) cfg.log.compaction_map_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "group-initial-rebalance-delay-ms", 0, 300000, n)) return failure{*e};
    if (s.values.count("group-initial-rebalance-delay-ms")) cfg.group_initial_rebalance_delay = std::chrono::milliseconds(n);
    if (auto e = number(s, "broker-id", 0, 2147483647, n)) return failure{*e};
    if (s.values.count("broker-id")) cfg.node_id = static_cast<std::int32_t>(n);
    if (auto e = number(s, "node-id", 0, 2147483647, n)) return failure{*e};
    if (s.values.count("node-id")) {
        // Two names for one id (Kafka's node.id and broker.id): given both, they must agree.
        if (s.values.count("broker-id") && cfg.node_id != static_cast<std::int32_t>(n)) {
            return failure{"--node-id " + std::to_string(n) + " and --broker-id " + std::to_string(cfg.node_id) +
                           " name one id differently; give one of them"};
        }
        cfg.node_id = static_cast<std::int32_t>(n);
    }
    if (auto e = number(s, "lease-ttl-s", 2, 300, n)) return failure{*e};
    if (s.values.count("lease-ttl-s")) cfg.lease_ttl = std::chrono::seconds(n);
    if (auto* v = text("rack")) cfg.rack = *v;
    if (auto* v = text("etcd")) {
        std::string_view rest = *v;
        while (!rest.empty()) {
            auto comma = rest.find(',');
            std::string_view url = rest.substr(0, comma);
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
            if (url.empty()) continue;
            if (!url.starts_with("http://") && !url.starts_with("https://")) {
                return failure{"--etcd takes http:// or https:// URLs separated by commas, not '" + *v + "'"};
            }
            cfg.etcd_endpoints.emplace_back(url);
        }
        if (cfg.etcd_endpoints.empty()) return failure{std::string("--etcd needs at least one URL")};
    }
    if (auto* v = text("log-level")) {
        if (!log::set_level(*v)) return failure{"--log-level must be trace, debug, info, warn or error, not '" + *v + "'"};
    }
    // The segment must hold at least what one request may carry.
    if (cfg.log.segment_bytes < 1024) cfg.log.segment_bytes = 1024;

    if (auto* v = text("s3-bucket")) {
        if (v->empty() || v->front() == '/') return failure{"--s3-bucket must be BUCKET or BUCKET/PREFIX, not '" + *v + "'"};
        cfg.s3_bucket = *v;
        while (!cfg.s3_bucket.empty() && cfg.s3_bucket.back() == '/') cfg.s3_bucket.pop_back();
        s3_flags f;
        if (auto* e = text("s3-endpoint")) f.endpoint = *e;
        if (auto* r = text("s3-region")) f.region = *r;
        bool path_style = false;
        if (auto e = boolean(s, "s3-path-style", path_style)) return failure{*e};
        f.path_style = path_style;
        auto c = make_s3_config(f);
        if (!c) return failure{c.error()};
        cfg.s3 = std::move(*c);
    } else {
        // S3 settings on the command line without a bucket are a mistake (the broker would
        // quietly use the local directory); in the environment they may be meant for `skiff s3`.
        for (const char* f : {"s3-endpoint", "s3-region", "s3-path-style"}) {
            if (s.on_command_line.count(f)) return failure{"--" + std::string(f) + " needs --s3-bucket"};
        }
    }
    return cfg;
}

} // namespace

int serve_command(const std::vector<std::string>& args) {
    settings s;
    bool help = false;
    if (auto e = collect(args, s, help)) {
        std::fprintf(stderr, "skiff serve: %s\n", e->c_str());
        return 2;
    }
    if (help) {
        usage(stdout);
        return 0;
    }
    auto cfg = make_config(s);
    if (!cfg) {
        std::fprintf(stderr, "skiff serve: %s\n", cfg.error().c_str());
        return 2;
    }

    // Signals go to one thread that turns them into a stop request; every other thread (the
    // reactors inherit this mask) has them blocked.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    std::stop_source stop;
    std::atomic<bool> finished{false};
    std::thread signals([&set, &stop, &finished] {
        int received = 0;
        while (!finished.load()) {
            timespec ts{0, 200 * 1000 * 1000};
            int sig = sigtimedwait(&set, nullptr, &ts);
            if (sig <= 0) continue;
            if (++received == 1) {
                log::info("received {}, draining (send it again to exit at once)", sig == SIGTERM ? "SIGTERM" : "SIGINT");
                stop.request_stop();
            } else {
                log::warn("second signal: exiting without draining");
                std::_Exit(130);
            }
        }
    });
    auto r = broker::serve(std::move(*cfg), stop.get_token());
    finished = true;
    signals.join();
    if (!r) {
        std::fprintf(stderr, "skiff serve: %s\n", r.error().c_str());
        return 1;
    }
    return 0;
}

} // namespace skiff::cli
