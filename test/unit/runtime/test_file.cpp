#include "run_task.hpp"

#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/file.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio> // RENAME_NOREPLACE
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using namespace skiff;
using namespace skiff::runtime;

namespace {

// A fresh directory under the system temp dir, removed with everything in it.
struct temp_dir {
    std::string path;
    temp_dir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "skiff-file-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::error_code sys(int e) { return {e, std::system_category()}; }

} // namespace

TEST_CASE("file: write, fsync, read back, stat and close on the ring", "[runtime][file]") {
    temp_dir dir;
    auto t = [](std::string root) -> task<void> {
        const std::string path = root + "/a.bin";
        auto fd = co_await open_file(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
        REQUIRE(fd.has_value());
        fd_guard guard(*fd);
        const std::string body = "hello, ring";
        auto w = co_await write_all_at(*fd, std::span<const char>(body), 0);
        CHECK(w.has_value());
        auto w2 = co_await write_all_at(*fd, std::span<const char>(body.data(), 5), 100); // a hole before
        CHECK(w2.has_value());
        auto synced = co_await fsync_file(*fd);
        CHECK(synced.has_value());
        std::string back(5, '\0');
        auto r = co_await read_exact_at(*fd, std::span<char>(back), 7);
        CHECK(r.has_value());
        CHECK(back == std::string("ring") + std::string(1, '\0')); // the hole reads as zeros
        // Past the end: the file ends first.
        std::string past(10, '\0');
        auto short_read = co_await read_exact_at(*fd, std::span<char>(past), 100);
        REQUIRE_FALSE(short_read.has_value());
        CHECK(short_read.error() == sys(ENODATA));
        struct statx stx {};
        auto st = co_await stat_path(*fd, "", AT_EMPTY_PATH, &stx);
        REQUIRE(st.has_value());
        CHECK(stx.stx_size == 105);
        CHECK(S_ISREG(stx.stx_mode));
        auto closed = co_await close_file(guard.release());
        CHECK(closed.has_value());
    };
    run_task(t(dir.path));
    std::string on_disk = slurp(dir.path + "/a.bin");
    REQUIRE(on_disk.size() == 105);
    CHECK(on_disk.substr(0, 11) == "hello, ring");
    CHECK(on_disk.substr(100) == "hello");
}

TEST_CASE("file: errors are errno codes; open of a missing file is ENOENT", "[runtime][file]") {
    temp_dir dir;
    auto t = [](std::string root) -> task<void> {
        auto fd = co_await open_file(root + "/missing", O_RDONLY | O_CLOEXEC, 0);
        REQUIRE_FALSE(fd.has_value());
        CHECK(fd.error() == sys(ENOENT));
        struct statx stx {};
        auto st = co_await stat_path(AT_FDCWD, (root + "/missing").c_str(), AT_SYMLINK_NOFOLLOW, &stx);
        REQUIRE_FALSE(st.has_value());
        CHECK(st.error() == sys(ENOENT));
        auto un = co_await unlink_path(root + "/missing");
        REQUIRE_FALSE(un.has_value());
        CHECK(un.error() == sys(ENOENT));
    };
    run_task(t(dir.path));
}

TEST_CASE("file: rename with RENAME_NOREPLACE refuses an existing target; unlink removes",
          "[runtime][file]") {
    temp_dir dir;
    {
        std::ofstream(dir.path + "/from") << "new";
        std::ofstream(dir.path + "/to") << "old";
    }
    auto t = [](std::string root) -> task<void> {
        auto refused = co_await rename_path(root + "/from", root + "/to", RENAME_NOREPLACE);
        REQUIRE_FALSE(refused.has_value());
        CHECK(refused.error() == sys(EEXIST));
        auto un = co_await unlink_path(root + "/to");
        CHECK(un.has_value());
        auto moved = co_await rename_path(root + "/from", root + "/to", RENAME_NOREPLACE);
        CHECK(moved.has_value());
        auto synced = co_await fsync_dir(root);
        CHECK(synced.has_value());
    };
    run_task(t(dir.path));
    CHECK(slurp(dir.path + "/to") == "new");
    CHECK_FALSE(std::filesystem::exists(dir.path + "/from"));
}

TEST_CASE("file: make_dirs creates missing parents, tolerates existing ones, names what failed",
          "[runtime][file]") {
    temp_dir dir;
    std::ofstream(dir.path + "/plain") << "x";
    auto t = [](std::string root) -> task<void> {
        std::string failed;
        auto made = co_await make_dirs(root + "/a/b/c", &failed);
        CHECK(made.has_value());
        auto again = co_await make_dirs(root + "/a/b/c", &failed);
        CHECK(again.has_value());
        auto under_file = co_await make_dirs(root + "/plain/sub", &failed);
        REQUIRE_FALSE(under_file.has_value());
        CHECK(under_file.error() == sys(ENOTDIR));
        CHECK(failed == root + "/plain/sub");
        auto rmdir = co_await unlink_path(root + "/a/b/c", AT_REMOVEDIR);
        CHECK(rmdir.has_value());
    };
    run_task(t(dir.path));
    CHECK(std::filesystem::is_directory(dir.path + "/a/b"));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/a/b/c"));
}

TEST_CASE("file: a fired stop token cancels, never reports success", "[runtime][file]") {
    temp_dir dir;
    auto t = [](std::string root) -> task<void> {
        std::stop_source src;
        src.request_stop();
        auto fd = co_await open_file(root + "/never", O_CREAT | O_RDWR | O_CLOEXEC, 0644, src.get_token());
        REQUIRE_FALSE(fd.has_value());
        CHECK(is_cancelled(fd.error()));
        std::string failed;
        auto made = co_await make_dirs(root + "/x/y", &failed, src.get_token());
        REQUIRE_FALSE(made.has_value());
        CHECK(is_cancelled(made.error()));
    };
    run_task(t(dir.path));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/never"));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/x"));
}

TEST_CASE("file: parent_path", "[runtime][file]") {
    CHECK(parent_path("/a/b/c") == "/a/b");
    CHECK(parent_path("/a") == "/");
    CHECK(parent_path("/") == "/");
}
