// File operations on this core's io_uring, beside the sockets: open, close, fsync, rename,
// unlink, statx, mkdir, and whole reads and writes that continue short transfers.
//
// Every call must be awaited on the reactor's thread (its stop_token signalled there too).
// Errors are std::error_code from runtime::from_errno: errno values in std::system_category
// (ENOENT, EEXIST, ENOTDIR, ...), errc::cancelled when `st` fired and the kernel dropped the
// operation. A cancelled operation resumes only after its own completion, so the paths and
// buffers passed in only need to live until the co_await returns. Calls without a stop_token
// are the ones that must run to the end once started (closing an fd, renaming at a commit
// point, the clean-up fsync of a directory).
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/task.hpp>

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

namespace skiff::runtime {

// openat(AT_FDCWD, path, flags, mode) → the new fd.
task<result<int>> open_file(const std::string& path, int flags, mode_t mode, std::stop_token st = {});
// Not cancellable: an fd is always given back.
task<result<void>> close_file(int fd);
task<result<void>> fsync_file(int fd, std::stop_token st = {});
// unlinkat(AT_FDCWD, path, flags): flags 0 for a file, AT_REMOVEDIR for an empty directory.
task<result<void>> unlink_path(const std::string& path, int flags = 0, std::stop_token st = {});
task<result<void>> make_dir(const std::string& path, mode_t mode = 0755, std::stop_token st = {});
// renameat2(from, to, flags); RENAME_NOREPLACE fails with EEXIST when `to` exists. Not
// cancellable: callers use a rename as their commit point.
task<result<void>> rename_path(const std::string& from, const std::string& to, unsigned flags = 0);
// statx(dirfd, path, flags, STATX_TYPE | STATX_SIZE): an open fd with "" and AT_EMPTY_PATH, or
// a path (add AT_SYMLINK_NOFOLLOW not to follow a final symlink).
task<result<void>> stat_path(int dirfd, const char* path, int flags, struct statx* out, std::stop_token st = {});

// Writes all of `body` from `offset` on. A write that makes no progress is EIO, not a spin.
task<result<void>> write_all_at(int fd, std::span<const char> body, std::uint64_t offset, std::stop_token st = {});
// Reads exactly buf.size() bytes at `offset`; ENODATA when the file ends first.
task<result<void>> read_exact_at(int fd, std::span<char> buf, std::uint64_t offset, std::stop_token st = {});

// open + fsync + close of a directory, so entries created or renamed in it are on disk. Not
// cancellable.
task<result<void>> fsync_dir(const std::string& dir);
// mkdir -p: creates `dir` and its missing parents (EEXIST counts as done: another writer may
// have made it). On failure `failed_path` names the directory that could not be made.
task<result<void>> make_dirs(std::string dir, std::string* failed_path, std::stop_token st = {});

// "/a/b/c" → "/a/b"; "/a" → "/".
std::string parent_path(std::string_view path);

// Owns an fd between its open and its close on the ring. Normal paths close through
// close_file(release()); only an exception unwinding through a coroutine leaves the fd here,
// and then a synchronous close() is the only option left (a destructor cannot co_await).
class fd_guard {
public:
    explicit fd_guard(int fd) noexcept : _fd(fd) {}
    fd_guard(const fd_guard&) = delete;
    fd_guard& operator=(const fd_guard&) = delete;
    ~fd_guard();
    int get() const noexcept { return _fd; }
    int release() noexcept { return std::exchange(_fd, -1); }

private:
    int _fd;
};

} // namespace skiff::runtime
