#include "local_list.hpp"

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

namespace skiff::storage::detail {

std::string join(std::string_view dir, std::string_view name) {
    if (dir == "/") return fmt::format("/{}", name);
    return fmt::format("{}/{}", dir, name);
}

bool list_walk::walk(const std::string& dir_key) {
    const std::string dir_path =
        dir_key.empty() ? std::string(root) : join(root, std::string_view(dir_key).substr(0, dir_key.size() - 1));
    DIR* d = ::opendir(dir_path.c_str());
    if (!d) {
        if (errno == ENOENT || errno == ENOTDIR) return true; // nothing stored there
        error = errno;
        error_path = dir_path;
        return false;
    }
    std::vector<std::string> names;
    for (;;) {
        errno = 0;
        const dirent* e = ::readdir(d);
        if (!e) break;
        const std::string_view name = e->d_name;
        if (name == "." || name == ".." || name.substr(0, temp_prefix.size()) == temp_prefix) continue;
        unsigned char type = e->d_type;
        if (type == DT_UNKNOWN) { // some file systems do not fill d_type
            struct stat sb {};
            if (::fstatat(::dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
            type = S_ISDIR(sb.st_mode) ? DT_DIR : (S_ISREG(sb.st_mode) ? DT_REG : DT_UNKNOWN);
        }
        // Symlinks, sockets and the like are not objects skiff wrote.
        if (type == DT_DIR) names.push_back(fmt::format("{}/", name));
        else if (type == DT_REG) names.emplace_back(name);
    }
    const int read_error = errno;
    ::closedir(d);
    if (read_error != 0) {
        error = read_error;
        error_path = dir_path;
        return false;
    }
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
        std::string key = dir_key + name;
        const bool under_prefix = key.starts_with(prefix);
        const bool is_dir = key.back() == '/';
        // Names are sorted, and keys that start with `prefix` form one contiguous run:
        // past it, nothing in this directory can match.
        if (!under_prefix && key > prefix && !(is_dir && prefix.starts_with(key))) break;
        if (is_dir) {
            if (!under_prefix && !prefix.starts_with(key)) continue;
            // Every key below starts with `key`; if `key` sorts before `after` and is not a
            // prefix of it, they differ at a byte where `key` is smaller, so all of them
            // sort before `after` too.
            if (!after.empty() && key < after && !after.starts_with(key)) continue;
            if (!walk(key)) return false;
        } else {
            if (!under_prefix || key <= after) continue;
            keys.push_back(std::move(key));
            if (keys.size() >= want) return false;
        }
    }
    return true;
}

} // namespace skiff::storage::detail
