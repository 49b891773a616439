// The local-directory object store: the shared contract, plus what only a file system can
// get wrong — layout on disk, temporary files, durability steps under cancellation, errors
// from the kernel, and keys that clash with directories.
#include "run_task.hpp"
#include "store_contract.hpp"

#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/runtime/when_all.hpp>
#include <skiff/storage/local_store.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <coroutine>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::storage;
using skiff::runtime::run_task;
using skiff::runtime::task;
namespace fs = std::filesystem;

namespace {

std::span<const char> bytes(const std::string& s) { return {s.data(), s.size()}; }

template <typename T>
std::string outcome(const result<T, store_error>& r) {
    return r.has_value() ? std::string("ok") : std::string(to_string(r.error().code));
}
template <typename T>
std::string message(const result<T, store_error>& r) {
    return r.has_value() ? std::string() : r.error().message;
}

// A fresh directory under $TMPDIR, removed with everything in it.
class temp_dir {
public:
    temp_dir() {
        std::string tmpl = (fs::temp_directory_path() / "skiff-local-store-XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        _path = tmpl;
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(_path, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    const std::string& path() const noexcept { return _path; }

private:
    std::string _path;
};

std::unique_ptr<local_store> make_store(const std::string& root) {
    auto r = local_store::create(root);
    INFO(message(r));
    REQUIRE(r.has_value());
    return std::move(*r);
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Every temporary file (or directory) anywhere under `root`.
std::vector<std::string> temp_files(const std::string& root) {
    std::vector<std::string> out;
    std::error_code ec;
    if (!fs::exists(root, ec)) return out;
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->path().filename().string().starts_with(".tmp.")) out.push_back(it->path().string());
    }
    return out;
}

class local_harness final : public contract::store_harness {
public:
    // The root does not exist yet: the first put creates it.
    local_harness() : _store(make_store(_dir.path() + "/root")) {}
    ~local_harness() override {
        // Whatever a contract case did, it left no temporary file behind.
        CHECK(temp_files(_dir.path()).empty());
    }
    object_store& store() override { return *_store; }

private:
    temp_dir _dir;
    std::unique_ptr<local_store> _store;
};

// Resumes on the reactor's next loop turn, so a test can stop a put after k turns.
struct yield_once {
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) { runtime::reactor::local().schedule(h); }
    void await_resume() const noexcept {}
};

} // namespace

TEST_CASE("local store: object store contract", "[storage][local_store]") {
    contract::check_object_store_contract([] { return std::make_unique<local_harness>(); });
}

TEST_CASE("local store: keys are files under the root; describe() names it", "[storage][local_store]") {
    temp_dir dir;
    const std::string root = dir.path() + "/data/";
    auto store = make_store(root);
    CHECK(store->root() == dir.path() + "/data");
    CHECK(store->describe() == "file://" + dir.path() + "/data");
    CHECK(store->path_of("ns/topic/0/x.kfs") == dir.path() + "/data/ns/topic/0/x.kfs");

    auto t = [](local_store* s) -> task<void> {
        const std::string body = "segment bytes";
        auto r = co_await s->put("ns/topic/0/segment-00000000000000000000.kfs", bytes(body), false, {});
        INFO(message(r));
        REQUIRE(r.has_value());
    };
    run_task(t(store.get()));
    const fs::path file = fs::path(dir.path()) / "data/ns/topic/0/segment-00000000000000000000.kfs";
    REQUIRE(fs::is_regular_file(file));
    CHECK(read_file(file) == "segment bytes");
    CHECK(temp_files(dir.path()).empty());

    // A relative root is made absolute at creation, so a later chdir cannot move the store.
    auto rel = make_store("relative/root");
    CHECK(rel->root() == (fs::current_path() / "relative/root").string());

    auto empty = local_store::create("");
    CHECK(outcome(empty) == "permanent");
}

TEST_CASE("local store: a missing root lists empty and gets not_found", "[storage][local_store]") {
    temp_dir dir;
    auto store = make_store(dir.path() + "/never/created");
    auto t = [](local_store* s) -> task<void> {
        auto l = co_await s->list("", "", "", 10, {});
        INFO(message(l));
        REQUIRE(l.has_value());
        CHECK(l->objects.empty());
        CHECK(l->next_token.empty());
        auto g = co_await s->get("a/b", std::nullopt, {});
        CHECK(outcome(g) == "not_found");
        auto rm = co_await s->remove("a/b", {});
        CHECK(outcome(rm) == "ok");
    };
    run_task(t(store.get()));
    CHECK_FALSE(fs::exists(dir.path() + "/never"));
}

TEST_CASE("local store: temporary files and foreign entries are never listed", "[storage][local_store]") {
    temp_dir dir;
    const std::string root = dir.path() + "/root";
    fs::create_directories(root + "/ns/topic/0");
    fs::create_directories(root + "/.tmp.dir");
    std::ofstream(root + "/ns/topic/0/.tmp.seg.1234abcd") << "half a segment";
    std::ofstream(root + "/.tmp.dir/inside") << "x";
    std::ofstream(root + "/outside-target") << "target";
    fs::create_symlink(root + "/outside-target", root + "/ns/link");
    auto store = make_store(root);

    auto t = [](local_store* s) -> task<void> {
        const std::string body = "v";
        for (std::string key : {"ns/topic/0/seg", "ns/a", "zz"}) {
            auto r = co_await s->put(key, bytes(body), false, {});
            REQUIRE(r.has_value());
        }
        auto l = co_await s->list("", "", "", 100, {});
        REQUIRE(l.has_value());
        std::vector<std::string> keys;
        for (const auto& o : l->objects) keys.push_back(o.key);
        CHECK(keys == std::vector<std::string>{"ns/a", "ns/topic/0/seg", "outside-target", "zz"});
        // A symlink is not an object: not listed, not readable through, no size.
        auto g = co_await s->get("ns/link", std::nullopt, {});
        CHECK(outcome(g) == "not_found");
        auto z = co_await s->size("ns/link", {});
        CHECK(outcome(z) == "not_found");
        // Prefixes that point into temporary names find nothing either.
        auto lt = co_await s->list("ns/topic/0/.tmp", "", "", 100, {});
        REQUIRE(lt.has_value());
        CHECK(lt->objects.empty());
        auto ld = co_await s->list(".tmp.dir/", "", "", 100, {});
        REQUIRE(ld.has_value());
        CHECK(ld->objects.empty());
    };
    run_task(t(store.get()));
    // The planted ones are still there (the store does not own them); the store made none.
    auto temps = temp_files(root);
    std::sort(temps.begin(), temps.end());
    CHECK(temps == std::vector<std::string>{root + "/.tmp.dir", root + "/ns/topic/0/.tmp.seg.1234abcd"});
}

TEST_CASE("local store: a put whose file cannot be created says where and why", "[storage][local_store]") {
    // Tests run as root, so permissions cannot make a directory unwritable; a root that is a
    // regular file can.
    temp_dir dir;
    const std::string file = dir.path() + "/not-a-dir";
    std::ofstream(file) << "x";
    for (std::string root : {file, file + "/sub"}) {
        auto store = make_store(root);
        auto t = [](local_store* s) -> task<void> {
            const std::string body = "data";
            auto r = co_await s->put("ns/topic/0/seg", bytes(body), false, {});
            REQUIRE_FALSE(r.has_value());
            CHECK(outcome(r) == "permanent");
            INFO(r.error().message);
            CHECK_THAT(r.error().message, Catch::Contains(s->root()) && Catch::Contains("Not a directory"));
            auto g = co_await s->get("ns/topic/0/seg", std::nullopt, {});
            CHECK(outcome(g) == "not_found");
            auto l = co_await s->list("", "", "", 10, {});
            CHECK(outcome(l) == "ok");
        };
        run_task(t(store.get()));
    }
    CHECK(read_file(file) == "x");
}

TEST_CASE("local store: a failed write removes its temporary file", "[storage][local_store]") {
    // RLIMIT_FSIZE makes the kernel fail a write past the limit with EFBIG (and SIGXFSZ,
    // ignored here): a write error in the middle of a put without needing a full disk.
    temp_dir dir;
    const std::string root = dir.path() + "/root";
    auto store = make_store(root);
    auto t = [](local_store* s) -> task<void> {
        const std::string old_body = "old";
        auto first = co_await s->put("w/obj", bytes(old_body), false, {});
        REQUIRE(first.has_value());

        rlimit saved{};
        REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
        auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
        rlimit small = saved;
        small.rlim_cur = 64 * 1024;
        REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
        const std::string big(1 << 20, 'b');
        auto r = co_await s->put("w/obj", bytes(big), false, {});
        auto n = co_await s->put("w/new", bytes(big), true, {});
        ::setrlimit(RLIMIT_FSIZE, &saved);
        std::signal(SIGXFSZ, old_handler);

        INFO(message(r));
        CHECK(outcome(r) == "permanent");
        CHECK_THAT(message(r), Catch::Contains("write temporary file") && Catch::Contains("File too large"));
        CHECK(outcome(n) == "permanent");
        // The old object is untouched and the new one never appeared.
        auto g = co_await s->get("w/obj", std::nullopt, {});
        REQUIRE(g.has_value());
        CHECK(g->data == "old");
        auto z = co_await s->size("w/new", {});
        CHECK(outcome(z) == "not_found");
    };
    run_task(t(store.get()));
    CHECK(temp_files(root).empty());
}

TEST_CASE("local store: keys that clash with directories fail cleanly", "[storage][local_store]") {
    temp_dir dir;
    const std::string root = dir.path() + "/root";
    auto store = make_store(root);
    auto t = [](local_store* s) -> task<void> {
        const std::string body = "x";
        auto a = co_await s->put("a/b", bytes(body), false, {});
        REQUIRE(a.has_value());
        // "a" is a directory holding "a/b": no object "a", and none can be put there.
        auto pa = co_await s->put("a", bytes(body), false, {});
        CHECK(outcome(pa) == "permanent");
        CHECK_THAT(message(pa), Catch::Contains("Is a directory"));
        auto pia = co_await s->put("a", bytes(body), true, {});
        CHECK_FALSE(pia.has_value());
        auto ga = co_await s->get("a", std::nullopt, {});
        CHECK(outcome(ga) == "not_found");
        auto za = co_await s->size("a", {});
        CHECK(outcome(za) == "not_found");
        auto ra = co_await s->remove("a", {});
        CHECK(outcome(ra) == "ok");
        auto still = co_await s->get("a/b", std::nullopt, {});
        CHECK(outcome(still) == "ok");

        // "f" is an object: "f/x" cannot live below it.
        auto f = co_await s->put("f", bytes(body), false, {});
        REQUIRE(f.has_value());
        auto fx = co_await s->put("f/x", bytes(body), false, {});
        CHECK(outcome(fx) == "permanent");
        CHECK_THAT(message(fx), Catch::Contains("Not a directory"));
        auto gfx = co_await s->get("f/x", std::nullopt, {});
        CHECK(outcome(gfx) == "not_found");
        auto rfx = co_await s->remove("f/x", {});
        CHECK(outcome(rfx) == "ok");
    };
    run_task(t(store.get()));
    CHECK(temp_files(root).empty());
}

TEST_CASE("local store: remove drops directories it leaves empty, never the root", "[storage][local_store]") {
    temp_dir dir;
    const std::string root = dir.path() + "/root";
    auto store = make_store(root);
    auto t = [](local_store* s) -> task<void> {
        const std::string body = "x";
        for (std::string key : {"p/q/r/s", "p/keep"}) {
            auto r = co_await s->put(key, bytes(body), false, {});
            REQUIRE(r.has_value());
        }
        auto rm = co_await s->remove("p/q/r/s", {});
        REQUIRE(rm.has_value());
        auto rm2 = co_await s->remove("p/keep", {});
        REQUIRE(rm2.has_value());
        // The directories went away; writing below them again recreates them.
        auto again = co_await s->put("p/q/r/t", bytes(body), false, {});
        REQUIRE(again.has_value());
        auto rm3 = co_await s->remove("p/q/r/t", {});
        REQUIRE(rm3.has_value());
    };
    run_task(t(store.get()));
    CHECK_FALSE(fs::exists(root + "/p"));
    CHECK(fs::is_directory(root));
}

namespace {

struct cancel_observation {
    bool final_was_partial = false; // the final key ever held something but the whole body
};

// Stops `src` after `turns` loop turns, or ends early once the put finished; meanwhile
// watches the final file: absent, the old object or the whole new one, never in between (a
// file being written grows, so its size tells).
task<void> stop_after(std::stop_source* src, int turns, const bool* put_done, std::string final_path,
                      std::uintmax_t old_size, std::uintmax_t new_size, cancel_observation* obs) {
    for (int i = 0; i < turns && !*put_done; ++i) {
        // Single turns first, to land between the put's steps; then 1 ms steps, so a slow
        // disk's fsync is still outwaited and the late-stop side gets exercised too.
        if (i < 64) co_await yield_once{};
        else (void)co_await runtime::sleep(std::chrono::milliseconds(1));
        std::error_code ec;
        const auto now = fs::file_size(final_path, ec);
        if (!ec && now != new_size && now != old_size) obs->final_was_partial = true;
    }
    src->request_stop();
}

task<result<void, store_error>> put_then_flag(local_store* s, std::string key, std::span<const char> body,
                                              bool if_absent, std::stop_token st, bool* done) {
    auto r = co_await s->put(key, body, if_absent, st);
    *done = true;
    co_return r;
}

} // namespace

TEST_CASE("local store: a cancelled put never leaves a partial or a cancelled object", "[storage][local_store]") {
    temp_dir dir;
    const std::string root = dir.path() + "/root";
    auto store = make_store(root);
    struct tally {
        int cancelled_mid_flight = 0;
        int succeeded = 0;
        int iterations = 0;
    } counts;
    auto t = [](local_store* s, tally* c) -> task<void> {
        const std::string old_body = "old";
        const std::string body(1 << 20, 'n');
        int successes_in_a_row = 0;
        // Stops land after 0, 1, 2, ... loop turns at first (each step of the put), then
        // further apart, until the put reliably finishes first.
        for (int k = 0; k < 300 && successes_in_a_row < 6; ++k) {
            const int turns = k / 2 + (k / 2) * (k / 2) / 16;
            ++c->iterations;
            // Even k: overwrite an existing key (cancelled → the old body stays).
            // Odd k: a new key (cancelled → it does not exist), with if_absent.
            const bool overwrite = k % 2 == 0;
            const std::string key = overwrite ? "cx/existing" : "cx/new-" + std::to_string(k);
            if (overwrite) {
                auto reset = co_await s->put(key, bytes(old_body), false, {});
                REQUIRE(reset.has_value());
            }
            std::stop_source src;
            cancel_observation obs;
            bool done = false;
            auto [r, stopped] = co_await runtime::when_all(
                put_then_flag(s, key, bytes(body), !overwrite, src.get_token(), &done),
                stop_after(&src, turns, &done, s->path_of(key), overwrite ? old_body.size() : body.size(), body.size(), &obs));
            (void)stopped;
            INFO("k = " << k << ": " << message(r));
            CHECK_FALSE(obs.final_was_partial);
            auto now = co_await s->get(key, std::nullopt, {});
            if (r.has_value()) {
                ++c->succeeded;
                ++successes_in_a_row;
                REQUIRE(now.has_value());
                CHECK(now->data.size() == body.size());
                CHECK((now->data == body));
            } else {
                successes_in_a_row = 0;
                REQUIRE(outcome(r) == "cancelled");
                if (turns > 0) ++c->cancelled_mid_flight;
                if (overwrite) {
                    REQUIRE(now.has_value());
                    CHECK(now->data == old_body);
                } else {
                    CHECK(outcome(now) == "not_found");
                }
            }
            CHECK(temp_files(s->root()).empty());
        }
    };
    run_task(t(store.get(), &counts));
    INFO("iterations " << counts.iterations << ", cancelled mid-flight " << counts.cancelled_mid_flight
                       << ", succeeded " << counts.succeeded);
    // The stop landed inside the put (not only before it) at least once, and late enough
    // stops let it finish: both sides of the commit point were exercised.
    CHECK(counts.cancelled_mid_flight > 0);
    CHECK(counts.succeeded > 0);
    CHECK(temp_files(root).empty());
}

namespace {
// Whether `dir`'s file system takes O_DIRECT (tmpfs before 6.6 does not).
bool fs_has_direct_io(const std::string& dir) {
    const std::string probe = dir + "/.direct-probe";
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    ::close(fd);
    ::unlink(probe.c_str());
    return true;
}
} // namespace

TEST_CASE("local store: large bodies go through O_DIRECT whole, whatever their length; small ones and opt-out do not",
          "[storage][local_store]") {
    temp_dir dir;
    const bool direct_here = fs_has_direct_io(dir.path());
    auto t = [](std::string root, bool direct_here) -> task<void> {
        auto store = make_store(root);
        local_store_options off;
        off.direct_writes = false;
        auto r = local_store::create(root + "-buffered", off);
        REQUIRE(r.has_value());
        auto buffered = std::move(*r);
        // Lengths around the 4 KiB block: an exact multiple, a tail, and one just above the
        // 64 KiB threshold; each byte differs so a misplaced tail would show.
        const std::size_t sizes[] = {16 * 4096, 16 * 4096 + 1, 70000, 1 << 20, (1 << 20) + 4095};
        std::uint64_t want_direct = 0;
        for (std::size_t n : sizes) {
            std::string body(n, '\0');
            for (std::size_t i = 0; i < n; ++i) body[i] = static_cast<char>((i * 131 + n) % 251);
            const std::string key = "ns/t/0/" + std::to_string(n) + ".kfs";
            auto put = co_await store->put(key, bytes(body), true, {});
            INFO(message(put));
            REQUIRE(put.has_value());
            ++want_direct;
            auto got = co_await store->get(key, std::nullopt, {});
            REQUIRE(got.has_value());
            CHECK(got->data == body);
            CHECK(read_file(store->path_of(key)) == body);
            auto size = co_await store->size(key, {});
            REQUIRE(size.has_value());
            CHECK(*size == n);
            auto bput = co_await buffered->put(key, bytes(body), true, {});
            REQUIRE(bput.has_value());
            CHECK(read_file(buffered->path_of(key)) == body);
        }
        // Small: always buffered.
        std::string small(1000, 'i');
        auto sput = co_await store->put("ns/t/0/small.index", bytes(small), true, {});
        REQUIRE(sput.has_value());
        CHECK(read_file(store->path_of("ns/t/0/small.index")) == small);
        CHECK(store->direct_puts() == (direct_here ? want_direct : 0));
        CHECK(buffered->direct_puts() == 0);
        CHECK(temp_files(root).empty());
    };
    run_task(t(dir.path() + "/root", direct_here));
}
