// The object store under the storage engine: one interface, two backends — S3 (through the
// s3 client) and a local directory (the embedded default). In both, an object appears under
// its final key whole or not at all, and keys list in byte order.
//
// A store belongs to one core (reactor); every call takes a stop_token and never reports a
// cancelled operation as success.
//
// Throttling. A backend that asks us to slow down (S3's 503 SlowDown or 429; memory_store's
// mem_fault::fail_transient) says so twice, for two different listeners:
//  - per request: the throttle observer is called at every throttled request, at once, also
//    for requests a store retries internally (the S3 client's bounded retries). The io_budget
//    listens here (io_budget::listen_to), so its limit halves at the first SlowDown;
//  - per operation: a failed operation whose last request was throttled returns
//    errc::transient with store_error::throttled set, for logs, spans and tests. Nothing
//    should feed this flag to the budget too: the observer already counted that request.
// Other transient failures (resets, 500s, timeouts, lost answers) are neither.
// Who retries what, and for how long: docs/retries.md.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/storage/errc.hpp>
#include <skiff/runtime/task.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::storage {

// The key grammar every backend enforces, so that a key valid on one backend is valid on all
// (the local store maps keys to paths, and S3 would accept almost anything): a key is
// 1..1024 bytes of '/'-separated components; no component is empty (no leading '/', no "//",
// no trailing '/'), ".", "..", longer than 255 bytes, or starts with ".tmp." (the local
// store's temporary files); no NUL byte. nullopt when `key` is valid, otherwise
// errc::invalid_argument with a sentence naming the problem.
std::optional<store_error> check_key(std::string_view key);

// Byte range of a GET: [first, last] inclusive, [first, end), or the last n bytes.
class byte_range {
public:
    byte_range() = default;
    static byte_range between(std::uint64_t first, std::uint64_t last) { return byte_range(kind::bounded, first, last); }
    static byte_range from(std::uint64_t first) { return byte_range(kind::from, first, 0); }
    static byte_range suffix(std::uint64_t n) { return byte_range(kind::suffix, n, 0); }
    enum class kind : std::uint8_t { bounded, from, suffix };
    kind k() const noexcept { return _k; }
    std::uint64_t first() const noexcept { return _a; }      // bounded/from
    std::uint64_t last() const noexcept { return _b; }       // bounded
    std::uint64_t suffix_length() const noexcept { return _a; } // suffix

    // The inclusive [first, last] slice this range selects in an object of `object_size`
    // bytes, with S3's rules (RFC 9110 14.1.2): `last` beyond the end is clamped; a suffix
    // longer than the object selects all of it; nullopt when nothing is selected (first at or
    // beyond the end, suffix(0), any range of an empty object; S3 answers 416) or when a
    // bounded range ends before it starts (S3 would ignore such a Range and send everything;
    // the stores refuse it instead, both with errc::invalid_argument).
    std::optional<std::pair<std::uint64_t, std::uint64_t>> resolve(std::uint64_t object_size) const noexcept {
        if (_k == kind::bounded && _b < _a) return std::nullopt;
        if (object_size == 0) return std::nullopt;
        switch (_k) {
        case kind::bounded:
            if (_a >= object_size) return std::nullopt;
            return std::pair{_a, _b < object_size ? _b : object_size - 1};
        case kind::from:
            if (_a >= object_size) return std::nullopt;
            return std::pair{_a, object_size - 1};
        case kind::suffix:
            if (_a == 0) return std::nullopt;
            return std::pair{_a >= object_size ? 0 : object_size - _a, object_size - 1};
        }
        return std::nullopt;
    }

private:
    byte_range(kind k, std::uint64_t a, std::uint64_t b) : _k(k), _a(a), _b(b) {}
    kind _k = kind::from;
    std::uint64_t _a = 0, _b = 0;
};

struct object_entry {
    object_entry() = default;
    object_entry(std::string k, std::uint64_t s) : key(std::move(k)), size(s) {}
    std::string key;
    std::uint64_t size = 0;
};

struct list_result {
    list_result() = default;
    std::vector<object_entry> objects;      // byte order
    std::string next_token;                 // empty when this was the last page
};

struct get_result {
    get_result() = default;
    std::string data;
    std::uint64_t object_size = 0; // the whole object's size
};

class object_store {
public:
    virtual ~object_store() = default;

    // Stores `body` under `key` atomically (readers see all or nothing). With if_absent the
    // put fails with precondition_failed when the key exists. The caller keeps `body` alive
    // until the task completes.
    virtual runtime::task<result<void, store_error>> put(std::string key, std::span<const char> body,
                                                          bool if_absent, std::stop_token st) = 0;
    // put with exactly one backend request and no retry inside the store: for a caller that
    // owns the retry loop (flush uploads), so that every attempt is its own and one loop, not
    // two nested ones, decides when to try again. Same contract as put otherwise. Stores that
    // never retry internally (local, memory) keep this default.
    virtual runtime::task<result<void, store_error>> put_once(std::string key, std::span<const char> body,
                                                               bool if_absent, std::stop_token st) {
        return put(std::move(key), body, if_absent, std::move(st));
    }
    virtual runtime::task<result<get_result, store_error>> get(std::string key, std::optional<byte_range> range,
                                                               std::stop_token st) = 0;
    // Size of the object, not_found when absent.
    virtual runtime::task<result<std::uint64_t, store_error>> size(std::string key, std::stop_token st) = 0;
    // Removing a missing key succeeds.
    virtual runtime::task<result<void, store_error>> remove(std::string key, std::stop_token st) = 0;
    // Removes every key of `keys` (a missing key succeeds), in as few requests as the backend
    // allows: S3 sends DeleteObjects (multi-object delete) with up to 1000 keys per request; the
    // default removes one key after the other. On failure the keys already removed stay
    // removed and the error names a key that was not (the caller may simply call again with
    // all of them). An empty `keys` succeeds without a request.
    virtual runtime::task<result<void, store_error>> remove_many(std::vector<std::string> keys, std::stop_token st);
    // One page of keys starting with `prefix` (a string prefix, as in S3: "a/1" matches
    // "a/10/x"), in byte order, after `start_after` (exclusive) or continuing from `token`
    // (next_token of a previous page with the same prefix; opaque, backend-specific). At most
    // max_keys entries; max_keys <= 0 or above 1000 means 1000 (S3's page limit). A page may
    // hold fewer entries and still have a next_token.
    virtual runtime::task<result<list_result, store_error>> list(std::string prefix, std::string start_after,
                                                                 std::string token, int max_keys,
                                                                 std::stop_token st) = 0;
    // "s3://bucket/prefix" or "file:///path": for logs and fsck output.
    virtual std::string describe() const = 0;

    // Called on the store's core at every request the backend answered with "slow down" (see
    // the top of this file); it must not call into the store. One observer per store: set it
    // where the store and its io_budget are built, before the first request; empty to stop.
    using throttle_observer = std::function<void()>;
    void set_throttle_observer(throttle_observer f) { _on_throttle = std::move(f); }

protected:
    void notify_throttled() const {
        if (_on_throttle) _on_throttle();
    }

private:
    throttle_observer _on_throttle;
};

} // namespace skiff::storage
