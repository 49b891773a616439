#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/uring.hpp>

#include <liburing.h>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

namespace skiff::runtime {

result<socket_address, std::string> socket_address::parse(std::string_view hp) {
    socket_address a;
    std::string_view host, port;
    if (!hp.empty() && hp.front() == '[') {
        auto close = hp.find(']');
        if (close == std::string_view::npos || close + 1 >= hp.size() || hp[close + 1] != ':') {
            return failure{fmt::format("bad address '{}': expected [IPv6]:port", hp)};
        }
        host = hp.substr(1, close - 1);
        port = hp.substr(close + 2);
    } else {
        auto colon = hp.rfind(':');
        if (colon == std::string_view::npos) return failure{fmt::format("bad address '{}': expected host:port", hp)};
        host = hp.substr(0, colon);
        port = hp.substr(colon + 1);
    }
    unsigned p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc{} || ptr != port.data() + port.size() || p > 65535 || port.empty()) {
        return failure{fmt::format("bad address '{}': port must be a number from 0 to 65535", hp)};
    }
    std::string h(host == "localhost" ? std::string_view("127.0.0.1") : host);
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    if (inet_pton(AF_INET, h.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(static_cast<std::uint16_t>(p));
        a.len = sizeof(sockaddr_in);
    } else if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(static_cast<std::uint16_t>(p));
        a.len = sizeof(sockaddr_in6);
    } else {
        return failure{fmt::format("bad address '{}': '{}' is not a numeric IPv4 or IPv6 address", hp, h)};
    }
    return a;
}

std::string socket_address::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (storage.ss_family == AF_INET) {
        auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage);
        inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
        return fmt::format("{}:{}", buf, ntohs(v4->sin_port));
    }
    if (storage.ss_family == AF_INET6) {
        auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage);
        inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
        return fmt::format("[{}]:{}", buf, ntohs(v6->sin6_port));
    }
    return "<unset>";
}

std::uint16_t socket_address::port() const noexcept {
    if (storage.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
    if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
    return 0;
}

tcp_stream::tcp_stream(tcp_stream&& o) noexcept : _fd(std::exchange(o._fd, -1)) {}
tcp_stream& tcp_stream::operator=(tcp_stream&& o) noexcept {
    if (this != &o) {
        close();
        _fd = std::exchange(o._fd, -1);
    }
    return *this;
}
tcp_stream::~tcp_stream() { close(); }

void tcp_stream::close() noexcept {
    // Closing does not cancel operations in flight; callers cancel and await them first.
    if (_fd >= 0) ::close(std::exchange(_fd, -1));
}

void tcp_stream::shutdown_write() noexcept {
    if (_fd >= 0) ::shutdown(_fd, SHUT_WR);
}

socket_address tcp_stream::peer_address() const {
    socket_address a;
    a.len = sizeof(a.storage);
    if (::getpeername(_fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0) a.len = 0;
    return a;
}

task<result<tcp_stream>> tcp_stream::connect(socket_address addr, std::stop_token st) {
    int fd = ::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) co_return from_errno(errno);
    tcp_stream s(fd);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto* sa = reinterpret_cast<const sockaddr*>(&addr.storage);
    int res = co_await uring_op([fd, sa, len = addr.len](io_uring_sqe* sqe) { io_uring_prep_connect(sqe, fd, sa, len); },
                                st);
    if (res < 0) co_return from_errno(res);
    co_return std::move(s);
}

task<result<std::size_t>> tcp_stream::read_some(std::span<char> buf, std::stop_token st) {
    const int fd = _fd;
    for (;;) {
        int res = co_await uring_op(
            [fd, buf](io_uring_sqe* sqe) { io_uring_prep_recv(sqe, fd, buf.data(), buf.size(), 0); }, st);
        if (res == -EINTR || res == -EAGAIN) continue;
        if (res < 0) co_return from_errno(res);
        co_return static_cast<std::size_t>(res);
    }
}

task<result<void>> tcp_stream::read_exactly(std::span<char> buf, std::stop_token st) {
    std::size_t done = 0;
    while (done < buf.size()) {
        auto r = co_await read_some(buf.subspan(done), st);
        if (!r) co_return failure{r.error()};
        if (*r == 0) co_return errc::eof;
        done += *r;
    }
    co_return ok();
}

task<result<void>> tcp_stream::write_all(std::span<const char> buf, std::stop_token st) {
    const int fd = _fd;
    std::size_t done = 0;
    while (done < buf.size()) {
        auto rest = buf.subspan(done);
        int res = co_await uring_op(
            [fd, rest](io_uring_sqe* sqe) { io_uring_prep_send(sqe, fd, rest.data(), rest.size(), MSG_NOSIGNAL); },
            st);
        if (res == -EINTR || res == -EAGAIN) continue;
        if (res < 0) co_return from_errno(res);
        done += static_cast<std::size_t>(res);
    }
    co_return ok();
}

tcp_listener::tcp_listener(tcp_listener&& o) noexcept : _fd(std::exchange(o._fd, -1)) {}
tcp_listener& tcp_listener::operator=(tcp_listener&& o) noexcept {
    if (this != &o) {
        close();
        _fd = std::exchange(o._fd, -1);
    }
    return *this;
}
tcp_listener::~tcp_listener() { close(); }
void tcp_listener::close() noexcept {
    if (_fd >= 0) ::close(std::exchange(_fd, -1));
}

result<tcp_listener, std::string> tcp_listener::listen(const socket_address& addr, listen_options opts) {
    int fd = ::socket(addr.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return failure{fmt::format("cannot create a socket: {}", std::strerror(errno))};
    tcp_listener l;
    l._fd = fd;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (opts.reuse_port) ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) != 0) {
        return failure{fmt::format("cannot listen on {}: {}", addr.to_string(), std::strerror(errno))};
    }
    if (::listen(fd, opts.backlog) != 0) {
        return failure{fmt::format("cannot listen on {}: {}", addr.to_string(), std::strerror(errno))};
    }
    return l;
}

task<result<tcp_stream>> tcp_listener::accept(std::stop_token st) {
    const int fd = _fd;
    for (;;) {
        int res = co_await uring_op(
            [fd](io_uring_sqe* sqe) { io_uring_prep_accept(sqe, fd, nullptr, nullptr, SOCK_CLOEXEC); }, st);
        if (res == -EINTR || res == -EAGAIN || res == -ECONNABORTED) continue;
        if (res < 0) co_return from_errno(res);
        int one = 1;
        ::setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        co_return tcp_stream(res);
    }
}

socket_address tcp_listener::local_address() const {
    socket_address a;
    a.len = sizeof(a.storage);
    if (::getsockname(_fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0) a.len = 0;
    return a;
}

} // namespace skiff::runtime
