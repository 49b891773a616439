// The local-directory object store. See local_store.hpp for the contract; the comments here
// say why each step is done the way it is.
#include "local_list.hpp"

#include <skiff/storage/local_store.hpp>

#include <skiff/core/log.hpp>
#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/file.hpp>
#include <skiff/runtime/when_all.hpp>

#include <fmt/format.h>
#include <liburing.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio> // RENAME_NOREPLACE (glibc, _GNU_SOURCE)
#include <cstdlib>
#include <cstring>
#include <memory>
#include <filesystem>
#include <random>
#include <system_error>
#include <vector>

namespace skiff::storage {

namespace {

using detail::join;
using detail::list_walk;
using detail::temp_prefix;
using runtime::task;

// Puts retry creating their temporary file this often when a directory vanishes under them
// (a remove() pruning an empty directory between our mkdir and our open) or a random name
// collides. Either needs a race per attempt, so a handful of attempts is plenty.
constexpr int max_create_attempts = 8;
// Sizes of a list page are fetched with this many STATX in flight at once.
constexpr std::size_t stat_batch = 64;
constexpr int max_page = 1000;

// The opcodes this store submits. The reactor probes the ones every module needs; these are
// checked here so a kernel without them fails at start-up with a sentence, not with EINVAL
// on the first put.
std::string probe_opcodes() {
    io_uring_probe* probe = io_uring_get_probe();
    if (!probe) return "io_uring is not available: cannot probe its opcodes for the local object store";
    struct named {
        int op;
        const char* name;
    };
    static constexpr named needed[] = {
        {IORING_OP_OPENAT, "OPENAT"}, {IORING_OP_CLOSE, "CLOSE"},       {IORING_OP_READ, "READ"},
        {IORING_OP_WRITE, "WRITE"},   {IORING_OP_FSYNC, "FSYNC"},       {IORING_OP_STATX, "STATX"},
        {IORING_OP_RENAMEAT, "RENAMEAT"}, {IORING_OP_UNLINKAT, "UNLINKAT"}, {IORING_OP_MKDIRAT, "MKDIRAT"},
    };
    std::string missing;
    for (const auto& n : needed) {
        if (!io_uring_opcode_supported(probe, n.op)) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", n.name);
    }
    io_uring_free_probe(probe);
    if (missing.empty()) return {};
    return fmt::format("the kernel's io_uring lacks opcodes the local object store needs: {}", missing);
}

std::string errno_text(int err) { return std::error_code(err, std::system_category()).message(); }

// errno → storage error: one sentence naming what we tried, the path and the cause.
store_error errno_error(int err, std::string_view what, std::string_view path) {
    errc code = errc::permanent;
    switch (err) {
    case ENOENT: code = errc::not_found; break;
    case EEXIST: code = errc::precondition_failed; break;
    case ECANCELED: code = errc::cancelled; break;
    // Resource shortages of this process or of the moment, not of the disk: retrying later
    // may work. ENOSPC and EDQUOT stay permanent: freeing space takes an operator.
    case EINTR:
    case EAGAIN:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EBUSY: code = errc::transient; break;
    case ENAMETOOLONG: code = errc::invalid_argument; break;
    default: break; // EIO, ENOSPC, EDQUOT, EACCES, EPERM, EROFS, ENOTDIR, EISDIR, ELOOP, ...
    }
    return {code, fmt::format("cannot {} '{}': {}", what, path, errno_text(err))};
}

store_error cancelled_error(std::string_view op, std::string_view key) {
    return {errc::cancelled, fmt::format("{} of object '{}' cancelled", op, key)};
}


std::uint64_t splitmix64(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

using runtime::fd_guard;

// --- ring operations (runtime/file.hpp). The store's steps below decide by errno value
// (ENOENT, EEXIST, ENOTDIR, ...), so these turn the runtime's error codes back into the CQE's
// res: >= 0, or -errno (-ECANCELED when `st` fired). ----------------------------------------

int res_of(const std::error_code& ec) {
    if (runtime::is_cancelled(ec)) return -ECANCELED;
    if (ec == make_error_code(runtime::errc::timed_out)) return -ETIME;
    if (ec.category() == std::system_category()) return -ec.value();
    return -EIO;
}
int res_of(const result<void>& r) { return r ? 0 : res_of(r.error()); }

task<int> open_at(const std::string& path, int flags, mode_t mode, std::stop_token st) {
    auto fd = co_await runtime::open_file(path, flags, mode, std::move(st));
    co_return fd ? *fd : res_of(fd.error());
}

task<int> close_fd(int fd) {
    auto r = co_await runtime::close_file(fd);
    co_return res_of(r);
}

task<int> fsync_fd(int fd, std::stop_token st) {
    auto r = co_await runtime::fsync_file(fd, std::move(st));
    co_return res_of(r);
}

task<int> unlink_at(const std::string& path, int flags, std::stop_token st) {
    auto r = co_await runtime::unlink_path(path, flags, std::move(st));
    co_return res_of(r);
}

task<int> rename_at(const std::string& from, const std::string& to, unsigned flags) {
    auto r = co_await runtime::rename_path(from, to, flags);
    co_return res_of(r);
}

// STATX of an open fd (empty path + AT_EMPTY_PATH) or of a path (no symlink following: a
// symlink is not an object skiff wrote).
task<int> statx_at(int dirfd, const char* path, int flags, struct statx* out, std::stop_token st) {
    auto r = co_await runtime::stat_path(dirfd, path, flags, out, std::move(st));
    co_return res_of(r);
}

// Writes all of `body` at offset 0; 0 or -errno.
task<int> write_all(int fd, std::span<const char> body, std::stop_token st) {
    auto r = co_await runtime::write_all_at(fd, body, 0, std::move(st));
    co_return res_of(r);
}

// O_DIRECT wants the buffer, the offset and the length aligned to the device's logical block;
// 4 KiB covers every common device. The aligned bulk goes from an aligned copy (a memcpy costs
// a tenth of the kernel's copy into the page cache); the tail, less than a block, is written
// through the page cache after O_DIRECT is cleared on the fd. 0 or -errno.
constexpr std::size_t direct_align = 4096;

// Writes through the page cache from now on; 0 or -errno.
int clear_direct(int fd) { return ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_DIRECT) < 0 ? -errno : 0; }

task<int> write_direct(int fd, std::span<const char> body, std::stop_token st) {
    const std::size_t bulk = body.size() / direct_align * direct_align;
    if (bulk > 0) {
        struct aligned_free {
            void operator()(char* p) const noexcept { std::free(p); }
        };
        std::unique_ptr<char, aligned_free> buf(static_cast<char*>(std::aligned_alloc(direct_align, bulk)));
        if (!buf) co_return -ENOMEM;
        std::memcpy(buf.get(), body.data(), bulk);
        auto r = co_await runtime::write_all_at(fd, std::span<const char>(buf.get(), bulk), 0, st);
        if (!r) co_return res_of(r);
    }
    if (bulk == body.size()) co_return 0;
    if (const int cleared = clear_direct(fd); cleared < 0) co_return cleared;
    auto r = co_await runtime::write_all_at(fd, body.subspan(bulk), bulk, st);
    co_return res_of(r);
}

// Reads exactly `len` bytes at `offset`; 0, -errno, or -ENODATA when the file ended first.
task<int> read_exact(int fd, char* buf, std::size_t len, std::uint64_t offset, std::stop_token st) {
    auto r = co_await runtime::read_exact_at(fd, std::span<char>(buf, len), offset, std::move(st));
    co_return res_of(r);
}

// Not cancellable: it runs after a put's commit point.
task<int> fsync_dir(const std::string& dir) {
    auto r = co_await runtime::fsync_dir(dir);
    co_return res_of(r);
}

task<int> make_dirs(std::string dir, std::string* failed_path, std::stop_token st) {
    auto r = co_await runtime::make_dirs(std::move(dir), failed_path, std::move(st));
    co_return res_of(r);
}

// Cleanup of a temporary file on a failed or cancelled put. Never cancellable (it is what
// cancellation needs done); a failure is only logged, since the put already failed for a
// better reason and list() never shows the leftover.
task<void> remove_temp(const std::string& path) {
    const int res = co_await unlink_at(path, 0, {});
    if (res < 0 && res != -ENOENT) log::warn("local store: cannot remove temporary file '{}': {}", path, errno_text(-res));
}

task<int> stat_size(std::string path, std::uint64_t* size, std::stop_token st) {
    struct statx stx {};
    const int res = co_await statx_at(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, &stx, st);
    if (res < 0) co_return res;
    if (!S_ISREG(stx.stx_mode)) co_return -ENOENT;
    *size = stx.stx_size;
    co_return 0;
}

} // namespace

// --- local_store -----------------------------------------------------------------------

local_store::local_store(std::string root, local_store_options opts)
    : _root(std::move(root)), _seed(0), _opts(opts) {
    std::random_device rd;
    _seed = (std::uint64_t{rd()} << 32) ^ rd();
}

result<std::unique_ptr<local_store>, store_error> local_store::create(std::string root, local_store_options opts) {
    if (root.empty()) return failure{store_error(errc::permanent, "the local object store needs a root directory")};
    static const std::string probe_error = probe_opcodes();
    if (!probe_error.empty()) return failure{store_error(errc::permanent, probe_error)};
    std::error_code ec;
    auto abs = std::filesystem::absolute(root, ec);
    if (ec) {
        return failure{store_error(errc::permanent,
                                   fmt::format("cannot resolve the local store root '{}': {}", root, ec.message()))};
    }
    std::string norm = abs.lexically_normal().string();
    while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
    return std::unique_ptr<local_store>(new local_store(std::move(norm), opts));
}

std::string local_store::describe() const { return fmt::format("file://{}", _root); }

std::string local_store::path_of(std::string_view key) const { return join(_root, key); }

std::string local_store::temp_name(std::string_view final_name) {
    // Unique within the store by the counter, across stores and processes by the random seed;
    // the name is also opened O_EXCL, so a collision is retried, never shared. The final name
    // is cut so the whole stays within NAME_MAX (255).
    return fmt::format("{}{}.{:016x}", temp_prefix, final_name.substr(0, 200), splitmix64(_seed + ++_counter));
}

task<result<void, store_error>> local_store::put(std::string key, std::span<const char> body, bool if_absent,
                                                 std::stop_token st) {
    if (auto bad = check_key(key)) co_return failure{std::move(*bad)};
    const std::string path = path_of(key);
    const std::string dir = runtime::parent_path(path);
    const std::string name = path.substr(path.rfind('/') + 1);

    // 1. The temporary file, next to the final one so the rename stays in one directory (and
    //    one file system). The parents are created only when the open says they are missing:
    //    the common case (a known partition directory) costs no MKDIRAT at all.
    std::string tmp;
    int fd = -1;
    bool direct = _opts.direct_writes && body.size() >= _opts.direct_min_bytes;
    for (int attempt = 1;; ++attempt) {
        tmp = join(dir, temp_name(name));
        fd = co_await open_at(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | (direct ? O_DIRECT : 0), 0644, st);
        if (fd >= 0 || fd == -ECANCELED || attempt == max_create_attempts) break;
        if (fd == -EEXIST) continue;
        if (fd == -EINVAL && direct) {
            // The file system has no O_DIRECT: buffered writes from now on.
            log::info("{}: no O_DIRECT on this file system; writing through the page cache", describe());
            _opts.direct_writes = false;
            direct = false;
            continue;
        }
        if (fd != -ENOENT) break;
        std::string failed;
        const int made = co_await make_dirs(dir, &failed, st);
        if (made == -ECANCELED) co_return failure{cancelled_error("put", key)};
        if (made < 0 && made != -ENOENT) co_return failure{errno_error(-made, "create directory", failed)};
    }
    if (fd == -ECANCELED) co_return failure{cancelled_error("put", key)};
    if (fd < 0) {
        // ENOENT after retries means the directory keeps vanishing: not "no such object".
        store_error e = errno_error(-fd, "create temporary file", tmp);
        if (e.code == errc::not_found || e.code == errc::precondition_failed) e.code = errc::transient;
        co_return failure{std::move(e)};
    }

    // 2. Data, then fsync, then close. From here on every failure removes the temporary file.
    //    A fired stop_token makes the next ring operation resolve -ECANCELED at once (or the
    //    kernel drops the one in flight); the check after close catches a stop that arrived
    //    while the last operation completed anyway.
    fd_guard guard(fd);
    std::string_view failed_step = "write temporary file";
    int res = 0;
    if (direct) {
        res = co_await write_direct(fd, body, st);
        if (res == -EINVAL) {
            // Opened with O_DIRECT but the write is refused (alignment the device wants larger
            // than 4 KiB, or a file system that only pretends): rewrite the whole body buffered.
            log::info("{}: O_DIRECT writes refused; writing through the page cache", describe());
            _opts.direct_writes = false;
            direct = false;
            res = clear_direct(fd);
        } else if (res >= 0) {
            ++_direct_puts;
        }
    }
    if (res >= 0 && !direct) res = co_await write_all(fd, body, st);
    if (res >= 0) {
        failed_step = "sync temporary file";
        res = co_await fsync_fd(fd, st);
    }
    const int closed = co_await close_fd(guard.release());
    if (res >= 0 && closed < 0) {
        failed_step = "close temporary file";
        res = closed;
    }
    if (res >= 0 && st.stop_requested()) res = -ECANCELED;
    if (res < 0) {
        co_await remove_temp(tmp);
        if (res == -ECANCELED) co_return failure{cancelled_error("put", key)};
        co_return failure{errno_error(-res, failed_step, tmp)};
    }

    // 3. The commit point. The rename gets no stop_token: were it cancelled after the kernel
    //    performed it, we could neither report "cancelled" (the object is there) nor undo it
    //    (an overwrite destroyed the previous object). It is one short metadata operation.
    const int renamed = co_await rename_at(tmp, path, if_absent ? RENAME_NOREPLACE : 0u);
    if (renamed < 0) {
        co_await remove_temp(tmp);
        if (renamed == -EEXIST && if_absent) {
            co_return failure{store_error(errc::precondition_failed,
                                          fmt::format("object '{}' already exists in {}", key, describe()))};
        }
        co_return failure{errno_error(-renamed, fmt::format("rename '{}' into place as", tmp), path)};
    }

    // 4. The name itself must survive a crash: fsync the directory (and new parents).
    auto durable = co_await make_durable(dir);
    if (!durable) co_return durable;
    co_return ok();
}

// fsyncs `dir`, then walks up: every directory whose entry in its parent is not yet known to
// be on disk gets its parent fsynced. The set is filled only after the fsync completed, so a
// concurrent put into a directory another put just created syncs the parents itself instead
// of returning before they are durable.
task<result<void, store_error>> local_store::make_durable(std::string dir) {
    int res = co_await fsync_dir(dir);
    if (res < 0) co_return failure{errno_error(-res, "sync directory", dir)};
    std::string child = dir;
    while (!_durable_dirs.contains(child)) {
        std::string parent = runtime::parent_path(child);
        res = co_await fsync_dir(parent);
        if (res < 0) co_return failure{errno_error(-res, "sync directory", parent)};
        _durable_dirs.insert(child);
        // The root's own entry is the last one we answer for; its ancestors are the operator's.
        if (child == _root) break;
        child = std::move(parent);
    }
    co_return ok();
}

task<result<get_result, store_error>> local_store::get(std::string key, std::optional<byte_range> range,
                                                       std::stop_token st) {
    if (auto bad = check_key(key)) co_return failure{std::move(*bad)};
    if (range && range->k() == byte_range::kind::bounded && range->last() < range->first()) {
        co_return failure{store_error(errc::invalid_argument,
                                      fmt::format("invalid range {}-{} for object '{}': it ends before it starts",
                                                  range->first(), range->last(), key))};
    }
    const std::string path = path_of(key);
    // O_NOFOLLOW: an object is a regular file skiff renamed into place, never a symlink (only
    // the last component is checked; directories on the way may be symlinks, as the root may).
    const int fd = co_await open_at(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0, st);
    // ELOOP: the name is a symlink, which is no object skiff wrote (list() skips them too).
    if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP) {
        co_return failure{store_error(errc::not_found, fmt::format("no object '{}' in {}", key, describe()))};
    }
    if (fd == -ECANCELED) co_return failure{cancelled_error("get", key)};
    if (fd < 0) co_return failure{errno_error(-fd, "open", path)};
    fd_guard guard(fd);

    result<get_result, store_error> out = store_error(errc::permanent, "unreachable");
    struct statx stx {};
    const int sres = co_await statx_at(fd, "", AT_EMPTY_PATH, &stx, st);
    if (sres == -ECANCELED) {
        out = failure{cancelled_error("get", key)};
    } else if (sres < 0) {
        out = failure{errno_error(-sres, "stat", path)};
    } else if (!S_ISREG(stx.stx_mode)) {
        // "a" is a directory holding "a/b": there is no object "a".
        out = failure{store_error(errc::not_found, fmt::format("no object '{}' in {}", key, describe()))};
    } else {
        const std::uint64_t size = stx.stx_size;
        std::uint64_t first = 0;
        std::uint64_t count = size;
        std::optional<std::pair<std::uint64_t, std::uint64_t>> slice;
        if (range) slice = range->resolve(size);
        if (range && !slice) {
            out = failure{store_error(errc::invalid_argument,
                                      fmt::format("range not satisfiable for object '{}' of {} bytes", key, size))};
        } else {
            if (slice) {
                first = slice->first;
                count = slice->second - slice->first + 1;
            }
            get_result got;
            got.object_size = size;
            got.data.resize(count);
            const int rres = co_await read_exact(fd, got.data.data(), count, first, st);
            if (rres == -ECANCELED) out = failure{cancelled_error("get", key)};
            else if (rres == -ENODATA) {
                // Objects are never modified in place (puts rename a new file over them), so
                // a file shorter than its size a moment ago was changed behind skiff's back.
                out = failure{store_error(errc::corrupt,
                                          fmt::format("object file '{}' shrank while being read", path))};
            } else if (rres < 0) out = failure{errno_error(-rres, "read", path)};
            else out = std::move(got);
        }
    }
    (void)co_await close_fd(guard.release()); // read-only: a failed close loses nothing
    co_return std::move(out);
}

task<result<std::uint64_t, store_error>> local_store::size(std::string key, std::stop_token st) {
    if (auto bad = check_key(key)) co_return failure{std::move(*bad)};
    const std::string path = path_of(key);
    struct statx stx {};
    const int res = co_await statx_at(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, &stx, st);
    if (res == -ECANCELED) co_return failure{cancelled_error("size", key)};
    if (res == -ENOENT || res == -ENOTDIR || (res == 0 && !S_ISREG(stx.stx_mode))) {
        co_return failure{store_error(errc::not_found, fmt::format("no object '{}' in {}", key, describe()))};
    }
    if (res < 0) co_return failure{errno_error(-res, "stat", path)};
    co_return std::uint64_t{stx.stx_size};
}

task<result<void, store_error>> local_store::remove(std::string key, std::stop_token st) {
    if (auto bad = check_key(key)) co_return failure{std::move(*bad)};
    const std::string path = path_of(key);
    const int res = co_await unlink_at(path, 0, st);
    if (res == -ECANCELED) co_return failure{cancelled_error("remove", key)};
    // Absent, or a directory of other keys ("a" holding "a/b"): either way no object "a".
    if (res == -ENOENT || res == -ENOTDIR || res == -EISDIR) co_return ok();
    if (res < 0) co_return failure{errno_error(-res, "remove", path)};

    // The unlink happened: from here on nothing is cancellable, as in put's commit. The
    // directory is synced so a removed object does not come back after a crash.
    std::string dir = runtime::parent_path(path);
    const int synced = co_await fsync_dir(dir);
    if (synced < 0) co_return failure{errno_error(-synced, "sync directory", dir)};
    // Best effort: drop directories left empty, so lists do not walk dead partitions. A put
    // racing with this retries its open (see put), and rmdir never removes a non-empty one.
    // An empty directory that survives a crash is harmless, so these are not synced.
    while (dir.size() > _root.size()) {
        if (co_await unlink_at(dir, AT_REMOVEDIR, {}) < 0) break;
        _durable_dirs.erase(dir);
        dir = runtime::parent_path(dir);
    }
    co_return ok();
}

task<result<list_result, store_error>> local_store::list(std::string prefix, std::string start_after,
                                                         std::string token, int max_keys, std::stop_token st) {
    if (st.stop_requested()) co_return failure{store_error(errc::cancelled, "list cancelled")};
    if (max_keys <= 0 || max_keys > max_page) max_keys = max_page;
    if (prefix.find('\0') != std::string::npos) {
        co_return failure{store_error(errc::invalid_argument, "list prefix contains a NUL byte")};
    }
    list_result page;
    // The walk starts in the deepest directory the prefix names. If that part is not a valid
    // key path ("../", "a//"), no valid key can start with the prefix.
    const std::string dir_key = prefix.substr(0, prefix.rfind('/') + 1);
    if (!dir_key.empty() && check_key(std::string_view(dir_key).substr(0, dir_key.size() - 1))) co_return page;

    // The token is the last key of the previous page; the later of the two positions wins.
    list_walk w;
    w.root = _root;
    w.prefix = prefix;
    w.after = std::max(start_after, token);
    w.want = static_cast<std::size_t>(max_keys) + 1; // one extra tells whether more follow
    w.walk(dir_key);
    if (w.error != 0) co_return failure{errno_error(w.error, "list directory", w.error_path)};
    if (w.keys.size() > static_cast<std::size_t>(max_keys)) {
        w.keys.resize(static_cast<std::size_t>(max_keys));
        page.next_token = w.keys.back();
    }

    std::vector<std::uint64_t> sizes(w.keys.size());
    std::vector<int> results;
    results.reserve(w.keys.size());
    for (std::size_t base = 0; base < w.keys.size(); base += stat_batch) {
        std::vector<task<int>> batch;
        for (std::size_t i = base; i < std::min(w.keys.size(), base + stat_batch); ++i) {
            batch.push_back(stat_size(path_of(w.keys[i]), &sizes[i], st));
        }
        auto done = co_await runtime::when_all(std::move(batch));
        results.insert(results.end(), done.begin(), done.end());
    }
    for (std::size_t i = 0; i < w.keys.size(); ++i) {
        const int res = results[i];
        if (res == -ECANCELED) co_return failure{store_error(errc::cancelled, "list cancelled")};
        // Removed between the directory read and the STATX: it is no longer there to list.
        if (res == -ENOENT || res == -ENOTDIR) continue;
        if (res < 0) co_return failure{errno_error(-res, "stat", path_of(w.keys[i]))};
        page.objects.emplace_back(std::move(w.keys[i]), sizes[i]);
    }
    co_return page;
}

} // namespace skiff::storage
