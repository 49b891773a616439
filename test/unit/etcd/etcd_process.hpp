// A real etcd for the gateway_kv tests: started on free loopback ports with a fresh data
// directory, killed (and the directory removed) when the object goes. A missing etcd binary
// fails the test: CI installs etcd-server (tools/install-deps.sh), so a skip would hide a
// broken setup.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <sys/types.h>

namespace skiff::test {

class etcd_process {
public:
    // Starts etcd (SKIFF_ETCD, else `etcd` on PATH) and returns once it listens; REQUIREs
    // success. Does not need a reactor. Its election timeout is 500 ms, which makes its
    // shortest lease 1 s.
    static std::unique_ptr<etcd_process> start();
    ~etcd_process();
    etcd_process(const etcd_process&) = delete;
    etcd_process& operator=(const etcd_process&) = delete;

    const std::string& url() const noexcept { return _url; }
    // SIGKILL now and reap: clients see connections reset and refused from here on.
    void kill();
    // Starts it again on the same ports and data (after kill()): the keyspace survives.
    void restart();
    // The tail of etcd's own log, for failure messages.
    std::string log_tail() const;

private:
    etcd_process() = default;
    void spawn();
    pid_t _pid = -1;
    std::string _bin;
    std::uint16_t _client_port = 0;
    std::uint16_t _peer_port = 0;
    std::string _dir;
    std::string _url;
};

// A loopback port nobody listens on (bound, then released).
std::uint16_t unused_port();

} // namespace skiff::test
