// One broker connection: a reader coroutine (under the connection's gate) splits the byte
// stream into frames and hands each to the request waiting for its correlation id; senders
// write whole frames one at a time (a one-unit semaphore, so pipelined frames never
// interleave on the socket). https://kafka.apache.org/protocol.html#protocol_network
#include <skiff/client/connection.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/sasl/plain.hpp>
#include <skiff/sasl/scram_client.hpp>
#include <skiff/tls/context.hpp>
#include <skiff/tls/stream.hpp>

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

// The host part of "host:port" ("[::1]:9092" -> "::1"): what the broker's certificate must name.
std::string host_of(const std::string& address) {
    auto colon = address.rfind(':');
    std::string host = colon == std::string::npos ? address : address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return host;
}

// Built per connection: the name to check is the host this connection reached, and a broker
// list may name several hosts. Reads the PEM files (blocking; a command-line client opens a
// handful of connections).
result<std::shared_ptr<const tls::context>, error> client_tls_context(const std::string& address,
                                                                      const security_config& sec) {
    tls::client_config c;
    c.ca_file = sec.ssl_ca_file;
    c.cert_file = sec.ssl_cert_file;
    c.key_file = sec.ssl_key_file;
    if (sec.ssl_verify_hostname) c.server_name = host_of(address);
    auto ctx = tls::context::make_client(c);
    if (!ctx) return failure{error(errc::bad_config, "TLS settings: " + ctx.error().message)};
    return std::move(*ctx);
}

error tls_error(const std::string& address, const std::error_code& ec) {
    std::string why = sys_text(ec);
    if (ec == tls::errc::certificate_invalid) {
        why += " (is the CA file the one that signed the broker's certificate, and does the certificate name " +
               host_of(address) + "?)";
    } else if (ec == tls::errc::closed || ec == tls::errc::not_tls || ec == tls::errc::protocol_error) {
        why += " (is it a TLS listener?)";
    }
    return error(errc::tls_failed, "TLS handshake with " + address + " failed: " + why);
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) {
        if (!out.empty()) out += ", ";
        out += s;
    }
    return out.empty() ? std::string("none") : out;
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

connection::connection(std::string address, connection_options opts, tls::any_stream stream)
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
    runtime::tcp_stream tcp;
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
        tcp = std::move(*s);
    }
    tls::any_stream stream;
    if (opts.security.uses_tls()) {
        auto ctx = client_tls_context(address, opts.security);
        if (!ctx) {
            tcp.close();
            co_return failure{ctx.error()};
        }
        const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(opts.connect_timeout);
        auto ht = tls::stream::connect(std::move(*ctx), std::move(tcp), st, limit);
        auto h = co_await std::move(ht);
        if (!h) {
            if (st.stop_requested()) co_return failure{error(errc::cancelled, "connecting to " + address + " was cancelled")};
            if (h.error() == runtime::errc::timed_out) {
                co_return failure{error(errc::tls_failed, "TLS handshake with " + address + " failed: no answer within " +
                                                              ms_text(opts.connect_timeout) + " (is it a TLS listener?)")};
            }
            co_return failure{tls_error(address, h.error())};
        }
        stream = tls::any_stream(std::move(*h));
    } else {
        stream = tls::any_stream(std::move(tcp));
    }
    std::unique_ptr<connection> c(new connection(address, std::move(opts), std::move(stream)));
    auto spawned = c->_gate.spawn(read_loop(c.get()));
    if (!spawned) co_return failure{error(errc::disconnected, "connection to " + address + " closed")};
    auto nt = c->negotiate(st);
    auto n = co_await std::move(nt);
    if (!n) {
        co_await c->close();
        error e = n.error();
        // A TLS listener closes on the first plaintext frame (it reads as a huge TLS record).
        if (e.code == errc::disconnected && !c->_opts.security.uses_tls()) {
            e.message += " during ApiVersions: is it a TLS listener (SSL or SASL_SSL)?";
        }
        co_return failure{e};
    }
    if (c->_opts.security.uses_sasl()) {
        auto at = c->authenticate(st);
        auto a = co_await std::move(at);
        if (!a) {
            co_await c->close();
            co_return failure{a.error()};
        }
    }
    co_return std::move(c);
}

// KIP-152: SaslHandshake v1 names the mechanism, then the tokens travel in SaslAuthenticate
// requests, so a refusal comes back as a Kafka error with the broker's message (v0's raw
// tokens would only close the connection).
runtime::task<result<void, error>> connection::authenticate(std::stop_token st) {
    const security_config& sec = _opts.security;
    const std::string mechanism = sec.sasl_mechanism;
    if (!known_sasl_mechanism(mechanism)) {
        co_return failure{error(errc::bad_config, "unknown SASL mechanism '" + mechanism +
                                                      "' (skiff speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512)")};
    }
    if (sec.sasl_username.empty()) co_return failure{error(errc::bad_config, "SASL needs a user name")};
    if (sec.sasl_password.empty()) co_return failure{error(errc::bad_config, "SASL needs a password")};
    auto hv = _versions.pick(kafka::api_key::sasl_handshake, std::int16_t{1});
    auto av = _versions.pick(kafka::api_key::sasl_authenticate);
    if (!hv || *hv < 1 || !av) {
        co_return failure{error(errc::unsupported_version, "broker at " + _address +
                                                               " does not support SaslHandshake v1 and SaslAuthenticate")};
    }
    if (st.stop_requested()) co_return failure{error(errc::cancelled, "connecting to " + _address + " was cancelled")};
    kafka::SaslHandshakeRequest hs;
    hs.mechanism = mechanism;
    request_options o;
    o.timeout = _opts.connect_timeout;
    o.max_version = 1;
    auto ht = send(std::move(hs), o);
    auto h = co_await std::move(ht);
    if (!h) co_return failure{h.error()};
    if (h->error_code == kafka::error_code::unsupported_sasl_mechanism) {
        co_return failure{error(errc::authentication_failed, "the broker does not offer SASL mechanism " + mechanism +
                                                                 " (it offers " + join(h->mechanisms) + ")")};
    }
    if (h->error_code == kafka::error_code::illegal_sasl_state) {
        co_return failure{error(errc::authentication_failed, "authentication failed: the listener at " + _address +
                                                                 " does not use SASL (ILLEGAL_SASL_STATE); check the "
                                                                 "security protocol")};
    }
    if (h->error_code != kafka::error_code::none) {
        co_return failure{error(errc::authentication_failed, "authentication failed: the broker refused SaslHandshake (" +
                                                                 std::string(kafka::name(h->error_code)) + ")")};
    }

    if (mechanism == "PLAIN") {
        // RFC 4616: authzid NUL authcid NUL passwd, with an empty authzid.
        std::string token;
        token.reserve(sec.sasl_username.size() + sec.sasl_password.size() + 2);
        token.push_back('\0');
        token += sec.sasl_username;
        token.push_back('\0');
        token += sec.sasl_password;
        auto t = sasl_step(std::move(token), mechanism);
        auto r = co_await std::move(t);
        if (!r) co_return failure{r.error()};
        co_return ok();
    }

    const auto m = sasl::mechanism_from_name(mechanism);
    sasl::scram_client scram(sasl::scram_client::options{*m, sec.sasl_username, sec.sasl_password, ""});
    auto first = scram.first_message();
    if (!first) {
        co_return failure{error(errc::bad_config, "the SASL user name is not valid for SCRAM (empty, too long or not UTF-8)")};
    }
    auto t1 = sasl_step(std::move(*first), mechanism);
    auto server_first = co_await std::move(t1);
    if (!server_first) co_return failure{server_first.error()};
    auto final_ = scram.final_message(*server_first);
    if (!final_) {
        std::string why;
        if (!scram.server_error().empty()) {
            why = "the broker answered " + scram.server_error();
        } else if (final_.error() == sasl::errc::invalid_credential) {
            why = "the broker's SCRAM parameters are outside Kafka's bounds (4096 to 16384 iterations)";
        } else {
            why = "the broker's SCRAM server-first message is invalid or does not extend our nonce";
        }
        co_return failure{error(errc::authentication_failed, "authentication failed: " + why)};
    }
    auto t2 = sasl_step(std::move(*final_), mechanism);
    auto server_final = co_await std::move(t2);
    if (!server_final) co_return failure{server_final.error()};
    auto verified = scram.verify_final(*server_final);
    if (!verified) {
        std::string why;
        if (!scram.server_error().empty()) {
            why = "the broker answered " + scram.server_error();
        } else if (verified.error() == sasl::errc::bad_proof) {
            // Mutual authentication (RFC 5802 §5): the broker must prove it holds the credential.
            why = "the broker's SCRAM server signature is wrong, so it does not hold this user's credential";
        } else {
            why = "the broker's SCRAM server-final message is invalid";
        }
        co_return failure{error(errc::authentication_failed, "authentication failed: " + why)};
    }
    co_return ok();
}

// One SaslAuthenticate round trip: `bytes` out (wiped here), the broker's bytes back; a refusal
// is authentication_failed with the broker's own message.
runtime::task<result<std::string, error>> connection::sasl_step(std::string bytes, const std::string& mechanism) {
    kafka::SaslAuthenticateRequest req;
    req.auth_bytes = bytes;
    sasl::wipe_buffer(bytes.data(), bytes.capacity());
    request_options o;
    o.timeout = _opts.connect_timeout;
    auto t = send(std::move(req), o);
    auto r = co_await std::move(t);
    if (!r) {
        // The broker closes the connection after a refused exchange; a close without an answer
        // reads the same here.
        if (r.error().code == errc::disconnected) {
            co_return failure{error(errc::authentication_failed, "authentication failed: the broker at " + _address +
                                                                     " closed the connection during SASL " + mechanism)};
        }
        co_return failure{r.error()};
    }
    if (r->error_code != kafka::error_code::none) {
        std::string msg = r->error_message && !r->error_message->empty() ? *r->error_message
                                                                          : std::string(kafka::name(r->error_code));
        co_return failure{error(errc::authentication_failed, "authentication failed: " + msg)};
    }
    co_return std::move(r->auth_bytes);
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
