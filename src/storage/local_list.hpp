// The key-ordered directory walk behind local_store::list(), and the path helpers it shares
// with the store. Private to src/storage.
//
// The walk reads directories synchronously (io_uring has no getdents) on the calling core.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::storage::detail {

// Temporary files of a put in progress start with this; they are never objects.
inline constexpr std::string_view temp_prefix = ".tmp.";

// "dir" + "/" + "name" ("/" + "name" at the root).
std::string join(std::string_view dir, std::string_view name);

// Depth-first walk in key order. Sorting each directory's names with a '/' appended to
// subdirectories makes the walk visit keys in byte order: "a-c" (0x2d) sorts before the
// subtree "a/" (0x2f), which sorts before "a0".
struct list_walk {
    std::string_view root;
    std::string_view prefix;
    std::string_view after; // exclusive; empty: from the start
    std::size_t want = 0;
    std::vector<std::string> keys;
    int error = 0; // errno of the directory that could not be read
    std::string error_path;

    // Walks the directory of `dir_key` ("" for the root, else a key prefix ending in '/').
    // False once `want` keys were found or an error stopped the walk.
    bool walk(const std::string& dir_key);
};

} // namespace skiff::storage::detail
