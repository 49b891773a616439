// The key grammar shared by every object store.
#include <skiff/storage/object_store.hpp>

#include <skiff/core/printable.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace skiff::storage {

std::optional<store_error> check_key(std::string_view key) {
    auto bad = [&](std::string_view why) {
        return store_error(errc::invalid_argument, fmt::format("invalid object key '{}': {}", printable(key), why));
    };
    if (key.empty()) return bad("it is empty");
    // S3's limit (1024 bytes of UTF-8); the local store's paths stay below PATH_MAX with it.
    if (key.size() > 1024) return bad("longer than 1024 bytes");
    if (key.find('\0') != std::string_view::npos) return bad("it contains a NUL byte");
    if (key.front() == '/') return bad("it starts with '/' (keys are relative)");
    if (key.back() == '/') return bad("it ends with '/' (that names a directory, not an object)");
    std::size_t start = 0;
    while (start <= key.size()) {
        const std::size_t slash = std::min(key.find('/', start), key.size());
        const std::string_view part = key.substr(start, slash - start);
        if (part.empty()) return bad("it contains an empty component (\"//\")");
        if (part == "." || part == "..") return bad("it contains a '.' or '..' component");
        // NAME_MAX on Linux file systems: the local store could not create the file.
        if (part.size() > 255) return bad("a component is longer than 255 bytes");
        // The local store's temporary files; such a key could collide with one and would
        // never show up in list().
        if (part.substr(0, 5) == ".tmp.") return bad("a component starts with '.tmp.' (reserved)");
        start = slash + 1;
    }
    return std::nullopt;
}

runtime::task<result<void, store_error>> object_store::remove_many(std::vector<std::string> keys,
                                                                   std::stop_token st) {
    for (auto& k : keys) {
        auto r = co_await remove(k, st);
        if (!r) co_return failure{std::move(r).error()};
    }
    co_return ok();
}

} // namespace skiff::storage
