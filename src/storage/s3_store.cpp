// The S3 object store. See s3_store.hpp for the contract and the error mapping.
#include <skiff/storage/s3_store.hpp>

#include <skiff/core/crc32c.hpp>
#include <skiff/s3/classify.hpp>
#include <skiff/s3/client.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace skiff::storage {

namespace {

using runtime::task;

// S3's key limit applies to the full key, the store's prefix included.
constexpr std::size_t max_s3_key = 1024;
constexpr int max_page = 1000;

bool ends_with(std::string_view s, std::string_view suffix) noexcept {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

} // namespace

std::string_view s3_store::metric_kind(std::string_view key) noexcept {
    if (ends_with(key, ".kfs")) return "kfs";
    if (ends_with(key, ".index")) return "index";
    if (ends_with(key, ".kfst")) return "kfst";
    return "other";
}

void s3_store::fill(s3::request_options& o, std::string_view key) const {
    o.kind = metric_kind(key);
    o.on_attempt = [this](const s3::attempt_outcome& a) {
        if (a.throttled) notify_throttled();
    };
}

s3_store::s3_store(s3::client& client, std::string bucket, std::string prefix)
    : _client(client), _bucket(std::move(bucket)), _prefix(std::move(prefix)) {}

result<std::unique_ptr<s3_store>, store_error> s3_store::create(s3::client& client, std::string_view url) {
    auto bad = [&](std::string_view why) {
        return failure{store_error(errc::invalid_argument, fmt::format("invalid S3 store URL '{}': {}", url, why))};
    };
    constexpr std::string_view scheme = "s3://";
    if (url.substr(0, scheme.size()) != scheme) return bad("it must start with s3://");
    std::string_view rest = url.substr(scheme.size());
    const auto slash = rest.find('/');
    const std::string_view bucket = rest.substr(0, slash);
    if (bucket.empty()) return bad("it names no bucket");
    if (bucket.find_first_of("?#@: \t\r\n") != std::string_view::npos) return bad("the bucket name has characters S3 does not allow");
    std::string prefix(slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1));
    if (!prefix.empty() && prefix.front() == '/') return bad("the prefix starts with '/'");
    if (prefix.find('\0') != std::string::npos) return bad("the prefix contains a NUL byte");
    // "s3://b/p" and "s3://b/p/" are one store: keys live below the prefix as a directory, so
    // store "p" never sees the objects of a neighbouring store "p2".
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';
    // The series operators know are there from the start, at zero.
    client.declare_metric_kind("kfs");
    client.declare_metric_kind("index");
    client.declare_metric_kind("kfst");
    return std::unique_ptr<s3_store>(new s3_store(client, std::string(bucket), std::move(prefix)));
}

std::string s3_store::describe() const { return fmt::format("s3://{}/{}", _bucket, _prefix); }

std::string s3_store::object_key(std::string_view key) const { return fmt::format("{}{}", _prefix, key); }

store_error s3_store::map_error(const s3::error& e, std::string_view what) {
    errc code = errc::permanent;
    switch (e.code) {
    // bad_response: a proxy's garbage or a cut-off body; the next attempt usually parses.
    case s3::errc::retryable:
    case s3::errc::bad_response: code = errc::transient; break;
    case s3::errc::not_found: code = errc::not_found; break;
    case s3::errc::precondition_failed: code = errc::precondition_failed; break;
    case s3::errc::cancelled: code = errc::cancelled; break;
    case s3::errc::deadline_exceeded: code = errc::deadline_exceeded; break;
    case s3::errc::invalid_request:
        // 416 is the caller's range, not a broken request: the local store says the same.
        code = (e.s3_code == "InvalidRange" || e.http_status == 416) ? errc::invalid_argument : errc::permanent;
        break;
    case s3::errc::access_denied:
    case s3::errc::signature_mismatch:
    case s3::errc::config: code = errc::permanent; break;
    }
    return {code, fmt::format("{} failed: {}", what, e.message), s3::is_throttle(e)};
}

task<result<void, store_error>> s3_store::put(std::string key, std::span<const char> body, bool if_absent,
                                              std::stop_token st) {
    return put_with(std::move(key), body, if_absent, 0, std::move(st));
}

task<result<void, store_error>> s3_store::put_once(std::string key, std::span<const char> body, bool if_absent,
                                                   std::stop_token st) {
    return put_with(std::move(key), body, if_absent, 1, std::move(st));
}

task<result<void, store_error>> s3_store::put_with(std::string key, std::span<const char> body, bool if_absent,
                                                   int max_attempts, std::stop_token st) {
    if (auto bad = check_key(key)) co_return failure{std::move(*bad)};
    const std::string full = object_key(key);
    if (full.size() > max_s3_key) {
        co_return failure{store_error(errc::invalid_argument,
                                      fmt::format("key '{}' is too long for S3 with the prefix '{}'", key, _prefix))};
    }
    // Named options, not braced temporaries: see s3::put_options (g++ 12 and aggregate
    // prvalues in co_await expressions).
    s3::put_options opts;
    fill(opts, key);
    opts.max_attempts = max_attempts;
    opts.if_none_match = if_absent;
    opts.crc32c = skiff::crc32c(body.data(), body.size());
    auto r = co_await _client.put_object(_bucket, full, body, opts, st);
    if (!r) co_return failure{map_error(r.error(), fmt::format("put of 's3://{}/{}'", _bucket, full))};
    co_return ok();
}

task<result<get_result, store_error>> s3_store::get(std::string key, std::optional<byte_range> range,
                                                    std::stop_token st) {
    if (auto bad = check_key(key)) co_return failure{std::move(*bad)};
    std::optional<s3::byte_range> s3_range;
    if (range) {
        switch (range->k()) {
        case byte_range::kind::bounded:
            // S3 ignores such a Range and sends the whole object; refuse it like the local store.
            if (range->last() < range->first()) {
                co_return failure{store_error(errc::invalid_argument,
                                              fmt::format("invalid range {}-{} for object '{}': it ends before it starts",
                                                          range->first(), range->last(), key))};
            }
            s3_range = s3::byte_range::between(range->first(), range->last());
            break;
        case byte_range::kind::from: s3_range = s3::byte_range::starting_at(range->first()); break;
        case byte_range::kind::suffix: s3_range = s3::byte_range::suffix(range->suffix_length()); break;
        }
    }
    const std::string full = object_key(key);
    s3::request_options opts;
    fill(opts, key);
    auto r = co_await _client.get_object(_bucket, full, s3_range, opts, st);
    if (!r) co_return failure{map_error(r.error(), fmt::format("get of 's3://{}/{}'", _bucket, full))};
    get_result out;
    out.data = std::move(r->body);
    out.object_size = r->object_size;
    co_return std::move(out);
}

task<result<std::uint64_t, store_error>> s3_store::size(std::string key, std::stop_token st) {
    if (auto bad = check_key(key)) co_return failure{std::move(*bad)};
    const std::string full = object_key(key);
    s3::request_options opts;
    fill(opts, key);
    auto r = co_await _client.head_object(_bucket, full, opts, st);
    if (!r) co_return failure{map_error(r.error(), fmt::format("size (HEAD) of 's3://{}/{}'", _bucket, full))};
    co_return std::uint64_t{r->size};
}

task<result<void, store_error>> s3_store::remove(std::string key, std::stop_token st) {
    if (auto bad = check_key(key)) co_return failure{std::move(*bad)};
    const std::string full = object_key(key);
    s3::request_options opts;
    fill(opts, key);
    auto r = co_await _client.delete_object(_bucket, full, opts, st);
    if (!r) co_return failure{map_error(r.error(), fmt::format("remove of 's3://{}/{}'", _bucket, full))};
    co_return ok();
}

task<result<void, store_error>> s3_store::remove_many(std::vector<std::string> keys, std::stop_token st) {
    for (const auto& k : keys) {
        if (auto bad = check_key(k)) co_return failure{std::move(*bad)};
    }
    // One key twice in a request gains nothing, and servers disagree on whether it is allowed.
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());

    std::optional<store_error> refused; // the error this call returns when keys were refused
    std::size_t n_refused = 0;
    for (std::size_t first = 0; first < keys.size(); first += s3::max_delete_keys) {
        const std::size_t last = std::min(keys.size(), first + s3::max_delete_keys);
        std::vector<std::string> batch;
        batch.reserve(last - first);
        std::string_view kind = metric_kind(keys[first]);
        for (std::size_t i = first; i < last; ++i) {
            batch.push_back(object_key(keys[i]));
            // A batch of segments is labelled kfs; a mix of kinds is "other".
            if (metric_kind(keys[i]) != kind) kind = "other";
        }
        s3::request_options opts;
        fill(opts, {});
        opts.kind = kind;
        auto r = co_await _client.delete_objects(_bucket, std::move(batch), opts, st);
        if (!r) {
            // Named by its first key, as object_store::remove_many promises a key not removed.
            const std::string what =
                fmt::format("remove of 's3://{}/{}' and {} more keys (batch {} of {})", _bucket,
                            object_key(keys[first]), last - first - 1, first / s3::max_delete_keys + 1,
                            (keys.size() + s3::max_delete_keys - 1) / s3::max_delete_keys);
            co_return failure{map_error(r.error(), what)};
        }
        bool throttled = false;
        for (const auto& f : r->failed) {
            s3::error e;
            e.code = f.code;
            e.s3_code = f.s3_code;
            e.message = f.message;
            auto mapped = map_error(e, fmt::format("remove of 's3://{}/{}'", _bucket, f.key));
            throttled = throttled || mapped.throttled;
            ++n_refused;
            // A caller that retries transient errors must still hear of a refusal that
            // retrying cannot fix.
            if (!refused || (refused->code == errc::transient && mapped.code != errc::transient)) {
                refused = std::move(mapped);
            }
        }
        if (throttled) notify_throttled();
    }
    if (refused) {
        refused->message += fmt::format(" ({} of {} keys not removed)", n_refused, keys.size());
        co_return failure{std::move(*refused)};
    }
    co_return ok();
}

task<result<list_result, store_error>> s3_store::list(std::string prefix, std::string start_after,
                                                      std::string token, int max_keys, std::stop_token st) {
    s3::list_request req(object_key(prefix));
    // S3 compares StartAfter with full keys, so it carries the store's prefix too.
    if (!start_after.empty()) req.start_after = object_key(start_after);
    req.continuation_token = std::move(token);
    req.max_keys = (max_keys <= 0 || max_keys > max_page) ? max_page : max_keys;
    s3::request_options opts;
    fill(opts, prefix);
    auto r = co_await _client.list_objects_v2(_bucket, std::move(req), opts, st);
    if (!r) {
        co_return failure{map_error(r.error(), fmt::format("list of 's3://{}/{}'", _bucket, object_key(prefix)))};
    }
    list_result page;
    page.objects.reserve(r->objects.size());
    for (auto& o : r->objects) {
        // Every key S3 returns starts with the request's prefix, which starts with ours; a
        // server that breaks that would hand us another store's objects.
        if (o.key.size() < _prefix.size() || o.key.compare(0, _prefix.size(), _prefix) != 0) {
            co_return failure{store_error(
                errc::transient,
                fmt::format("list of 's3://{}/{}': the server returned key '{}' outside the prefix", _bucket,
                            object_key(prefix), o.key))};
        }
        page.objects.emplace_back(o.key.substr(_prefix.size()), o.size);
    }
    if (r->is_truncated) page.next_token = std::move(r->next_continuation_token);
    co_return std::move(page);
}

} // namespace skiff::storage
