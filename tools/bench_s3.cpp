// skiff-bench-s3: PUT/GET latency, throughput and client CPU per request of skiff's S3 client.
//
// One reactor (one core, one thread). For every cell (op, size, concurrency) it starts
// `concurrency` worker coroutines that share a request counter and loop until the cell's
// requests are done, records each request's latency (steady clock), and measures the process's
// CPU time (getrusage user+sys) around the cell: the client runs on this one thread, so that is
// the client's CPU. With --server-pid it also reports the server process's CPU over the cell
// (/proc/PID/stat), to show whether the server is the limit.
//
// Keys are PREFIX/<size in bytes>/<i>, i in [0, requests): PUT cells write them, GET cells
// read them back, so run put before get. tools/bench_s3_boto3.py runs the same cells with
// boto3 and prints the same JSON lines; tools/bench-s3.sh runs both side by side.
#include <skiff/core/allocator.hpp>
#include <skiff/core/log.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/s3/credentials.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace skiff;

constexpr const char* usage =
    "usage: skiff-bench-s3 [options]\n"
    "\n"
    "  --endpoint URL        S3 endpoint (default: env S3_ENDPOINT)\n"
    "  --bucket NAME         bucket (default: env S3_BUCKET)\n"
    "  --region NAME         region (default: env AWS_REGION or us-east-1)\n"
    "  --sizes LIST          object sizes, e.g. 1K,64K,1M,8M (default 1K,64K,1M,8M)\n"
    "  --concurrency LIST    requests in flight, e.g. 1,8,64 (default 1,8,64)\n"
    "  --ops LIST            put,get,pair (default put,get; GET reads what PUT wrote; pair: a\n"
    "                        segment and a 64-byte index PUT together, timed as one)\n"
    "  --requests N          requests per cell (overrides the three options below)\n"
    "  --byte-budget SIZE    bytes per cell: requests = budget / size ... (default 256M)\n"
    "  --max-requests N      ... at most N (default 200)\n"
    "  --min-requests N      ... at least N (default 16)\n"
    "  --prefix P            key prefix (default bench)\n"
    "  --server-pid PID      also report this process's CPU time per cell (the S3 server)\n"
    "  --json                one JSON line per cell on stdout (default: a readable line)\n"
    "  --raw                 with --json: every request's latency too (latency_ms)\n"
    "\n"
    "Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or ~/.aws). Exit status 1 when any\n"
    "request failed, 2 on bad usage.\n";

struct options {
    std::string endpoint, bucket, region, prefix = "bench";
    std::vector<std::uint64_t> sizes;
    std::vector<unsigned> concurrency;
    std::vector<std::string> ops;
    std::optional<std::uint64_t> requests;
    std::uint64_t byte_budget = std::uint64_t{256} << 20;
    std::uint64_t max_requests = 200, min_requests = 16;
    long server_pid = 0;
    bool json = false;
    bool raw = false; // every request's latency in the JSON line (latency_ms)
};

std::vector<std::string> split(std::string_view s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= s.size()) {
        auto comma = s.find(',', start);
        if (comma == std::string_view::npos) comma = s.size();
        if (comma > start) out.emplace_back(s.substr(start, comma - start));
        start = comma + 1;
    }
    return out;
}

// "1K" = 1024, "8M", "1MiB", "100" (bytes), "1G".
std::optional<std::uint64_t> parse_size(std::string_view s) {
    std::size_t digits = 0;
    while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
    if (digits == 0 || digits > 12) return std::nullopt;
    std::uint64_t n = std::stoull(std::string(s.substr(0, digits)));
    std::string unit(s.substr(digits));
    for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (unit.empty() || unit == "B") return n;
    if (unit == "K" || unit == "KB" || unit == "KIB") return n << 10;
    if (unit == "M" || unit == "MB" || unit == "MIB") return n << 20;
    if (unit == "G" || unit == "GB" || unit == "GIB") return n << 30;
    return std::nullopt;
}

std::string size_label(std::uint64_t n) {
    if (n >= (1u << 20) && n % (1u << 20) == 0) return fmt::format("{}M", n >> 20);
    if (n >= (1u << 10) && n % (1u << 10) == 0) return fmt::format("{}K", n >> 10);
    return fmt::format("{}", n);
}

std::uint64_t requests_for(const options& o, std::uint64_t size) {
    if (o.requests) return *o.requests;
    std::uint64_t n = size ? o.byte_budget / size : o.max_requests;
    return std::max(o.min_requests, std::min(o.max_requests, n));
}

struct cpu_times {
    double user = 0, sys = 0;
};

cpu_times cpu_seconds_self() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    return cpu_times{tv(ru.ru_utime), tv(ru.ru_stime)};
}

// utime + stime of a process (all its threads), in seconds; nullopt when unreadable.
std::optional<double> cpu_seconds_of(long pid) {
    if (pid <= 0) return std::nullopt;
    std::ifstream f(fmt::format("/proc/{}/stat", pid));
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto paren = stat.rfind(')');
    if (!f.good() && stat.empty()) return std::nullopt;
    if (paren == std::string::npos) return std::nullopt;
    std::istringstream rest(stat.substr(paren + 1));
    std::vector<std::string> fields; // fields[0] is field 3 (state)
    for (std::string w; rest >> w;) fields.push_back(w);
    if (fields.size() < 13) return std::nullopt;
    const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    return (std::stod(fields[11]) + std::stod(fields[12])) / ticks; // utime (14), stime (15)
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0;
    auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1]; // nearest rank
}

struct cell_state {
    s3::client* client = nullptr;
    std::string bucket;
    std::string prefix;
    bool put = true;
    bool pair = false; // a segment and its index, PUT together: the storage floor of an ack
    std::uint64_t size = 0;
    std::uint64_t requests = 0;
    std::uint64_t next = 0; // next request index to issue (shared by the workers)
    std::span<const char> body;
    std::vector<double> latency_ms;
    std::uint64_t errors = 0;
    std::string first_error;
};

void record_error(cell_state* st, std::string what) {
    if (st->errors++ == 0) st->first_error = std::move(what);
}

runtime::task<void> worker(cell_state* st) {
    while (st->next < st->requests) {
        const std::uint64_t i = st->next++;
        const std::string key = fmt::format("{}/{}/{}", st->prefix, st->size, i);
        const auto t0 = std::chrono::steady_clock::now();
        if (st->pair) {
            // What a flush does: the .kfs and its .index (a few dozen bytes) in one round trip.
            const std::string index_key = key + ".index";
            auto both = co_await runtime::when_all(st->client->put_object(st->bucket, key, st->body),
                                                   st->client->put_object(st->bucket, index_key,
                                                                          st->body.subspan(0, std::min<std::size_t>(st->body.size(), 64))));
            auto& [a, b] = both;
            if (!a) record_error(st, fmt::format("PUT {}: {}", key, a.error().message));
            if (!b) record_error(st, fmt::format("PUT {}: {}", index_key, b.error().message));
        } else if (st->put) {
            auto r = co_await st->client->put_object(st->bucket, key, st->body);
            if (!r) record_error(st, fmt::format("PUT {}: {} ({})", key, s3::to_string(r.error().code), r.error().message));
        } else {
            auto r = co_await st->client->get_object(st->bucket, key);
            if (!r) record_error(st, fmt::format("GET {}: {} ({})", key, s3::to_string(r.error().code), r.error().message));
            else if (r->body.size() != st->size)
                record_error(st, fmt::format("GET {}: {} bytes, expected {}", key, r->body.size(), st->size));
        }
        const auto t1 = std::chrono::steady_clock::now();
        st->latency_ms[i] = std::chrono::duration<double, std::milli>(t1 - t0).count();
    }
}

// Runs one cell and returns its JSON line.
runtime::task<nlohmann::json> run_cell(s3::client* client, const options* o, std::string op, std::uint64_t size,
                                       unsigned conc, const std::string* payload) {
    cell_state st;
    st.client = client;
    st.bucket = o->bucket;
    st.prefix = o->prefix;
    st.put = op == "put" || op == "pair";
    st.pair = op == "pair";
    st.size = size;
    st.requests = requests_for(*o, size);
    st.body = std::span<const char>(payload->data(), size);
    st.latency_ms.assign(st.requests, 0.0);
    const auto kind = st.put ? s3::op_kind::put : s3::op_kind::get;
    const std::uint64_t retries0 = client->stats().of(kind).retries;

    std::vector<runtime::task<void>> workers;
    workers.reserve(conc);
    for (unsigned k = 0; k < conc; ++k) workers.push_back(worker(&st));

    const std::uint64_t turns0 = runtime::reactor::local().loop_turns();
    const auto server0 = cpu_seconds_of(o->server_pid);
    const cpu_times cpu0 = cpu_seconds_self();
    const auto t0 = std::chrono::steady_clock::now();
    auto done = co_await runtime::when_all(std::move(workers));
    const auto t1 = std::chrono::steady_clock::now();
    const cpu_times cpu1 = cpu_seconds_self();
    const auto server1 = cpu_seconds_of(o->server_pid);
    const std::uint64_t turns = runtime::reactor::local().loop_turns() - turns0;
    (void)done;

    const double wall = std::chrono::duration<double>(t1 - t0).count();
    const double user = cpu1.user - cpu0.user, sys = cpu1.sys - cpu0.sys;
    const double cpu = user + sys;
    const double n = static_cast<double>(st.requests);
    std::vector<double> sorted = st.latency_ms;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double v : sorted) sum += v;

    nlohmann::json j;
    j["tool"] = "skiff";
    j["op"] = op;
    j["size"] = size_label(size);
    j["size_bytes"] = size;
    j["concurrency"] = conc;
    j["requests"] = st.requests;
    j["errors"] = st.errors;
    j["retries"] = client->stats().of(kind).retries - retries0;
    j["wall_s"] = wall;
    j["p50_ms"] = percentile(sorted, 0.50);
    j["p99_ms"] = percentile(sorted, 0.99);
    j["mean_ms"] = sorted.empty() ? 0.0 : sum / n;
    j["max_ms"] = sorted.empty() ? 0.0 : sorted.back();
    j["req_per_s"] = wall > 0 ? n / wall : 0.0;
    j["mib_per_s"] = wall > 0 ? n * static_cast<double>(size) / wall / (1024.0 * 1024.0) : 0.0;
    j["cpu_s"] = cpu;
    j["user_s"] = user;
    j["sys_s"] = sys;
    j["cpu_us_per_req"] = cpu / n * 1e6;
    j["cpu_util"] = wall > 0 ? cpu / wall : 0.0;
    j["loop_turns_per_req"] = static_cast<double>(turns) / n;
    if (server0 && server1) {
        j["server_cpu_s"] = *server1 - *server0;
        j["server_cpu_us_per_req"] = (*server1 - *server0) / n * 1e6;
        j["server_cpu_util"] = wall > 0 ? (*server1 - *server0) / wall : 0.0;
    }
    if (st.errors) j["first_error"] = st.first_error;
    if (o->raw) j["latency_ms"] = st.latency_ms;
    co_return j;
}

void print_cell(const options& o, const nlohmann::json& j) {
    if (o.json) {
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("%-3s %5s c=%-3u n=%-4llu p50 %8.2f ms  p99 %8.2f ms  %8.1f req/s  %8.2f MiB/s  cpu %7.1f us/req%s\n",
                    j["op"].get<std::string>().c_str(), j["size"].get<std::string>().c_str(),
                    j["concurrency"].get<unsigned>(), static_cast<unsigned long long>(j["requests"].get<std::uint64_t>()),
                    j["p50_ms"].get<double>(), j["p99_ms"].get<double>(), j["req_per_s"].get<double>(),
                    j["mib_per_s"].get<double>(), j["cpu_us_per_req"].get<double>(),
                    j["errors"].get<std::uint64_t>() ? fmt::format("  ERRORS {}", j["errors"].get<std::uint64_t>()).c_str() : "");
    }
    std::fflush(stdout);
    if (j.contains("first_error"))
        std::fprintf(stderr, "skiff-bench-s3: %s/%s/c%u: %llu errors, first: %s\n", j["op"].get<std::string>().c_str(),
                     j["size"].get<std::string>().c_str(), j["concurrency"].get<unsigned>(),
                     static_cast<unsigned long long>(j["errors"].get<std::uint64_t>()),
                     j["first_error"].get<std::string>().c_str());
}

runtime::task<int> run_all(s3::client_config cfg, const options* o) {
    auto created = s3::client::create(std::move(cfg));
    if (!created) {
        std::fprintf(stderr, "skiff-bench-s3: %s\n", created.error().c_str());
        co_return 1;
    }
    s3::client* client = created->get();

    std::uint64_t largest = 0;
    for (auto s : o->sizes) largest = std::max(largest, s);
    std::string payload(largest, '\0');
    std::uint64_t x = 0x9e3779b97f4a7c15ull; // xorshift: incompressible, deterministic
    for (auto& ch : payload) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ch = static_cast<char>(x);
    }

    // One untimed request so connection setup code paths and lazy initialisation are warm.
    {
        const std::string warm_key = o->prefix + "/warmup";
        auto w = co_await client->put_object(o->bucket, warm_key, std::span<const char>(payload.data(), 0));
        if (!w) {
            std::fprintf(stderr, "skiff-bench-s3: warm-up PUT failed: %s\n", w.error().message.c_str());
            co_return 1;
        }
    }

    std::uint64_t errors = 0;
    for (const auto& op : o->ops)
        for (auto size : o->sizes)
            for (auto conc : o->concurrency) {
                nlohmann::json j = co_await run_cell(client, o, op, size, conc, &payload);
                errors += j["errors"].get<std::uint64_t>();
                print_cell(*o, j);
            }
    co_return errors ? 1 : 0;
}

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
}

} // namespace

int main(int argc, char** argv) {
    skiff::tune_allocator();
    options o;
    std::string sizes = "1K,64K,1M,8M", concs = "1,8,64", ops = "put,get";
    auto bad = [](const std::string& msg) {
        std::fprintf(stderr, "skiff-bench-s3: %s\n%s", msg.c_str(), usage);
        return 2;
    };
    auto number = [](const std::string& s) -> std::optional<std::uint64_t> {
        if (s.empty() || s.size() > 12 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
        return std::stoull(s);
    };
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(usage, stdout);
            return 0;
        }
        if (a == "--raw") {
            o.raw = true;
            continue;
        }
        if (a == "--json") {
            o.json = true;
            continue;
        }
        if (i + 1 >= argc) return bad(fmt::format("{} needs a value (or is unknown)", a));
        std::string v = argv[++i];
        if (a == "--endpoint") o.endpoint = v;
        else if (a == "--bucket") o.bucket = v;
        else if (a == "--region") o.region = v;
        else if (a == "--prefix") o.prefix = v;
        else if (a == "--sizes") sizes = v;
        else if (a == "--concurrency") concs = v;
        else if (a == "--ops") ops = v;
        else if (a == "--byte-budget") {
            auto b = parse_size(v);
            if (!b || *b == 0) return bad(fmt::format("bad --byte-budget '{}'", v));
            o.byte_budget = *b;
        } else if (a == "--requests" || a == "--max-requests" || a == "--min-requests" || a == "--server-pid") {
            auto n = number(v);
            if (!n || *n == 0) return bad(fmt::format("{} needs a positive number, not '{}'", a, v));
            if (a == "--requests") o.requests = *n;
            else if (a == "--max-requests") o.max_requests = *n;
            else if (a == "--min-requests") o.min_requests = *n;
            else o.server_pid = static_cast<long>(*n);
        } else {
            return bad(fmt::format("unknown option '{}'", a));
        }
    }
    for (auto& s : split(sizes)) {
        auto n = parse_size(s);
        if (!n || *n == 0) return bad(fmt::format("bad size '{}'", s));
        o.sizes.push_back(*n);
    }
    for (auto& s : split(concs)) {
        auto n = number(s);
        if (!n || *n == 0 || *n > 4096) return bad(fmt::format("bad concurrency '{}'", s));
        o.concurrency.push_back(static_cast<unsigned>(*n));
    }
    for (auto& s : split(ops)) {
        if (s != "put" && s != "get" && s != "pair") return bad(fmt::format("bad op '{}' (put, get or pair)", s));
        o.ops.push_back(s);
    }
    if (o.sizes.empty() || o.concurrency.empty() || o.ops.empty()) return bad("empty --sizes, --concurrency or --ops");
    if (o.min_requests > o.max_requests) return bad("--min-requests is above --max-requests");
    if (o.endpoint.empty()) o.endpoint = env("S3_ENDPOINT").value_or("");
    if (o.bucket.empty()) o.bucket = env("S3_BUCKET").value_or("");
    if (o.endpoint.empty() || o.bucket.empty()) return bad("--endpoint and --bucket are needed (or S3_ENDPOINT, S3_BUCKET)");

    log::set_level(log::level::warn);
    auto creds = s3::load_credentials(s3::process_env());
    if (!creds) {
        std::fprintf(stderr, "skiff-bench-s3: %s\n", creds.error().c_str());
        return 1;
    }
    s3::client_config cfg;
    cfg.creds = creds->creds;
    cfg.endpoint = o.endpoint;
    cfg.region = !o.region.empty() ? o.region
                 : env("AWS_REGION")  ? *env("AWS_REGION")
                 : !creds->region.empty() ? creds->region
                                          : std::string("us-east-1");
    cfg.path_style = true;

    auto reactor = runtime::reactor::create(0);
    if (!reactor) {
        std::fprintf(stderr, "skiff-bench-s3: %s\n", reactor.error().c_str());
        return 1;
    }
    return (*reactor)->run_until_complete(run_all(std::move(cfg), &o));
}
