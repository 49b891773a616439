#include "fake_s3.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <list>
#include <mutex>
#include <regex>
#include <system_error>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pugixml.hpp>

#include <skiff/core/iso_time.hpp>
#include <skiff/s3/sigv4.hpp>

namespace skiff::test {

namespace {

// --- small encoders ------------------------------------------------------------------------

std::string hex(const unsigned char* p, std::size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(n * 2);
    for (std::size_t i = 0; i < n; ++i) {
        out += digits[p[i] >> 4];
        out += digits[p[i] & 0xf];
    }
    return out;
}

std::string digest_hex(const EVP_MD* md, std::string_view data) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), out.data(), &len, md, nullptr);
    return hex(out.data(), len);
}

std::string base64(const unsigned char* p, std::size_t n) {
    static constexpr char table[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (std::size_t i = 0; i < n; i += 3) {
        const unsigned v = (unsigned{p[i]} << 16) | (i + 1 < n ? unsigned{p[i + 1]} << 8 : 0u) |
                           (i + 2 < n ? unsigned{p[i + 2]} : 0u);
        out += table[(v >> 18) & 63];
        out += table[(v >> 12) & 63];
        out += i + 1 < n ? table[(v >> 6) & 63] : '=';
        out += i + 2 < n ? table[v & 63] : '=';
    }
    return out;
}

// CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, as x-amz-checksum-crc32c uses.
std::uint32_t crc32c(std::string_view data) {
    static const auto table = [] {
        std::array<std::uint32_t, 256> t{};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    std::uint32_t crc = 0xFFFFFFFFu;
    for (char ch : data) crc = table[(crc ^ static_cast<unsigned char>(ch)) & 0xff] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

std::string crc32c_base64(std::string_view data) {
    const std::uint32_t c = crc32c(data);
    const std::array<unsigned char, 4> be = {
        static_cast<unsigned char>(c >> 24), static_cast<unsigned char>(c >> 16),
        static_cast<unsigned char>(c >> 8), static_cast<unsigned char>(c)};
    return base64(be.data(), be.size());
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%') {
            if (i + 2 >= s.size()) return std::nullopt;
            const int hi = hex_digit(s[i + 1]);
            const int lo = hex_digit(s[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (plus_is_space && s[i] == '+') {
            out += ' ';
        } else {
            out += s[i];
        }
    }
    return out;
}

// EncodingType=url the way S3 writes it: form style, '/' kept.
std::string s3_url_encode(std::string_view s) {
    std::string out;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
            out += ch;
        } else if (c == ' ') {
            out += '+';
        } else {
            out += fmt::format("%{:02X}", c);
        }
    }
    return out;
}

std::string xml_escape(std::string_view s) {
    std::string out;
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default:
            // A literal CR would be normalised away by the client's XML parser.
            if (c < 0x20 && c != '\t' && c != '\n')
                out += fmt::format("&#{};", c);
            else
                out += ch;
        }
    }
    return out;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::optional<std::uint64_t> parse_u64(std::string_view s) {
    if (s.empty()) return std::nullopt;
    std::uint64_t v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::string http_date(std::chrono::system_clock::time_point t) {
    const std::time_t tt = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    std::array<char, 64> buf{};
    const auto n = std::strftime(buf.data(), buf.size(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return std::string(buf.data(), n);
}

std::string iso8601(std::chrono::system_clock::time_point t) {
    const std::time_t tt = std::chrono::system_clock::to_time_t(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    std::array<char, 64> buf{};
    const auto n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
    return fmt::format("{}.{:03}Z", std::string_view(buf.data(), n), ms);
}

const char* reason_phrase(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Payload Too Large";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

// --- HTTP messages -------------------------------------------------------------------------

struct http_request {
    std::string method;
    std::string target;
    std::string version;
    std::map<std::string, std::string> headers; // lower-case names
    std::string body;
    bool keep_alive = true;

    const std::string* header(const std::string& name) const {
        const auto it = headers.find(name);
        return it == headers.end() ? nullptr : &it->second;
    }
};

struct http_response {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    // HEAD: Content-Length describes the entity, but no body bytes are sent.
    std::optional<std::size_t> head_content_length;
};

std::string serialize(const http_response& r, bool head, bool closing, const std::string& request_id) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", r.status, reason_phrase(r.status));
    for (const auto& [name, value] : r.headers) out += fmt::format("{}: {}\r\n", name, value);
    out += fmt::format("x-amz-request-id: {}\r\nx-amz-id-2: fake/{}\r\n", request_id, request_id);
    out += fmt::format("Date: {}\r\nServer: skiff-fake-s3\r\n", http_date(std::chrono::system_clock::now()));
    if (r.status != 204 && r.status != 304) {
        const std::size_t len =
            head && r.head_content_length ? *r.head_content_length : (head ? 0 : r.body.size());
        out += fmt::format("Content-Length: {}\r\n", len);
    }
    if (closing) out += "Connection: close\r\n";
    out += "\r\n";
    if (!head && r.status != 204 && r.status != 304) out += r.body;
    return out;
}

http_response s3_error(int status, std::string_view code, std::string_view message,
                       const std::vector<std::pair<std::string, std::string>>& extra = {}) {
    http_response r;
    r.status = status;
    r.headers.emplace_back("Content-Type", "application/xml");
    r.body =
        fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{}</Code><Message>{}</Message>",
                    xml_escape(code), xml_escape(message));
    for (const auto& [name, value] : extra) r.body += fmt::format("<{0}>{1}</{0}>", name, xml_escape(value));
    r.body += "</Error>";
    return r;
}

struct active_rule {
    int id = 0;
    fault_rule rule;
    std::regex re;
    int remaining = 0;
    std::uint64_t matched = 0; // for fault_rule::every
};

struct connection {
    int fd = -1; // guarded by impl::mu; -1 once the serving thread closed it
    std::thread thread;
    std::atomic<bool> done{false};
};

enum class read_status { ok, closed, stopped, bad, too_large };

} // namespace

// --- the server ----------------------------------------------------------------------------

struct fake_s3::impl {
    fake_s3_options options;
    int listen_fd = -1;
    std::uint16_t port = 0;
    std::array<int, 2> wake{-1, -1}; // written once by stop(); every wait polls the read end
    std::atomic<bool> stopping{false};
    std::thread acceptor;

    mutable std::mutex mu;
    mutable std::condition_variable changed;
    std::map<std::string, std::map<std::string, stored_object>, std::less<>> buckets;
    std::vector<active_rule> rules;
    int next_rule_id = 1;
    fake_s3_stats counters;
    std::vector<request_record> log;
    std::list<std::unique_ptr<connection>> connections;
    std::uint64_t next_request_id = 1;
    std::mutex stop_mu; // serialises stop()

    // Waits for `fd` to become readable, or for stop(). timeout_ms < 0: no timeout.
    // Returns 1 readable, 0 timeout, -1 stopped or error.
    int wait_readable(int fd, int timeout_ms) const {
        std::array<pollfd, 2> fds{};
        fds[0] = {wake[0], POLLIN, 0};
        fds[1] = {fd, POLLIN, 0};
        const nfds_t n = fd >= 0 ? 2 : 1;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (true) {
            int wait = timeout_ms;
            if (timeout_ms >= 0) {
                // Rounded up: a delay fault must never answer early.
                const auto left =
                    std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
                if (left.count() <= 0) return 0;
                wait = static_cast<int>(left.count());
            }
            const int rc = ::poll(fds.data(), n, wait);
            if (rc < 0 && errno == EINTR) continue;
            if (rc < 0) return -1;
            if (fds[0].revents != 0 || stopping.load()) return -1;
            if (rc == 0) continue; // re-check the deadline
            return 1;
        }
    }

    // Sleeps unless stop() comes first. Returns false when stopped.
    bool sleep_for(std::chrono::milliseconds d) const {
        return wait_readable(-1, static_cast<int>(std::min<std::int64_t>(d.count(), 1 << 30))) == 0;
    }

    static bool send_all(int fd, std::string_view data) {
        while (!data.empty()) {
            const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return false;
            data.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }

    // --- reading requests ----------------------------------------------------------------

    struct reader {
        const impl& server;
        int fd;
        std::string buf;

        // Appends what the socket has; false on EOF, error or stop.
        bool fill(read_status& why) {
            if (server.wait_readable(fd, -1) != 1) {
                why = read_status::stopped;
                return false;
            }
            std::array<char, 64 * 1024> chunk{};
            ssize_t n;
            do {
                n = ::recv(fd, chunk.data(), chunk.size(), 0);
            } while (n < 0 && errno == EINTR);
            if (n <= 0) {
                why = read_status::closed;
                return false;
            }
            buf.append(chunk.data(), static_cast<std::size_t>(n));
            return true;
        }

        bool ensure(std::size_t n, read_status& why) {
            while (buf.size() < n) {
                if (!fill(why)) return false;
            }
            return true;
        }

        // A CRLF-terminated line starting at buf[0], removed from buf.
        bool take_line(std::string& line, read_status& why) {
            std::size_t eol;
            while ((eol = buf.find("\r\n")) == std::string::npos) {
                if (buf.size() > 64 * 1024) {
                    why = read_status::bad;
                    return false;
                }
                if (!fill(why)) return false;
            }
            line = buf.substr(0, eol);
            buf.erase(0, eol + 2);
            return true;
        }
    };

    read_status read_request(reader& in, http_request& req) const {
        read_status why = read_status::closed;
        // Head: request line and headers.
        std::size_t end;
        while (true) {
            // RFC 9112 2.2: ignore empty lines before the request line.
            while (in.buf.size() >= 2 && in.buf[0] == '\r' && in.buf[1] == '\n') in.buf.erase(0, 2);
            end = in.buf.find("\r\n\r\n");
            if (end != std::string::npos) break;
            if (in.buf.size() > 64 * 1024) return read_status::bad;
            if (!in.fill(why)) return why;
        }
        const std::string head = in.buf.substr(0, end);
        in.buf.erase(0, end + 4);

        const auto line_end = head.find("\r\n");
        const std::string_view request_line = std::string_view(head).substr(0, line_end);
        const auto sp1 = request_line.find(' ');
        const auto sp2 = request_line.rfind(' ');
        if (sp1 == std::string_view::npos || sp2 == sp1) return read_status::bad;
        req.method = std::string(request_line.substr(0, sp1));
        req.target = std::string(request_line.substr(sp1 + 1, sp2 - sp1 - 1));
        req.version = std::string(request_line.substr(sp2 + 1));
        if (req.version != "HTTP/1.1" && req.version != "HTTP/1.0") return read_status::bad;

        std::string_view rest =
            line_end == std::string::npos ? std::string_view() : std::string_view(head).substr(line_end + 2);
        while (!rest.empty()) {
            const auto eol = rest.find("\r\n");
            const std::string_view line = rest.substr(0, eol);
            rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
            const auto colon = line.find(':');
            if (colon == std::string_view::npos || colon == 0) return read_status::bad;
            const std::string name = lower(line.substr(0, colon));
            const std::string value(trim(line.substr(colon + 1)));
            auto [it, inserted] = req.headers.emplace(name, value);
            if (!inserted) it->second += "," + value;
        }

        const std::string connection_header =
            req.header("connection") ? lower(*req.header("connection")) : "";
        req.keep_alive = req.version == "HTTP/1.1"
                             ? connection_header.find("close") == std::string::npos
                             : connection_header.find("keep-alive") != std::string::npos;

        // Body.
        const std::string* te = req.header("transfer-encoding");
        const bool chunked = te && lower(*te).find("chunked") != std::string::npos;
        std::optional<std::uint64_t> length;
        if (!chunked) {
            if (const std::string* cl = req.header("content-length")) {
                length = parse_u64(*cl);
                if (!length) return read_status::bad;
            }
        }
        const bool has_body = chunked || (length && *length > 0);
        if (length && *length > options.max_body_size) return read_status::too_large;

        // Answer "continue" unless the body is already arriving. Also for an empty body, as
        // S3 does: botocore keeps a stale status line on a keep-alive connection when an
        // Expect request gets its final answer first, and misparses the next response.
        const std::string* expect = req.header("expect");
        if (expect && lower(*expect) == "100-continue" && req.version == "HTTP/1.1" &&
            (!has_body || in.buf.empty())) {
            if (!send_all(in.fd, "HTTP/1.1 100 Continue\r\n\r\n")) return read_status::closed;
        }

        if (length) {
            if (!in.ensure(*length, why)) return why;
            req.body = in.buf.substr(0, *length);
            in.buf.erase(0, *length);
        } else if (chunked) {
            while (true) {
                std::string size_line;
                if (!in.take_line(size_line, why)) return why;
                const std::string_view digits =
                    trim(std::string_view(size_line).substr(0, size_line.find(';')));
                std::uint64_t size = 0;
                const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
                if (digits.empty() || ec != std::errc{} || p != digits.data() + digits.size())
                    return read_status::bad;
                if (req.body.size() + size > options.max_body_size) return read_status::too_large;
                if (size == 0) break;
                if (!in.ensure(size + 2, why)) return why;
                if (in.buf.compare(size, 2, "\r\n") != 0) return read_status::bad;
                req.body.append(in.buf, 0, size);
                in.buf.erase(0, size + 2);
            }
            // Trailers up to the empty line.
            std::string trailer;
            do {
                if (!in.take_line(trailer, why)) return why;
            } while (!trailer.empty());
        }
        return read_status::ok;
    }

    // --- S3 semantics --------------------------------------------------------------------

    struct parsed_target {
        std::string bucket;
        std::string key;
        std::map<std::string, std::string> query;
    };

    static std::optional<parsed_target> parse_target(std::string_view target) {
        if (target.empty() || target.front() != '/') return std::nullopt;
        parsed_target out;
        const auto q = target.find('?');
        const std::string_view path = target.substr(0, q);
        if (q != std::string_view::npos) {
            std::string_view query = target.substr(q + 1);
            while (!query.empty()) {
                const auto amp = query.find('&');
                const std::string_view pair = query.substr(0, amp);
                query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
                if (pair.empty()) continue;
                const auto eq = pair.find('=');
                auto name = percent_decode(pair.substr(0, eq), true);
                auto value = percent_decode(
                    eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
                if (!name || !value) return std::nullopt;
                out.query[*name] = *value;
            }
        }
        const std::string_view rest = path.substr(1);
        const auto slash = rest.find('/');
        auto bucket = percent_decode(rest.substr(0, slash), false);
        if (!bucket) return std::nullopt;
        out.bucket = std::move(*bucket);
        if (slash != std::string_view::npos) {
            auto key = percent_decode(rest.substr(slash + 1), false);
            if (!key) return std::nullopt;
            out.key = std::move(*key);
        }
        return out;
    }

    static std::string make_etag(std::string_view body) { return "\"" + digest_hex(EVP_md5(), body) + "\""; }

    static stored_object make_object(std::string body, std::string checksum, std::string content_type) {
        stored_object o;
        o.etag = make_etag(body);
        o.body = std::move(body);
        o.checksum_crc32c = std::move(checksum);
        o.content_type = std::move(content_type);
        o.last_modified = std::chrono::system_clock::now();
        return o;
    }

    // Checks that do not depend on the store.
    std::optional<http_response> check_payload_hash(const http_request& req) const {
        if (!options.require_content_sha256) return std::nullopt;
        const std::string* h = req.header("x-amz-content-sha256");
        if (!h) {
            return s3_error(400, "InvalidRequest",
                            "Missing required header for this request: x-amz-content-sha256");
        }
        if (*h == "UNSIGNED-PAYLOAD" || h->rfind("STREAMING-", 0) == 0) return std::nullopt;
        const bool is_hex =
            h->size() == 64 && std::all_of(h->begin(), h->end(), [](char c) { return hex_digit(c) >= 0; });
        if (!is_hex) {
            return s3_error(
                400, "InvalidArgument",
                "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-*, or a valid sha256 value.",
                {{"ArgumentName", "x-amz-content-sha256"}, {"ArgumentValue", *h}});
        }
        const std::string actual = digest_hex(EVP_sha256(), req.body);
        if (lower(*h) != actual) {
            return s3_error(400, "XAmzContentSHA256Mismatch",
                            "The provided 'x-amz-content-sha256' header does not match what was computed.",
                            {{"ClientComputedContentSHA256", *h}, {"S3ComputedContentSHA256", actual}});
        }
        return std::nullopt;
    }

    http_response no_such_bucket(const std::string& bucket) const {
        return s3_error(404, "NoSuchBucket", "The specified bucket does not exist", {{"BucketName", bucket}});
    }

    // --- S3 Express sessions -----------------------------------------------------------
    struct express_session {
        std::string secret;
        std::chrono::system_clock::time_point expires;
    };
    std::map<std::string, express_session> sessions; // by access key id; guarded by mu
    std::map<std::string, std::string> session_by_token;

    static std::string random_token(std::size_t bytes) {
        std::string raw(bytes, '\0');
        RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(raw.size()));
        static const char* digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        std::string out;
        for (unsigned char c : raw) out += digits[c % 36];
        return out;
    }

    // Recomputes the request's SigV4 signature for `service` with (key_id, secret); an error
    // answer when it is not what the request carries.
    std::optional<http_response> verify_sigv4(const http_request& req, const parsed_target& t,
                                              const std::string& key_id, const std::string& secret,
                                              std::string_view service) const {
        const std::string* auth = req.header("authorization");
        const std::string prefix = "AWS4-HMAC-SHA256 ";
        if (!auth || auth->rfind(prefix, 0) != 0) {
            return s3_error(403, "AccessDenied", "The request is not signed with AWS4-HMAC-SHA256");
        }
        std::map<std::string, std::string> parts;
        std::string_view rest = std::string_view(*auth).substr(prefix.size());
        while (!rest.empty()) {
            auto comma = rest.find(',');
            std::string_view kv = rest.substr(0, comma);
            rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
            while (!kv.empty() && kv.front() == ' ') kv.remove_prefix(1);
            auto eq = kv.find('=');
            if (eq != std::string_view::npos) parts[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
        }
        // Credential = KEY/DATE/REGION/SERVICE/aws4_request
        std::vector<std::string> scope;
        {
            std::string_view c = parts["Credential"];
            while (true) {
                auto slash = c.find('/');
                scope.emplace_back(c.substr(0, slash));
                if (slash == std::string_view::npos) break;
                c = c.substr(slash + 1);
            }
        }
        if (scope.size() != 5 || scope[4] != "aws4_request") {
            return s3_error(400, "AuthorizationHeaderMalformed", "The authorization header is malformed");
        }
        if (scope[0] != key_id) {
            return s3_error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
        }
        if (scope[3] != service) {
            return s3_error(400, "AuthorizationHeaderMalformed",
                            fmt::format("The authorization header is malformed; the service '{}' is wrong; expecting '{}'",
                                        scope[3], service));
        }
        const std::string* date = req.header("x-amz-date");
        std::tm tm{};
        if (!date || !strptime(date->c_str(), "%Y%m%dT%H%M%SZ", &tm)) {
            return s3_error(403, "AccessDenied", "x-amz-date is missing or malformed");
        }
        const auto when = std::chrono::system_clock::from_time_t(timegm(&tm));
        s3::signing_request sr;
        sr.method = req.method;
        sr.encoded_path = req.target.substr(0, req.target.find('?'));
        for (const auto& [k, v] : t.query) sr.query.emplace_back(k, v);
        std::string_view names = parts["SignedHeaders"];
        while (!names.empty()) {
            auto semi = names.find(';');
            std::string name(names.substr(0, semi));
            names = semi == std::string_view::npos ? std::string_view() : names.substr(semi + 1);
            const std::string* v = req.header(name);
            if (!v) return s3_error(403, "SignatureDoesNotMatch", "a signed header is missing: " + name);
            sr.headers.push_back({name, *v});
        }
        const std::string* hash = req.header("x-amz-content-sha256");
        sr.payload_hash = hash ? *hash : std::string("UNSIGNED-PAYLOAD");
        s3::credentials creds{key_id, secret, ""};
        s3::signing_options so;
        so.region = scope[2];
        so.service = std::string(service);
        auto expected = s3::sign(sr, creds, so, when);
        if (!expected || expected->signature != parts["Signature"]) {
            return s3_error(403, "SignatureDoesNotMatch",
                            "The request signature we calculated does not match the signature you provided.");
        }
        return std::nullopt;
    }

    std::optional<http_response> check_express(const http_request& req, const parsed_target& t) {
        const auto& ex = *options.express;
        if (t.key.empty() && req.method == "GET" && t.query.count("session")) {
            // CreateSession: signed with the long-term keys.
            if (auto bad = verify_sigv4(req, t, ex.access_key_id, ex.secret_access_key, "s3express")) return bad;
            std::lock_guard lock(mu);
            if (!buckets.count(t.bucket)) return no_such_bucket(t.bucket);
            const std::string id = "ASIA" + random_token(16);
            const std::string secret = random_token(40);
            const std::string token = random_token(64);
            const auto expires = std::chrono::system_clock::now() + ex.session_ttl;
            sessions[id] = express_session{secret, expires};
            session_by_token[token] = id;
            ++counters.sessions_created;
            const std::string iso = iso8601_utc(expires);
            http_response r;
            r.headers.emplace_back("Content-Type", "application/xml");
            r.body = fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateSessionResult "
                                 "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Credentials><SessionToken>{}"
                                 "</SessionToken><SecretAccessKey>{}</SecretAccessKey><AccessKeyId>{}</AccessKeyId>"
                                 "<Expiration>{}</Expiration></Credentials></CreateSessionResult>",
                                 token, secret, id, iso);
            return r;
        }
        const std::string* token = req.header("x-amz-s3session-token");
        if (!token) return s3_error(403, "AccessDenied", "x-amz-s3session-token is required for a directory bucket");
        std::string id;
        express_session session;
        {
            std::lock_guard lock(mu);
            auto it = session_by_token.find(*token);
            if (it == session_by_token.end()) return s3_error(403, "AccessDenied", "The session token is not valid");
            id = it->second;
            session = sessions[id];
        }
        if (std::chrono::system_clock::now() >= session.expires) {
            return s3_error(400, "ExpiredToken", "The provided token has expired.");
        }
        const std::string* signed_names = req.header("authorization");
        if (!signed_names || signed_names->find("x-amz-s3session-token") == std::string::npos) {
            return s3_error(403, "SignatureDoesNotMatch", "x-amz-s3session-token must be signed");
        }
        return verify_sigv4(req, t, id, session.secret, "s3express");
    }

    http_response handle(const http_request& req, const parsed_target& t) {
        if (auto bad = check_payload_hash(req)) return *bad;
        if (options.express && !t.bucket.empty()) {
            if (auto refused = check_express(req, t)) {
                if (refused->status != 200) {
                    std::lock_guard lock(mu);
                    ++counters.auth_failures;
                }
                return *refused;
            }
        }
        if (t.bucket.empty()) {
            if (req.method == "GET") return list_buckets();
            return s3_error(405, "MethodNotAllowed",
                            "The specified method is not allowed against this resource.");
        }
        if (t.key.empty() && req.method == "POST" && t.query.count("delete")) return delete_objects(req, t);
        if (t.key.empty()) return handle_bucket(req, t);
        return handle_object(req, t);
    }

    // DeleteObjects. AWS refuses the body unless a checksum covers it: a body damaged in
    // transit could otherwise delete keys nobody asked for.
    http_response delete_objects(const http_request& req, const parsed_target& t) {
        const std::string* md5 = req.header("content-md5");
        const std::string* crc = req.header("x-amz-checksum-crc32c");
        if (!md5 && !crc) {
            return s3_error(400, "MissingContentMD5",
                            "Missing required header for this request: Content-MD5 or x-amz-checksum-*");
        }
        if (md5) {
            std::array<unsigned char, EVP_MAX_MD_SIZE> d{};
            unsigned int len = 0;
            EVP_Digest(req.body.data(), req.body.size(), d.data(), &len, EVP_md5(), nullptr);
            const std::string expected = base64(d.data(), len);
            if (trim(*md5).size() != expected.size()) {
                return s3_error(400, "InvalidDigest", "The Content-MD5 you specified was invalid.",
                                {{"Content-MD5", *md5}});
            }
            if (trim(*md5) != expected) {
                return s3_error(400, "BadDigest", "The Content-MD5 you specified did not match what we received.",
                                {{"ExpectedDigest", *md5}, {"CalculatedDigest", expected}});
            }
        }
        if (crc && crc32c_base64(req.body) != trim(*crc)) {
            return s3_error(400, "BadDigest", "The CRC32C you specified did not match the calculated checksum.");
        }
        auto malformed = [] {
            return s3_error(400, "MalformedXML",
                            "The XML you provided was not well-formed or did not validate against our published schema");
        };
        pugi::xml_document doc;
        if (!doc.load_buffer(req.body.data(), req.body.size(), pugi::parse_default | pugi::parse_ws_pcdata_single,
                             pugi::encoding_utf8)) {
            return malformed();
        }
        const pugi::xml_node root = doc.document_element();
        if (std::string_view(root.name()) != "Delete") return malformed();
        const bool quiet = lower(trim(root.child("Quiet").child_value())) == "true";
        std::vector<std::string> keys;
        for (const pugi::xml_node object : root.children("Object")) {
            const pugi::xml_node key = object.child("Key");
            if (!key) return malformed();
            keys.emplace_back(key.child_value());
        }
        if (keys.empty() || keys.size() > 1000) return malformed();

        std::lock_guard lock(mu);
        const auto b = buckets.find(t.bucket);
        if (b == buckets.end()) return no_such_bucket(t.bucket);
        counters.delete_objects_keys.push_back(keys.size());
        http_response r;
        r.headers.emplace_back("Content-Type", "application/xml");
        r.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<DeleteResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
        for (const auto& key : keys) {
            if (auto refused = take_key_fault(key)) {
                ++counters.faults_injected;
                r.body += fmt::format("<Error><Key>{}</Key><Code>{}</Code><Message>{}</Message></Error>",
                                      xml_escape(key), refused->first, xml_escape(refused->second));
                continue;
            }
            b->second.erase(key); // a missing key counts as deleted
            if (!quiet) r.body += fmt::format("<Deleted><Key>{}</Key></Deleted>", xml_escape(key));
        }
        r.body += "</DeleteResult>";
        return r;
    }

    // The per-key fault of a DeleteObjects entry (see fault_rule): S3 code and message.
    // Caller holds mu.
    std::optional<std::pair<std::string, std::string>> take_key_fault(const std::string& key) {
        for (auto& r : rules) {
            if (r.remaining == 0 || r.rule.method != "DELETE") continue;
            std::pair<std::string, std::string> answer;
            switch (r.rule.action) {
            case fault_action::status_503_slowdown: answer = {"SlowDown", "Please reduce your request rate."}; break;
            case fault_action::status_500:
            case fault_action::status_500_empty_body:
                answer = {"InternalError", "We encountered an internal error. Please try again."};
                break;
            case fault_action::access_denied: answer = {"AccessDenied", "Access Denied"}; break;
            case fault_action::reset:
            case fault_action::hang:
            case fault_action::delay: continue;
            }
            if (!std::regex_search(key, r.re)) continue;
            if (r.rule.every > 1 && ++r.matched % static_cast<std::uint64_t>(r.rule.every) != 0) continue;
            if (r.remaining > 0) --r.remaining;
            return answer;
        }
        return std::nullopt;
    }

    http_response list_buckets() {
        std::lock_guard lock(mu);
        http_response r;
        r.headers.emplace_back("Content-Type", "application/xml");
        r.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListAllMyBucketsResult "
                 "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Owner><ID>fake</ID></Owner><Buckets>";
        for (const auto& [name, objects] : buckets) {
            r.body += fmt::format(
                "<Bucket><Name>{}</Name><CreationDate>2024-01-01T00:00:00.000Z</CreationDate></Bucket>",
                xml_escape(name));
        }
        r.body += "</Buckets></ListAllMyBucketsResult>";
        return r;
    }

    http_response handle_bucket(const http_request& req, const parsed_target& t) {
        std::lock_guard lock(mu);
        const auto it = buckets.find(t.bucket);
        if (req.method == "PUT") {
            buckets.try_emplace(t.bucket);
            http_response r;
            r.headers.emplace_back("Location", "/" + t.bucket);
            return r;
        }
        if (it == buckets.end()) {
            return no_such_bucket(t.bucket);
        }
        if (req.method == "HEAD") return http_response{};
        if (req.method == "DELETE") {
            if (!it->second.empty()) {
                return s3_error(409, "BucketNotEmpty", "The bucket you tried to delete is not empty",
                                {{"BucketName", t.bucket}});
            }
            buckets.erase(it);
            http_response r;
            r.status = 204;
            return r;
        }
        if (req.method == "GET") {
            const auto lt = t.query.find("list-type");
            if (lt == t.query.end() || lt->second != "2") {
                return s3_error(501, "NotImplemented", "fake_s3 implements ListObjectsV2 (list-type=2) only");
            }
            return list_objects_v2(it->second, t);
        }
        return s3_error(501, "NotImplemented", "fake_s3 does not implement this bucket operation");
    }

    static std::string encode_token(char kind, const std::string& marker) {
        return std::string("fk") + kind +
               hex(reinterpret_cast<const unsigned char*>(marker.data()), marker.size());
    }

    static std::optional<std::pair<char, std::string>> decode_token(std::string_view token) {
        if (token.size() < 3 || token.substr(0, 2) != "fk" || (token[2] != 'k' && token[2] != 'p') ||
            (token.size() - 3) % 2 != 0) {
            return std::nullopt;
        }
        std::string marker;
        for (std::size_t i = 3; i < token.size(); i += 2) {
            const int hi = hex_digit(token[i]);
            const int lo = hex_digit(token[i + 1]);
            if (hi < 0 || lo < 0) return std::nullopt;
            marker += static_cast<char>(hi * 16 + lo);
        }
        return std::pair{token[2], std::move(marker)};
    }

    // Caller holds mu.
    static http_response list_objects_v2(const std::map<std::string, stored_object>& objects,
                                         const parsed_target& t) {
        auto param = [&](const char* name) -> std::string {
            const auto it = t.query.find(name);
            return it == t.query.end() ? std::string() : it->second;
        };
        const std::string prefix = param("prefix");
        const std::string delimiter = param("delimiter");
        const std::string start_after = param("start-after");
        const std::string token = param("continuation-token");
        const bool url = param("encoding-type") == "url";
        if (t.query.count("encoding-type") && !url) {
            return s3_error(400, "InvalidArgument", "Invalid Encoding Method specified in Request",
                            {{"ArgumentName", "encoding-type"}});
        }
        std::uint64_t max_keys = 1000;
        if (t.query.count("max-keys")) {
            auto v = parse_u64(param("max-keys"));
            if (!v) {
                return s3_error(400, "InvalidArgument",
                                "Provided max-keys not an integer or within integer range",
                                {{"ArgumentName", "max-keys"}, {"ArgumentValue", param("max-keys")}});
            }
            max_keys = std::min<std::uint64_t>(*v, 1000);
        }

        char marker_kind = 0;
        std::string marker;
        if (t.query.count("continuation-token")) {
            auto decoded = decode_token(token);
            if (!decoded) {
                return s3_error(400, "InvalidArgument", "The continuation token provided is incorrect",
                                {{"ArgumentName", "continuation-token"}});
            }
            marker_kind = decoded->first;
            marker = std::move(decoded->second);
        } else if (!start_after.empty()) {
            marker_kind = 'k';
            marker = start_after;
        }

        std::vector<const std::pair<const std::string, stored_object>*> contents;
        std::vector<std::string> prefixes;
        std::string last_prefix = marker_kind == 'p' ? marker : std::string();
        char last_kind = 0;
        std::string last_marker;
        bool truncated = false;
        std::uint64_t count = 0;

        // Every key >= prefix is past a marker that sorts before the prefix.
        auto it =
            marker_kind != 0 && marker >= prefix ? objects.upper_bound(marker) : objects.lower_bound(prefix);
        for (; max_keys > 0 && it != objects.end(); ++it) {
            const std::string& key = it->first;
            if (key.compare(0, prefix.size(), prefix) != 0) {
                if (key.compare(0, prefix.size(), prefix) > 0) break;
                continue;
            }
            if (!last_prefix.empty() && key.compare(0, last_prefix.size(), last_prefix) == 0) continue;
            std::string common;
            if (!delimiter.empty()) {
                const auto pos = key.find(delimiter, prefix.size());
                if (pos != std::string::npos) common = key.substr(0, pos + delimiter.size());
            }
            if (count == max_keys) {
                truncated = true;
                break;
            }
            ++count;
            if (!common.empty()) {
                prefixes.push_back(common);
                last_prefix = common;
                last_kind = 'p';
                last_marker = common;
            } else {
                contents.push_back(&*it);
                last_kind = 'k';
                last_marker = key;
            }
        }

        auto enc = [&](const std::string& s) { return xml_escape(url ? s3_url_encode(s) : s); };
        http_response r;
        r.headers.emplace_back("Content-Type", "application/xml");
        std::string& b = r.body;
        b = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
        b += fmt::format("<Name>{}</Name><Prefix>{}</Prefix><KeyCount>{}</KeyCount><MaxKeys>{}</MaxKeys>",
                         xml_escape(t.bucket), enc(prefix), count, max_keys);
        if (!delimiter.empty()) b += fmt::format("<Delimiter>{}</Delimiter>", enc(delimiter));
        if (url) b += "<EncodingType>url</EncodingType>";
        b += fmt::format("<IsTruncated>{}</IsTruncated>", truncated ? "true" : "false");
        if (t.query.count("continuation-token"))
            b += fmt::format("<ContinuationToken>{}</ContinuationToken>", xml_escape(token));
        if (truncated)
            b += fmt::format("<NextContinuationToken>{}</NextContinuationToken>",
                             encode_token(last_kind, last_marker));
        if (!start_after.empty()) b += fmt::format("<StartAfter>{}</StartAfter>", enc(start_after));
        for (const auto* entry : contents) {
            b += fmt::format("<Contents><Key>{}</Key><LastModified>{}</LastModified><ETag>{}</ETag>"
                             "<Size>{}</Size><StorageClass>STANDARD</StorageClass></Contents>",
                             enc(entry->first), iso8601(entry->second.last_modified),
                             xml_escape(entry->second.etag), entry->second.body.size());
        }
        for (const auto& p : prefixes)
            b += fmt::format("<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>", enc(p));
        b += "</ListBucketResult>";
        return r;
    }

    static void add_object_headers(http_response& r, const stored_object& o, bool with_checksum) {
        r.headers.emplace_back("ETag", o.etag);
        r.headers.emplace_back("Last-Modified", http_date(o.last_modified));
        r.headers.emplace_back("Content-Type",
                               o.content_type.empty() ? "binary/octet-stream" : o.content_type);
        r.headers.emplace_back("Accept-Ranges", "bytes");
        if (with_checksum && !o.checksum_crc32c.empty())
            r.headers.emplace_back("x-amz-checksum-crc32c", o.checksum_crc32c);
    }

    http_response handle_object(const http_request& req, const parsed_target& t) {
        const bool head = req.method == "HEAD";
        if (t.query.count("uploadId") || t.query.count("uploads") || req.header("x-amz-copy-source")) {
            return s3_error(501, "NotImplemented", "fake_s3 does not implement multipart uploads or copies");
        }
        std::lock_guard lock(mu);
        const auto b = buckets.find(t.bucket);
        if (b == buckets.end()) return no_such_bucket(t.bucket);
        auto& objects = b->second;
        const auto it = objects.find(t.key);
        auto no_such_key = [&] {
            return s3_error(404, "NoSuchKey", "The specified key does not exist.", {{"Key", t.key}});
        };
        auto precondition_failed = [&](const char* condition) {
            return s3_error(412, "PreconditionFailed",
                            "At least one of the pre-conditions you specified did not hold",
                            {{"Condition", condition}});
        };

        if (req.method == "PUT") {
            if (const std::string* inm = req.header("if-none-match");
                inm && trim(*inm) == "*" && it != objects.end()) {
                return precondition_failed("If-None-Match");
            }
            if (const std::string* im = req.header("if-match")) {
                if (it == objects.end()) return no_such_key();
                if (trim(*im) != it->second.etag && trim(*im) != "*") return precondition_failed("If-Match");
            }
            std::string checksum;
            if (const std::string* c = req.header("x-amz-checksum-crc32c")) {
                checksum = *c;
                if (crc32c_base64(req.body) != checksum) {
                    return s3_error(400, "BadDigest",
                                    "The CRC32C you specified did not match the calculated checksum.");
                }
            }
            const std::string* ct = req.header("content-type");
            stored_object o = make_object(req.body, checksum, ct ? *ct : std::string());
            http_response r;
            r.headers.emplace_back("ETag", o.etag);
            if (!checksum.empty()) r.headers.emplace_back("x-amz-checksum-crc32c", checksum);
            objects.insert_or_assign(t.key, std::move(o));
            return r;
        }
        if (req.method == "DELETE") {
            if (it != objects.end()) objects.erase(it);
            http_response r;
            r.status = 204;
            return r;
        }
        if (req.method != "GET" && req.method != "HEAD") {
            return s3_error(405, "MethodNotAllowed",
                            "The specified method is not allowed against this resource.");
        }
        if (it == objects.end()) return no_such_key();
        const stored_object& o = it->second;
        if (const std::string* im = req.header("if-match"); im && trim(*im) != o.etag && trim(*im) != "*") {
            return precondition_failed("If-Match");
        }
        if (const std::string* inm = req.header("if-none-match");
            inm && (trim(*inm) == o.etag || trim(*inm) == "*")) {
            http_response r;
            r.status = 304;
            r.headers.emplace_back("ETag", o.etag);
            return r;
        }
        const std::string* mode = req.header("x-amz-checksum-mode");
        const bool with_checksum = mode && lower(*mode) == "enabled";
        const std::size_t size = o.body.size();

        http_response r;
        std::size_t first = 0;
        std::size_t last = size == 0 ? 0 : size - 1;
        bool partial = false;
        if (const std::string* range = req.header("range")) {
            switch (parse_range(*range, size, first, last)) {
            case range_kind::ignore: break;
            case range_kind::satisfiable: partial = true; break;
            case range_kind::unsatisfiable: {
                http_response bad =
                    s3_error(416, "InvalidRange", "The requested range is not satisfiable",
                             {{"RangeRequested", *range}, {"ActualObjectSize", std::to_string(size)}});
                bad.headers.emplace_back("Content-Range", fmt::format("bytes */{}", size));
                if (head) bad.body.clear();
                return bad;
            }
            }
        }
        add_object_headers(r, o, with_checksum);
        if (partial) {
            r.status = 206;
            r.headers.emplace_back("Content-Range", fmt::format("bytes {}-{}/{}", first, last, size));
            r.body = o.body.substr(first, last - first + 1);
        } else {
            r.body = o.body;
        }
        if (head) {
            r.head_content_length = r.body.size();
            r.body.clear();
        }
        return r;
    }

    enum class range_kind { ignore, satisfiable, unsatisfiable };

    // RFC 9110 14.1.2: a syntactically invalid range is ignored; one that selects nothing is
    // 416. S3 supports a single range only and ignores lists.
    static range_kind parse_range(std::string_view value, std::size_t size, std::size_t& first,
                                  std::size_t& last) {
        value = trim(value);
        if (value.substr(0, 6) != "bytes=") return range_kind::ignore;
        value.remove_prefix(6);
        if (value.find(',') != std::string_view::npos) return range_kind::ignore;
        const auto dash = value.find('-');
        if (dash == std::string_view::npos) return range_kind::ignore;
        const std::string_view a = trim(value.substr(0, dash));
        const std::string_view b = trim(value.substr(dash + 1));
        if (a.empty()) {
            const auto n = parse_u64(b);
            if (!n) return range_kind::ignore;
            if (*n == 0 || size == 0) return range_kind::unsatisfiable;
            first = *n >= size ? 0 : size - static_cast<std::size_t>(*n);
            last = size - 1;
            return range_kind::satisfiable;
        }
        const auto from = parse_u64(a);
        if (!from) return range_kind::ignore;
        std::optional<std::uint64_t> to;
        if (!b.empty()) {
            to = parse_u64(b);
            if (!to || *to < *from) return range_kind::ignore;
        }
        if (*from >= size) return range_kind::unsatisfiable;
        first = static_cast<std::size_t>(*from);
        last = to ? static_cast<std::size_t>(std::min<std::uint64_t>(*to, size - 1)) : size - 1;
        return range_kind::satisfiable;
    }

    // --- faults, stats, connections ------------------------------------------------------

    std::optional<fault_rule> take_fault(const http_request& req, const std::string& key) {
        const std::string line = req.method + " " + req.target;
        for (auto& r : rules) {
            if (r.remaining == 0) continue;
            if (!r.rule.method.empty() && r.rule.method != "*" && r.rule.method != req.method) continue;
            if (!std::regex_search(key, r.re) && !std::regex_search(line, r.re)) continue;
            if (r.rule.every > 1 && ++r.matched % static_cast<std::uint64_t>(r.rule.every) != 0) continue;
            if (r.remaining > 0) --r.remaining;
            return r.rule;
        }
        return std::nullopt;
    }

    void record(request_record rec) {
        std::lock_guard lock(mu);
        ++counters.by_status[rec.status];
        log.push_back(std::move(rec));
    }

    std::string new_request_id() {
        std::lock_guard lock(mu);
        return fmt::format("FAKE{:012X}", next_request_id++);
    }

    // Closes the connection, with an RST when `reset` is set; stop() no longer sees the fd.
    void close_connection(connection& c, bool reset) {
        int fd;
        {
            std::lock_guard lock(mu);
            fd = c.fd;
            c.fd = -1;
        }
        if (fd < 0) return;
        if (reset) {
            const linger l{1, 0};
            ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        }
        ::close(fd);
    }

    // Holds a request unanswered: reads and drops whatever arrives until the client closes
    // or the server stops.
    void hang(int fd) const {
        std::array<char, 4096> sink{};
        while (wait_readable(fd, -1) == 1) {
            const ssize_t n = ::recv(fd, sink.data(), sink.size(), 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return;
        }
    }

    // Closing with unread input makes the kernel send an RST, which can destroy the error
    // response before the client reads it; so stop sending, then swallow input for a while.
    void drain_before_close(int fd) const {
        ::shutdown(fd, SHUT_WR);
        std::array<char, 4096> sink{};
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
        while (std::chrono::steady_clock::now() < deadline && wait_readable(fd, 100) == 1) {
            const ssize_t n = ::recv(fd, sink.data(), sink.size(), 0);
            if (n <= 0) return;
        }
    }

    http_response fault_response(fault_action action) {
        switch (action) {
        case fault_action::status_503_slowdown:
            return s3_error(503, "SlowDown", "Please reduce your request rate.");
        case fault_action::status_500:
            return s3_error(500, "InternalError", "We encountered an internal error. Please try again.");
        case fault_action::access_denied: return s3_error(403, "AccessDenied", "Access Denied");
        case fault_action::status_500_empty_body: {
            http_response r;
            r.status = 500;
            return r;
        }
        default: return {};
        }
    }

    void serve(connection& c) {
        reader in{*this, c.fd, {}};
        while (!stopping.load()) {
            http_request req;
            const read_status st = read_request(in, req);
            if (st == read_status::closed || st == read_status::stopped) break;
            if (st == read_status::bad || st == read_status::too_large) {
                const http_response r =
                    st == read_status::bad
                        ? s3_error(400, "BadRequest", "fake_s3 could not parse the request")
                        : s3_error(413, "EntityTooLarge",
                                   "Your proposed upload exceeds the maximum allowed size");
                send_all(c.fd, serialize(r, false, true, new_request_id()));
                drain_before_close(c.fd);
                break;
            }

            const auto target = parse_target(req.target);
            request_record rec;
            rec.method = req.method;
            rec.target = req.target;
            rec.headers = req.headers;
            rec.body_size = req.body.size();
            if (target) {
                rec.bucket = target->bucket;
                rec.key = target->key;
            }
            std::optional<fault_rule> fault;
            {
                std::lock_guard lock(mu);
                ++counters.requests;
                ++counters.by_method[req.method];
                ++counters.by_key[rec.key];
                fault = take_fault(req, rec.key);
                if (fault) ++counters.faults_injected;
            }
            changed.notify_all();
            rec.faulted = fault.has_value();
            const bool head = req.method == "HEAD";
            const std::string request_id = new_request_id();

            // Applies the fault's connection-level effect; false when the connection is gone.
            auto disrupt = [&](fault_action action) {
                if (action == fault_action::reset) {
                    record(rec);
                    close_connection(c, true);
                    return false;
                }
                if (action == fault_action::hang) {
                    record(rec);
                    hang(c.fd);
                    return false;
                }
                if (action == fault_action::delay) return sleep_for(fault->delay);
                return true;
            };

            http_response resp;
            bool replaced = false;
            if (fault && fault->when == fault_when::before) {
                if (!disrupt(fault->action)) break;
                if (fault->action != fault_action::delay) {
                    resp = fault_response(fault->action);
                    replaced = true;
                }
            }
            if (!replaced) {
                resp = target ? handle(req, *target)
                              : s3_error(400, "InvalidURI", "Couldn't parse the specified URI.");
                if (fault && fault->when == fault_when::after) {
                    if (!disrupt(fault->action)) break;
                    if (fault->action != fault_action::delay) resp = fault_response(fault->action);
                }
            }
            if (head && resp.status >= 300) resp.body.clear(); // S3 sends no error body on HEAD

            rec.status = resp.status;
            record(std::move(rec));
            const bool closing = !req.keep_alive || stopping.load();
            if (!send_all(c.fd, serialize(resp, head, closing, request_id)) || closing) break;
        }
        close_connection(c, false);
        c.done.store(true);
    }

    void accept_loop() {
        while (wait_readable(listen_fd, -1) == 1) {
            const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE) sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

            std::lock_guard lock(mu);
            if (stopping.load()) {
                ::close(fd);
                break;
            }
            // Join connections that ended, so a long test does not collect threads.
            for (auto it = connections.begin(); it != connections.end();) {
                if ((*it)->done.load()) {
                    (*it)->thread.join();
                    it = connections.erase(it);
                } else {
                    ++it;
                }
            }
            ++counters.connections_accepted;
            auto conn = std::make_unique<connection>();
            conn->fd = fd;
            connection* raw = conn.get();
            conn->thread = std::thread([this, raw] { serve(*raw); });
            connections.push_back(std::move(conn));
        }
    }
};

// --- public interface ----------------------------------------------------------------------

fake_s3::fake_s3(fake_s3_options options) : _impl(std::make_unique<impl>()) {
    impl& s = *_impl;
    s.options = std::move(options);
    for (const auto& b : s.options.buckets) s.buckets.try_emplace(b);

    auto fail = [&s](const char* what) {
        const int err = errno;
        for (int fd : {s.listen_fd, s.wake[0], s.wake[1]}) {
            if (fd >= 0) ::close(fd);
        }
        throw std::system_error(err, std::generic_category(), what);
    };
    if (::pipe2(s.wake.data(), O_CLOEXEC) != 0) fail("fake_s3: pipe2");
    s.listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s.listen_fd < 0) fail("fake_s3: socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(s.listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(s.listen_fd, 128) != 0) {
        fail("fake_s3: bind/listen on 127.0.0.1:0");
    }
    socklen_t len = sizeof addr;
    ::getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    s.port = ntohs(addr.sin_port);
    s.acceptor = std::thread([&s] { s.accept_loop(); });
}

fake_s3::~fake_s3() { stop(); }

void fake_s3::stop() {
    impl& s = *_impl;
    std::lock_guard stop_lock(s.stop_mu);
    if (s.stopping.exchange(true)) return;
    const char byte = 1;
    [[maybe_unused]] const auto n = ::write(s.wake[1], &byte, 1);
    {
        std::lock_guard lock(s.mu);
        for (auto& c : s.connections) {
            if (c->fd >= 0) ::shutdown(c->fd, SHUT_RDWR); // unblocks a send() to a client that does not read
        }
    }
    s.acceptor.join();
    // The acceptor is gone, so the list no longer grows; observers may still read it.
    std::list<std::unique_ptr<connection>> connections;
    {
        std::lock_guard lock(s.mu);
        connections.swap(s.connections);
    }
    for (auto& c : connections) c->thread.join();
    ::close(s.listen_fd);
    ::close(s.wake[0]);
    ::close(s.wake[1]);
    s.changed.notify_all();
}

std::uint16_t fake_s3::port() const noexcept { return _impl->port; }

std::string fake_s3::endpoint() const { return fmt::format("http://127.0.0.1:{}", _impl->port); }

int fake_s3::add_rule(fault_rule rule) {
    active_rule r;
    r.re = std::regex(rule.pattern, std::regex::ECMAScript);
    r.remaining = rule.count < 0 ? -1 : rule.count;
    r.rule = std::move(rule);
    std::lock_guard lock(_impl->mu);
    r.id = _impl->next_rule_id++;
    _impl->rules.push_back(std::move(r));
    return _impl->rules.back().id;
}

bool fake_s3::remove_rule(int id) {
    std::lock_guard lock(_impl->mu);
    auto& rules = _impl->rules;
    const auto it =
        std::find_if(rules.begin(), rules.end(), [&](const active_rule& r) { return r.id == id; });
    if (it == rules.end()) return false;
    rules.erase(it);
    return true;
}

void fake_s3::clear_rules() {
    std::lock_guard lock(_impl->mu);
    _impl->rules.clear();
}

int fake_s3::rule_remaining(int id) const {
    std::lock_guard lock(_impl->mu);
    for (const auto& r : _impl->rules) {
        if (r.id == id) return r.remaining;
    }
    return 0;
}

void fake_s3::create_bucket(std::string_view bucket) {
    std::lock_guard lock(_impl->mu);
    _impl->buckets.try_emplace(std::string(bucket));
}

bool fake_s3::has_bucket(std::string_view bucket) const {
    std::lock_guard lock(_impl->mu);
    return _impl->buckets.find(bucket) != _impl->buckets.end();
}

void fake_s3::put_object(std::string_view bucket, std::string_view key, std::string body) {
    stored_object o = impl::make_object(std::move(body), {}, {});
    std::lock_guard lock(_impl->mu);
    auto& objects = _impl->buckets[std::string(bucket)];
    objects.insert_or_assign(std::string(key), std::move(o));
}

std::optional<stored_object> fake_s3::stat_object(std::string_view bucket, std::string_view key) const {
    std::lock_guard lock(_impl->mu);
    const auto b = _impl->buckets.find(bucket);
    if (b == _impl->buckets.end()) return std::nullopt;
    const auto it = b->second.find(std::string(key));
    if (it == b->second.end()) return std::nullopt;
    return it->second;
}

std::optional<std::string> fake_s3::get_object(std::string_view bucket, std::string_view key) const {
    auto o = stat_object(bucket, key);
    if (!o) return std::nullopt;
    return std::move(o->body);
}

bool fake_s3::has_object(std::string_view bucket, std::string_view key) const {
    std::lock_guard lock(_impl->mu);
    const auto b = _impl->buckets.find(bucket);
    return b != _impl->buckets.end() && b->second.count(std::string(key)) > 0;
}

bool fake_s3::delete_object(std::string_view bucket, std::string_view key) {
    std::lock_guard lock(_impl->mu);
    const auto b = _impl->buckets.find(bucket);
    return b != _impl->buckets.end() && b->second.erase(std::string(key)) > 0;
}

std::vector<std::string> fake_s3::list_keys(std::string_view bucket, std::string_view prefix) const {
    std::vector<std::string> out;
    std::lock_guard lock(_impl->mu);
    const auto b = _impl->buckets.find(bucket);
    if (b == _impl->buckets.end()) return out;
    for (auto it = b->second.lower_bound(std::string(prefix)); it != b->second.end(); ++it) {
        if (it->first.compare(0, prefix.size(), prefix) != 0) break;
        out.push_back(it->first);
    }
    return out;
}

void fake_s3::expire_sessions() {
    std::lock_guard lock(_impl->mu);
    for (auto& [id, s] : _impl->sessions) s.expires = std::chrono::system_clock::now() - std::chrono::seconds(1);
}

fake_s3_stats fake_s3::stats() const {
    std::lock_guard lock(_impl->mu);
    return _impl->counters;
}

std::vector<request_record> fake_s3::request_log() const {
    std::lock_guard lock(_impl->mu);
    return _impl->log;
}

void fake_s3::reset_stats() {
    std::lock_guard lock(_impl->mu);
    _impl->counters = {};
    _impl->log.clear();
}

std::size_t fake_s3::open_connections() const {
    std::lock_guard lock(_impl->mu);
    return static_cast<std::size_t>(std::count_if(_impl->connections.begin(), _impl->connections.end(),
                                                  [](const auto& c) { return c->fd >= 0; }));
}

bool fake_s3::wait_for_requests(std::uint64_t n, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(_impl->mu);
    return _impl->changed.wait_for(lock, timeout, [&] { return _impl->counters.requests >= n; });
}

} // namespace skiff::test
