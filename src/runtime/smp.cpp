#include <skiff/runtime/smp.hpp>

#include <fmt/format.h>

namespace skiff::runtime {

namespace {
// Set while an smp group exists; cross-core calls look their target up here.
std::atomic<smp*> g_group{nullptr};
} // namespace

result<std::unique_ptr<smp>, std::string> smp::create(unsigned cores, reactor_config cfg) {
    if (cores == 0) return failure{std::string("at least one core is needed")};
    std::unique_ptr<smp> s(new smp());
    for (unsigned i = 0; i < cores; ++i) {
        auto r = reactor::create(i, cfg);
        if (!r) return failure{fmt::format("core {}: {}", i, r.error())};
        s->_reactors.push_back(std::move(*r));
    }
    smp* expected = nullptr;
    if (!g_group.compare_exchange_strong(expected, s.get())) {
        return failure{std::string("another smp group is already running in this process")};
    }
    return s;
}

smp::~smp() {
    smp* self = this;
    g_group.compare_exchange_strong(self, nullptr);
}

reactor* smp::reactor_of(unsigned core) noexcept {
    smp* g = g_group.load(std::memory_order_acquire);
    if (!g || core >= g->_reactors.size()) return nullptr;
    return g->_reactors[core].get();
}

unsigned smp::count() noexcept {
    smp* g = g_group.load(std::memory_order_acquire);
    return g ? g->size() : 0;
}

void smp::run_core(unsigned core, const std::function<task<void>(unsigned)>& main) {
    reactor& r = *_reactors[core];
    r.run_until_complete(main(core));
    if (_remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        for (auto& other : _reactors) other->request_stop();
    }
    // Serve other cores' calls until the last main ends (a stop requested earlier is
    // remembered, so this returns at once in that case).
    r.run();
}

void smp::run(std::function<task<void>(unsigned core)> main) {
    _remaining.store(size(), std::memory_order_release);
    std::vector<std::thread> threads;
    for (unsigned i = 1; i < size(); ++i) {
        threads.emplace_back([this, i, &main] { run_core(i, main); });
    }
    run_core(0, main);
    for (auto& t : threads) t.join();
}

} // namespace skiff::runtime
