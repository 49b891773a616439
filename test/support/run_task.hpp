// Test helper: drive a reactor on this thread until a task finishes.
#pragma once

#include <skiff/runtime/reactor.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace skiff::runtime {

inline std::unique_ptr<reactor> make_test_reactor(reactor_config cfg = {}) {
    auto r = reactor::create(0, std::move(cfg));
    if (!r) {
        std::fprintf(stderr, "cannot create reactor: %s\n", r.error().c_str());
        std::abort();
    }
    return std::move(*r);
}

template <typename T>
T run_task(task<T> t, reactor_config cfg = {}) {
    auto r = make_test_reactor(std::move(cfg));
    return r->run_until_complete(std::move(t));
}

} // namespace skiff::runtime
