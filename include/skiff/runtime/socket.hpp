// TCP on the ring: listen, accept, connect, recv, send. Every operation takes a stop_token
// and resolves errc::cancelled (never success) when it fires. Numeric addresses only: the
// broker and its tests talk to configured IPs; S3 hostnames are resolved by libcurl.
// Use a socket on the reactor thread that created it.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/errc.hpp>
#include <skiff/runtime/task.hpp>

#include <cstdint>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <sys/socket.h>

namespace skiff::runtime {

struct socket_address {
    sockaddr_storage storage{};
    socklen_t len = 0;

    // "127.0.0.1:9092", "0.0.0.0:0", "[::1]:9092". The error says what is wrong.
    static result<socket_address, std::string> parse(std::string_view host_port);
    std::string to_string() const;
    std::uint16_t port() const noexcept;
};

class tcp_stream {
public:
    tcp_stream() = default;
    explicit tcp_stream(int fd) noexcept : _fd(fd) {}
    tcp_stream(tcp_stream&& o) noexcept;
    tcp_stream& operator=(tcp_stream&& o) noexcept;
    ~tcp_stream();

    static task<result<tcp_stream>> connect(socket_address addr, std::stop_token st = {});

    // Reads what is available, at most buf.size() bytes; 0 means the peer closed.
    task<result<std::size_t>> read_some(std::span<char> buf, std::stop_token st = {});
    // Reads exactly buf.size() bytes or fails (errc::eof if the peer closes first).
    task<result<void>> read_exactly(std::span<char> buf, std::stop_token st = {});
    // Writes every byte or fails.
    task<result<void>> write_all(std::span<const char> buf, std::stop_token st = {});

    void shutdown_write() noexcept;
    void close() noexcept;
    bool is_open() const noexcept { return _fd >= 0; }
    int fd() const noexcept { return _fd; }
    socket_address peer_address() const;

private:
    int _fd = -1;
};

struct listen_options {
    int backlog = 1024;
    // Every core listens on the same port and the kernel spreads connections.
    bool reuse_port = false;
};

class tcp_listener {
public:
    tcp_listener() = default;
    tcp_listener(tcp_listener&& o) noexcept;
    tcp_listener& operator=(tcp_listener&& o) noexcept;
    ~tcp_listener();

    static result<tcp_listener, std::string> listen(const socket_address& addr, listen_options opts = {});
    task<result<tcp_stream>> accept(std::stop_token st = {});
    socket_address local_address() const;
    void close() noexcept;
    int fd() const noexcept { return _fd; }

private:
    int _fd = -1;
};

} // namespace skiff::runtime
