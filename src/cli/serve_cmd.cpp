// `skiff serve`: settings (serve_config: flags, SKIFF_* variables, --config file), the checks
// that refuse a broker that could not work (serve_checks), signal handling, and the broker.
#include "commands.hpp"
#include "serve_checks.hpp"
#include "serve_config.hpp"

#include <skiff/broker/broker.hpp>
#include <skiff/core/log.hpp>

#include <fmt/format.h>

#include <pthread.h>
#include <skiff/tls/context.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

namespace skiff::cli {

namespace {

struct checks_passed {
    checks_passed() = default;
    std::optional<data_dir_lock> lock; // held while the broker runs
    std::shared_ptr<tls::context_holder> tls; // SSL / SASL_SSL listeners' certificate
};

// In the order a broker would trip over them; stops at the first failure. `report` (--check)
// gets one line per passed check.
result<checks_passed, std::string> run_checks(const serve_options& o, const broker::broker_config& cfg,
                                              std::FILE* report) {
    auto line = [report](const char* what, const std::string& detail) {
        if (report) std::fprintf(report, "ok   %-12s %s\n", what, detail.c_str());
    };
    if (report) {
        int flags = 0, env = 0, file = 0;
        for (auto& [_, s] : o.values) {
            flags += s.source == value_source::flag;
            env += s.source == value_source::env;
            file += s.source == value_source::file;
        }
        std::string from = fmt::format("{} from flags, {} from the environment", flags, env);
        if (!o.config_path.empty()) from += fmt::format(", {} from {}", file, o.config_path);
        line("settings", "valid and consistent (" + from + ")");
    }
    if (cfg.listeners.empty()) {
        auto kafka = check_port(cfg.kafka_addr, "kafka-addr");
        if (!kafka) return failure{kafka.error()};
        line("kafka-addr", *kafka);
    } else {
        for (const auto& l : cfg.listeners) {
            auto port = check_port(l.addr, "listeners");
            if (!port) return failure{port.error()};
            line(std::string(l.name()).c_str(), *port);
        }
    }
    if (!cfg.http_addr.empty()) {
        auto http = check_port(cfg.http_addr, "http-addr");
        if (!http) return failure{http.error()};
        line("http-addr", *http);
    }
    checks_passed out;
    if (cfg.uses_tls()) {
        // The certificate is loaded here, so a bad file is refused before "serving" (and by
        // --check); the broker and the SIGHUP reload share this holder.
        auto holder = tls::context_holder::create(cfg.tls);
        if (!holder) return failure{"TLS: " + holder.error().message};
        out.tls = std::shared_ptr<tls::context_holder>(std::move(*holder));
        const auto subject = out.tls->current()->certificate_subject();
        line("tls", "certificate " + (subject.empty() ? cfg.tls.cert_file : subject));
    }
    if (cfg.s3_bucket.empty()) {
        std::string detail;
        auto lock = claim_data_dir(cfg.data_dir, cfg.clustered(), detail);
        if (!lock) return failure{lock.error()};
        out.lock.emplace(std::move(*lock));
        line("data-dir", detail);
    } else {
        auto s3 = check_s3_store(cfg);
        if (!s3) return failure{s3.error()};
        line("s3-bucket", *s3);
    }
    return out;
}

} // namespace

int serve_command(const std::vector<std::string>& args) {
    auto o = parse_serve_options(args, process_environment());
    if (!o) {
        std::fprintf(stderr, "skiff serve: %s\n", o.error().c_str());
        return 2;
    }
    if (o->help) {
        print_serve_usage(stdout);
        return 0;
    }
    auto cfg = make_broker_config(*o);
    if (!cfg) {
        std::fprintf(stderr, "skiff serve: %s\n", cfg.error().c_str());
        return 2;
    }
    if (o->print_config) {
        std::fputs(render_config(*o, *cfg).c_str(), stdout);
        std::fflush(stdout);
        if (!o->check) return 0;
    }
    auto passed = run_checks(*o, *cfg, o->check ? stdout : nullptr);
    std::fflush(stdout);
    if (!passed) {
        std::fprintf(stderr, "skiff serve: %s\n", passed.error().c_str());
        return 1;
    }
    if (o->check) {
        std::puts("ok   all checks passed");
        return 0;
    }

    // Signals go to one thread that turns them into a stop request; every other thread (the
    // reactors inherit this mask) has them blocked.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    cfg->tls_context = passed->tls;
    std::shared_ptr<tls::context_holder> tls_holder = passed->tls;
    ::signal(SIGPIPE, SIG_IGN);
    std::stop_source stop;
    std::atomic<bool> finished{false};
    std::thread signals([&set, &stop, &finished, tls_holder] {
        int received = 0;
        while (!finished.load()) {
            timespec ts{0, 200 * 1000 * 1000};
            int sig = sigtimedwait(&set, nullptr, &ts);
            if (sig <= 0) continue;
            if (sig == SIGHUP) {
                // New TLS connections get the files' current certificate; open ones keep theirs.
                if (!tls_holder) {
                    log::info("received SIGHUP: no TLS listener, nothing to reload");
                } else if (auto r = tls_holder->reload(); !r) {
                    log::error("received SIGHUP: TLS certificate not reloaded, the old one stays: {}", r.error().message);
                } else {
                    log::info("received SIGHUP: TLS certificate reloaded ({}, generation {})",
                              tls_holder->current()->certificate_subject(), tls_holder->generation());
                }
                continue;
            }
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
    return 0; // the data directory's lock goes with `passed`, after the drain
}

} // namespace skiff::cli
