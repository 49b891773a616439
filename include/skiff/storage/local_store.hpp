// The local-directory object store, skiff's embedded default: key "ns/topic/0/x.kfs" is the
// file <root>/ns/topic/0/x.kfs. Object data and metadata operations go through this core's
// io_uring (OPENAT, WRITE, READ, FSYNC, STATX, RENAMEAT, UNLINKAT, MKDIRAT, CLOSE).
//
// Durability: put writes a temporary file ".tmp.<name>.<random>" next to the final one,
// fsyncs it, renames it into place (renameat2 RENAME_NOREPLACE for if_absent) and fsyncs the
// directory (and, the first time, the directories above it up to the root), so an object
// appears under its final key whole or not at all, also across a crash. The rename is the
// commit point: a stop_token that fires before it cancels the put (the temporary file is
// removed and the key is untouched); once the rename has been submitted the put runs to the
// end and reports what happened. Temporary files never appear in list().
//
// list() reads directories synchronously (io_uring has no getdents) on the calling core. It
// only opens the directories the prefix and start position can match ("ns/topic/0/" reads
// that one directory), but it reads each such directory whole, so a page from a directory of
// N entries costs O(N log N) CPU. Sizes of the page's entries are read with STATX on the ring.
//
// Limitations of a file system compared to S3: a key cannot also be a "directory" of other
// keys ("a" and "a/b" cannot both exist; the second put fails with errc::permanent), and the
// empty directories that remove() leaves behind are removed on a best-effort basis. Symlinks
// and other non-regular files under the root are not objects (not listed, get/size say
// not_found), but symlinked directories on the way to a key are followed. if_absent needs
// RENAME_NOREPLACE (ext4, xfs, btrfs, tmpfs; not every network or overlay file system).
//
// Errors: ENOENT → not_found; an existing key with if_absent → precondition_failed; ENOSPC,
// EIO, EACCES and other local failures → permanent with a sentence naming the path and the
// cause; ENOMEM, EMFILE, EAGAIN → transient; a fired stop_token → cancelled.
//
// Large objects (segments) are written with O_DIRECT: the aligned bulk goes from a 4 KiB-aligned
// copy of the body straight to the device, only the last partial block through the page cache.
// Buffered writes cost the broker most of its CPU per GB produced (the kernel's copy into the
// page cache, docs/benchmarks.md "CPU per GB"), and the data is fsynced anyway. A file system
// without O_DIRECT (EINVAL at open or write) gets buffered writes from then on.
//
// A local_store belongs to one core: call it only on the reactor thread that runs it. Several
// stores (or processes) may share a root; temporary names never collide.
#pragma once

#include <skiff/storage/object_store.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>

namespace skiff::storage {

struct local_store_options {
    local_store_options() = default;
    bool direct_writes = true;                   // O_DIRECT for bodies of at least direct_min_bytes
    std::size_t direct_min_bytes = 64 * 1024;    // smaller ones (indexes, metadata) are buffered
};

class local_store final : public object_store {
public:
    // Does no file I/O: the root directory is created (with its parents) by the first put.
    // Fails with errc::permanent when `root` is empty or when the kernel's io_uring lacks an
    // opcode the store needs (the message names it). A relative root is made absolute here.
    static result<std::unique_ptr<local_store>, store_error> create(std::string root, local_store_options opts = {});
    // Puts whose bulk went through O_DIRECT (tests and the benchmark check which path ran).
    std::uint64_t direct_puts() const noexcept { return _direct_puts; }

    runtime::task<result<void, store_error>> put(std::string key, std::span<const char> body, bool if_absent,
                                                 std::stop_token st) override;
    runtime::task<result<get_result, store_error>> get(std::string key, std::optional<byte_range> range,
                                                       std::stop_token st) override;
    runtime::task<result<std::uint64_t, store_error>> size(std::string key, std::stop_token st) override;
    runtime::task<result<void, store_error>> remove(std::string key, std::stop_token st) override;
    // next_token is the last key of the page.
    runtime::task<result<list_result, store_error>> list(std::string prefix, std::string start_after,
                                                         std::string token, int max_keys,
                                                         std::stop_token st) override;
    std::string describe() const override; // "file:///abs/root"

    const std::string& root() const noexcept { return _root; }
    // The file that holds `key` (which must be valid, see check_key()).
    std::string path_of(std::string_view key) const;

private:
    local_store(std::string root, local_store_options opts);
    std::string temp_name(std::string_view final_name);
    runtime::task<result<void, store_error>> make_durable(std::string dir);

    std::string _root; // absolute, no trailing '/' (except "/" itself)
    std::uint64_t _seed;
    std::uint64_t _counter = 0;
    // Directories whose entry in their parent is known to be on disk (the parent was fsynced
    // after they were created), so later puts only fsync the object's own directory.
    std::unordered_set<std::string> _durable_dirs;
    local_store_options _opts;
    std::uint64_t _direct_puts = 0;
};

} // namespace skiff::storage
