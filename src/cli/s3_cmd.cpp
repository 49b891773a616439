// `skiff s3 ls|get|put|rm|stat`: the broker's S3 client behind a command for operators.
// Errors are one plain sentence on stderr and a non-zero exit status.
#include "commands.hpp"
#include "s3_config.hpp"

#include <skiff/core/log.hpp>
#include <skiff/core/parse_int.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/s3/client.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace skiff::cli {

namespace {

constexpr const char* s3_usage =
    "usage: skiff s3 <verb> [options]\n"
    "\n"
    "  skiff s3 ls   s3://BUCKET[/PREFIX]        list keys (all pages) with their sizes\n"
    "  skiff s3 get  s3://BUCKET/KEY [FILE|-]    download (default: to stdout)\n"
    "  skiff s3 put  s3://BUCKET/KEY FILE|-      upload a file (or stdin)\n"
    "  skiff s3 rm   s3://BUCKET/KEY             delete\n"
    "  skiff s3 stat s3://BUCKET/KEY             size, ETag and modification time\n"
    "\n"
    "options:\n"
    "  --s3-endpoint URL   endpoint (env SKIFF_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL)\n"
    "  --s3-region NAME    region (env SKIFF_S3_REGION, AWS_REGION, AWS_DEFAULT_REGION; default us-east-1)\n"
    "  --s3-path-style     path-style addressing (automatic for IP endpoints)\n"
    "  --range A-B|A-|-N   (get) byte range\n"
    "  --if-none-match     (put) fail if the key already exists\n"
    "  --timeout-ms N      overall deadline per operation (default 60000)\n"
    "  -v                  log retries and requests to stderr\n"
    "\n"
    "credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, or\n"
    "~/.aws/credentials and ~/.aws/config with AWS_PROFILE.\n";

struct s3_url {
    std::string bucket;
    std::string key;
};

std::optional<s3_url> parse_s3_url(const std::string& u) {
    constexpr std::string_view scheme = "s3://";
    if (u.compare(0, scheme.size(), scheme) != 0) return std::nullopt;
    std::string rest = u.substr(scheme.size());
    auto slash = rest.find('/');
    s3_url out;
    out.bucket = rest.substr(0, slash);
    if (slash != std::string::npos) out.key = rest.substr(slash + 1);
    if (out.bucket.empty()) return std::nullopt;
    return out;
}

std::optional<s3::byte_range> parse_range(const std::string& r) {
    auto dash = r.find('-');
    if (dash == std::string::npos) return std::nullopt;
    auto num = [](const std::string& s) { return parse_u64(s); };
    std::string a = r.substr(0, dash), b = r.substr(dash + 1);
    if (a.empty()) {
        auto n = num(b);
        if (!n) return std::nullopt;
        return s3::byte_range::suffix(*n);
    }
    auto first = num(a);
    if (!first) return std::nullopt;
    if (b.empty()) return s3::byte_range::starting_at(*first);
    auto last = num(b);
    if (!last || *last < *first) return std::nullopt;
    return s3::byte_range::between(*first, *last);
}

int fail(const std::string& msg) {
    std::fprintf(stderr, "skiff: %s\n", msg.c_str());
    return 1;
}

std::string describe_error(const s3::error& e) { return e.message.empty() ? s3::to_string(e.code) : e.message; }

runtime::task<int> run_verb(s3::client* c, std::string verb, s3_url url, std::vector<std::string> pos,
                            std::optional<s3::byte_range> range, bool if_none_match, std::string* upload) {
    if (verb == "ls") {
        s3::list_request req;
        req.prefix = url.key;
        std::uint64_t count = 0;
        for (;;) {
            auto page = co_await c->list_objects_v2(url.bucket, req);
            if (!page) co_return fail(describe_error(page.error()));
            for (auto& o : page->objects) {
                std::printf("%12llu  %s\n", static_cast<unsigned long long>(o.size), o.key.c_str());
                ++count;
            }
            if (!page->is_truncated) break;
            req.continuation_token = page->next_continuation_token;
        }
        std::fflush(stdout);
        co_return 0;
    }
    if (url.key.empty()) co_return fail(fmt::format("'{}' needs s3://BUCKET/KEY, not just a bucket", verb));
    if (verb == "get") {
        auto r = co_await c->get_object(url.bucket, url.key, range);
        if (!r) co_return fail(describe_error(r.error()));
        std::string dest = pos.empty() ? "-" : pos[0];
        if (dest == "-") {
            std::fwrite(r->body.data(), 1, r->body.size(), stdout);
            std::fflush(stdout);
        } else {
            std::ofstream f(dest, std::ios::binary | std::ios::trunc);
            f.write(r->body.data(), static_cast<std::streamsize>(r->body.size()));
            f.close();
            if (!f) co_return fail(fmt::format("cannot write '{}': {}", dest, std::strerror(errno)));
        }
        co_return 0;
    }
    if (verb == "put") {
        s3::put_options opts;
        opts.if_none_match = if_none_match;
        auto r = co_await c->put_object(url.bucket, url.key, std::span<const char>(upload->data(), upload->size()), opts);
        if (!r) co_return fail(describe_error(r.error()));
        std::fprintf(stderr, "uploaded %zu bytes to s3://%s/%s %s\n", upload->size(), url.bucket.c_str(),
                     url.key.c_str(), r->etag.c_str());
        co_return 0;
    }
    if (verb == "rm") {
        auto r = co_await c->delete_object(url.bucket, url.key);
        if (!r) co_return fail(describe_error(r.error()));
        co_return 0;
    }
    if (verb == "stat") {
        auto r = co_await c->head_object(url.bucket, url.key);
        if (!r) co_return fail(describe_error(r.error()));
        std::printf("key:           %s\nsize:          %llu\netag:          %s\nlast-modified: %s\n", url.key.c_str(),
                    static_cast<unsigned long long>(r->size), r->etag.c_str(), r->last_modified.c_str());
        co_return 0;
    }
    co_return fail(fmt::format("unknown s3 verb '{}'", verb));
}

} // namespace

int s3_command(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(s3_usage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    const std::string verb = args[0];
    if (verb != "ls" && verb != "get" && verb != "put" && verb != "rm" && verb != "stat") {
        std::fprintf(stderr, "skiff: unknown s3 verb '%s'\n%s", verb.c_str(), s3_usage);
        return 2;
    }
    std::vector<std::string> pos;
    std::string endpoint, region, range_text, timeout_text;
    bool path_style = false, if_none_match = false, verbose = false, help = false;
    CLI::App app{"skiff s3"};
    app.set_help_flag(); // s3_usage, in our words
    app.allow_extras(true);
    app.add_flag("-h,--help", help);
    auto* endpoint_opt = app.add_option("--s3-endpoint", endpoint);
    auto* region_opt = app.add_option("--s3-region", region);
    auto* range_opt = app.add_option("--range", range_text);
    auto* timeout_opt = app.add_option("--timeout-ms", timeout_text);
    app.add_flag("--s3-path-style", path_style);
    app.add_flag("--if-none-match", if_none_match);
    app.add_flag("-v", verbose);
    app.add_option("args", pos);
    for (auto* o : {endpoint_opt, region_opt, range_opt, timeout_opt}) {
        o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    const std::vector<std::string> after_verb(args.begin() + 1, args.end());
    if (auto code = parse_s3_style_args(app, after_verb)) return *code;
    if (help) {
        std::fputs(s3_usage, stdout);
        return 0;
    }
    if (auto extra = app.remaining(); !extra.empty()) {
        std::fprintf(stderr, "skiff: unknown option '%s'\n", extra.front().c_str());
        return 2;
    }
    long timeout_ms = 60000;
    if (timeout_opt->count()) {
        auto v = parse_u64(timeout_text);
        if (!v || *v == 0 || *v > 86400000) {
            return fail(fmt::format("--timeout-ms must be a positive number, not '{}'", timeout_text)), 2;
        }
        timeout_ms = static_cast<long>(*v);
    }
    std::optional<std::string> range_given;
    if (range_opt->count()) range_given = range_text;
    log::set_level(verbose ? log::level::debug : log::level::warn);
    if (pos.empty()) return fail(fmt::format("'{}' needs an s3://BUCKET/... argument", verb)), 2;
    auto url = parse_s3_url(pos[0]);
    if (!url) return fail(fmt::format("'{}' is not an s3://BUCKET/KEY url", pos[0])), 2;
    pos.erase(pos.begin());

    std::optional<s3::byte_range> range;
    if (range_given) {
        range = parse_range(*range_given);
        if (!range) return fail(fmt::format("bad --range '{}': use A-B, A- or -N", *range_given)), 2;
    }

    std::string upload;
    if (verb == "put") {
        if (pos.empty()) return fail("put needs a FILE (or - for stdin)"), 2;
        if (pos[0] == "-") {
            upload.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
        } else {
            std::ifstream f(pos[0], std::ios::binary);
            if (!f) return fail(fmt::format("cannot read '{}': {}", pos[0], std::strerror(errno)));
            std::ostringstream ss;
            ss << f.rdbuf();
            upload = std::move(ss).str();
        }
    }

    s3_flags flags;
    if (endpoint_opt->count()) flags.endpoint = endpoint;
    if (region_opt->count()) flags.region = region;
    flags.path_style = path_style;
    auto made = make_s3_config(flags);
    if (!made) return fail(made.error());
    s3::client_config cfg = std::move(*made);
    cfg.operation_deadline = std::chrono::milliseconds(timeout_ms);
    cfg.attempt_timeout = std::min(cfg.attempt_timeout, cfg.operation_deadline);

    auto reactor = runtime::reactor::create(0);
    if (!reactor) return fail((*&reactor).error());
    auto& r = **reactor;
    // The client must be created on the reactor thread it belongs to.
    return r.run_until_complete([](s3::client_config c, std::string v, s3_url u, std::vector<std::string> p,
                                   std::optional<s3::byte_range> rg, bool inm, std::string* up) -> runtime::task<int> {
        auto client = s3::client::create(std::move(c));
        if (!client) co_return fail(client.error());
        co_return co_await run_verb(client->get(), std::move(v), std::move(u), std::move(p), rg, inm, up);
    }(std::move(cfg), verb, std::move(*url), std::move(pos), range, if_none_match, &upload));
}

} // namespace skiff::cli
