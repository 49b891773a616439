// One broker connection: a reader coroutine (under the connection's gate) splits the byte
// stream into frames and hands each to the request waiting for its correlation id; senders
// write whole frames one at a time (a one-unit semaphore, so pipelined frames never
// interleave on the socket). https://kafka.apache.org/protocol.html#protocol_network
#include <skiff/client/connection.hpp>
#include <skiff/runtime/timer.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace skiff::client {

namespace {

std::string ms_text(runtime::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

std::string api_name(kafka::api_key key) {
    const auto* api = kafka::find_api(static_cast<std::int16_t>(key));
    return api ? std::string(api->name) : "API " + std::to_string(static_cast<int>(key));
}

// A system error in words, lower-case first as in the rest of skiff's sentences.
std::string sys_text(const std::error_code& ec) {
    std::string m = ec.message();
    if (!m.empty() && m[0] >= 'A' && m[0] <= 'Z' && (m.size() < 2 || !(m[1] >= 'A' && m[1] <= 'Z'))) {
        m[0] = static_cast<char>(m[0] - 'A' + 'a');
    }
    return m;
}

error connect_error(const std::string& address, const std::error_code& ec) {
    if (ec == std::errc::connection_refused) {
        return error(errc::connection_refused, "cannot connect to " + address + ": connection refused");
    }
    return error(errc::unreachable, "cannot connect to " + address + ": " + sys_text(ec));
}

// Numeric addresses parse directly; a host name goes through getaddrinfo (blocking, which a
// command-line client can afford; Metadata usually hands out what the operator typed).
result<runtime::socket_address, error> resolve(const std::string& address) {
    auto numeric = runtime::socket_address::parse(address);
    if (numeric) return *numeric;
    auto colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
        return failure{error(errc::bad_address, "bad broker address '" + address + "': expected host:port")};
    }
    std::string host = address.substr(0, colon);
    std::string port = address.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
        return failure{error(errc::bad_address,
                             "cannot resolve broker address '" + address + "': " + ::gai_strerror(rc))};
    }
    runtime::socket_address a;
    std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
    a.len = static_cast<socklen_t>(res->ai_addrlen);
    ::freeaddrinfo(res);
    return a;
}

std::int32_t read_be32(const char* p) noexcept {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return static_cast<std::int32_t>((std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) |
                                     (std::uint32_t{u[2]} << 8) | std::uint32_t{u[3]});
}

} // namespace

// A request waiting for its answer; lives in roundtrip()'s frame and is in _pending exactly
// while roundtrip() waits (it removes itself before returning).
struct connection::pending {
    std::int16_t header_version = 0;
    runtime::oneshot<result<std::string, error>> done; // the frame after its size prefix
};

connection::connection(std::string address, connection_options opts, runtime::tcp_stream stream)
    : _address(std::move(address)), _opts(std::move(opts)), _stream(std::move(stream)) {}

connection::~connection() {
    if (_gate.count() != 0) {
        std::fprintf(stderr, "skiff: client connection to %s destroyed without close()\n", _address.c_str());
        std::abort();
    }
}

runtime::task<result<std::unique_ptr<connection>, error>> connection::open(std::string address,
                                                                           connection_options opts,
                                                                           std::stop_token st) {
    auto addr = resolve(address);
    if (!addr) co_return failure{addr.error()};
    runtime::tcp_stream stream;
    {
        runtime::deadline_scope scope(runtime::reactor::local().now() + opts.connect_timeout, st);
        auto ct = runtime::tcp_stream::connect(*addr, scope.token());
        auto s = co_await std::move(ct);
        if (!s) {
            if (st.stop_requested()) co_return failure{error(errc::cancelled, "connecting to " + address + " was cancelled")};
            if (scope.expired()) {
                co_return failure{error(errc::timed_out, "cannot connect to " + address + ": no answer within " +
                                                             ms_text(opts.connect_timeout))};
            }
            co_return failure{connect_error(address, s.error())};
        }
        stream = std::move(*s);
    }
    std::unique_ptr<connection> c(new connection(address, std::move(opts), std::move(stream)));
    auto spawned = c->_gate.spawn(read_loop(c.get()));
    if (!spawned) co_return failure{error(errc::disconnected, "connection to " + address + " closed")};
    auto nt = c->negotiate(st);
    auto n = co_await std::move(nt);
    if (!n) {
        co_await c->close();
        co_return failure{n.error()};
    }
    co_return std::move(c);
}

runtime::task<result<void, error>> connection::negotiate(std::stop_token st) {
    // Ask in the newest version skiff speaks. A broker that does not speak it answers in v0
    // with UNSUPPORTED_VERSION and its own range (KIP-511); ask again in its newest.
    std::int16_t version = kafka::ApiVersionsRequest::max_version;
    for (int attempt = 0; attempt < 3; ++attempt) {
        if (st.stop_requested()) co_return failure{error(errc::cancelled, "connecting to " + _address + " was cancelled")};
        kafka::ApiVersionsRequest req;
        req.client_software_name = "skiff";
        req.client_software_version = "0.1.0";
        req.normalize(version);
        const std::int32_t corr = next_correlation_id();
        std::optional<std::string> client_id(_opts.client_id);
        auto frame = kafka::encode_request(req, version, corr, std::move(client_id));
        if (!frame) co_return failure{encode_failure("ApiVersionsRequest", frame.error())};
        std::optional<runtime::duration> limit(_opts.connect_timeout);
        auto t = roundtrip(kafka::api_key::api_versions, version, corr, std::move(*frame), limit);
        auto body = co_await std::move(t);
        if (!body) co_return failure{body.error()};
        const std::span<const char> bytes(body->data(), body->size());
        auto r = kafka::decode_message<kafka::ApiVersionsResponse>(bytes, version);
        if (!r || r->error_code == kafka::error_code::unsupported_version) {
            auto r0 = kafka::decode_message<kafka::ApiVersionsResponse>(bytes, 0);
            if (version > 0 && r0 && r0->error_code == kafka::error_code::unsupported_version) {
                std::int16_t theirs = 0;
                for (const auto& k : r0->api_keys) {
                    if (k.api_key == static_cast<std::int16_t>(kafka::api_key::api_versions)) theirs = k.max_version;
                }
                version = std::min<std::int16_t>(theirs, static_cast<std::int16_t>(version - 1));
                continue;
            }
            if (!r) {
                error e = decode_failure("ApiVersionsResponse", version, r.error());
                shut(e);
                co_return failure{e};
            }
        }
        if (r->error_code != kafka::error_code::none) {
            co_return failure{broker_error(r->error_code, "broker at " + _address + " refused ApiVersions")};
        }
        _versions = api_versions::from(*r);
        co_return ok();
    }
    co_return failure{error(errc::unsupported_version,
                            "broker at " + _address + " accepts no ApiVersions version that skiff speaks")};
}

runtime::task<result<std::string, error>> connection::roundtrip(kafka::api_key key, std::int16_t version,
                                                                std::int32_t correlation_id, std::string frame,
                                                                std::optional<runtime::duration> timeout) {
    if (!_open) co_return failure{_broken.value_or(error(errc::disconnected, "connection to " + _address + " is closed"))};
    const runtime::duration limit = timeout.value_or(_opts.request_timeout);
    const runtime::time_point deadline = runtime::reactor::local().now() + limit;
    auto timed_out = [&] {
        return error(errc::timed_out, "broker at " + _address + " did not answer " + api_name(key) + " within " +
                                          ms_text(limit));
    };

    pending p;
    p.header_version = kafka::response_header_version(static_cast<std::int16_t>(key), version);
    _pending.emplace(correlation_id, &p);

    {
        // The write is bounded by the same deadline: a broker that stops reading must not
        // hang the caller either.
        runtime::deadline_scope scope(deadline, _stop.get_token());
        auto acq = _write_lock.acquire(1, scope.token());
        auto units = co_await acq;
        bool written = false;
        std::error_code werr;
        if (units && _open) {
            auto wt = _stream.write_all(std::span<const char>(frame.data(), frame.size()), scope.token());
            auto w = co_await std::move(wt);
            written = w.has_value();
            if (!w) werr = w.error();
        }
        if (!written) {
            _pending.erase(correlation_id);
            if (scope.expired() && _open) {
                error e = timed_out();
                // A frame may be half written: the stream cannot carry another request.
                shut(error(errc::disconnected, "connection to " + _address + " closed after a request timed out"));
                co_return failure{e};
            }
            if (_open && werr) shut(error(errc::disconnected, "cannot send to " + _address + ": " + sys_text(werr)));
            co_return failure{_broken.value_or(error(errc::disconnected, "connection to " + _address + " is closed"))};
        }
    }

    const auto now = runtime::reactor::local().now();
    auto waiter = p.done.wait(deadline > now ? deadline - now : runtime::duration::zero());
    auto answer = co_await waiter;
    _pending.erase(correlation_id);
    if (!answer) {
        if (answer.error() == runtime::errc::timed_out) {
            error e = timed_out();
            // Kafka's client does the same: a late answer must never be taken for the next one.
            shut(error(errc::disconnected, "connection to " + _address + " closed after a request timed out"));
            co_return failure{e};
        }
        co_return failure{_broken.value_or(error(errc::disconnected, "connection to " + _address + " is closed"))};
    }
    auto inner = std::move(*answer);
    if (!inner) co_return failure{inner.error()};
    auto header = kafka::parse_response_header(std::span<const char>(inner->data(), inner->size()), p.header_version);
    if (!header) {
        error e(errc::protocol_error, "broker at " + _address + " sent a bad " + api_name(key) +
                                          " response header: " + header.error().message);
        shut(e);
        co_return failure{e};
    }
    co_return std::string(header->body.data(), header->body.size());
}

runtime::task<void> connection::read_loop(connection* self) {
    std::string buf;
    std::size_t start = 0;
    const std::stop_token st = self->_stop.get_token();
    std::optional<error> why;
    while (!why) {
        // Hand out every complete frame in the buffer.
        for (;;) {
            const std::span<const char> avail(buf.data() + start, buf.size() - start);
            auto size = kafka::peek_frame_size(avail, self->_opts.max_frame_bytes);
            if (!size) {
                why = error(errc::protocol_error, "broker at " + self->_address + " sent an invalid frame (" +
                                                      size.error().message + "): is it a Kafka port?");
                break;
            }
            if (!*size || avail.size() < kafka::size_prefix_bytes + **size) break;
            const std::size_t n = **size;
            if (n < 4) {
                why = error(errc::protocol_error, "broker at " + self->_address + " sent a frame too short for a response header");
                break;
            }
            const char* body = avail.data() + kafka::size_prefix_bytes;
            const std::int32_t corr = read_be32(body);
            auto it = self->_pending.find(corr);
            if (it == self->_pending.end()) {
                why = error(errc::protocol_error, "broker at " + self->_address +
                                                      " sent an answer to no request (correlation id " +
                                                      std::to_string(corr) + "): is it a Kafka port?");
                break;
            }
            pending* p = it->second;
            self->_pending.erase(it);
            p->done.set(result<std::string, error>(std::string(body, n)));
            start += kafka::size_prefix_bytes + n;
        }
        if (why) break;
        if (start > 0) {
            buf.erase(0, start);
            start = 0;
        }
        const std::size_t old = buf.size();
        constexpr std::size_t chunk = 64 * 1024;
        buf.resize(old + chunk);
        auto rt = self->_stream.read_some(std::span<char>(buf.data() + old, chunk), st);
        auto n = co_await std::move(rt);
        if (!n) {
            buf.resize(old);
            if (st.stop_requested()) break; // shut() recorded the reason
            why = error(errc::disconnected, "connection to " + self->_address + " failed: " + sys_text(n.error()));
            break;
        }
        if (*n == 0) {
            buf.resize(old);
            why = error(errc::disconnected, "broker at " + self->_address + " closed the connection");
            break;
        }
        buf.resize(old + *n);
    }
    self->shut(why.value_or(error(errc::disconnected, "connection to " + self->_address + " was closed")));
    // No write may still use the fd when it closes (a parked SQE would otherwise be prepared
    // with a number the kernel may have handed to another file): shut() cancelled writes,
    // and holding the write lock waits for the one in progress to notice.
    auto acq = self->_write_lock.acquire(1);
    auto units = co_await acq;
    self->fail_all(*self->_broken);
    self->_stream.close();
}

void connection::shut(const error& why) {
    if (!_broken) _broken = why;
    _open = false;
    _stop.request_stop();
}

void connection::fail_all(const error& e) {
    auto pending_now = std::move(_pending);
    _pending.clear();
    for (auto& [corr, p] : pending_now) p->done.set(result<std::string, error>(failure{e}));
}

runtime::task<void> connection::close() {
    shut(error(errc::disconnected, "connection to " + _address + " was closed"));
    co_await _gate.close();
}

error connection::decode_failure(std::string_view what, std::int16_t version, const kafka::decode_error& e) const {
    return error(errc::protocol_error, "broker at " + _address + " sent a " + std::string(what) + " v" +
                                           std::to_string(version) + " that does not decode: " + e.message);
}

error connection::encode_failure(std::string_view what, const kafka::encode_error& e) const {
    return error(errc::protocol_error, "cannot encode " + std::string(what) + ": " + e.message);
}

} // namespace skiff::client
