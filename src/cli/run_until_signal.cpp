// run_until_signal.hpp.
#include "run_until_signal.hpp"

#include <skiff/core/log.hpp>
#include <skiff/runtime/reactor.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <signal.h>
#include <thread>

namespace skiff::cli {

int run_until_signal(const std::function<runtime::task<int>(std::stop_token)>& body) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    auto r = runtime::reactor::create(0);
    if (!r) {
        std::fprintf(stderr, "skiff: %s\n", r.error().c_str());
        return 1;
    }
    runtime::reactor* home = r->get();
    std::stop_source stop;
    std::atomic<bool> finished{false};
    std::thread signals([&set, &stop, &finished, home] {
        int received = 0;
        while (!finished.load()) {
            timespec ts{0, 200 * 1000 * 1000};
            int sig = sigtimedwait(&set, nullptr, &ts);
            if (sig <= 0) continue;
            if (++received == 1) {
                log::info("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
                home->post([&stop] { stop.request_stop(); });
            } else {
                std::_Exit(130);
            }
        }
    });
    int rc = home->run_until_complete(body(stop.get_token()));
    finished = true;
    signals.join();
    return rc;
}

} // namespace skiff::cli
