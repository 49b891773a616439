#include <skiff/runtime/timer.hpp>
#include <skiff/storage/memory_store.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace skiff::storage {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
store_error cancelled_error(const std::string& key) { return {errc::cancelled, fmt::format("{}: cancelled", key)}; }
} // namespace

memory_store::memory_store(std::shared_ptr<memory_bucket> bucket) : _bucket(std::move(bucket)) {}

runtime::task<std::optional<store_error>> memory_store::enter(const char* op, const std::string& key,
                                                              std::stop_token st, bool* lost_answer) {
    if (st.stop_requested()) co_return cancelled_error(key);
    std::optional<mem_fault> fault;
    for (auto& r : _faults) {
        if (r.count == 0) continue;
        if (r.op != "*" && r.op != op) continue;
        if (!r.key_suffix.empty() && !ends_with(key, r.key_suffix)) continue;
        if (r.count > 0) --r.count;
        fault = r.fault;
        ++_stats.faults;
        break;
    }
    if (_latency.count() > 0) {
        auto slept = co_await runtime::sleep(_latency, st);
        if (!slept) co_return cancelled_error(key);
    }
    if (!fault) co_return std::nullopt;
    switch (*fault) {
    case mem_fault::fail_transient:
        notify_throttled();
        co_return store_error(errc::transient, fmt::format("{} {}: injected SlowDown", op, key), true);
    case mem_fault::fail_reset:
        co_return store_error(errc::transient, fmt::format("{} {}: injected connection reset", op, key));
    case mem_fault::fail_permanent: co_return store_error(errc::permanent, fmt::format("{} {}: injected access denied", op, key));
    case mem_fault::lost_answer:
        if (lost_answer) *lost_answer = true;
        co_return std::nullopt;
    case mem_fault::hang: {
        auto slept = co_await runtime::sleep(std::chrono::hours(24 * 365), st);
        (void)slept;
        co_return cancelled_error(key);
    }
    }
    co_return std::nullopt;
}

runtime::task<result<void, store_error>> memory_store::put(std::string key, std::span<const char> body,
                                                           bool if_absent, std::stop_token st) {
    ++_stats.puts;
    ++_puts_in_flight;
    _stats.max_concurrent_puts = std::max(_stats.max_concurrent_puts, _puts_in_flight);
    bool lost = false;
    auto err = co_await enter("put", key, st, &lost);
    if (!err && before_put && !before_put(key)) {
        // "The process died" between two PUTs: this one never lands and never answers.
        auto slept = co_await runtime::sleep(std::chrono::hours(24 * 365), st);
        (void)slept;
        err = cancelled_error(key);
    }
    --_puts_in_flight;
    if (err) co_return failure{std::move(*err)};
    if (if_absent && _bucket->objects.count(key)) {
        co_return failure{store_error(errc::precondition_failed, fmt::format("{} exists", key))};
    }
    _bucket->objects[key].assign(body.data(), body.size());
    if (lost) co_return failure{store_error(errc::transient, fmt::format("put {}: answer lost", key))};
    co_return ok();
}

runtime::task<result<get_result, store_error>> memory_store::get(std::string key, std::optional<byte_range> range,
                                                                 std::stop_token st) {
    ++_stats.gets;
    ++_stats.gets_by_key[key];
    auto err = co_await enter("get", key, st, nullptr);
    if (err) co_return failure{std::move(*err)};
    auto it = _bucket->objects.find(key);
    if (it == _bucket->objects.end()) co_return failure{store_error(errc::not_found, fmt::format("no such key {}", key))};
    const std::string& obj = it->second;
    get_result out;
    out.object_size = obj.size();
    std::uint64_t first = 0, last = obj.empty() ? 0 : obj.size() - 1;
    if (range) {
        switch (range->k()) {
        case byte_range::kind::bounded: first = range->first(); last = std::min<std::uint64_t>(range->last(), last); break;
        case byte_range::kind::from: first = range->first(); break;
        case byte_range::kind::suffix:
            first = range->suffix_length() >= obj.size() ? 0 : obj.size() - range->suffix_length();
            break;
        }
        if (first >= obj.size() && !obj.empty()) {
            co_return failure{store_error(errc::invalid_argument, fmt::format("{}: range not satisfiable", key))};
        }
    }
    if (!obj.empty()) out.data = obj.substr(first, last - first + 1);
    _stats.bytes_read += out.data.size();
    co_return out;
}

runtime::task<result<std::uint64_t, store_error>> memory_store::size(std::string key, std::stop_token st) {
    ++_stats.sizes;
    auto err = co_await enter("size", key, st, nullptr);
    if (err) co_return failure{std::move(*err)};
    auto it = _bucket->objects.find(key);
    if (it == _bucket->objects.end()) co_return failure{store_error(errc::not_found, fmt::format("no such key {}", key))};
    co_return static_cast<std::uint64_t>(it->second.size());
}

runtime::task<result<void, store_error>> memory_store::remove(std::string key, std::stop_token st) {
    ++_stats.removes;
    auto err = co_await enter("remove", key, st, nullptr);
    if (err) co_return failure{std::move(*err)};
    _bucket->objects.erase(key);
    co_return ok();
}

runtime::task<result<list_result, store_error>> memory_store::list(std::string prefix, std::string start_after,
                                                                   std::string token, int max_keys,
                                                                   std::stop_token st) {
    ++_stats.lists;
    auto err = co_await enter("list", prefix, st, nullptr);
    if (err) co_return failure{std::move(*err)};
    const std::string& after = token.empty() ? start_after : token;
    auto it = after.empty() ? _bucket->objects.lower_bound(prefix) : _bucket->objects.upper_bound(after);
    if (it != _bucket->objects.end() && it->first < prefix) it = _bucket->objects.lower_bound(prefix);
    list_result out;
    const std::size_t limit = max_keys > 0 ? static_cast<std::size_t>(max_keys) : 1000;
    for (; it != _bucket->objects.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
        if (out.objects.size() == limit) {
            out.next_token = out.objects.back().key;
            break;
        }
        out.objects.emplace_back(it->first, it->second.size());
    }
    co_return out;
}

} // namespace skiff::storage
