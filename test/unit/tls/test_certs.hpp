// Throw-away PKI for the tls tests, generated with OpenSSL's C API into a temporary directory
// (nothing secret is committed). EC P-256 keys: fast to make.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace skiff::test {

struct test_pki {
    std::string dir;
    std::string ca_cert;                          // CN=skiff test CA
    std::string server_cert, server_key;          // CN=localhost, SAN IP:127.0.0.1, DNS:localhost
    std::string server2_cert, server2_key;        // CN=server2, same SANs (for reload)
    std::string client_cert, client_key;          // CN=alice,OU=eng,O=acme
    std::string other_ca_cert;                    // an unrelated CA
    std::string other_client_cert, other_client_key; // CN=mallory, signed by other CA
    std::string garbage;                          // not PEM at all

    // Generated once per process; the directory is removed at exit.
    static const test_pki& get();
};

// Writes a certificate with the given subject entries (in encoding order, least specific
// first) signed by the test CA; returns {cert, key} paths. For principal-format tests.
std::pair<std::string, std::string> make_client_cert(const std::string& name,
                                                     const std::vector<std::pair<std::string, std::string>>& subject);

} // namespace skiff::test
