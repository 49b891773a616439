// `skiff fsck s3://BUCKET/NAMESPACE | DIR [--namespace NS] [--repair]`: a full check of a
// namespace — segments, orphans, gaps and corrupt objects per partition — and, with
// --repair, rebuilt indexes. Exit status 0 when clean (or repaired clean), 1 otherwise.
#include "commands.hpp"
#include "s3_config.hpp"
#include "store_target.hpp"

#include <skiff/core/log.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/storage/fsck.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

namespace skiff::cli {

namespace {

constexpr const char* fsck_usage =
    "usage: skiff fsck s3://BUCKET[/NAMESPACE] [--repair] [--s3-endpoint URL] [--s3-region R] [--s3-path-style]\n"
    "       skiff fsck DIR [--namespace NS] [--repair]\n"
    "\n"
    "Checks every segment (.kfs) and index (.index) of a namespace (default \"default\") and lists,\n"
    "per partition, the segments, orphans, offset gaps and corrupt objects. --repair rebuilds\n"
    "missing or unusable indexes from their segments. Exit status: 0 clean, 1 problems, 2 usage.\n";

runtime::task<int> run_fsck(std::string target, std::string ns, bool repair, s3_flags flags) {
    auto opened = open_store_target(target, ns, flags);
    if (!opened) {
        std::fprintf(stderr, "skiff: %s\n", opened.error().message.c_str());
        co_return opened.error().status;
    }
    auto& store = opened->store;
    ns = opened->ns;
    auto report = co_await storage::fsck(*store, ns, repair);
    if (!report) {
        std::fprintf(stderr, "skiff: fsck of %s failed: %s\n", store->describe().c_str(), report.error().message.c_str());
        co_return 1;
    }
    auto text = storage::format_fsck_report(*report, fmt::format("{} namespace '{}'", store->describe(), ns));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    // Repaired orphans count as fixed: the exit status reflects what remains.
    bool remaining = false;
    for (auto& p : report->partitions) {
        // Gaps are warnings (takeovers leave them on purpose; docs/cluster.md).
        if (!p.orphan_index.empty() || !p.overlaps.empty()) remaining = true;
        if (p.orphan_kfs.size() > p.repaired.size()) remaining = true;
        if (!p.corrupt.empty() && p.repaired.empty()) remaining = true;
    }
    co_return remaining ? 1 : 0;
}

} // namespace

int fsck_command(const std::vector<std::string>& args) {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(fsck_usage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    std::string target;
    std::string ns = "default";
    bool repair = false, help = false;
    std::string endpoint, region;
    std::vector<std::string> pos;
    bool path_style = false;
    CLI::App app{"skiff fsck"};
    app.set_help_flag(); // fsck_usage, in our words
    app.allow_extras(true);
    app.add_flag("-h,--help", help);
    app.add_flag("--repair", repair);
    app.add_option("--namespace", ns)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    auto* endpoint_opt = app.add_option("--s3-endpoint", endpoint)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    auto* region_opt = app.add_option("--s3-region", region)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_flag("--s3-path-style", path_style);
    app.add_option("target", pos);
    if (auto code = parse_s3_style_args(app, args)) return *code;
    if (help) {
        std::fputs(fsck_usage, stdout);
        return 0;
    }
    if (auto extra = app.remaining(); !extra.empty()) {
        std::fprintf(stderr, "skiff: unknown option '%s'\n%s", extra.front().c_str(), fsck_usage);
        return 2;
    }
    if (pos.size() > 1) {
        std::fprintf(stderr, "skiff: unexpected argument '%s'\n", pos[1].c_str());
        return 2;
    }
    if (!pos.empty()) target = pos[0];
    s3_flags flags;
    if (endpoint_opt->count()) flags.endpoint = endpoint;
    if (region_opt->count()) flags.region = region;
    flags.path_style = path_style;
    if (target.empty()) {
        std::fputs(fsck_usage, stderr);
        return 2;
    }
    log::set_level(log::level::warn);
    auto r = runtime::reactor::create(0);
    if (!r) {
        std::fprintf(stderr, "skiff: %s\n", r.error().c_str());
        return 1;
    }
    return (*r)->run_until_complete(run_fsck(target, ns, repair, flags));
}

} // namespace skiff::cli
