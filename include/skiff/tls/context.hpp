// tls::context: an OpenSSL SSL_CTX built from a server or client configuration, shared by the
// connections that started with it (shared_ptr: a connection keeps its context alive, so a
// reload never pulls certificates from under a running connection).
//
// context_holder keeps the current server context and reloads it from the same files.
//
// A context is immutable once built and may be used from any core or thread (OpenSSL's
// SSL_CTX is safe to share for creating connections). Building reads files: blocking, so
// do it at start-up or on an admin path, not in a hot loop.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/tls/config.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

struct ssl_ctx_st;
struct X509_name_st;

namespace skiff::tls {

// A distinguished name as Java's X500Principal.getName() prints it (RFC 2253): most specific
// first ("CN=alice,OU=eng,O=acme"), ',' between RDNs and '+' inside one, RFC 2253 escapes; names
// outside RFC 2253's keywords (CN C L ST O OU STREET DC UID) as a dotted OID with the DER value
// in lower-case hex ("1.2.840.113549.1.9.1=#1611..."). Kafka's ACL principals are this string.
std::string principal_name(const X509_name_st* name);

class context {
public:
    // Build from files. Errors: errc::file_unreadable, bad_pem, key_mismatch or bad_config,
    // with a message naming the file and the problem.
    static result<std::shared_ptr<const context>, config_error> make_server(const server_config& cfg);
    static result<std::shared_ptr<const context>, config_error> make_client(const client_config& cfg);

    ~context();
    context(const context&) = delete;
    context& operator=(const context&) = delete;

    ssl_ctx_st* native_handle() const noexcept { return _ctx; }
    bool is_server() const noexcept { return _server; }
    // Client contexts: the name checked against (and sent as SNI to) the server.
    const std::string& server_name() const noexcept { return _server_name; }
    // The own certificate's subject (RFC 2253), empty without one: for logs after a reload.
    const std::string& certificate_subject() const noexcept { return _subject; }

private:
    context(ssl_ctx_st* ctx, bool server) noexcept : _ctx(ctx), _server(server) {}
    ssl_ctx_st* _ctx;
    bool _server;
    std::string _server_name;
    std::string _subject;
};

// The current server context, swapped only by a reload that builds. Thread-safe: every core's
// listener may take current() while an admin thread calls reload().
class context_holder {
public:
    static result<std::unique_ptr<context_holder>, config_error> create(server_config cfg);

    // The context new connections should use.
    std::shared_ptr<const context> current() const;
    // Rebuilds from the same files. On error the old context stays current and the error is
    // returned; connections already running keep the context they started with either way.
    result<void, config_error> reload();
    // How many successful builds (1 after create).
    std::uint64_t generation() const;
    const server_config& config() const noexcept { return _cfg; }

private:
    context_holder(server_config cfg, std::shared_ptr<const context> ctx)
        : _cfg(std::move(cfg)), _current(std::move(ctx)) {}
    const server_config _cfg;
    mutable std::mutex _mutex;
    std::shared_ptr<const context> _current;
    std::uint64_t _generation = 1;
};

} // namespace skiff::tls
