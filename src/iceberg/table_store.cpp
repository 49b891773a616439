// A table's files in the object store and the commit by exclusive create
// (include/skiff/iceberg/table_store.hpp).
#include <skiff/iceberg/table_store.hpp>

#include <skiff/core/parse_int.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace skiff::iceberg {

namespace {

iceberg_error from_store(const storage::store_error& e, std::string_view what) {
    switch (e.code) {
    case storage::errc::not_found: return iceberg_error(errc::not_found, fmt::format("{}: not found", what));
    case storage::errc::cancelled: return iceberg_error(errc::cancelled, fmt::format("{}: cancelled", what));
    default: return iceberg_error(errc::store_failed, fmt::format("{}: {}", what, e.message));
    }
}

constexpr std::string_view hint_name = "version-hint.text";

} // namespace

std::optional<int> metadata_version(std::string_view key) {
    const auto slash = key.rfind('/');
    std::string_view name = slash == std::string_view::npos ? key : key.substr(slash + 1);
    constexpr std::string_view suffix = ".metadata.json";
    if (name.size() <= 1 + suffix.size() || name[0] != 'v' || !name.ends_with(suffix)) return std::nullopt;
    const std::string_view digits = name.substr(1, name.size() - 1 - suffix.size());
    if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        return std::nullopt;
    }
    if (digits.size() > 1 && digits[0] == '0') return std::nullopt; // one spelling per version
    int v = 0;
    for (char c : digits) v = v * 10 + (c - '0');
    return v;
}

table_store::table_store(storage::object_store& store, std::string prefix, std::string location)
    : _store(store), _prefix(std::move(prefix)), _location(std::move(location)) {
    while (!_location.empty() && _location.back() == '/') _location.pop_back();
}

std::string table_store::metadata_key(int version) const { return fmt::format("{}/metadata/v{}.metadata.json", _prefix, version); }

std::string table_store::uri_of(std::string_view key) const {
    if (key.size() > _prefix.size() && key.substr(0, _prefix.size()) == _prefix && key[_prefix.size()] == '/') {
        return _location + std::string(key.substr(_prefix.size()));
    }
    return std::string(key);
}

std::optional<std::string> table_store::key_of(std::string_view uri) const {
    if (uri.size() <= _location.size() + 1 || uri.substr(0, _location.size()) != _location || uri[_location.size()] != '/') {
        return std::nullopt;
    }
    const std::string_view rest = uri.substr(_location.size());
    if (rest.find("/../") != std::string_view::npos || rest.find("/./") != std::string_view::npos) return std::nullopt;
    return _prefix + std::string(rest);
}

runtime::task<result<std::optional<storage::io_budget::permit>, iceberg_error>> table_store::permit(std::stop_token st) {
    if (!_budget) co_return std::optional<storage::io_budget::permit>();
    auto p = co_await _budget->acquire(storage::io_budget::priority::normal, st);
    if (!p) co_return iceberg_error(errc::cancelled, "waiting for the S3 budget: cancelled");
    co_return std::optional<storage::io_budget::permit>(std::move(*p));
}

// Each request with a permit of the budget held for just that request.
runtime::task<result<storage::get_result, storage::store_error>> table_store::budgeted_get(std::string key,
                                                                                          std::optional<storage::byte_range> r,
                                                                                          std::stop_token st) {
    auto held = co_await permit(st);
    if (!held) co_return storage::store_error(storage::errc::cancelled, held.error().message);
    co_return co_await _store.get(std::move(key), r, st);
}

runtime::task<result<void, storage::store_error>> table_store::budgeted_put(std::string key, std::span<const char> body,
                                                                           bool if_absent, std::stop_token st) {
    auto held = co_await permit(st);
    if (!held) co_return storage::store_error(storage::errc::cancelled, held.error().message);
    co_return co_await _store.put(std::move(key), body, if_absent, st);
}

runtime::task<result<std::uint64_t, storage::store_error>> table_store::budgeted_size(std::string key, std::stop_token st) {
    auto held = co_await permit(st);
    if (!held) co_return storage::store_error(storage::errc::cancelled, held.error().message);
    co_return co_await _store.size(std::move(key), st);
}

runtime::task<result<void, storage::store_error>> table_store::budgeted_remove_many(std::vector<std::string> keys,
                                                                                   std::stop_token st) {
    auto held = co_await permit(st);
    if (!held) co_return storage::store_error(storage::errc::cancelled, held.error().message);
    co_return co_await _store.remove_many(std::move(keys), st);
}

runtime::task<result<storage::list_result, storage::store_error>> table_store::budgeted_list(std::string prefix, std::string after,
                                                                                            std::string token, int max_keys,
                                                                                            std::stop_token st) {
    auto held = co_await permit(st);
    if (!held) co_return storage::store_error(storage::errc::cancelled, held.error().message);
    co_return co_await _store.list(std::move(prefix), std::move(after), std::move(token), max_keys, st);
}

runtime::task<result<std::optional<int>, iceberg_error>> table_store::read_hint(std::stop_token st) {
    std::string key = fmt::format("{}/metadata/{}", _prefix, hint_name);
    auto r = co_await budgeted_get(std::move(key), std::nullopt, st);
    if (!r) {
        if (r.error().code == storage::errc::not_found) co_return std::optional<int>();
        co_return from_store(r.error(), "reading the version hint");
    }
    std::string_view text = r->data;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
    // A hint that does not parse is ignored (the listing decides), as Java's HadoopTableOperations does.
    co_return metadata_version("v" + std::string(text) + ".metadata.json");
}

runtime::task<result<std::optional<int>, iceberg_error>> table_store::highest_listed(std::stop_token st) {
    auto keys = co_await list("metadata/v", st);
    if (!keys) co_return keys.error();
    std::optional<int> best;
    for (const auto& e : *keys) {
        if (auto v = metadata_version(e.key); v && (!best || *v > *best)) best = v;
    }
    co_return best;
}

runtime::task<result<loaded_table, iceberg_error>> table_store::load(std::stop_token st) {
    auto hint = co_await read_hint(st);
    if (!hint) co_return hint.error();
    std::optional<int> version = *hint;
    const std::optional<int> hinted = *hint;
    if (version) {
        // The hinted version must exist; if it does not, the hint is not to be trusted.
        auto s = co_await budgeted_size(metadata_key(*version), st);
        if (!s) {
            if (s.error().code != storage::errc::not_found) co_return from_store(s.error(), "probing the hinted version");
            version.reset();
        }
    }
    if (!version) {
        auto listed = co_await highest_listed(st);
        if (!listed) co_return listed.error();
        version = *listed;
        if (!version) co_return iceberg_error(errc::not_found, fmt::format("no metadata file under {}/metadata/", _prefix));
    }
    // Later versions than the hint: a writer died before its hint, or hints raced.
    while (true) {
        auto s = co_await budgeted_size(metadata_key(*version + 1), st);
        if (!s) {
            if (s.error().code == storage::errc::not_found) break;
            co_return from_store(s.error(), "probing for a later version");
        }
        ++*version;
    }
    if (*version != hinted.value_or(-1)) {
        // Heal the hint: readers that trust it without probing (icebird, some engines' quick
        // paths) would otherwise see an old version. It goes stale when a writer's hint PUT
        // failed, or its commit's answer was lost (the retried PUT then saw 412, so it never
        // wrote the hint). Best effort: its failure is the next load's to heal.
        const std::string text = std::to_string(*version);
        std::string hint_key = fmt::format("{}/metadata/{}", _prefix, hint_name);
        (void)co_await budgeted_put(std::move(hint_key), std::span<const char>(text.data(), text.size()), false, st);
    }
    const std::string key = metadata_key(*version);
    auto body = co_await budgeted_get(key, std::nullopt, st);
    if (!body) co_return from_store(body.error(), fmt::format("reading {}", key));
    auto md = table_metadata::parse(body->data);
    if (!md) co_return iceberg_error(errc::invalid_metadata, fmt::format("{}: {}", key, md.error().message));
    loaded_table out;
    out.version = *version;
    out.metadata = std::move(*md);
    co_return out;
}

runtime::task<result<int, iceberg_error>> table_store::commit(int base_version, const table_metadata& next, std::stop_token st) {
    const int version = base_version + 1;
    const std::string body = next.dump();
    std::string key = metadata_key(version);
    auto r = co_await budgeted_put(key, std::span<const char>(body.data(), body.size()), true, st);
    if (!r) {
        if (r.error().code == storage::errc::precondition_failed) {
            co_return iceberg_error(errc::conflict, fmt::format("version {} of {} was committed by another writer", version, _location));
        }
        co_return from_store(r.error(), fmt::format("writing {}", key));
    }
    const std::string hint = std::to_string(version);
    std::string hint_key = fmt::format("{}/metadata/{}", _prefix, hint_name);
    (void)co_await budgeted_put(std::move(hint_key), std::span<const char>(hint.data(), hint.size()), false, st);
    co_return version;
}

runtime::task<result<std::string, iceberg_error>> table_store::read(std::string key, std::stop_token st) {
    auto r = co_await budgeted_get(key, std::nullopt, st);
    if (!r) co_return from_store(r.error(), fmt::format("reading {}", key));
    co_return std::move(r->data);
}

runtime::task<result<void, iceberg_error>> table_store::write(std::string key, std::span<const char> body, std::stop_token st) {
    auto r = co_await budgeted_put(key, body, false, st);
    if (!r) co_return from_store(r.error(), fmt::format("writing {}", key));
    co_return ok();
}

runtime::task<result<void, iceberg_error>> table_store::remove_many(std::vector<std::string> keys, std::stop_token st) {
    auto r = co_await budgeted_remove_many(std::move(keys), st);
    if (!r) co_return from_store(r.error(), "deleting files");
    co_return ok();
}

runtime::task<result<std::vector<storage::object_entry>, iceberg_error>> table_store::list(std::string sub, std::stop_token st) {
    const std::string prefix = _prefix + "/" + sub;
    std::vector<storage::object_entry> out;
    std::string token;
    while (true) {
        auto page = co_await budgeted_list(prefix, std::string(), token, 1000, st);
        if (!page) co_return from_store(page.error(), fmt::format("listing {}", prefix));
        for (auto& e : page->objects) out.push_back(std::move(e));
        if (page->next_token.empty()) break;
        token = std::move(page->next_token);
    }
    co_return out;
}

} // namespace skiff::iceberg
