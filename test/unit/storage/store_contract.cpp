// The object_store contract, once for every backend. Each case builds a fresh store inside
// its task and checks results on the test thread (Catch2 is not thread-safe).
#include "store_contract.hpp"

#include "run_task.hpp"

#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <stop_token>
#include <string>
#include <vector>

namespace skiff::storage::contract {

namespace {

using runtime::run_task;
using runtime::task;

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

// "ok" or the error class, so a failed CHECK prints a name instead of a number.
template <typename T>
std::string outcome(const result<T, store_error>& r) {
    return r.has_value() ? std::string("ok") : std::string(to_string(r.error().code));
}
template <typename T>
std::string message(const result<T, store_error>& r) {
    return r.has_value() ? std::string() : r.error().message;
}

// Deterministic bytes that differ at every offset a test reads, so a slice taken from the
// wrong place cannot compare equal.
std::string pattern(std::size_t n, std::uint32_t seed = 1) {
    std::string s(n, '\0');
    std::uint32_t x = seed;
    for (auto& c : s) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<char>(x >> 24);
    }
    return s;
}

task<void> put_ok(object_store& s, std::string key, std::string body) {
    auto r = co_await s.put(key, bytes(body), false, {});
    INFO(key << ": " << message(r));
    REQUIRE(r.has_value());
}

task<std::string> get_ok(object_store& s, std::string key) {
    auto r = co_await s.get(key, std::nullopt, {});
    INFO(key << ": " << message(r));
    REQUIRE(r.has_value());
    co_return std::move(r->data);
}

// Awaited outside the CHECK: a co_await inside a Catch2 assertion would keep the assertion
// open across a suspension.
task<void> expect_body(object_store& s, std::string key, std::string expected) {
    const std::string got = co_await get_ok(s, key);
    INFO(key);
    CHECK(got == expected);
}

// All pages of a listing, following next_token.
task<std::vector<object_entry>> list_all(object_store& s, std::string prefix, std::string start_after, int page_size,
                                         int* pages) {
    std::vector<object_entry> all;
    std::string token;
    *pages = 0;
    for (;;) {
        auto r = co_await s.list(prefix, start_after, token, page_size, {});
        INFO("prefix '" << prefix << "': " << message(r));
        REQUIRE(r.has_value());
        ++*pages;
        REQUIRE(*pages < 1000);
        if (page_size > 0) CHECK(r->objects.size() <= static_cast<std::size_t>(page_size));
        for (auto& o : r->objects) all.push_back(std::move(o));
        if (r->next_token.empty()) break;
        token = std::move(r->next_token);
    }
    co_return all;
}

std::vector<std::string> keys_of(const std::vector<object_entry>& v) {
    std::vector<std::string> out;
    for (const auto& o : v) out.push_back(o.key);
    return out;
}

std::vector<std::string> matching(const std::vector<std::string>& sorted, std::string_view prefix,
                                  std::string_view after = {}) {
    std::vector<std::string> out;
    for (const auto& k : sorted) {
        if (k.starts_with(prefix) && k > after) out.push_back(k);
    }
    return out;
}

// --- cases -------------------------------------------------------------------------------

task<void> round_trip(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    const std::string key = "ns/topic/0/segment-00000000000000000000.kfs";
    const std::string body = pattern(1000);
    co_await put_ok(s, key, body);
    auto got = co_await s.get(key, std::nullopt, {});
    REQUIRE(got.has_value());
    CHECK(got->data == body);
    CHECK(got->object_size == 1000);
    auto sz = co_await s.size(key, {});
    REQUIRE(sz.has_value());
    CHECK(*sz == 1000);

    // Overwrite without if_absent replaces the object whole.
    co_await put_ok(s, key, "second");
    co_await expect_body(s, key, "second");
    auto sz2 = co_await s.size(key, {});
    REQUIRE(sz2.has_value());
    CHECK(*sz2 == 6);

    // Empty objects exist and have size 0.
    co_await put_ok(s, "empty", "");
    auto e = co_await s.get("empty", std::nullopt, {});
    REQUIRE(e.has_value());
    CHECK(e->data.empty());
    CHECK(e->object_size == 0);
    auto esz = co_await s.size("empty", {});
    REQUIRE(esz.has_value());
    CHECK(*esz == 0);

    // Keys with bytes that need care on the wire or on disk.
    const std::string odd = "odd/a b+c%20d=e&f~!$'()*,;@[]\xc3\xa9.txt";
    co_await put_ok(s, odd, "odd");
    co_await expect_body(s, odd, "odd");
    const std::string dotted = "dots/a..b/.hidden/x.";
    co_await put_ok(s, dotted, "dotted");
    co_await expect_body(s, dotted, "dotted");
}

task<void> ranges(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    const std::string body = pattern(100);
    co_await put_ok(s, "r/obj", body);

    struct expect_slice {
        byte_range range;
        std::string data;
    };
    const std::vector<expect_slice> good = {
        {byte_range::between(10, 19), body.substr(10, 10)},
        {byte_range::between(0, 0), body.substr(0, 1)},
        {byte_range::between(99, 99), body.substr(99, 1)},
        {byte_range::between(90, 500), body.substr(90)}, // last beyond the end is clamped
        {byte_range::from(0), body},
        {byte_range::from(95), body.substr(95)},
        {byte_range::suffix(4), body.substr(96)},
        {byte_range::suffix(100), body},
        {byte_range::suffix(500), body}, // longer than the object: all of it
    };
    for (std::size_t i = 0; i < good.size(); ++i) {
        std::optional<byte_range> range = good[i].range;
        auto r = co_await s.get("r/obj", range, {});
        INFO("range #" << i << ": " << message(r));
        REQUIRE(r.has_value());
        CHECK(r->data == good[i].data);
        CHECK(r->object_size == 100);
    }

    const std::vector<byte_range> unsatisfiable = {
        byte_range::between(100, 120), byte_range::from(100), byte_range::from(1000),
        byte_range::suffix(0),         byte_range::between(20, 10),
    };
    for (std::size_t i = 0; i < unsatisfiable.size(); ++i) {
        std::optional<byte_range> range = unsatisfiable[i];
        auto r = co_await s.get("r/obj", range, {});
        INFO("bad range #" << i << ": " << message(r));
        CHECK(outcome(r) == "invalid_argument");
        CHECK_FALSE(message(r).empty());
    }

    // Any range of an empty object selects nothing (S3 answers 416 too).
    co_await put_ok(s, "r/empty", "");
    std::optional<byte_range> from0 = byte_range::from(0);
    auto er = co_await s.get("r/empty", from0, {});
    CHECK(outcome(er) == "invalid_argument");
    // A range of a missing object: not_found wins.
    std::optional<byte_range> some = byte_range::between(0, 9);
    auto mr = co_await s.get("r/missing", some, {});
    CHECK(outcome(mr) == "not_found");
}

task<void> missing_and_remove(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    auto g = co_await s.get("no/such/key", std::nullopt, {});
    CHECK(outcome(g) == "not_found");
    CHECK_FALSE(message(g).empty());
    auto sz = co_await s.size("no/such/key", {});
    CHECK(outcome(sz) == "not_found");
    auto rm = co_await s.remove("no/such/key", {});
    CHECK(outcome(rm) == "ok");

    co_await put_ok(s, "d/x/1", "one");
    co_await put_ok(s, "d/x/2", "two");
    auto rm1 = co_await s.remove("d/x/1", {});
    CHECK(outcome(rm1) == "ok");
    auto gone = co_await s.size("d/x/1", {});
    CHECK(outcome(gone) == "not_found");
    auto again = co_await s.remove("d/x/1", {});
    CHECK(outcome(again) == "ok");
    co_await expect_body(s, "d/x/2", "two");
    // Removing the last key of a "directory" leaves nothing listable behind, and the
    // "directory" can be written again at once.
    auto rm2 = co_await s.remove("d/x/2", {});
    CHECK(outcome(rm2) == "ok");
    int pages = 0;
    auto left = co_await list_all(s, "", "", 100, &pages);
    CHECK(left.empty());
    co_await put_ok(s, "d/x/3", "three");
    co_await expect_body(s, "d/x/3", "three");
}

task<void> listing(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    // Chosen so a directory walk that sorts names naively gets the order wrong: '-' (0x2d)
    // and '.' (0x2e) sort before '/' (0x2f), and "ns/t/1" is a string prefix of "ns/t/10/y".
    std::vector<std::string> keys = {
        "ns/t/0/seg-1", "ns/t/0/seg-2", "ns/t/0/seg-10", "ns/t/1/x", "ns/t/10/y", "ns/t-a",
        "ns/t.b",       "ns/u",         "ns0",           "a b/c",    "z",         "ns/t/1/x2/deep",
    };
    for (std::size_t i = 0; i < keys.size(); ++i) co_await put_ok(s, keys[i], std::string(i + 1, 'v'));
    std::vector<std::uint64_t> size_of_sorted;
    std::vector<std::string> sorted = keys;
    std::sort(sorted.begin(), sorted.end());
    for (const auto& k : sorted) {
        size_of_sorted.push_back(std::find(keys.begin(), keys.end(), k) - keys.begin() + 1);
    }

    auto all = co_await s.list("", "", "", 1000, {});
    REQUIRE(all.has_value());
    CHECK(keys_of(all->objects) == sorted);
    CHECK(all->next_token.empty());
    REQUIRE(all->objects.size() == sorted.size());
    for (std::size_t i = 0; i < sorted.size(); ++i) CHECK(all->objects[i].size == size_of_sorted[i]);

    // Prefixes are string prefixes, as in S3, not directory names.
    for (std::string prefix : {"ns/t/1", "ns/t/1/", "ns/t", "ns/t/", "ns/t/0/seg-1", "ns", "n", "a", "a b/",
                               "z", "zz", "nope", "../", "ns//", "ns/t/1/x", "ns/t/1/x2/deep/"}) {
        int pages = 0;
        auto got = co_await list_all(s, prefix, "", 1000, &pages);
        INFO("prefix '" << prefix << "'");
        CHECK(keys_of(got) == matching(sorted, prefix));
        CHECK(pages == 1);
    }

    // Pagination: pages of every size reassemble the whole listing in order.
    for (int page_size : {1, 2, 3, 5, 11, 12, 13}) {
        int pages = 0;
        auto got = co_await list_all(s, "", "", page_size, &pages);
        INFO("page size " << page_size);
        CHECK(keys_of(got) == sorted);
        const int full_pages = static_cast<int>((sorted.size() + page_size - 1) / page_size);
        CHECK(pages == full_pages);
    }
    {
        int pages = 0;
        auto got = co_await list_all(s, "ns/t/", "", 2, &pages);
        CHECK(keys_of(got) == matching(sorted, "ns/t/"));
    }
    // A page exactly as large as what is left says there is nothing more.
    auto exact = co_await s.list("ns/t/0/", "", "", 3, {});
    REQUIRE(exact.has_value());
    CHECK(exact->objects.size() == 3);
    CHECK(exact->next_token.empty());

    // start_after: exclusive, need not be an existing key, combines with the prefix.
    for (std::string after : {"ns/t/0/seg-2", "ns/t/0/seg-15", "ns/t/0/", "ns/t", "a", "ns/t/1/x2", "zzz", ""}) {
        int pages = 0;
        auto got = co_await list_all(s, "", after, 4, &pages);
        INFO("start_after '" << after << "'");
        CHECK(keys_of(got) == matching(sorted, "", after));
        auto in_prefix = co_await list_all(s, "ns/t/", after, 4, &pages);
        CHECK(keys_of(in_prefix) == matching(sorted, "ns/t/", after));
    }

    // max_keys <= 0 means the default page (1000).
    auto dflt = co_await s.list("", "", "", 0, {});
    REQUIRE(dflt.has_value());
    CHECK(dflt->objects.size() == sorted.size());
}

task<void> if_absent(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    const std::string first = "first";
    const std::string second = "second";
    auto a = co_await s.put("ia/k", bytes(first), true, {});
    INFO(message(a));
    CHECK(outcome(a) == "ok");
    auto b = co_await s.put("ia/k", bytes(second), true, {});
    CHECK(outcome(b) == "precondition_failed");
    CHECK_FALSE(message(b).empty());
    co_await expect_body(s, "ia/k", "first");
    auto rm = co_await s.remove("ia/k", {});
    CHECK(outcome(rm) == "ok");
    auto c = co_await s.put("ia/k", bytes(second), true, {});
    CHECK(outcome(c) == "ok");
    co_await expect_body(s, "ia/k", "second");
    // Only the key itself counts: a sibling or a longer key does not block it.
    auto d = co_await s.put("ia/k2", bytes(first), true, {});
    CHECK(outcome(d) == "ok");
}

task<void> hostile_keys(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    const std::vector<std::string> bad = {
        "",
        "/abs",
        "/",
        "..",
        ".",
        "../escape",
        "a/../../escape",
        "a/./b",
        "a/.",
        "a//b",
        "a/",
        std::string("a\0b", 3),
        ".tmp.x",
        "a/.tmp.y.1234",
        std::string(256, 'n'),
        std::string(1025, 'k'),
    };
    const std::string body = "evil";
    for (const auto& key : bad) {
        INFO("key '" << key << "'");
        auto p = co_await s.put(key, bytes(body), false, {});
        CHECK(outcome(p) == "invalid_argument");
        CHECK_FALSE(message(p).empty());
        auto g = co_await s.get(key, std::nullopt, {});
        CHECK(outcome(g) == "invalid_argument");
        auto z = co_await s.size(key, {});
        CHECK(outcome(z) == "invalid_argument");
        auto r = co_await s.remove(key, {});
        CHECK(outcome(r) == "invalid_argument");
    }
    int pages = 0;
    auto left = co_await list_all(s, "", "", 1000, &pages);
    CHECK(left.empty());
    // Legal neighbours of the hostile ones.
    co_await put_ok(s, "ok/.tmp", "a");
    co_await put_ok(s, "ok/tmp.x", "b");
    co_await put_ok(s, std::string(255, 'n'), "c");
}

task<void> cancelled_before(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    co_await put_ok(s, "c/existing", "old");
    std::stop_source src;
    src.request_stop();
    const std::string body = "new";
    auto p = co_await s.put("c/new", bytes(body), false, src.get_token());
    CHECK(outcome(p) == "cancelled");
    auto p2 = co_await s.put("c/existing", bytes(body), false, src.get_token());
    CHECK(outcome(p2) == "cancelled");
    auto g = co_await s.get("c/existing", std::nullopt, src.get_token());
    CHECK(outcome(g) == "cancelled");
    auto z = co_await s.size("c/existing", src.get_token());
    CHECK(outcome(z) == "cancelled");
    auto r = co_await s.remove("c/existing", src.get_token());
    CHECK(outcome(r) == "cancelled");
    auto l = co_await s.list("c/", "", "", 10, src.get_token());
    CHECK(outcome(l) == "cancelled");

    // Nothing was written, replaced or removed.
    auto missing = co_await s.size("c/new", {});
    CHECK(outcome(missing) == "not_found");
    co_await expect_body(s, "c/existing", "old");
    int pages = 0;
    auto left = co_await list_all(s, "c/", "", 10, &pages);
    CHECK(keys_of(left) == std::vector<std::string>{"c/existing"});
}

task<void> large_object(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    const std::string body = pattern(8u << 20, 7);
    co_await put_ok(s, "big/8mib", body);
    auto sz = co_await s.size("big/8mib", {});
    REQUIRE(sz.has_value());
    CHECK(*sz == body.size());
    auto got = co_await s.get("big/8mib", std::nullopt, {});
    REQUIRE(got.has_value());
    CHECK(got->data.size() == body.size());
    CHECK((got->data == body)); // no dump of 8 MiB on failure
    std::optional<byte_range> mid = byte_range::between((4u << 20) - 10, (4u << 20) + 9);
    auto part = co_await s.get("big/8mib", mid, {});
    REQUIRE(part.has_value());
    CHECK(part->data == body.substr((4u << 20) - 10, 20));
    CHECK(part->object_size == body.size());
    std::optional<byte_range> tail = byte_range::suffix(1u << 20);
    auto t = co_await s.get("big/8mib", tail, {});
    REQUIRE(t.has_value());
    CHECK((t->data == body.substr(body.size() - (1u << 20))));
}

task<result<void, store_error>> put_one(object_store* s, std::string key, std::string body) {
    auto r = co_await s->put(key, bytes(body), false, {});
    co_return r;
}

task<void> concurrent_puts(const store_factory* make) {
    auto h = (*make)();
    object_store& s = h->store();
    // Half share one directory, half get one each under a common parent: both the same
    // directory's fsync and concurrent creation of sibling directories are exercised.
    std::vector<std::string> keys;
    for (int i = 0; i < 200; ++i) {
        keys.push_back(i % 2 ? fmt::format("cc/same/k{:03}", i) : fmt::format("cc/p{:03}/obj", i));
    }
    std::vector<task<result<void, store_error>>> puts;
    for (const auto& k : keys) puts.push_back(put_one(&s, k, "body of " + k));
    auto results = co_await runtime::when_all(std::move(puts));
    REQUIRE(results.size() == keys.size());
    for (std::size_t i = 0; i < results.size(); ++i) {
        INFO(keys[i] << ": " << message(results[i]));
        CHECK(results[i].has_value());
    }
    std::sort(keys.begin(), keys.end());
    int pages = 0;
    auto listed = co_await list_all(s, "cc/", "", 1000, &pages);
    CHECK(keys_of(listed) == keys);
    for (int i : {0, 1, 99, 198, 199}) {
        const auto& k = keys[static_cast<std::size_t>(i)];
        co_await expect_body(s, k, "body of " + k);
    }
}

} // namespace

void check_object_store_contract(const store_factory& make) {
    SECTION("put, get, size and overwrite round trip") { run_task(round_trip(&make)); }
    SECTION("byte ranges: bounded, from, suffix, and unsatisfiable ones") { run_task(ranges(&make)); }
    SECTION("missing keys are not_found; remove is idempotent") { run_task(missing_and_remove(&make)); }
    SECTION("list: byte order, string prefixes, pagination, start_after") { run_task(listing(&make)); }
    SECTION("if_absent refuses an existing key") { run_task(if_absent(&make)); }
    SECTION("hostile keys are invalid_argument everywhere") { run_task(hostile_keys(&make)); }
    SECTION("a stop_token fired before the call cancels it and changes nothing") {
        run_task(cancelled_before(&make));
    }
    SECTION("8 MiB object round trip") { run_task(large_object(&make)); }
    SECTION("200 concurrent puts") { run_task(concurrent_puts(&make)); }
}

} // namespace skiff::storage::contract
