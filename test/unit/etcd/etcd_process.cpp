#include "etcd_process.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <csignal>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace skiff::test {

namespace {

std::string find_etcd() {
    if (const char* env = std::getenv("SKIFF_ETCD"); env && *env) return env;
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "/usr/bin:/bin");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const auto candidate = std::filesystem::path(dir.empty() ? "." : dir) / "etcd";
        if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
    return {};
}

// True once something accepts TCP connections on the port (etcd listens before it has
// elected itself; the tests' first request waits for the leader through its own retries).
bool accepts(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    return ok;
}

} // namespace

std::uint16_t unused_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    socklen_t len = sizeof(a);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    ::close(fd);
    return ntohs(a.sin_port);
}

std::unique_ptr<etcd_process> etcd_process::start() {
    auto bin = find_etcd();
    if (bin.empty()) {
        FAIL("etcd is not installed: apt-get install etcd-server (tools/install-deps.sh does), or set SKIFF_ETCD");
    }
    std::unique_ptr<etcd_process> p(new etcd_process);
    char tmpl[] = "/tmp/skiff-etcd-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    p->_dir = tmpl;
    p->_bin = std::move(bin);
    p->_client_port = unused_port();
    p->_peer_port = unused_port();
    p->_url = fmt::format("http://127.0.0.1:{}", p->_client_port);
    p->spawn();
    return p;
}

void etcd_process::restart() {
    kill();
    spawn();
}

void etcd_process::spawn() {
    const auto peer_url = fmt::format("http://127.0.0.1:{}", _peer_port);
    const std::vector<std::string> args{
        _bin,
        "--name", "default",
        "--data-dir", _dir + "/data",
        "--listen-client-urls", _url,
        "--advertise-client-urls", _url,
        "--listen-peer-urls", peer_url,
        "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", "default=" + peer_url,
        // A short election timeout: a fast start, and leases down to 1 s keep the tests short.
        "--heartbeat-interval", "100",
        "--election-timeout", "500",
    };
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const auto log = _dir + "/etcd.log";

    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // Dies with the test process, even when that one crashes.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            ::dup2(fd, 1);
            ::dup2(fd, 2);
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    _pid = pid;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!accepts(_client_port)) {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) {
            _pid = -1;
            FAIL("etcd exited while starting: " << log_tail());
        }
        if (std::chrono::steady_clock::now() > deadline) FAIL("etcd did not listen within 10 s: " << log_tail());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

void etcd_process::kill() {
    if (_pid <= 0) return;
    ::kill(_pid, SIGKILL);
    int status = 0;
    ::waitpid(_pid, &status, 0);
    _pid = -1;
}

std::string etcd_process::log_tail() const {
    std::ifstream in(_dir + "/etcd.log");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

etcd_process::~etcd_process() {
    kill();
    std::error_code ec;
    if (!_dir.empty()) std::filesystem::remove_all(_dir, ec);
}

} // namespace skiff::test
