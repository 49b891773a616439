#include "serve_checks.hpp"

#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/s3/errc.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stop_token>
#include <thread>

namespace skiff::cli {

namespace {

using namespace std::chrono_literals;

constexpr const char* lock_name = ".skiff.lock";

std::string error_text(int err) { return std::strerror(err); }

// The pid an exclusive holder wrote into the lock file, as " (pid N)"; shared holders (cluster
// mode) leave it empty.
std::string holder_of(int fd) {
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return " (brokers in cluster mode hold it)";
    std::string pid(buf, static_cast<std::size_t>(n));
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; })) return {};
    return " (pid " + pid + ")";
}

// The broker's S3 client, as the store uses it, but the client's own one-sentence errors
// ("no such bucket 'x'") rather than the store's wrapping of them.
runtime::task<result<std::string, std::string>> list_one(s3::client_config c, std::string bucket_prefix,
                                                         std::string ns) {
    auto client = s3::client::create(std::move(c));
    if (!client) co_return failure{client.error()};
    const auto slash = bucket_prefix.find('/');
    const std::string bucket = bucket_prefix.substr(0, slash);
    std::string prefix = slash == std::string::npos ? std::string() : bucket_prefix.substr(slash + 1) + "/";
    prefix += ns + "/";
    s3::list_request req(prefix);
    req.max_keys = 1;
    const std::string store = "s3://" + bucket_prefix;
    auto r = co_await (*client)->list_objects_v2(bucket, req);
    if (!r) {
        const std::string why = r.error().message.empty() ? s3::to_string(r.error().code) : r.error().message;
        co_return failure{"cannot read the store " + store + ": " + why};
    }
    co_return fmt::format("{}: the bucket answers a listing of namespace '{}'", store, ns);
}

} // namespace

data_dir_lock& data_dir_lock::operator=(data_dir_lock&& o) noexcept {
    if (this != &o) {
        if (_fd >= 0) ::close(_fd);
        _fd = o._fd;
        o._fd = -1;
    }
    return *this;
}

data_dir_lock::~data_dir_lock() {
    if (_fd >= 0) ::close(_fd);
}

result<data_dir_lock, std::string> claim_data_dir(const std::string& dir, bool cluster_mode, std::string& detail) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path abs = fs::absolute(dir, ec);
    if (ec) return failure{fmt::format("cannot create the data directory '{}': {}", dir, ec.message())};
    std::string shown = abs.lexically_normal().string();
    while (shown.size() > 1 && shown.back() == '/') shown.pop_back();

    const bool existed = fs::is_directory(shown, ec);
    if (!existed) {
        fs::create_directories(shown, ec);
        if (ec) return failure{fmt::format("cannot create the data directory {}: {}", shown, ec.message())};
    }
    // The local store's reserved temporary prefix: should we die between create and unlink,
    // nothing the store lists is left behind.
    const std::string probe = fmt::format("{}/.tmp.skiff-check.{}", shown, ::getpid());
    const int pfd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (pfd < 0) return failure{fmt::format("the data directory {} is not writable: {}", shown, error_text(errno))};
    int werr = 0;
    if (::write(pfd, "x", 1) != 1 || ::fsync(pfd) != 0) werr = errno ? errno : EIO;
    ::close(pfd);
    ::unlink(probe.c_str());
    if (werr) return failure{fmt::format("the data directory {} is not writable: {}", shown, error_text(werr))};

    const std::string lock_path = shown + "/" + lock_name;
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return failure{fmt::format("cannot lock the data directory {}: {}: {}", shown, lock_path, error_text(errno))};
    if (::flock(fd, (cluster_mode ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
        const int err = errno;
        if (err == EWOULDBLOCK) {
            std::string who = holder_of(fd);
            ::close(fd);
            return failure{fmt::format("the data directory {} is in use by another skiff broker{}; stop it or give "
                                       "another --data-dir",
                                       shown, who)};
        }
        ::close(fd);
        return failure{fmt::format("cannot lock the data directory {}: {}", shown, error_text(err))};
    }
    data_dir_lock lock(fd);
    // Only an exclusive holder names itself: with shared holders the pid would be one of many.
    if (::ftruncate(fd, 0) != 0) {
        return failure{fmt::format("the data directory {} is not writable: {}", shown, error_text(errno))};
    }
    if (!cluster_mode) {
        const std::string pid = std::to_string(::getpid()) + "\n";
        if (::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
            return failure{fmt::format("the data directory {} is not writable: {}", shown, error_text(errno))};
        }
    }
    detail = fmt::format("{}{}, writable, locked ({})", shown, existed ? "" : " created",
                         cluster_mode ? "shared with the cluster's brokers" : "no other broker uses it");
    return lock;
}

result<std::string, std::string> check_port(const std::string& addr, std::string_view flag) {
    auto a = runtime::socket_address::parse(addr);
    if (!a) return failure{fmt::format("--{} must be HOST:PORT, not '{}': {}", flag, addr, a.error())};
    if (a->port() == 0) return fmt::format("{} (port 0: the kernel picks a free one)", addr);
    int rc = 0, err = 0;
    // A broker that just exited may hold its port a moment longer: io_uring releases the
    // listening sockets of a ring with accepts in flight in a kernel worker, after the process
    // is gone. So a port in use is asked again for up to a second before it is refused.
    for (int attempt = 0; attempt < 20; ++attempt) {
        if (attempt) std::this_thread::sleep_for(50ms);
        const int fd = ::socket(a->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return failure{fmt::format("cannot listen on {} (--{}): {}", addr, flag, error_text(errno))};
        // As the broker binds: SO_REUSEADDR, so a previous broker's TIME_WAIT connections do
        // not count, while a socket listening on the port does.
        int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&a->storage), a->len);
        err = errno;
        ::close(fd);
        if (rc == 0 || err != EADDRINUSE) break;
    }
    if (rc != 0) {
        if (err == EADDRINUSE) {
            return failure{fmt::format("cannot listen on {} (--{}): the port is in use by another process", addr, flag)};
        }
        return failure{fmt::format("cannot listen on {} (--{}): {}", addr, flag, error_text(err))};
    }
    return fmt::format("{} is free", addr);
}

result<std::string, std::string> check_s3_store(const broker::broker_config& cfg) {
    if (!cfg.s3) return failure{std::string("S3 settings are missing")};
    s3::client_config c = *cfg.s3;
    // Seconds, not the minutes a flush may retry for: a refusal at start must come quickly.
    c.operation_deadline = std::min<std::chrono::milliseconds>(c.operation_deadline, 15s);
    c.attempt_timeout = std::min<std::chrono::milliseconds>(c.attempt_timeout, 5s);
    auto reactor = runtime::reactor::create(0);
    if (!reactor) return failure{(*&reactor).error()};
    return (*reactor)->run_until_complete(list_one(std::move(c), cfg.s3_bucket, cfg.ns));
}

} // namespace skiff::cli
