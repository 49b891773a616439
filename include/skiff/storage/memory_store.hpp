// An object store in memory, for tests and benchmarks: optional per-request latency (a
// simulated round trip on the reactor's clock) and injectable faults per key pattern, so the
// partition log can be driven through every failure the real stores produce. Lives on one
// core like the others. Its objects can be shared between instances (a "bucket") so a test
// can "restart" a partition on the same data.
#pragma once

#include <skiff/storage/object_store.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace skiff::storage {

struct memory_bucket {
    std::map<std::string, std::string> objects;
};

enum class mem_fault : std::uint8_t {
    fail_transient,  // the request fails (nothing stored), like a 503 SlowDown: a throttle
                     // (store_error::throttled, and the throttle observer is called)
    fail_reset,      // the request fails (nothing stored), like a connection reset or a 500:
                     // transient, not a throttle
    fail_permanent,  // like 403
    hang,            // never answers until cancelled
    lost_answer,     // the put is applied, but the caller sees a transient failure
};

struct mem_fault_rule {
    mem_fault_rule() = default;
    mem_fault_rule(std::string op_, std::string suffix_, mem_fault f, int n)
        : op(std::move(op_)), key_suffix(std::move(suffix_)), fault(f), count(n) {}
    std::string op = "put";      // put | get | size | remove | list | *
    std::string key_suffix;      // matches keys ending with this ("" = any)
    mem_fault fault = mem_fault::fail_transient;
    int count = 1;               // -1: always
};

struct mem_store_stats {
    std::uint64_t puts = 0, gets = 0, sizes = 0, removes = 0, lists = 0, faults = 0;
    std::int64_t max_concurrent_puts = 0;
    std::uint64_t bytes_read = 0; // by GETs, ranges as returned
    std::map<std::string, int> gets_by_key;
};

class memory_store final : public object_store {
public:
    explicit memory_store(std::shared_ptr<memory_bucket> bucket = std::make_shared<memory_bucket>());

    // Every request waits this long before it is applied and answered.
    void set_latency(std::chrono::nanoseconds d) { _latency = d; }
    void add_fault(mem_fault_rule r) { _faults.push_back(std::move(r)); }
    void clear_faults() { _faults.clear(); }
    // Called before every put is applied; return false to refuse it as "the process died"
    // (the request never completes: it hangs until cancelled).
    std::function<bool(const std::string& key)> before_put;

    runtime::task<result<void, store_error>> put(std::string key, std::span<const char> body, bool if_absent,
                                                 std::stop_token st) override;
    runtime::task<result<get_result, store_error>> get(std::string key, std::optional<byte_range> range,
                                                       std::stop_token st) override;
    runtime::task<result<std::uint64_t, store_error>> size(std::string key, std::stop_token st) override;
    runtime::task<result<void, store_error>> remove(std::string key, std::stop_token st) override;
    runtime::task<result<list_result, store_error>> list(std::string prefix, std::string start_after,
                                                         std::string token, int max_keys,
                                                         std::stop_token st) override;
    std::string describe() const override { return "mem://"; }

    const mem_store_stats& stats() const noexcept { return _stats; }
    memory_bucket& bucket() noexcept { return *_bucket; }

private:
    // Applies latency and faults; returns an error to report, or nothing to proceed.
    runtime::task<std::optional<store_error>> enter(const char* op, const std::string& key, std::stop_token st,
                                                    bool* lost_answer);

    std::shared_ptr<memory_bucket> _bucket;
    std::chrono::nanoseconds _latency{0};
    std::vector<mem_fault_rule> _faults;
    mem_store_stats _stats;
    std::int64_t _puts_in_flight = 0;
};

} // namespace skiff::storage
