#include <skiff/s3/sigv4.hpp>

#include <skiff/core/ascii.hpp>
#include <skiff/core/hex.hpp>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace skiff::s3 {

namespace {

// SHA-256 and HMAC fail only when OpenSSL cannot allocate or its default provider is
// missing; neither is recoverable, and a signer that returned garbage would be worse.
[[noreturn]] void openssl_failed(const char* what) {
    std::fprintf(stderr, "skiff: OpenSSL %s failed\n", what);
    std::abort();
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

// Trims, and collapses each inner run of spaces/tabs to one space. The SigV4 spec applies
// this to quoted strings as well ("a   b" -> "a b"), so no quote tracking.
std::string canonical_value(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    bool pending_space = false;
    for (char c : v) {
        if (is_space(c)) {
            pending_space = !out.empty();
            continue;
        }
        if (pending_space) out.push_back(' ');
        pending_space = false;
        out.push_back(c);
    }
    return out;
}

bool is_lower_hex64(std::string_view s) {
    return s.size() == 64 &&
           std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool is_hex_upper_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

const header* find_header(const std::vector<header>& headers, std::string_view name) {
    for (const auto& h : headers) {
        if (iequals(h.name, name)) return &h;
    }
    return nullptr;
}

// The checks both signing modes share. Messages name the problem, never credential values.
result<void, std::string> validate(const signing_request& req, const credentials& creds,
                                   const signing_options& opts) {
    if (creds.access_key_id.empty() || creds.secret_access_key.empty()) {
        return failure{std::string("cannot sign: credentials are incomplete (") + describe(creds) + ")"};
    }
    if (opts.region.empty()) return failure{std::string("cannot sign: region is empty")};
    if (opts.service.empty()) return failure{std::string("cannot sign: service is empty")};
    if (req.method.empty() || req.method.find_first_of(" \t\r\n") != std::string::npos) {
        return failure{std::string("cannot sign: method is empty or contains whitespace")};
    }
    const std::string& p = req.encoded_path;
    if (p.empty() || p.front() != '/') {
        return failure{"cannot sign: encoded_path '" + p + "' must start with '/'"};
    }
    // Anything but unreserved bytes, '/' and %XX would be escaped by encode_key_path. Finding
    // one means the path was not encoded (or was hand-built), and S3 would compute a
    // different canonical URI than ours.
    for (size_t i = 0; i < p.size(); ++i) {
        auto c = static_cast<unsigned char>(p[i]);
        bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                          c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
        if (unreserved) continue;
        if (c == '%' && i + 2 < p.size() && is_hex_upper_digit(p[i + 1]) && is_hex_upper_digit(p[i + 2])) {
            i += 2;
            continue;
        }
        return failure{fmt::format("cannot sign: encoded_path has an unencoded byte 0x{:02X} at offset {}; "
                                   "build it with encode_key_path() (percent escapes must be uppercase)",
                                   static_cast<unsigned>(c), i)};
    }
    for (const auto& h : req.headers) {
        if (h.name.empty() || h.name.find_first_of(" \t\r\n:") != std::string::npos) {
            return failure{"cannot sign: invalid header name '" + h.name + "'"};
        }
        if (h.value.find_first_of("\r\n") != std::string::npos) {
            return failure{"cannot sign: value of header '" + h.name + "' contains CR or LF"};
        }
    }
    const header* host = find_header(req.headers, "host");
    if (host == nullptr || canonical_value(host->value).empty()) {
        return failure{std::string("cannot sign: the request has no Host header (the signature covers it)")};
    }
    return {};
}

result<void, std::string> validate_payload_hash(std::string_view h) {
    if (is_lower_hex64(h) || h == unsigned_payload || h.rfind("STREAMING-", 0) == 0) return {};
    if (h.empty()) {
        return failure{std::string("cannot sign: payload_hash is empty (use sha256_hex(body) or UNSIGNED-PAYLOAD)")};
    }
    return failure{"cannot sign: payload_hash '" + std::string(h) +
                   "' is neither lowercase hex SHA-256 nor UNSIGNED-PAYLOAD/STREAMING-*"};
}

std::string scope_of(std::string_view day, const signing_options& opts) {
    return fmt::format("{}/{}/{}/aws4_request", day, opts.region, opts.service);
}

std::string canonical_request_of(const signing_request& req, const signing_options& opts,
                                 const std::string& canonical_query_string,
                                 const canonical_header_set& headers, std::string_view payload_hash) {
    std::string uri = opts.normalize_path ? normalize_path(req.encoded_path) : req.encoded_path;
    return fmt::format("{}\n{}\n{}\n{}\n{}\n{}", req.method, uri, canonical_query_string, headers.block,
                       headers.signed_headers, payload_hash);
}

std::string string_to_sign_of(std::string_view date, std::string_view scope, std::string_view canonical_request) {
    return fmt::format("{}\n{}\n{}\n{}", sigv4_algorithm, date, scope, sha256_hex(canonical_request));
}

std::string signature_of(const credentials& creds, std::string_view day, const signing_options& opts,
                         std::string_view string_to_sign) {
    digest key = derive_signing_key(creds.secret_access_key, day, opts.region, opts.service);
    return hex(hmac_sha256(key, string_to_sign));
}

} // namespace

std::string hex(std::span<const uint8_t> bytes) {
    return hex_encode(bytes); // SigV4 wants lower case (AWS "Hex" function)
}

digest sha256(std::string_view bytes) {
    digest out{};
    unsigned int len = 0;
    if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size()) {
        openssl_failed("SHA-256");
    }
    return out;
}

std::string sha256_hex(std::string_view bytes) { return hex(sha256(bytes)); }

digest hmac_sha256(std::span<const uint8_t> key, std::string_view data) {
    digest out{};
    unsigned int len = 0;
    if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
             data.size(), out.data(), &len) == nullptr ||
        len != out.size()) {
        openssl_failed("HMAC-SHA256");
    }
    return out;
}

digest hmac_sha256(std::string_view key, std::string_view data) {
    return hmac_sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size()), data);
}

digest derive_signing_key(std::string_view secret, std::string_view date, std::string_view region,
                          std::string_view service) {
    std::string k_secret = "AWS4" + std::string(secret);
    digest k = hmac_sha256(std::string_view(k_secret), date);
    // Scrub the secret-bearing copy; the digests are derived keys and scoped to one day.
    std::fill(k_secret.begin(), k_secret.end(), '\0');
    k = hmac_sha256(k, region);
    k = hmac_sha256(k, service);
    return hmac_sha256(k, "aws4_request");
}

std::string amz_date(std::chrono::system_clock::time_point t) {
    using namespace std::chrono;
    auto secs = floor<seconds>(t);
    auto day = floor<days>(secs);
    year_month_day ymd{day};
    hh_mm_ss hms{secs - day};
    return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}Z", static_cast<int>(ymd.year()),
                       static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                       hms.minutes().count(), hms.seconds().count());
}

std::string amz_day(std::chrono::system_clock::time_point t) { return amz_date(t).substr(0, 8); }

canonical_header_set canonical_headers(const std::vector<header>& headers) {
    std::vector<std::pair<std::string, std::string>> entries;
    entries.reserve(headers.size());
    for (const auto& h : headers) {
        std::string name = ascii_lowercase(h.name);
        entries.emplace_back(std::move(name), canonical_value(h.value));
    }
    // Stable, by name only: repeated headers keep request order when joined.
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    canonical_header_set out;
    for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0 && entries[i].first == entries[i - 1].first) {
            out.block.back() = ','; // replace the previous line's '\n'
        } else {
            if (!out.signed_headers.empty()) out.signed_headers.push_back(';');
            out.signed_headers += entries[i].first;
            out.block += entries[i].first;
            out.block.push_back(':');
        }
        out.block += entries[i].second;
        out.block.push_back('\n');
    }
    return out;
}

std::string normalize_path(std::string_view encoded_path) {
    std::vector<std::string_view> kept;
    bool trailing_slash = false;
    size_t pos = 0;
    while (pos <= encoded_path.size()) {
        size_t slash = encoded_path.find('/', pos);
        size_t end = slash == std::string_view::npos ? encoded_path.size() : slash;
        std::string_view seg = encoded_path.substr(pos, end - pos);
        bool last = slash == std::string_view::npos;
        if (seg == "..") {
            if (!kept.empty()) kept.pop_back();
        } else if (!seg.empty() && seg != ".") {
            kept.push_back(seg);
        }
        // A path ending in '/', '.' or '..' names a directory-like resource (RFC 3986 5.2.4).
        if (last) trailing_slash = seg.empty() || seg == "." || seg == "..";
        if (last) break;
        pos = slash + 1;
    }
    std::string out;
    for (auto seg : kept) {
        out.push_back('/');
        out += seg;
    }
    if (out.empty() || trailing_slash) out.push_back('/');
    return out;
}

result<signed_request, std::string> sign(const signing_request& req, const credentials& creds,
                                         const signing_options& opts, std::chrono::system_clock::time_point now) {
    if (auto v = validate(req, creds, opts); !v) return failure{std::move(v).error()};
    if (auto v = validate_payload_hash(req.payload_hash); !v) return failure{std::move(v).error()};
    if (find_header(req.headers, "authorization") != nullptr) {
        return failure{std::string("cannot sign: the request already has an Authorization header")};
    }

    const std::string date = amz_date(now);
    const std::string day = date.substr(0, 8);
    signed_request out;
    std::vector<header> headers = req.headers;
    std::vector<header> unsigned_after; // added to the request after signing

    // A signer-owned header the caller already set is accepted only if it carries the value
    // the signer would have used; anything else would silently sign one thing and send another.
    auto own = [&](std::string_view name, const std::string& value, bool is_secret) -> result<void, std::string> {
        const header* existing = find_header(headers, name);
        if (existing == nullptr) {
            headers.push_back({std::string(name), value});
            out.headers_to_add.push_back({std::string(name), value});
        } else if (canonical_value(existing->value) != value) {
            return failure{fmt::format("cannot sign: the request's {} header {}", name,
                                       is_secret ? std::string("differs from the credentials' session token")
                                                 : "'" + existing->value + "' differs from '" + value + "'")};
        }
        return {};
    };
    if (auto r = own("x-amz-date", date, false); !r) return failure{std::move(r).error()};
    if (opts.add_content_sha256_header) {
        if (auto r = own("x-amz-content-sha256", req.payload_hash, false); !r) return failure{std::move(r).error()};
    }
    if (!creds.session_token.empty()) {
        if (opts.sign_session_token) {
            if (auto r = own("x-amz-security-token", creds.session_token, true); !r) {
                return failure{std::move(r).error()};
            }
        } else if (find_header(headers, "x-amz-security-token") != nullptr) {
            return failure{std::string("cannot sign: sign_session_token is false but the request already "
                                       "carries x-amz-security-token, which would then be signed")};
        } else {
            unsigned_after.push_back({"x-amz-security-token", creds.session_token});
        }
    }

    canonical_header_set canon = canonical_headers(headers);
    out.signed_headers = canon.signed_headers;
    out.canonical_request = canonical_request_of(req, opts, canonical_query(req.query), canon, req.payload_hash);
    const std::string scope = scope_of(day, opts);
    out.string_to_sign = string_to_sign_of(date, scope, out.canonical_request);
    out.signature = signature_of(creds, day, opts, out.string_to_sign);
    out.authorization = fmt::format("{} Credential={}/{}, SignedHeaders={}, Signature={}", sigv4_algorithm,
                                    creds.access_key_id, scope, out.signed_headers, out.signature);
    for (auto& h : unsigned_after) out.headers_to_add.push_back(std::move(h));
    out.headers_to_add.push_back({"authorization", out.authorization});
    return out;
}

result<signed_request, std::string> presign(const signing_request& req, const credentials& creds,
                                            const signing_options& opts, std::chrono::system_clock::time_point now,
                                            std::chrono::seconds expires) {
    if (auto v = validate(req, creds, opts); !v) return failure{std::move(v).error()};
    std::string payload = req.payload_hash.empty() ? std::string(unsigned_payload) : req.payload_hash;
    if (auto v = validate_payload_hash(payload); !v) return failure{std::move(v).error()};
    // S3 caps X-Amz-Expires at 7 days (sigv4-query-string-auth.html).
    if (expires.count() < 1 || expires.count() > 604800) {
        return failure{fmt::format("cannot presign: expiry of {} s is outside 1..604800 s", expires.count())};
    }
    for (std::string_view name : {"authorization", "x-amz-date", "x-amz-security-token"}) {
        if (find_header(req.headers, name) != nullptr) {
            return failure{fmt::format("cannot presign: the request has a {} header; presigned URLs carry "
                                       "it in the query string",
                                       name)};
        }
    }
    for (const auto& [name, value] : req.query) {
        for (std::string_view reserved : {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                                          "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"}) {
            if (iequals(name, reserved)) {
                return failure{"cannot presign: the query already has " + name};
            }
        }
    }

    const std::string date = amz_date(now);
    const std::string day = date.substr(0, 8);
    const std::string scope = scope_of(day, opts);
    signed_request out;
    canonical_header_set canon = canonical_headers(req.headers);
    out.signed_headers = canon.signed_headers;

    out.query_to_add = {
        {"X-Amz-Algorithm", std::string(sigv4_algorithm)},
        {"X-Amz-Credential", creds.access_key_id + "/" + scope},
        {"X-Amz-Date", date},
        {"X-Amz-Expires", std::to_string(expires.count())},
        {"X-Amz-SignedHeaders", out.signed_headers},
    };
    bool token_signed = !creds.session_token.empty() && opts.sign_session_token;
    if (token_signed) out.query_to_add.emplace_back("X-Amz-Security-Token", creds.session_token);

    query_params all = req.query;
    all.insert(all.end(), out.query_to_add.begin(), out.query_to_add.end());
    std::string canonical_query_string = canonical_query(all);

    out.canonical_request = canonical_request_of(req, opts, canonical_query_string, canon, payload);
    out.string_to_sign = string_to_sign_of(date, scope, out.canonical_request);
    out.signature = signature_of(creds, day, opts, out.string_to_sign);

    out.query_string = canonical_query_string;
    if (!creds.session_token.empty() && !token_signed) {
        out.query_to_add.emplace_back("X-Amz-Security-Token", creds.session_token);
        out.query_string += "&X-Amz-Security-Token=" + uri_encode(creds.session_token, true);
    }
    out.query_to_add.emplace_back("X-Amz-Signature", out.signature);
    out.query_string += "&X-Amz-Signature=" + out.signature;
    return out;
}

} // namespace skiff::s3
