// The pgwire server over the toy backend as a process, for psql_smoke.sh: prints the port on
// stdout, then serves until `seconds` (argv[1], default 30) pass.
#include "run_task.hpp"
#include "test_backend.hpp"

#include <skiff/pgwire/server.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace skiff;

namespace {

runtime::task<void> stop_after(std::chrono::seconds d, std::stop_source* s) {
    (void)co_await runtime::sleep(d);
    s->request_stop();
}

runtime::task<int> serve(std::chrono::seconds d) {
    test::toy_backend b;
    pgwire::server_config cfg;
    cfg.addr = "127.0.0.1:0";
    auto srv = pgwire::server::create(std::move(cfg), b);
    if (!srv) {
        std::fprintf(stderr, "%s\n", srv.error().c_str());
        co_return 1;
    }
    std::printf("%u\n", static_cast<unsigned>((*srv)->local_address().port()));
    std::fflush(stdout);
    std::stop_source stop;
    auto serving = (*srv)->serve(stop.get_token());
    auto timer = stop_after(d, &stop);
    co_await runtime::when_all(std::move(serving), std::move(timer));
    co_return 0;
}

} // namespace

int main(int argc, char** argv) {
    const auto secs = std::chrono::seconds(argc > 1 ? std::atoi(argv[1]) : 30);
    return runtime::run_task(serve(secs));
}
