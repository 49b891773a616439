// Test helper: drive a fresh reactor on this thread until a task finishes.
#pragma once

#include <skiff/runtime/reactor.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace skiff::test {

inline std::unique_ptr<runtime::reactor> make_test_reactor(runtime::reactor_config cfg = {}) {
    auto r = runtime::reactor::create(0, std::move(cfg));
    if (!r) {
        std::fprintf(stderr, "cannot create reactor: %s\n", r.error().c_str());
        std::abort();
    }
    return std::move(*r);
}

template <typename T>
T run_task(runtime::task<T> t, runtime::reactor_config cfg = {}) {
    auto r = make_test_reactor(std::move(cfg));
    return r->run_until_complete(std::move(t));
}

} // namespace skiff::test
