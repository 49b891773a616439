// The flag table is the single list of `skiff serve`'s settings: CLI11 parses the command line
// from it, SKIFF_* variables and the config file's keys are derived from its names, --help and
// --print-config render it. Values stay text until make_broker_config validates them all in
// one place, whatever their source, so one flag has one error sentence.
#include "serve_config.hpp"

#include "config_file.hpp"
#include "s3_config.hpp"

#include <skiff/acl/authorizer.hpp>
#include <skiff/core/log.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/s3/credentials.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace skiff::cli {

namespace {

std::string ms(std::chrono::milliseconds v) { return std::to_string(v.count()); }
std::string yes_no(bool v) { return v ? "true" : "false"; }

using cfg_t = broker::broker_config;
const serve_flag flags[] = {
    {"kafka-addr", value_kind::text, "HOST:PORT", "Kafka listener", [](const cfg_t& c) { return c.kafka_addr; }},
    {"advertised-addr", value_kind::text, "HOST:PORT",
     "address put in Metadata (default: the address each client connected to)"},
    {"listeners", value_kind::text, "PROTO://HOST:PORT,...",
     "Kafka listeners with their security protocol (PLAINTEXT, SASL_PLAINTEXT; replaces --kafka-addr; docs/sasl.md)"},
    {"advertised-listeners", value_kind::text, "PROTO://HOST:PORT,...",
     "address put in Metadata for each listener (default: the address each client connected to)"},
    {"sasl-mechanisms", value_kind::text, "LIST", "SASL mechanisms SASL listeners offer",
     [](const cfg_t& c) {
         std::string out;
         for (const auto& m : c.sasl_mechanisms) out += (out.empty() ? "" : ",") + m;
         return out;
     }},
    {"max-reauth-ms", value_kind::number, "MS",
     "SASL session lifetime: clients re-authenticate within it or are disconnected (0: sessions never expire; "
     "Kafka's connections.max.reauth.ms)",
     [](const cfg_t& c) { return ms(c.max_reauth); }},
    {"failed-auth-delay-ms", value_kind::number, "MS", "a failed SASL authentication is answered this late",
     [](const cfg_t& c) { return ms(c.failed_auth_delay); }},
    {"http-tls", value_kind::boolean, "",
     "serve the metrics/traces/health endpoint over HTTPS with the --tls-cert-file certificate",
     [](const cfg_t& c) { return yes_no(c.http_tls); }},
    {"tls-cert-file", value_kind::text, "FILE",
     "PEM certificate (then its intermediates) of SSL and SASL_SSL listeners; reloaded on SIGHUP"},
    {"tls-key-file", value_kind::text, "FILE", "PEM private key of that certificate (unencrypted)"},
    {"tls-ca-file", value_kind::text, "FILE", "PEM CA certificates that client certificates must chain to (mTLS)"},
    {"tls-client-auth", value_kind::text, "none|requested|required",
     "ask TLS clients for a certificate (its subject becomes the principal on SSL listeners)",
     [](const cfg_t&) { return std::string("none"); }},
    {"tls-min-version", value_kind::text, "TLSv1.2|TLSv1.3", "oldest TLS version accepted",
     [](const cfg_t& c) { return c.tls.min_version; }},
    {"authorizer", value_kind::text, "none|acl",
     "acl: check every request against the stored ACLs (docs/acl.md); none: everyone may do everything",
     [](const cfg_t& c) { return std::string(c.authorization ? "acl" : "none"); }},
    {"super-users", value_kind::text, "User:A;User:B", "principals every ACL check allows (Kafka's super.users)"},
    {"allow-everyone-if-no-acl-found", value_kind::boolean, "",
     "a resource without any ACL is open to everyone (Kafka's allow.everyone.if.no.acl.found)",
     [](const cfg_t& c) { return yes_no(c.allow_everyone_if_no_acl_found); }},
    {"http-addr", value_kind::text, "HOST:PORT", "metrics/traces/health endpoint (\"off\" disables)",
     [](const cfg_t& c) { return c.http_addr; }},
    {"data-dir", value_kind::text, "DIR", "local directory store, the embedded default",
     [](const cfg_t& c) { return c.data_dir; }},
    {"s3-bucket", value_kind::text, "BUCKET[/PREFIX]", "keep the log in S3 instead of --data-dir"},
    {"s3-endpoint", value_kind::text, "URL", "S3 endpoint (also AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL)"},
    {"s3-region", value_kind::text, "NAME", "S3 region (also AWS_REGION, AWS_DEFAULT_REGION; default us-east-1)"},
    {"s3-path-style", value_kind::boolean, "", "path-style S3 addressing (automatic for IP endpoints)"},
    {"namespace", value_kind::text, "NS", "namespace (key prefix) in the store", [](const cfg_t& c) { return c.ns; },
     true},
    {"upload-mode", value_kind::text, "parallel|sequential",
     "upload a segment and its index together or one after the other",
     [](const cfg_t& c) {
         return std::string(c.log.mode == storage::upload_mode::parallel ? "parallel" : "sequential");
     }},
    {"flush-linger-ms", value_kind::text, "MS|adaptive",
     "adaptive: flush at once when idle, group commit under load; MS: wait this long for more data after an "
     "acks=all produce (fewer PUTs, more latency)",
     [](const cfg_t& c) { return c.log.linger ? ms(*c.log.linger) : std::string("adaptive"); }},
    {"flush-interval-ms", value_kind::number, "MS", "flush buffered data at least this often",
     [](const cfg_t& c) { return ms(c.log.max_age); }},
    {"segment-bytes", value_kind::number, "N", "flush when a partition buffers this much",
     [](const cfg_t& c) { return std::to_string(c.log.segment_bytes); }},
    {"max-inflight-flushes", value_kind::number, "N", "most segments of one partition uploading at once",
     [](const cfg_t& c) { return std::to_string(c.log.max_inflight_flushes); }},
    {"max-puts-per-second", value_kind::number, "N",
     "request budget: segment-upload PUTs per second for the whole broker (0: unlimited)",
     [](const cfg_t& c) { return fmt::format("{}", c.max_puts_per_second); }},
    {"hedge-after-ms", value_kind::text, "MS|adaptive|off",
     "send a segment PUT or GET again when unanswered after this (adaptive: the recent p99; at most 5% of requests)",
     [](const cfg_t& c) {
         if (!c.hedge.enabled) return std::string("off");
         return c.hedge.after ? ms(*c.hedge.after) : std::string("adaptive");
     }},
    {"put-price-per-1000", value_kind::text, "USD", "price per 1,000 PUTs the request-cost metric uses",
     [](const cfg_t& c) { return fmt::format("{}", c.put_price_per_1000); }},
    {"max-buffered-bytes", value_kind::number, "N",
     "produced bytes not yet stored, for the whole broker; beyond, produces wait (throttle_time_ms)",
     [](const cfg_t& c) { return std::to_string(c.max_buffered_bytes); }},
    {"max-partition-buffered-bytes", value_kind::number, "N", "the same bound for one partition",
     [](const cfg_t& c) { return std::to_string(c.log.max_pending_bytes); }},
    {"max-cache-bytes", value_kind::number, "N", "committed segments kept in memory for readers, for the whole broker",
     [](const cfg_t& c) { return std::to_string(c.max_cache_bytes); }},
    {"quota-produce-bytes-per-second", value_kind::number, "N",
     "produce quota of every client id without its own (0: none; docs/quotas.md)",
     [](const cfg_t& c) { return fmt::format("{}", c.quotas.defaults.produce_bytes_per_second); }},
    {"quota-fetch-bytes-per-second", value_kind::number, "N",
     "fetch quota of every client id without its own (0: none)",
     [](const cfg_t& c) { return fmt::format("{}", c.quotas.defaults.fetch_bytes_per_second); }},
    {"client-quotas", value_kind::text, "ID:produce=N,fetch=N;...",
     "quotas of named client ids, bytes per second (K/M/G suffixes)"},
    {"auto-create-topics", value_kind::boolean, "", "create topics on first Metadata request",
     [](const cfg_t& c) { return yes_no(c.auto_create_topics); }},
    {"default-partitions", value_kind::number, "N", "partitions of auto-created topics",
     [](const cfg_t& c) { return std::to_string(c.default_partitions); }},
    {"etcd", value_kind::text, "URL[,URL...]",
     "cluster mode: etcd client URLs (docs/cluster.md); none: a single broker"},
    {"node-id", value_kind::number, "N",
     "this broker's id (Kafka's node.id), shown in Metadata, FindCoordinator and DescribeCluster; unique in "
     "a cluster",
     [](const cfg_t& c) { return std::to_string(c.node_id); }},
    {"broker-id", value_kind::number, "N", "the same as --node-id (Kafka's older name, broker.id)"},
    {"lease-ttl-s", value_kind::number, "S", "cluster mode: a dead broker's partitions move after this many seconds",
     [](const cfg_t& c) { return std::to_string(c.lease_ttl.count()); }},
    {"rack", value_kind::text, "NAME", "cluster mode: this broker's rack, reported in Metadata"},
    {"cores", value_kind::number, "N", "reactor threads, one per core",
     [](const cfg_t& c) { return c.cores == 0 ? std::string("all cores") : std::to_string(c.cores); }},
    {"max-frame-bytes", value_kind::number, "N", "largest request accepted; larger ones close the connection",
     [](const cfg_t& c) { return std::to_string(c.max_frame_bytes); }},
    {"message-max-bytes", value_kind::number, "N",
     "largest record batch a topic takes unless its max.message.bytes says otherwise",
     [](const cfg_t& c) { return std::to_string(c.message_max_bytes); }},
    {"retention-ms", value_kind::number, "MS",
     "what a topic without retention.ms keeps, by the records' time (-1: everything)",
     [](const cfg_t& c) { return std::to_string(c.retention_ms); }},
    {"retention-bytes", value_kind::number, "N",
     "what a partition of a topic without retention.bytes keeps, in bytes (-1: everything)",
     [](const cfg_t& c) { return std::to_string(c.retention_bytes); }},
    {"file-delete-delay-ms", value_kind::number, "MS",
     "objects of segments that left a log are deleted this long after (a fetch reading one finishes)",
     [](const cfg_t& c) { return ms(c.log.delete_delay); }},
    {"manifest-every-segments", value_kind::number, "N",
     "a partition's manifest is rewritten after this many new segments (0: never)",
     [](const cfg_t& c) { return std::to_string(c.log.manifest_every_segments); }},
    {"time-index", value_kind::boolean, "",
     "write a .kfst time-index sidecar beside every segment, for readers that prune by time (docs/format.md)",
     [](const cfg_t& c) { return yes_no(c.log.time_index); }},
    {"merge-target-bytes", value_kind::number, "N",
     "adjacent small segments are merged into segments of about this size (0: no merging)",
     [](const cfg_t& c) { return std::to_string(c.log.merge_target_bytes); }},
    {"merge-age-ms", value_kind::number, "MS",
     "small segments are merged once the newest of a run is this old, even below half the target",
     [](const cfg_t& c) { return ms(c.log.merge_age); }},
    {"compaction-interval-ms", value_kind::number, "MS",
     "a compacted topic's partition is compacted at most this often (when it has new segments)",
     [](const cfg_t& c) { return ms(c.log.compaction_interval); }},
    {"compaction-map-bytes", value_kind::number, "N",
     "memory for a compaction pass's key map, per core; more distinct keys are compacted in rounds",
     [](const cfg_t& c) { return std::to_string(c.log.compaction_map_bytes); }},
    {"group-initial-rebalance-delay-ms", value_kind::number, "MS", "a new group waits this long for more members",
     [](const cfg_t& c) { return ms(c.group_initial_rebalance_delay); }},
    {"transaction-max-timeout-ms", value_kind::number, "MS", "the longest transaction.timeout.ms a producer may ask for",
     [](const cfg_t& c) { return ms(c.transaction_max_timeout); }},
    {"transactional-id-expiration-ms", value_kind::number, "MS",
     "a transactional id idle this long is forgotten (Kafka's transactional.id.expiration.ms)",
     [](const cfg_t& c) { return ms(c.transactional_id_expiration); }},
    {"iceberg-topics", value_kind::text, "T1,T2", "topics the broker appends to Iceberg tables in the store (docs/iceberg.md)"},
    {"iceberg-warehouse", value_kind::text, "PREFIX", "key prefix of the Iceberg tables (default iceberg/NAMESPACE)"},
    {"iceberg-location-base", value_kind::text, "URI",
     "the URI engines reach the store's root at, written into table metadata (default: the store's)"},
    {"iceberg-partition-by", value_kind::text, "day|partition|none", "Iceberg partitioning: day(timestamp), Kafka partition, none",
     [](const cfg_t& c) { return std::string(iceberg::to_string(c.iceberg.partition_by)); }},
    {"iceberg-project", value_kind::text, "[TOPIC/]NAME:TYPE:PATH;...",
     "typed Iceberg columns from JSON values, for every topic or TOPIC/ one (TYPE string|long|double|boolean|timestamptz, PATH $.a.b)"},
    {"iceberg-commit-interval-ms", value_kind::number, "MS", "time between Iceberg commits",
     [](const cfg_t& c) { return ms(c.iceberg.commit_interval); }},
    // The logger's own default; broker_config does not carry the level.
    {"log-level", value_kind::text, "LEVEL", "trace|debug|info|warn|error",
     [](const cfg_t&) { return std::string("info"); }},
};


// Where a value came from, for error sentences: "" for the command line (the user sees it).
std::string origin(const serve_options& o, std::string_view name) {
    auto it = o.values.find(name);
    if (it == o.values.end()) return {};
    switch (it->second.source) {
    case value_source::env: return " (from " + env_name(name) + ")";
    case value_source::file: return fmt::format(" (from {} line {})", o.config_path, it->second.line);
    case value_source::flag:
    case value_source::default_value: break;
    }
    return {};
}

// The validation below works on raw text, as the command line gives it.
struct raw_values {
    const serve_options& o;
    const std::string* text(std::string_view name) const {
        auto it = o.values.find(name);
        return it == o.values.end() ? nullptr : &it->second.value;
    }
    bool has(std::string_view name) const { return o.values.count(name) != 0; }
    // Set on the command line or in the config file, both meant for `skiff serve` alone
    // (SKIFF_S3_* variables may be meant for `skiff s3`).
    bool chosen(std::string_view name) const {
        auto it = o.values.find(name);
        return it != o.values.end() &&
               (it->second.source == value_source::flag || it->second.source == value_source::file);
    }
};

std::optional<std::string> number(const raw_values& s, const char* name, std::int64_t lo, std::int64_t hi,
                                  std::int64_t& out) {
    auto* t = s.text(name);
    if (!t) return std::nullopt;
    auto v = parse_flag_int(*t);
    if (!v || *v < lo || *v > hi) {
        return "--" + std::string(name) + " must be an integer from " + std::to_string(lo) + " to " +
               std::to_string(hi) + ", not '" + *t + "'";
    }
    out = *v;
    return std::nullopt;
}

std::optional<std::string> boolean(const raw_values& s, const char* name, bool& out) {
    auto* t = s.text(name);
    if (!t) return std::nullopt;
    auto v = parse_flag_bool(*t);
    if (!v) return "--" + std::string(name) + " must be true or false, not '" + *t + "'";
    out = *v;
    return std::nullopt;
}

bool wildcard_host(std::string_view addr) {
    return addr.starts_with("0.0.0.0:") || addr.starts_with("[::]:") || addr.starts_with(":");
}

std::string_view host_of(std::string_view addr) { return addr.substr(0, addr.rfind(':')); }

// Each value on its own; the combinations are checked by the caller.
result<broker::broker_config, std::string> make_config(const raw_values& s) {
    broker::broker_config cfg;
    auto text = [&](const char* name) { return s.text(name); };
    if (auto* v = text("kafka-addr")) {
        if (auto a = runtime::socket_address::parse(*v); !a) {
            return failure{"--kafka-addr must be HOST:PORT, not '" + *v + "': " + a.error()};
        }
        cfg.kafka_addr = *v;
    }
    if (auto* v = text("advertised-addr")) {
        auto colon = v->rfind(':');
        if (colon == std::string::npos || colon == 0 || !parse_flag_int(v->substr(colon + 1)) ||
            *parse_flag_int(v->substr(colon + 1)) <= 0 || *parse_flag_int(v->substr(colon + 1)) > 65535) {
            return failure{"--advertised-addr must be HOST:PORT, not '" + *v + "'"};
        }
        cfg.advertised_addr = *v;
    }
    if (auto* v = text("http-addr")) {
        cfg.http_addr = (*v == "off" || v->empty()) ? "" : *v;
        if (!cfg.http_addr.empty()) {
            if (auto a = runtime::socket_address::parse(cfg.http_addr); !a) {
                return failure{"--http-addr must be HOST:PORT or off, not '" + *v + "': " + a.error()};
            }
        }
    }
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
    if (s.has("max-puts-per-second")) cfg.max_puts_per_second = static_cast<double>(n);
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
    if (s.has("max-buffered-bytes")) cfg.max_buffered_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "max-partition-buffered-bytes", 1 << 16, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.has("max-partition-buffered-bytes")) cfg.log.max_pending_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "max-cache-bytes", 1 << 20, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.has("max-cache-bytes")) cfg.max_cache_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "quota-produce-bytes-per-second", 0, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.has("quota-produce-bytes-per-second")) {
        cfg.quotas.defaults.produce_bytes_per_second = static_cast<double>(n);
    }
    if (auto e = number(s, "quota-fetch-bytes-per-second", 0, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.has("quota-fetch-bytes-per-second")) {
        cfg.quotas.defaults.fetch_bytes_per_second = static_cast<double>(n);
    }
    if (auto* v = text("client-quotas")) {
        if (auto e = broker::parse_client_quotas(*v, cfg.quotas); !e.empty()) return failure{"--client-quotas: " + e};
    }
    if (auto* v = text("listeners")) {
        auto ls = broker::parse_listeners(*v);
        if (!ls) return failure{ls.error()};
        cfg.listeners = std::move(*ls);
    }
    if (auto* v = text("advertised-listeners")) {
        if (cfg.listeners.empty()) return failure{std::string("--advertised-listeners needs --listeners")};
        if (auto r = broker::apply_advertised_listeners(cfg.listeners, *v); !r) return failure{r.error()};
    }
    if (auto* v = text("sasl-mechanisms")) {
        cfg.sasl_mechanisms.clear();
        std::string_view rest = *v;
        while (!rest.empty()) {
            auto comma = rest.find(',');
            std::string m(rest.substr(0, comma));
            std::transform(m.begin(), m.end(), m.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
            if (m != "PLAIN" && m != "SCRAM-SHA-256" && m != "SCRAM-SHA-512") {
                return failure{"--sasl-mechanisms: unknown mechanism '" + m + "' (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"};
            }
            if (std::find(cfg.sasl_mechanisms.begin(), cfg.sasl_mechanisms.end(), m) == cfg.sasl_mechanisms.end()) {
                cfg.sasl_mechanisms.push_back(m);
            }
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
        }
        if (cfg.sasl_mechanisms.empty()) return failure{std::string("--sasl-mechanisms is empty")};
    }
    if (auto e = boolean(s, "http-tls", cfg.http_tls)) return failure{*e};
    if (auto* v = text("tls-cert-file")) cfg.tls.cert_file = *v;
    if (auto* v = text("tls-key-file")) cfg.tls.key_file = *v;
    if (auto* v = text("tls-ca-file")) cfg.tls.ca_file = *v;
    if (auto* v = text("tls-client-auth")) {
        if (*v == "none") {
            cfg.tls.client_auth_mode = tls::client_auth::none;
        } else if (*v == "requested") {
            cfg.tls.client_auth_mode = tls::client_auth::requested;
        } else if (*v == "required") {
            cfg.tls.client_auth_mode = tls::client_auth::required;
        } else {
            return failure{"--tls-client-auth must be none, requested or required, not '" + *v + "'"};
        }
    }
    if (auto* v = text("tls-min-version")) {
        if (*v != "TLSv1.2" && *v != "TLSv1.3") {
            return failure{"--tls-min-version must be TLSv1.2 or TLSv1.3, not '" + *v + "'"};
        }
        cfg.tls.min_version = *v;
    }
    if (auto e = number(s, "max-reauth-ms", 0, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.has("max-reauth-ms")) cfg.max_reauth = std::chrono::milliseconds(n);
    if (auto e = number(s, "failed-auth-delay-ms", 0, 60000, n)) return failure{*e};
    if (s.has("failed-auth-delay-ms")) cfg.failed_auth_delay = std::chrono::milliseconds(n);
    if (auto e = number(s, "flush-interval-ms", 1, 3600000, n)) return failure{*e};
    if (s.has("flush-interval-ms")) cfg.log.max_age = std::chrono::milliseconds(n);
    if (auto e = number(s, "segment-bytes", 1024, 1 << 30, n)) return failure{*e};
    if (s.has("segment-bytes")) cfg.log.segment_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "max-inflight-flushes", 1, 64, n)) return failure{*e};
    if (s.has("max-inflight-flushes")) cfg.log.max_inflight_flushes = static_cast<int>(n);
    if (auto e = boolean(s, "auto-create-topics", cfg.auto_create_topics)) return failure{*e};
    if (auto* v = text("authorizer")) {
        if (*v != "none" && *v != "acl") return failure{"--authorizer must be none or acl, not '" + *v + "'"};
        cfg.authorization = *v == "acl";
    }
    if (auto* v = text("super-users")) {
        auto users = acl::parse_super_users(*v);
        if (!users) {
            return failure{"--super-users must be principals like User:admin separated by ';', not '" + *v + "'"};
        }
        cfg.super_users = std::move(*users);
    }
    if (auto e = boolean(s, "allow-everyone-if-no-acl-found", cfg.allow_everyone_if_no_acl_found)) return failure{*e};
    if (auto e = number(s, "default-partitions", 1, 10000, n)) return failure{*e};
    if (s.has("default-partitions")) cfg.default_partitions = static_cast<std::int32_t>(n);
    if (auto e = number(s, "cores", 1, 1024, n)) return failure{*e};
    if (s.has("cores")) cfg.cores = static_cast<unsigned>(n);
    if (auto e = number(s, "max-frame-bytes", 1024, 1 << 30, n)) return failure{*e};
    if (s.has("max-frame-bytes")) cfg.max_frame_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "message-max-bytes", 0, 2147483647, n)) return failure{*e};
    if (s.has("message-max-bytes")) cfg.message_max_bytes = n;
    if (auto e = number(s, "retention-ms", -1, std::numeric_limits<std::int64_t>::max(), n)) return failure{*e};
    if (s.has("retention-ms")) cfg.retention_ms = n;
    if (auto e = number(s, "retention-bytes", -1, std::numeric_limits<std::int64_t>::max(), n)) return failure{*e};
    if (s.has("retention-bytes")) cfg.retention_bytes = n;
    if (auto e = number(s, "file-delete-delay-ms", 0, 86400000, n)) return failure{*e};
    if (s.has("file-delete-delay-ms")) cfg.log.delete_delay = std::chrono::milliseconds(n);
    if (auto e = number(s, "manifest-every-segments", 0, 1000000, n)) return failure{*e};
    if (s.has("manifest-every-segments")) {
        cfg.log.manifest_every_segments = static_cast<std::size_t>(n);
        cfg.log.manifests = n > 0;
    }
    if (auto e = boolean(s, "time-index", cfg.log.time_index)) return failure{*e};
    if (auto e = number(s, "merge-target-bytes", 0, 1ll << 30, n)) return failure{*e};
    if (s.has("merge-target-bytes")) cfg.log.merge_target_bytes = static_cast<std::uint64_t>(n);
    if (auto e = number(s, "merge-age-ms", 0, 7ll * 86400000, n)) return failure{*e};
    if (s.has("merge-age-ms")) cfg.log.merge_age = std::chrono::milliseconds(n);
    if (auto e = number(s, "compaction-interval-ms", 0, 86400000, n)) return failure{*e};
    if (s.has("compaction-interval-ms")) cfg.log.compaction_interval = std::chrono::milliseconds(n);
    if (auto e = number(s, "compaction-map-bytes", 1 << 16, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.has("compaction-map-bytes")) cfg.log.compaction_map_bytes = static_cast<std::size_t>(n);
    if (auto e = number(s, "group-initial-rebalance-delay-ms", 0, 300000, n)) return failure{*e};
    if (s.has("group-initial-rebalance-delay-ms")) {
        cfg.group_initial_rebalance_delay = std::chrono::milliseconds(n);
    }
    if (auto e = number(s, "transaction-max-timeout-ms", 1000, 86400000, n)) return failure{*e};
    if (s.has("transaction-max-timeout-ms")) cfg.transaction_max_timeout = std::chrono::milliseconds(n);
    if (auto e = number(s, "transactional-id-expiration-ms", 1000, std::int64_t{1} << 40, n)) return failure{*e};
    if (s.has("transactional-id-expiration-ms")) cfg.transactional_id_expiration = std::chrono::milliseconds(n);
    if (auto* v = text("iceberg-topics")) {
        std::string_view rest = *v;
        while (!rest.empty()) {
            auto comma = rest.find(',');
            std::string t(rest.substr(0, comma));
            if (t.empty() || t.size() > 249 ||
                !std::all_of(t.begin(), t.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-'; })) {
                return failure{"--iceberg-topics: '" + t + "' is not a topic name"};
            }
            cfg.iceberg.topics.push_back(std::move(t));
            if (comma == std::string_view::npos) break;
            rest.remove_prefix(comma + 1);
        }
    }
    if (auto* v = text("iceberg-warehouse")) cfg.iceberg.warehouse = *v;
    if (auto* v = text("iceberg-location-base")) cfg.iceberg.location_base = *v;
    if (auto* v = text("iceberg-partition-by")) {
        auto p = iceberg::parse_partitioning(*v);
        if (!p) return failure{"--iceberg-partition-by: " + p.error().message};
        cfg.iceberg.partition_by = *p;
    }
    if (auto* v = text("iceberg-project")) {
        std::string_view rest = *v;
        while (!rest.empty()) {
            auto semi = rest.find(';');
            auto one = iceberg::parse_projection_spec(rest.substr(0, semi));
            if (!one) return failure{"--iceberg-project: " + one.error().message};
            cfg.iceberg.projections.push_back(std::move(*one));
            if (semi == std::string_view::npos) break;
            rest.remove_prefix(semi + 1);
        }
        for (const auto& t : cfg.iceberg.topics) {
            if (auto c = iceberg::projections_for(cfg.iceberg.projections, t); !c) return failure{"--iceberg-project: " + c.error().message};
        }
        for (const auto& sp : cfg.iceberg.projections) {
            if (!sp.topic.empty() && std::find(cfg.iceberg.topics.begin(), cfg.iceberg.topics.end(), sp.topic) == cfg.iceberg.topics.end()) {
                return failure{"--iceberg-project: topic '" + sp.topic + "' is not in --iceberg-topics"};
            }
        }
    }
    if (auto e = number(s, "iceberg-commit-interval-ms", 10, 86400000, n)) return failure{*e};
    if (s.has("iceberg-commit-interval-ms")) cfg.iceberg.commit_interval = std::chrono::milliseconds(n);
    if (auto e = number(s, "broker-id", 0, 2147483647, n)) return failure{*e};
    if (s.has("broker-id")) cfg.node_id = static_cast<std::int32_t>(n);
    if (auto e = number(s, "node-id", 0, 2147483647, n)) return failure{*e};
    if (s.has("node-id")) {
        // Two names for one id (Kafka's node.id and broker.id): given both, they must agree.
        if (s.has("broker-id") && cfg.node_id != static_cast<std::int32_t>(n)) {
            return failure{"--node-id " + std::to_string(n) + " and --broker-id " + std::to_string(cfg.node_id) +
                           " name one id differently; give one of them"};
        }
        cfg.node_id = static_cast<std::int32_t>(n);
    }
    if (auto e = number(s, "lease-ttl-s", 2, 300, n)) return failure{*e};
    if (s.has("lease-ttl-s")) cfg.lease_ttl = std::chrono::seconds(n);
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
        bool path_style = false;
        if (auto e = boolean(s, "s3-path-style", path_style)) return failure{*e};
        s3_flags f;
        if (auto* e = text("s3-endpoint")) f.endpoint = *e;
        if (auto* r = text("s3-region")) f.region = *r;
        f.path_style = path_style;
        auto c = make_s3_config(f);
        if (!c) return failure{c.error()};
        cfg.s3 = std::move(*c);
    }
    return cfg;
}

// Settings that each make sense but not together. Checked before anything touches the disk or
// the network, so a contradiction is refused the same way by serve, --check and --print-config.
// These need only the raw values (and come before the S3 credentials are looked for).
std::optional<std::string> raw_contradiction(const serve_options& o) {
    raw_values s{o};
    auto named = [&](const char* name) { return "--" + std::string(name) + origin(o, name); };
    // Given at one level (both flags, both variables, both in the file) they contradict each
    // other. At different levels the bucket wins, as it always has: a service unit may give a
    // data directory for when no bucket is configured (docs/configuration.md).
    if (s.has("s3-bucket") && s.has("data-dir") &&
        o.values.find("s3-bucket")->second.source == o.values.find("data-dir")->second.source) {
        return named("data-dir") + " and " + named("s3-bucket") + " both choose where the log is kept; give one of them";
    }
    if (!s.has("s3-bucket")) {
        // Without a bucket these would be quietly ignored (the broker uses the local directory).
        for (const char* f : {"s3-endpoint", "s3-region", "s3-path-style"}) {
            if (s.chosen(f)) return named(f) + " needs --s3-bucket";
        }
    }
    if (!s.has("etcd")) {
        for (const char* f : {"rack", "lease-ttl-s"}) {
            if (s.has(f)) return named(f) + " is a cluster mode setting and needs --etcd";
        }
    }
    return std::nullopt;
}

// These need the parsed values.
std::optional<std::string> contradiction(const serve_options& o, const broker::broker_config& cfg) {
    auto named = [&](const char* name) { return "--" + std::string(name) + origin(o, name); };
    if (!cfg.listeners.empty() && (o.values.count("kafka-addr") || o.values.count("advertised-addr"))) {
        return fmt::format("{} replaces --kafka-addr and --advertised-addr; give one or the other",
                           named("listeners"));
    }
    if (cfg.clustered()) {
        // Other brokers send clients here: the address must be one they can reach.
        for (const auto& l : cfg.effective_listeners()) {
            const std::string& adv = l.advertised.empty() ? l.addr : l.advertised;
            if (!wildcard_host(adv)) continue;
            if (cfg.listeners.empty()) {
                return std::string("cluster mode needs --advertised-addr (or a --kafka-addr with a host other "
                                   "brokers' clients can reach)");
            }
            return "cluster mode needs --advertised-listeners for " + std::string(l.name()) +
                   " (or a listener host other brokers' clients can reach)";
        }
    }
    if (cfg.uses_tls() && (cfg.tls.cert_file.empty() || cfg.tls.key_file.empty())) {
        return std::string(cfg.http_tls ? "--http-tls" : "an SSL or SASL_SSL listener") +
               " needs --tls-cert-file and --tls-key-file";
    }
    if (cfg.http_tls && cfg.http_addr.empty()) return std::string("--http-tls needs an --http-addr");
    if (cfg.tls.client_auth_mode != tls::client_auth::none && cfg.tls.ca_file.empty()) {
        return fmt::format("{} needs --tls-ca-file (the CA client certificates chain to)", named("tls-client-auth"));
    }
    for (const auto& l : cfg.listeners) {
        if (cfg.http_addr.empty()) break;
        auto k = runtime::socket_address::parse(l.addr);
        auto h = runtime::socket_address::parse(cfg.http_addr);
        if (k && h && k->port() != 0 && k->port() == h->port() &&
            (host_of(l.addr) == host_of(cfg.http_addr) || wildcard_host(l.addr) || wildcard_host(cfg.http_addr))) {
            return fmt::format("the {} listener ({}) and {} ({}) are the same port; give them different ports",
                               l.name(), l.addr, named("http-addr"), cfg.http_addr);
        }
    }
    if (cfg.listeners.empty() && !cfg.http_addr.empty()) {
        auto k = runtime::socket_address::parse(cfg.kafka_addr);
        auto h = runtime::socket_address::parse(cfg.http_addr);
        if (k && h && k->port() != 0 && k->port() == h->port() &&
            (host_of(cfg.kafka_addr) == host_of(cfg.http_addr) || wildcard_host(cfg.kafka_addr) ||
             wildcard_host(cfg.http_addr))) {
            return fmt::format("{} ({}) and {} ({}) are the same port; give them different ports", named("kafka-addr"),
                               cfg.kafka_addr, named("http-addr"), cfg.http_addr);
        }
    }
    return std::nullopt;
}

} // namespace

std::optional<bool> parse_flag_bool(std::string_view v) {
    if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
    if (v == "false" || v == "0" || v == "no" || v == "off") return false;
    return std::nullopt;
}

std::optional<std::int64_t> parse_flag_int(std::string_view v) {
    std::int64_t out = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    if (ec != std::errc() || p != v.data() + v.size()) return std::nullopt;
    return out;
}

std::span<const serve_flag> serve_flags() noexcept { return flags; }

const serve_flag* find_serve_flag(std::string_view name) noexcept {
    for (auto& f : flags) {
        if (name == f.name) return &f;
    }
    return nullptr;
}

std::string env_name(std::string_view flag) {
    std::string out = "SKIFF_";
    for (char c : flag) out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    return out;
}

env_fn process_environment() {
    return [](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());
        if (!v) return std::nullopt;
        return std::string(v);
    };
}

void print_serve_usage(std::FILE* out) {
    std::fputs("usage: skiff serve [flags]\n"
               "       skiff serve --config skiff.toml [flags]\n"
               "\n"
               "Runs the Kafka broker. With no flags it keeps its log in ./skiff-data and listens on\n"
               "0.0.0.0:9092, so `kcat -b 127.0.0.1:9092 -P -t demo` just works. Every flag can also be\n"
               "set with an environment variable (--segment-bytes is SKIFF_SEGMENT_BYTES) and as a key of\n"
               "the --config file (segment-bytes = 1048576); a flag wins over the environment, which wins\n"
               "over the file. S3 credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/\n"
               "AWS_SESSION_TOKEN or ~/.aws (AWS_PROFILE). Before serving, the broker refuses (exit 1,\n"
               "one sentence) a data directory it cannot create, write or lock, an S3 bucket it cannot\n"
               "list, and a port in use. SIGTERM or SIGINT drains: stop accepting, answer what was read,\n"
               "flush every partition, exit 0. docs/configuration.md has the details.\n"
               "\n"
               "modes:\n"
               "  --config FILE                              a TOML file of flag = value lines (also SKIFF_CONFIG)\n"
               "  --print-config                             print the effective settings as TOML, with their\n"
               "                                             sources and secrets masked, and exit\n"
               "  --check                                    check the settings, the store and the ports, print\n"
               "                                             one line per check, and exit (0: all passed)\n"
               "  -h, --help                                 this text\n"
               "\n"
               "flags:\n",
               out);
    const broker::broker_config defaults;
    for (auto& f : flags) {
        std::string left = std::string("  --") + f.name + (f.meta[0] ? std::string(" ") + f.meta : "");
        std::string help = f.help;
        if (f.default_of) {
            const std::string d = f.default_of(defaults);
            help += " (default " + (f.quote_default ? "\"" + d + "\"" : d) + ")";
        }
        std::fprintf(out, "%-44s %s\n", left.c_str(), help.c_str());
    }
}

result<serve_options, std::string> parse_serve_options(const std::vector<std::string>& args, const env_fn& env) {
    serve_options o;
    CLI::App app{"skiff serve"};
    app.set_help_flag();     // our own text (print_serve_usage), with the defaults filled in
    app.allow_extras(true);  // reported below as one sentence in our words
    app.add_flag("-h,--help", o.help);
    std::string config;
    auto* config_opt = app.add_option("--config", config)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_flag("--print-config", o.print_config);
    app.add_flag("--check", o.check);
    std::vector<std::string> given(std::size(flags));
    std::vector<CLI::Option*> options(std::size(flags));
    for (std::size_t i = 0; i < std::size(flags); ++i) {
        auto* opt = app.add_option(std::string("--") + flags[i].name, given[i]);
        // As before CLI11: a repeated flag takes its last value (wrappers append overrides).
        opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        if (flags[i].kind == value_kind::boolean) opt->expected(0, 1); // --s3-path-style [true|false]
        options[i] = opt;
    }
    std::vector<std::string> reversed(args.rbegin(), args.rend()); // CLI11 pops from the back
    try {
        app.parse(reversed);
    } catch (const CLI::ArgumentMismatch& e) {
        // "--segment-bytes: 1 required N missing": the flag is the part before the colon.
        std::string what = e.what();
        std::string name = what.substr(0, what.find(':'));
        if (auto* f = find_serve_flag(std::string_view(name).substr(std::min<std::size_t>(2, name.size())))) {
            return failure{name + " needs a value (" + f->meta + ")"};
        }
        if (name == "--config") return failure{std::string("--config needs a value (FILE)")};
        return failure{what};
    } catch (const CLI::ParseError& e) {
        return failure{std::string(e.what())};
    }
    if (auto extra = app.remaining(); !extra.empty()) {
        const std::string& a = extra.front();
        if (a.starts_with("-")) {
            return failure{"unknown flag " + a.substr(0, a.find('=')) + " (see skiff serve --help)"};
        }
        return failure{"unexpected argument '" + a + "'"};
    }
    if (o.help) return o;

    for (std::size_t i = 0; i < std::size(flags); ++i) {
        if (options[i]->count() == 0) continue;
        setting st;
        // A bare boolean flag means true.
        st.value = flags[i].kind == value_kind::boolean && given[i].empty() ? "true" : given[i];
        st.source = value_source::flag;
        o.values[flags[i].name] = std::move(st);
    }
    for (auto& f : flags) {
        if (o.values.count(f.name)) continue;
        // An empty variable counts as unset: `SKIFF_X= skiff serve` is how shells unset one.
        if (auto v = env(env_name(f.name)); v && !v->empty()) {
            setting st;
            st.value = *v;
            st.source = value_source::env;
            o.values[f.name] = std::move(st);
        }
    }
    if (config_opt->count() > 0) {
        if (config.empty()) return failure{std::string("--config must name a file")};
        o.config_path = config;
    } else if (auto v = env("SKIFF_CONFIG"); v && !v->empty()) {
        o.config_path = *v;
    }
    if (!o.config_path.empty()) {
        auto entries = read_config_file(o.config_path);
        if (!entries) return failure{entries.error()};
        for (auto& e : *entries) {
            const serve_flag* f = find_serve_flag(e.key);
            if (!f) return failure{fmt::format("unknown key '{}' in {} (line {})", e.key, o.config_path, e.line)};
            const bool fits = f->kind == value_kind::number    ? e.type == toml_type::integer
                              : f->kind == value_kind::boolean ? e.type == toml_type::boolean
                                                               : e.type == toml_type::string ||
                                                                     e.type == toml_type::integer ||
                                                                     e.type == toml_type::floating;
            if (!fits) {
                const char* want = f->kind == value_kind::number    ? "an integer"
                                   : f->kind == value_kind::boolean ? "true or false"
                                                                    : "a string";
                return failure{fmt::format("key '{}' in {} (line {}) must be {}, not {}", e.key, o.config_path, e.line,
                                           want, describe(e.type))};
            }
            if (o.values.count(f->name)) continue; // a flag or a variable wins
            setting st;
            st.value = e.value;
            st.source = value_source::file;
            st.line = e.line;
            o.values[f->name] = std::move(st);
        }
    }
    return o;
}

result<broker::broker_config, std::string> make_broker_config(const serve_options& o) {
    if (auto c = raw_contradiction(o)) return failure{std::move(*c)};
    raw_values s{o};
    auto cfg = make_config(s);
    if (!cfg) {
        // The sentence names the flag; say where its value came from when it was not typed.
        std::string e = cfg.error();
        if (e.starts_with("--")) {
            std::size_t end = 2;
            while (end < e.size() && (std::isalnum(static_cast<unsigned char>(e[end])) || e[end] == '-')) ++end;
            const std::string name = e.substr(2, end - 2);
            if (find_serve_flag(name)) e += origin(o, name);
        }
        return failure{std::move(e)};
    }
    if (auto c = contradiction(o, *cfg)) return failure{std::move(*c)};
    return cfg;
}

} // namespace skiff::cli
