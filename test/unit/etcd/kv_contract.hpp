// The behaviour every etcd::kv must show, written once and run against both implementations:
// memory_kv on a manual clock (test_memory_kv.cpp) and gateway_kv against a real etcd
// (test_gateway_kv.cpp). That the same scenarios pass on both is what makes the fake a
// faithful stand-in for etcd in the cluster tests.
#pragma once

#include <skiff/etcd/kv.hpp>
#include <skiff/runtime/task.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace skiff::test {

// What a scenario needs from its implementation.
class kv_harness {
public:
    virtual ~kv_harness() = default;
    // A new client of the same keyspace (a second broker talking to the same etcd), owned by
    // the harness until shutdown().
    virtual etcd::kv& client() = 0;
    // Closes every client (after the scenario's watchers are gone).
    virtual runtime::task<void> shutdown() = 0;
    // Lets `d` pass on the clock leases run on: a manual clock moves, a real one is slept on.
    virtual runtime::task<void> let_pass(std::chrono::milliseconds d) = 0;
    // Compacts the keyspace's history up to `rev`.
    virtual runtime::task<void> compact(std::int64_t rev) = 0;
    // The shortest lease etcd grants (shorter asks are raised to it).
    virtual std::chrono::seconds min_ttl() const = 0;
    // A key prefix no other scenario uses (the real etcd is shared by all of them); the same
    // for every call in one scenario.
    virtual std::string ns() = 0;
};

using kv_scenario = runtime::task<void> (*)(kv_harness&);

struct named_scenario {
    const char* name;
    kv_scenario fn;
};

const std::vector<named_scenario>& kv_contract();

// Runs one scenario and then the harness's shutdown, also when the scenario failed.
runtime::task<void> run_scenario(kv_harness& h, kv_scenario fn);

// Collects events from `w` until `n` arrived (more than one batch may be needed).
runtime::task<std::vector<etcd::event>> collect(etcd::watcher& w, std::size_t n);
runtime::task<void> collect_into(etcd::watcher& w, std::size_t n, std::vector<etcd::event>& into);

} // namespace skiff::test
