#include <skiff/s3/uri.hpp>

#include <skiff/core/ascii.hpp>
#include <skiff/core/hex.hpp>
#include <skiff/core/percent.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>

namespace skiff::s3 {

namespace {

bool is_unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

bool is_ip_literal(std::string_view host) {
    if (!host.empty() && host.front() == '[') return true;
    std::string h(host);
    in_addr a4{};
    return inet_pton(AF_INET, h.c_str(), &a4) == 1;
}

// RFC 1123 host name: dot-separated labels of letters, digits and hyphens, no label empty or
// starting/ending with '-'. '_' is tolerated because some private DNS setups use it.
bool valid_dns_name(std::string_view host) {
    if (host.empty() || host.size() > 253) return false;
    size_t label_len = 0;
    char prev = '.';
    for (char c : host) {
        if (c == '.') {
            if (label_len == 0 || prev == '-') return false;
            label_len = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                   (c == '-' && label_len > 0)) {
            if (++label_len > 63) return false;
        } else {
            return false;
        }
        prev = c;
    }
    return label_len > 0 && prev != '-';
}

} // namespace

std::string uri_encode(std::string_view s, bool encode_slash) {
    std::string out;
    out.reserve(s.size() * 3);
    for (char ch : s) {
        auto c = static_cast<unsigned char>(ch);
        if (is_unreserved(c) || (c == '/' && !encode_slash)) {
            out.push_back(ch);
        } else {
            out.push_back('%');
            append_hex(out, c, hex_case::upper); // RFC 3986 2.1: upper case
        }
    }
    return out;
}

std::string encode_key_path(std::string_view key) { return uri_encode(key, false); }

result<std::string, std::string> percent_decode(std::string_view s) {
    auto decoded = skiff::percent_decode(s, plus_sign::literal, bad_escape::reject);
    if (decoded) return std::move(*decoded);
    // The input is not echoed: it may be a presigned URL carrying a token.
    return failure{"invalid percent escape at offset " + std::to_string(decoded.error()) +
                   ": '%' must be followed by two hex digits"};
}

std::string canonical_query(const query_params& params) {
    std::vector<std::pair<std::string, std::string>> encoded;
    encoded.reserve(params.size());
    for (const auto& [name, value] : params) {
        encoded.emplace_back(uri_encode(name, true), uri_encode(value, true));
    }
    // Sorting after encoding, not before: the signer compares encoded bytes ("%E1.." < "P").
    std::sort(encoded.begin(), encoded.end());
    std::string out;
    for (const auto& [name, value] : encoded) {
        if (!out.empty()) out.push_back('&');
        out += name;
        out.push_back('=');
        out += value;
    }
    return out;
}

result<endpoint, std::string> parse_endpoint(std::string_view url) {
    auto fail = [&](std::string_view why) -> result<endpoint, std::string> {
        return failure{"invalid S3 endpoint '" + std::string(url) + "': " + std::string(why)};
    };
    endpoint ep;
    auto sep = url.find("://");
    if (sep == std::string_view::npos) return fail("expected http://host[:port] or https://host[:port]");
    ep.scheme = ascii_lowercase(url.substr(0, sep));
    uint16_t default_port = 0;
    if (ep.scheme == "http") {
        default_port = 80;
    } else if (ep.scheme == "https") {
        default_port = 443;
    } else {
        return fail("scheme must be http or https");
    }
    std::string_view rest = url.substr(sep + 3);
    auto end = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, end);
    if (end != std::string_view::npos) {
        std::string_view tail = rest.substr(end);
        // An endpoint with a path prefix would need that prefix in every canonical URI; we do
        // not support it rather than sign requests S3 will reject.
        if (tail != "/") return fail("path, query and fragment are not supported (only an optional trailing '/')");
    }
    if (authority.find('@') != std::string_view::npos) return fail("user info ('user@') is not supported; use credentials");
    if (authority.empty()) return fail("host is empty");

    std::string_view host;
    std::string_view port_text;
    bool has_port = false;
    if (authority.front() == '[') {
        auto close = authority.find(']');
        if (close == std::string_view::npos) return fail("IPv6 address is missing its closing ']'");
        host = authority.substr(0, close + 1);
        std::string_view after = authority.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') return fail("unexpected text after the IPv6 address");
            port_text = after.substr(1);
            has_port = true;
        }
        std::string literal(host.substr(1, host.size() - 2));
        in6_addr a6{};
        if (inet_pton(AF_INET6, literal.c_str(), &a6) != 1) return fail("not a valid IPv6 address");
    } else {
        auto colon = authority.find(':');
        host = authority.substr(0, colon);
        if (colon != std::string_view::npos) {
            port_text = authority.substr(colon + 1);
            has_port = true;
        }
        if (host.empty()) return fail("host is empty");
        if (!valid_dns_name(ascii_lowercase(host))) return fail("host is not a valid DNS name or IPv4 address");
    }
    ep.host = ascii_lowercase(host);

    ep.port = default_port;
    if (has_port) {
        unsigned value = 0;
        auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
        if (port_text.empty() || ec != std::errc{} || ptr != port_text.data() + port_text.size() ||
            value == 0 || value > 65535) {
            return fail("port must be a number from 1 to 65535");
        }
        ep.port = static_cast<uint16_t>(value);
    }
    // curl leaves a default port out of the Host header; we must sign what it sends.
    ep.default_port = ep.port == default_port;
    return ep;
}

std::string host_header(const endpoint& ep) {
    if (ep.default_port) return ep.host;
    return ep.host + ":" + std::to_string(ep.port);
}

bool virtual_host_compatible(const endpoint& ep, std::string_view bucket) {
    if (is_ip_literal(ep.host)) return false;
    if (bucket.size() < 3 || bucket.size() > 63) return false;
    // Over TLS a dotted bucket name breaks the *.endpoint wildcard certificate.
    bool dots_ok = ep.scheme == "http";
    for (char c : bucket) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (c == '.' && dots_ok);
        if (!ok) return false;
    }
    return bucket.front() != '-' && bucket.back() != '-' && bucket.front() != '.' && bucket.back() != '.';
}

object_url make_object_url(const endpoint& ep, std::string_view bucket, std::string_view key,
                           bool path_style, const query_params& query) {
    object_url out;
    std::string host = path_style ? ep.host : std::string(bucket) + "." + ep.host;
    out.host_header = ep.default_port ? host : host + ":" + std::to_string(ep.port);
    if (path_style) {
        out.encoded_path = "/" + uri_encode(bucket, true);
        if (!key.empty()) out.encoded_path += "/" + encode_key_path(key);
    } else {
        out.encoded_path = "/" + encode_key_path(key);
    }
    out.query = canonical_query(query);
    out.url = ep.scheme + "://" + out.host_header + out.encoded_path;
    if (!out.query.empty()) out.url += "?" + out.query;
    return out;
}

} // namespace skiff::s3
