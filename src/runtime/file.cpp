#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/file.hpp>
#include <skiff/runtime/uring.hpp>

#include <liburing.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace skiff::runtime {

namespace {

// One READ/WRITE moves at most this much: the SQE length is 32 bits and the kernel stops a
// single transfer at 0x7ffff000 bytes anyway. Short transfers are continued in a loop.
constexpr std::size_t max_transfer = std::size_t{1} << 30;

result<void> void_of(int res) {
    if (res < 0) return from_errno(-res);
    return ok();
}

} // namespace

fd_guard::~fd_guard() {
    if (_fd >= 0) ::close(_fd);
}

// References stay valid in the lambdas below: each is awaited at once, and the awaitable
// resumes only after its CQE.

task<result<int>> open_file(const std::string& path, int flags, mode_t mode, std::stop_token st) {
    const int res = co_await uring_op(
        [&](io_uring_sqe* sqe) { io_uring_prep_openat(sqe, AT_FDCWD, path.c_str(), flags, mode); }, st);
    if (res < 0) co_return from_errno(-res);
    co_return res;
}

task<result<void>> close_file(int fd) {
    const int res = co_await uring_op([&](io_uring_sqe* sqe) { io_uring_prep_close(sqe, fd); });
    co_return void_of(res);
}

task<result<void>> fsync_file(int fd, std::stop_token st) {
    const int res = co_await uring_op([&](io_uring_sqe* sqe) { io_uring_prep_fsync(sqe, fd, 0); }, st);
    co_return void_of(res);
}

task<result<void>> unlink_path(const std::string& path, int flags, std::stop_token st) {
    const int res = co_await uring_op(
        [&](io_uring_sqe* sqe) { io_uring_prep_unlinkat(sqe, AT_FDCWD, path.c_str(), flags); }, st);
    co_return void_of(res);
}

task<result<void>> make_dir(const std::string& path, mode_t mode, std::stop_token st) {
    const int res = co_await uring_op(
        [&](io_uring_sqe* sqe) { io_uring_prep_mkdirat(sqe, AT_FDCWD, path.c_str(), mode); }, st);
    co_return void_of(res);
}

task<result<void>> rename_path(const std::string& from, const std::string& to, unsigned flags) {
    const int res = co_await uring_op([&](io_uring_sqe* sqe) {
        io_uring_prep_renameat(sqe, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags);
    });
    co_return void_of(res);
}

task<result<void>> stat_path(int dirfd, const char* path, int flags, struct statx* out, std::stop_token st) {
    const int res = co_await uring_op(
        [&](io_uring_sqe* sqe) { io_uring_prep_statx(sqe, dirfd, path, flags, STATX_TYPE | STATX_SIZE, out); }, st);
    co_return void_of(res);
}

task<result<void>> write_all_at(int fd, std::span<const char> body, std::uint64_t offset, std::stop_token st) {
    std::size_t done = 0;
    while (done < body.size()) {
        const auto n = static_cast<unsigned>(std::min(body.size() - done, max_transfer));
        const int res = co_await uring_op(
            [&](io_uring_sqe* sqe) { io_uring_prep_write(sqe, fd, body.data() + done, n, offset + done); }, st);
        if (res < 0) co_return from_errno(-res);
        if (res == 0) co_return from_errno(EIO);
        done += static_cast<std::size_t>(res);
    }
    co_return ok();
}

task<result<void>> read_exact_at(int fd, std::span<char> buf, std::uint64_t offset, std::stop_token st) {
    std::size_t done = 0;
    while (done < buf.size()) {
        const auto n = static_cast<unsigned>(std::min(buf.size() - done, max_transfer));
        const int res = co_await uring_op(
            [&](io_uring_sqe* sqe) { io_uring_prep_read(sqe, fd, buf.data() + done, n, offset + done); }, st);
        if (res < 0) co_return from_errno(-res);
        if (res == 0) co_return from_errno(ENODATA);
        done += static_cast<std::size_t>(res);
    }
    co_return ok();
}

task<result<void>> fsync_dir(const std::string& dir) {
    auto fd = co_await open_file(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (!fd) co_return fd.error();
    fd_guard guard(*fd);
    auto synced = co_await fsync_file(*fd);
    auto closed = co_await close_file(guard.release());
    if (!synced) co_return synced;
    co_return closed;
}

// Walk up until a directory exists (or is created), then create the missing ones on the way
// down. If an existing "directory" is a file instead, the caller's next open fails with
// ENOTDIR and says so.
task<result<void>> make_dirs(std::string dir, std::string* failed_path, std::stop_token st) {
    const std::error_code exists(EEXIST, std::system_category());
    const std::error_code missing_parent(ENOENT, std::system_category());
    std::vector<std::string> missing;
    for (;;) {
        auto made = co_await make_dir(dir, 0755, st);
        if (made || made.error() == exists) break;
        if (made.error() == missing_parent && dir != "/") {
            std::string parent = parent_path(dir);
            missing.push_back(std::move(dir));
            dir = std::move(parent);
            continue;
        }
        *failed_path = dir;
        co_return made;
    }
    while (!missing.empty()) {
        dir = std::move(missing.back());
        missing.pop_back();
        auto made = co_await make_dir(dir, 0755, st);
        if (!made && made.error() != exists) {
            *failed_path = dir;
            co_return made;
        }
    }
    co_return ok();
}

std::string parent_path(std::string_view path) {
    const auto slash = path.rfind('/');
    if (slash == 0 || slash == std::string_view::npos) return "/";
    return std::string(path.substr(0, slash));
}

} // namespace skiff::runtime
