// Tests of the fake S3 server, through plain blocking sockets: the client here is a few
// lines of HTTP/1.1, so a bug in skiff's own HTTP client cannot hide a bug in the fake.
#include <catch2/catch.hpp>

#include "fake_s3.hpp"

#include <skiff/s3/xml.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>

using namespace std::chrono_literals;
using skiff::test::fake_s3;
using skiff::test::fault_action;
using skiff::test::fault_rule;
using skiff::test::fault_when;

namespace {

const std::string bucket = "test-bucket";

std::string sha256_hex(std::string_view data) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr);
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < len; ++i) {
        out += digits[md[i] >> 4];
        out += digits[md[i] & 0xf];
    }
    return out;
}

struct response {
    int status = 0;
    std::map<std::string, std::string> headers; // lower-case names
    std::string body;

    std::string header(const std::string& name) const {
        const auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    }
};

using header_list = std::vector<std::pair<std::string, std::string>>;

// "PUT /b/k HTTP/1.1" with Host, Content-Length and (unless told otherwise) a correct
// x-amz-content-sha256.
std::string make_request(const std::string& method, const std::string& target, const std::string& body = "",
                         const header_list& headers = {}, bool payload_hash = true) {
    std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (payload_hash) r += "x-amz-content-sha256: " + sha256_hex(body) + "\r\n";
    if (!body.empty() || method == "PUT") r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [name, value] : headers) r += name + ": " + value + "\r\n";
    return r + "\r\n" + body;
}

// A blocking HTTP/1.1 client on one connection. Every read gives up after the receive
// timeout, so a broken server fails the test instead of hanging it. It asserts nothing
// itself except in request(), so worker threads may use it.
class raw_client {
public:
    explicit raw_client(std::uint16_t port, std::chrono::milliseconds timeout = 5s) {
        _fd = ::socket(AF_INET, SOCK_STREAM, 0);
        set_timeout(timeout);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) close();
    }
    ~raw_client() { close(); }
    raw_client(const raw_client&) = delete;
    raw_client& operator=(const raw_client&) = delete;

    void set_timeout(std::chrono::milliseconds timeout) {
        timeval tv{};
        tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
        tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
        ::setsockopt(_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }

    void close() {
        if (_fd >= 0) ::close(_fd);
        _fd = -1;
    }

    bool send_raw(std::string_view data) {
        if (_fd < 0) return false;
        while (!data.empty()) {
            const ssize_t n = ::send(_fd, data.data(), data.size(), MSG_NOSIGNAL);
            if (n <= 0) return false;
            data.remove_prefix(static_cast<std::size_t>(n));
        }
        return true;
    }

    // Reads one final response (interim 1xx responses are collected in `interim`).
    // nullopt on EOF, reset or timeout; last_errno then says which (0 = EOF).
    std::optional<response> read_response(bool head = false) {
        while (true) {
            auto r = read_one(head);
            if (!r || r->status >= 200) return r;
            interim.push_back(r->status);
        }
    }

    // Reads one response, interim or final.
    std::optional<response> read_one(bool head = false) {
        std::size_t end;
        while ((end = _buf.find("\r\n\r\n")) == std::string::npos) {
            if (!fill()) return std::nullopt;
        }
        response r;
        const std::string head_text = _buf.substr(0, end);
        _buf.erase(0, end + 4);
        const auto first_eol = head_text.find("\r\n");
        const std::string status_line = head_text.substr(0, first_eol);
        r.status = std::stoi(status_line.substr(9, 3));
        std::size_t pos = first_eol == std::string::npos ? head_text.size() : first_eol + 2;
        while (pos < head_text.size()) {
            auto eol = head_text.find("\r\n", pos);
            if (eol == std::string::npos) eol = head_text.size();
            const std::string line = head_text.substr(pos, eol - pos);
            const auto colon = line.find(':');
            std::string name = line.substr(0, colon);
            for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            std::string value = line.substr(colon + 1);
            while (!value.empty() && value.front() == ' ') value.erase(0, 1);
            r.headers[name] = value;
            pos = eol + 2;
        }
        if (r.status < 200) return r;
        if (head || r.status == 204 || r.status == 304) return r;
        const auto cl = r.headers.find("content-length");
        if (cl == r.headers.end()) {
            while (fill()) {}
            r.body = std::move(_buf);
            _buf.clear();
            return r;
        }
        const std::size_t n = std::stoul(cl->second);
        while (_buf.size() < n) {
            if (!fill()) return std::nullopt;
        }
        r.body = _buf.substr(0, n);
        _buf.erase(0, n);
        return r;
    }

    response request(const std::string& method, const std::string& target, const std::string& body = "",
                     const header_list& headers = {}) {
        REQUIRE(send_raw(make_request(method, target, body, headers)));
        auto r = read_response(method == "HEAD");
        REQUIRE(r);
        return *r;
    }

    // True once the server closed the connection (EOF or reset) before `timeout`.
    bool closed_by_peer() {
        if (_fd < 0) return false;
        std::array<char, 256> tmp{};
        const ssize_t n = ::recv(_fd, tmp.data(), tmp.size(), 0);
        last_errno = n < 0 ? errno : 0;
        return n == 0 || (n < 0 && errno == ECONNRESET);
    }

    int last_errno = 0;
    std::vector<int> interim;

private:
    bool fill() {
        std::array<char, 65536> tmp{};
        const ssize_t n = ::recv(_fd, tmp.data(), tmp.size(), 0);
        if (n <= 0) {
            last_errno = n < 0 ? errno : 0;
            return false;
        }
        _buf.append(tmp.data(), static_cast<std::size_t>(n));
        return true;
    }

    int _fd = -1;
    std::string _buf;
};

std::string obj(const std::string& key) { return "/" + bucket + "/" + key; }

// Waits (briefly) for a condition that another thread makes true.
template <typename F>
bool eventually(F&& f, std::chrono::milliseconds timeout = 3s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (f()) return true;
        std::this_thread::sleep_for(5ms);
    }
    return f();
}

std::vector<std::string> list_all(raw_client& c, const std::string& query_base, int* pages = nullptr,
                                  std::vector<std::string>* prefixes = nullptr) {
    std::vector<std::string> keys;
    std::string token;
    int n = 0;
    while (true) {
        std::string target = "/" + bucket + "?list-type=2" + query_base;
        if (!token.empty()) {
            std::string enc;
            for (char ch : token) {
                const auto u = static_cast<unsigned char>(ch);
                if (std::isalnum(u))
                    enc += ch;
                else
                    enc += fmt::format("%{:02X}", u);
            }
            target += "&continuation-token=" + enc;
        }
        const auto r = c.request("GET", target);
        REQUIRE(r.status == 200);
        auto page = skiff::s3::parse_list_objects_v2(r.body);
        REQUIRE(page);
        ++n;
        for (const auto& o : page->objects) keys.push_back(o.key);
        if (prefixes)
            prefixes->insert(prefixes->end(), page->common_prefixes.begin(), page->common_prefixes.end());
        CHECK(page->key_count == static_cast<int>(page->objects.size() + page->common_prefixes.size()));
        if (!page->is_truncated) break;
        token = page->next_continuation_token;
        REQUIRE(n < 100);
    }
    if (pages) *pages = n;
    return keys;
}

} // namespace

TEST_CASE("fake_s3 listens on a loopback port", "[fake_s3]") {
    fake_s3 s3;
    CHECK(s3.port() != 0);
    CHECK(s3.endpoint() == "http://127.0.0.1:" + std::to_string(s3.port()));
    CHECK(s3.has_bucket(bucket));
    fake_s3 other;
    CHECK(other.port() != s3.port());
}

TEST_CASE("fake_s3 PUT, GET, HEAD, DELETE over one keep-alive connection", "[fake_s3]") {
    fake_s3 s3;
    raw_client c(s3.port());

    const auto put = c.request("PUT", obj("a/b.txt"), "hello", {{"Content-Type", "text/plain"}});
    CHECK(put.status == 200);
    CHECK(put.header("etag") == "\"5d41402abc4b2a76b9719d911017c592\"");
    CHECK_FALSE(put.header("x-amz-request-id").empty());
    CHECK(s3.get_object(bucket, "a/b.txt") == std::optional<std::string>("hello"));

    const auto get = c.request("GET", obj("a/b.txt"));
    CHECK(get.status == 200);
    CHECK(get.body == "hello");
    CHECK(get.header("etag") == put.header("etag"));
    CHECK(get.header("content-type") == "text/plain");
    CHECK_FALSE(get.header("last-modified").empty());

    const auto head = c.request("HEAD", obj("a/b.txt"));
    CHECK(head.status == 200);
    CHECK(head.header("content-length") == "5");
    CHECK(head.header("etag") == put.header("etag"));

    const auto del = c.request("DELETE", obj("a/b.txt"));
    CHECK(del.status == 204);
    CHECK_FALSE(s3.has_object(bucket, "a/b.txt"));
    CHECK(c.request("DELETE", obj("a/b.txt")).status == 204); // S3 deletes are idempotent

    const auto missing = c.request("GET", obj("a/b.txt"));
    CHECK(missing.status == 404);
    const auto err = skiff::s3::parse_error_body(missing.body);
    REQUIRE(err);
    CHECK(err->code == "NoSuchKey");
    CHECK(err->key == "a/b.txt");

    // HEAD errors carry no body, as on S3; the next request on the connection proves it.
    const auto head_missing = c.request("HEAD", obj("a/b.txt"));
    CHECK(head_missing.status == 404);
    CHECK(c.request("GET", obj("nothing")).status == 404);

    const auto stats = s3.stats();
    CHECK(stats.connections_accepted == 1);
    CHECK(stats.requests == 8);
    CHECK(stats.by_method.at("GET") == 3);
    CHECK(stats.by_method.at("HEAD") == 2);
    CHECK(stats.by_method.at("PUT") == 1);
    CHECK(stats.by_method.at("DELETE") == 2);
    CHECK(stats.by_key.at("a/b.txt") == 7);
    CHECK(stats.by_status.at(404) == 3);
    CHECK(stats.faults_injected == 0);

    const auto log = s3.request_log();
    REQUIRE(log.size() == 8);
    CHECK(log[0].method == "PUT");
    CHECK(log[0].target == "/test-bucket/a/b.txt");
    CHECK(log[0].bucket == bucket);
    CHECK(log[0].key == "a/b.txt");
    CHECK(log[0].status == 200);
    CHECK(log[0].body_size == 5);
    CHECK(log[0].headers.at("content-type") == "text/plain");
    CHECK(log[7].status == 404);

    s3.reset_stats();
    CHECK(s3.stats().requests == 0);
    CHECK(s3.request_log().empty());
}

TEST_CASE("fake_s3 decodes percent-encoded keys", "[fake_s3]") {
    fake_s3 s3;
    raw_client c(s3.port());
    CHECK(c.request("PUT", obj("dir/a%20b%2Bc%C3%A9+d"), "x").status == 200);
    CHECK(s3.has_object(bucket, "dir/a b+c\xC3\xA9+d"));
    CHECK(c.request("GET", obj("dir/a%20b%2Bc%C3%A9%2Bd")).body == "x");
    CHECK(c.request("GET", obj("bad%zz")).status == 400);
}

TEST_CASE("fake_s3 conditional writes", "[fake_s3]") {
    fake_s3 s3;
    raw_client c(s3.port());
    CHECK(c.request("PUT", obj("lock"), "one", {{"If-None-Match", "*"}}).status == 200);
    const auto again = c.request("PUT", obj("lock"), "two", {{"If-None-Match", "*"}});
    CHECK(again.status == 412);
    const auto err = skiff::s3::parse_error_body(again.body);
    REQUIRE(err);
    CHECK(err->code == "PreconditionFailed");
    CHECK(s3.get_object(bucket, "lock") == std::optional<std::string>("one"));

    const std::string etag = s3.stat_object(bucket, "lock")->etag;
    CHECK(c.request("PUT", obj("lock"), "three", {{"If-Match", "\"0000\""}}).status == 412);
    CHECK(c.request("PUT", obj("lock"), "three", {{"If-Match", etag}}).status == 200);
    CHECK(s3.get_object(bucket, "lock") == std::optional<std::string>("three"));
    CHECK(c.request("PUT", obj("absent"), "x", {{"If-Match", etag}}).status == 404);
    CHECK(c.request("GET", obj("lock"), "", {{"If-Match", etag}}).status == 412);
    const std::string new_etag = s3.stat_object(bucket, "lock")->etag;
    CHECK(c.request("GET", obj("lock"), "", {{"If-None-Match", new_etag}}).status == 304);
}

TEST_CASE("fake_s3 checks x-amz-content-sha256", "[fake_s3]") {
    fake_s3 s3;
    raw_client c(s3.port());

    REQUIRE(c.send_raw(make_request("PUT", obj("k"), "body", {}, false)));
    auto missing = c.read_response();
    REQUIRE(missing);
    CHECK(missing->status == 400);
    CHECK(skiff::s3::parse_error_body(missing->body)->code == "InvalidRequest");

    REQUIRE(c.send_raw(
        make_request("PUT", obj("k"), "body", {{"x-amz-content-sha256", sha256_hex("other")}}, false)));
    auto mismatch = c.read_response();
    REQUIRE(mismatch);
    CHECK(mismatch->status == 400);
    CHECK(skiff::s3::parse_error_body(mismatch->body)->code == "XAmzContentSHA256Mismatch");
    CHECK_FALSE(s3.has_object(bucket, "k"));

    REQUIRE(c.send_raw(make_request("PUT", obj("k"), "body", {{"x-amz-content-sha256", "nonsense"}}, false)));
    auto invalid = c.read_response();
    REQUIRE(invalid);
    CHECK(invalid->status == 400);
    CHECK(skiff::s3::parse_error_body(invalid->body)->code == "InvalidArgument");

    REQUIRE(c.send_raw(
        make_request("PUT", obj("k"), "body", {{"x-amz-content-sha256", "UNSIGNED-PAYLOAD"}}, false)));
    auto unsigned_payload = c.read_response();
    REQUIRE(unsigned_payload);
    CHECK(unsigned_payload->status == 200);

    // Upper-case hex is the same hash.
    std::string upper = sha256_hex("BODY");
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    REQUIRE(c.send_raw(make_request("PUT", obj("k2"), "BODY", {{"x-amz-content-sha256", upper}}, false)));
    CHECK(c.read_response()->status == 200);

    skiff::test::fake_s3_options lax;
    lax.require_content_sha256 = false;
    fake_s3 relaxed(lax);
    raw_client r(relaxed.port());
    REQUIRE(r.send_raw(make_request("PUT", obj("k"), "body", {}, false)));
    CHECK(r.read_response()->status == 200);
}

TEST_CASE("fake_s3 stores and verifies x-amz-checksum-crc32c", "[fake_s3]") {
    fake_s3 s3;
    raw_client c(s3.port());
    // CRC-32C("123456789") = 0xE3069283, the standard check value.
    const auto put = c.request("PUT", obj("c"), "123456789", {{"x-amz-checksum-crc32c", "4waSgw=="}});
    CHECK(put.status == 200);
    CHECK(put.header("x-amz-checksum-crc32c") == "4waSgw==");
    CHECK(s3.stat_object(bucket, "c")->checksum_crc32c == "4waSgw==");

    CHECK(c.request("GET", obj("c")).header("x-amz-checksum-crc32c").empty());
    CHECK(c.request("GET", obj("c"), "", {{"x-amz-checksum-mode", "ENABLED"}})
              .header("x-amz-checksum-crc32c") == "4waSgw==");

    const auto bad = c.request("PUT", obj("d"), "123456789", {{"x-amz-checksum-crc32c", "AAAAAA=="}});
    CHECK(bad.status == 400);
    CHECK(skiff::s3::parse_error_body(bad.body)->code == "BadDigest");
    CHECK_FALSE(s3.has_object(bucket, "d"));
}

TEST_CASE("fake_s3 ranged GET", "[fake_s3]") {
    fake_s3 s3;
    s3.put_object(bucket, "r", "0123456789");
    s3.put_object(bucket, "empty", "");
    raw_client c(s3.port());
    struct row {
        const char* range;
        int status;
        const char* body;
        const char* content_range;
    };
    const std::vector<row> rows = {
        {"bytes=2-5", 206, "2345", "bytes 2-5/10"},    {"bytes=7-", 206, "789", "bytes 7-9/10"},
        {"bytes=-3", 206, "789", "bytes 7-9/10"},      {"bytes=-20", 206, "0123456789", "bytes 0-9/10"},
        {"bytes=5-100", 206, "56789", "bytes 5-9/10"}, {"bytes=0-0", 206, "0", "bytes 0-0/10"},
        {"bytes=9-9", 206, "9", "bytes 9-9/10"},       {"bytes=10-", 416, nullptr, "bytes */10"},
        {"bytes=10-20", 416, nullptr, "bytes */10"},   {"bytes=-0", 416, nullptr, "bytes */10"},
        {"bytes=5-2", 200, "0123456789", ""},     // invalid: ignored
        {"bytes=0-1,3-4", 200, "0123456789", ""}, // lists: ignored, as S3 does
        {"items=0-1", 200, "0123456789", ""},          {"bytes=x-y", 200, "0123456789", ""},
    };
    for (const auto& r : rows) {
        INFO(r.range);
        const auto resp = c.request("GET", obj("r"), "", {{"Range", r.range}});
        CHECK(resp.status == r.status);
        CHECK(resp.header("content-range") == r.content_range);
        if (r.body) {
            CHECK(resp.body == r.body);
        } else {
            const auto err = skiff::s3::parse_error_body(resp.body);
            REQUIRE(err);
            CHECK(err->code == "InvalidRange");
        }
    }
    const auto head = c.request("HEAD", obj("r"), "", {{"Range", "bytes=2-5"}});
    CHECK(head.status == 206);
    CHECK(head.header("content-length") == "4");
    CHECK(c.request("GET", obj("empty"), "", {{"Range", "bytes=0-"}}).status == 416);
    CHECK(c.request("GET", obj("empty"), "", {{"Range", "bytes=-5"}}).status == 416);
    CHECK(c.request("GET", obj("empty")).status == 200);
}

TEST_CASE("fake_s3 ListObjectsV2 paginates like S3", "[fake_s3]") {
    fake_s3 s3;
    const std::vector<std::string> keys = {"a/1", "a/2", "a/3", "b/1", "b/2/x", "b/2/y", "b/3", "c"};
    for (const auto& k : keys) s3.put_object(bucket, k, "data-" + k);
    raw_client c(s3.port());

    SECTION("all keys in pages of 3") {
        int pages = 0;
        CHECK(list_all(c, "&max-keys=3", &pages) == keys);
        CHECK(pages == 3);
    }
    SECTION("exact multiple of the page size ends with IsTruncated=false") {
        int pages = 0;
        CHECK(list_all(c, "&max-keys=4", &pages) == keys);
        CHECK(pages == 2);
    }
    SECTION("prefix and start-after") {
        CHECK(list_all(c, "&prefix=b/&max-keys=1") ==
              std::vector<std::string>{"b/1", "b/2/x", "b/2/y", "b/3"});
        CHECK(list_all(c, "&start-after=b/2/x") == std::vector<std::string>{"b/2/y", "b/3", "c"});
        CHECK(list_all(c, "&prefix=b/&start-after=a/9") ==
              std::vector<std::string>{"b/1", "b/2/x", "b/2/y", "b/3"});
        CHECK(list_all(c, "&prefix=zzz").empty());
    }
    SECTION("delimiter groups common prefixes, also across page boundaries") {
        for (int max_keys : {1, 2, 1000}) {
            INFO("max-keys " << max_keys);
            std::vector<std::string> prefixes;
            const auto top =
                list_all(c, "&delimiter=/&max-keys=" + std::to_string(max_keys), nullptr, &prefixes);
            CHECK(top == std::vector<std::string>{"c"});
            CHECK(prefixes == std::vector<std::string>{"a/", "b/"});

            prefixes.clear();
            const auto inside = list_all(c, "&prefix=b/&delimiter=/&max-keys=" + std::to_string(max_keys),
                                         nullptr, &prefixes);
            CHECK(inside == std::vector<std::string>{"b/1", "b/3"});
            CHECK(prefixes == std::vector<std::string>{"b/2/"});
        }
    }
    SECTION("sizes and etags") {
        const auto r = c.request("GET", "/" + bucket + "?list-type=2&prefix=c");
        auto page = skiff::s3::parse_list_objects_v2(r.body);
        REQUIRE(page);
        REQUIRE(page->objects.size() == 1);
        CHECK(page->objects[0].size == 6);
        CHECK(page->objects[0].etag == s3.stat_object(bucket, "c")->etag);
        CHECK(page->objects[0].last_modified.size() == 24);
    }
    SECTION("errors") {
        CHECK(c.request("GET", "/" + bucket + "?list-type=2&continuation-token=garbage").status == 400);
        CHECK(c.request("GET", "/" + bucket + "?list-type=2&max-keys=-1").status == 400);
        CHECK(c.request("GET", "/" + bucket + "?list-type=2&encoding-type=base64").status == 400);
        const auto nsb = c.request("GET", "/no-such-bucket?list-type=2");
        CHECK(nsb.status == 404);
        CHECK(skiff::s3::parse_error_body(nsb.body)->bucket_name == "no-such-bucket");
        CHECK(c.request("GET", "/" + bucket).status == 501); // ListObjects v1
        const auto zero = c.request("GET", "/" + bucket + "?list-type=2&max-keys=0");
        auto page = skiff::s3::parse_list_objects_v2(zero.body);
        REQUIRE(page);
        CHECK(page->objects.empty());
        CHECK_FALSE(page->is_truncated);
    }
}

TEST_CASE("fake_s3 ListObjectsV2 with encoding-type=url round-trips odd keys", "[fake_s3]") {
    fake_s3 s3;
    const std::vector<std::string> keys = {"odd/a b",   "odd/a+b",    "odd/caf\xC3\xA9",
                                           "odd/p%20q", "odd/x&y<z>", "odd/\xE6\x97\xA5\xE6\x9C\xAC"};
    for (const auto& k : keys) s3.put_object(bucket, k, "v");
    raw_client c(s3.port());
    auto sorted = keys;
    std::sort(sorted.begin(), sorted.end());
    CHECK(list_all(c, "&encoding-type=url&max-keys=2&prefix=odd/") == sorted);
    // Without encoding the XML escaping alone must carry them.
    CHECK(list_all(c, "&prefix=odd/") == sorted);

    // The raw document encodes as S3 does: '+' for a space, %2B for a plus.
    const auto raw = c.request("GET", "/" + bucket + "?list-type=2&encoding-type=url&prefix=odd%2Fa");
    CHECK_THAT(raw.body, Catch::Contains("<Key>odd/a+b</Key>"));
    CHECK_THAT(raw.body, Catch::Contains("<Key>odd/a%2Bb</Key>"));
}

TEST_CASE("fake_s3 buckets", "[fake_s3]") {
    fake_s3 s3;
    raw_client c(s3.port());
    CHECK(c.request("HEAD", "/" + bucket).status == 200);
    CHECK(c.request("HEAD", "/nope").status == 404);
    const auto nsb = c.request("GET", "/nope/key");
    CHECK(nsb.status == 404);
    CHECK(skiff::s3::parse_error_body(nsb.body)->code == "NoSuchBucket");
    CHECK(c.request("PUT", "/fresh").status == 200);
    CHECK(s3.has_bucket("fresh"));
    CHECK(c.request("PUT", "/fresh/k", "v").status == 200);
    CHECK(c.request("DELETE", "/fresh").status == 409);
    CHECK(c.request("DELETE", "/fresh/k").status == 204);
    CHECK(c.request("DELETE", "/fresh").status == 204);
    CHECK_FALSE(s3.has_bucket("fresh"));
    const auto all = c.request("GET", "/");
    CHECK(all.status == 200);
    CHECK_THAT(all.body, Catch::Contains("<Name>test-bucket</Name>"));
    CHECK(c.request("POST", obj("k")).status == 405);
    CHECK(c.request("PUT", obj("k") + "?partNumber=1&uploadId=x", "v").status == 501);
}

TEST_CASE("fake_s3 direct accessors", "[fake_s3]") {
    fake_s3 s3;
    s3.put_object("seeded", "x/1", "a");
    s3.put_object("seeded", "x/2", "b");
    s3.put_object("seeded", "y", "c");
    CHECK(s3.has_bucket("seeded"));
    CHECK(s3.list_keys("seeded") == std::vector<std::string>{"x/1", "x/2", "y"});
    CHECK(s3.list_keys("seeded", "x/") == std::vector<std::string>{"x/1", "x/2"});
    CHECK(s3.list_keys("none").empty());
    CHECK(s3.delete_object("seeded", "y"));
    CHECK_FALSE(s3.delete_object("seeded", "y"));
    CHECK_FALSE(s3.get_object("seeded", "y"));
    CHECK(s3.stat_object("seeded", "x/1")->etag == "\"0cc175b9c0f1b6a831c399e269772661\"");
}

TEST_CASE("fake_s3 HTTP details: 100-continue, chunked, pipelining, close", "[fake_s3]") {
    fake_s3 s3;

    SECTION("Expect: 100-continue") {
        raw_client c(s3.port());
        const std::string body = "continued";
        std::string req = make_request("PUT", obj("e"), body, {{"Expect", "100-continue"}});
        REQUIRE(c.send_raw(req.substr(0, req.size() - body.size())));
        // The interim answer comes before the body is sent; nothing final may.
        auto interim = c.read_one();
        REQUIRE(interim);
        CHECK(interim->status == 100);
        REQUIRE(c.send_raw(body));
        auto r = c.read_response();
        REQUIRE(r);
        CHECK(r->status == 200);
        CHECK(c.interim.empty());
        CHECK(s3.get_object(bucket, "e") == std::optional<std::string>(body));
    }
    SECTION("chunked request body") {
        raw_client c(s3.port());
        const std::string req = "PUT " + obj("chunked") +
                                " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                "x-amz-content-sha256: " +
                                sha256_hex("hello world") +
                                "\r\n\r\n"
                                "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: t\r\n\r\n";
        REQUIRE(c.send_raw(req));
        auto r = c.read_response();
        REQUIRE(r);
        CHECK(r->status == 200);
        CHECK(s3.get_object(bucket, "chunked") == std::optional<std::string>("hello world"));
        CHECK(c.request("GET", obj("chunked")).body == "hello world"); // connection still in sync
    }
    SECTION("pipelined requests are answered in order") {
        s3.put_object(bucket, "p1", "one");
        s3.put_object(bucket, "p2", "two");
        raw_client c(s3.port());
        REQUIRE(c.send_raw(make_request("GET", obj("p1")) + make_request("HEAD", obj("p2")) +
                           make_request("GET", obj("p2"))));
        CHECK(c.read_response()->body == "one");
        CHECK(c.read_response(true)->header("content-length") == "3");
        CHECK(c.read_response()->body == "two");
        CHECK(s3.stats().connections_accepted == 1);
    }
    SECTION("Connection: close") {
        raw_client c(s3.port());
        REQUIRE(c.send_raw(make_request("GET", obj("none"), "", {{"Connection", "close"}})));
        auto r = c.read_response();
        REQUIRE(r);
        CHECK(r->header("connection") == "close");
        CHECK(c.closed_by_peer());
    }
    SECTION("garbage gets 400 and a close") {
        raw_client c(s3.port());
        REQUIRE(c.send_raw("NONSENSE\r\n\r\n"));
        auto r = c.read_response();
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK(c.closed_by_peer());
    }
    SECTION("oversized body gets 413") {
        skiff::test::fake_s3_options small;
        small.max_body_size = 10;
        fake_s3 tiny(small);
        raw_client c(tiny.port());
        REQUIRE(c.send_raw(make_request("PUT", obj("big"), std::string(11, 'x'))));
        auto r = c.read_response();
        REQUIRE(r);
        CHECK(r->status == 413);
    }
}

TEST_CASE("fake_s3 fault: status codes before and after applying", "[fake_s3][faults]") {
    fake_s3 s3;
    raw_client c(s3.port());

    SECTION("503 SlowDown before: nothing stored, then the rule is used up") {
        fault_rule rule;
        rule.method = "PUT";
        const int id = s3.add_rule(rule);
        CHECK(s3.rule_remaining(id) == 1);
        const auto r = c.request("PUT", obj("k"), "v");
        CHECK(r.status == 503);
        CHECK(skiff::s3::parse_error_body(r.body)->code == "SlowDown");
        CHECK_FALSE(s3.has_object(bucket, "k"));
        CHECK(s3.rule_remaining(id) == 0);
        CHECK(c.request("PUT", obj("k"), "v").status == 200);
        CHECK(s3.has_object(bucket, "k"));
        CHECK(s3.stats().faults_injected == 1);
        const auto log = s3.request_log();
        REQUIRE(log.size() == 2);
        CHECK(log[0].faulted);
        CHECK(log[0].status == 503);
        CHECK_FALSE(log[1].faulted);
    }
    SECTION("500 after: stored, but the client sees InternalError") {
        fault_rule rule;
        rule.action = fault_action::status_500;
        rule.when = fault_when::after;
        s3.add_rule(rule);
        const auto r = c.request("PUT", obj("k"), "v");
        CHECK(r.status == 500);
        CHECK(skiff::s3::parse_error_body(r.body)->code == "InternalError");
        CHECK(s3.has_object(bucket, "k"));
    }
    SECTION("every: a deterministic share of the matching requests") {
        fault_rule rule;
        rule.method = "PUT";
        rule.every = 3;
        rule.count = 2;
        const int id = s3.add_rule(rule);
        std::vector<int> statuses;
        for (int i = 0; i < 9; ++i) statuses.push_back(c.request("PUT", obj("k" + std::to_string(i)), "v").status);
        CHECK(statuses == std::vector<int>{200, 200, 503, 200, 200, 503, 200, 200, 200});
        CHECK(c.request("GET", obj("k0")).status == 200); // not a PUT: not counted
        CHECK(s3.rule_remaining(id) == 0);
        CHECK(s3.stats().faults_injected == 2);
    }
    SECTION("500 with an empty body") {
        fault_rule rule;
        rule.action = fault_action::status_500_empty_body;
        s3.add_rule(rule);
        const auto r = c.request("GET", obj("k"));
        CHECK(r.status == 500);
        CHECK(r.body.empty());
        CHECK(r.header("content-length") == "0");
    }
    SECTION("count, method filter and removal") {
        fault_rule rule;
        rule.method = "GET";
        rule.count = 2;
        s3.add_rule(rule);
        s3.put_object(bucket, "k", "v");
        CHECK(c.request("PUT", obj("k2"), "v").status == 200); // other method: untouched
        CHECK(c.request("GET", obj("k")).status == 503);
        CHECK(c.request("HEAD", obj("k")).status == 200);
        CHECK(c.request("GET", obj("k")).status == 503);
        CHECK(c.request("GET", obj("k")).status == 200);

        fault_rule always;
        always.count = -1;
        const int id = s3.add_rule(always);
        for (int i = 0; i < 5; ++i) CHECK(c.request("GET", obj("k")).status == 503);
        CHECK(s3.rule_remaining(id) == -1);
        CHECK(s3.remove_rule(id));
        CHECK_FALSE(s3.remove_rule(id));
        CHECK(c.request("GET", obj("k")).status == 200);
        s3.add_rule(always);
        s3.clear_rules();
        CHECK(c.request("GET", obj("k")).status == 200);
    }
    SECTION("patterns match the key or the request line") {
        s3.put_object(bucket, "seg/0.log", "l");
        s3.put_object(bucket, "seg/0.index", "i");
        fault_rule by_key;
        by_key.pattern = R"(\.log$)";
        by_key.count = -1;
        const int a = s3.add_rule(by_key);
        CHECK(c.request("GET", obj("seg/0.log")).status == 503);
        CHECK(c.request("GET", obj("seg/0.index")).status == 200);
        s3.remove_rule(a);

        fault_rule by_line;
        by_line.pattern = R"(^PUT /test-bucket/.*\.index$)";
        by_line.count = -1;
        s3.add_rule(by_line);
        CHECK(c.request("GET", obj("seg/0.index")).status == 200);
        CHECK(c.request("PUT", obj("seg/1.index"), "x").status == 503);
        CHECK(c.request("PUT", obj("seg/1.log"), "x").status == 200);

        fault_rule query;
        query.pattern = "list-type=2";
        s3.add_rule(query);
        CHECK(c.request("GET", "/" + bucket + "?list-type=2").status == 503);

        CHECK_THROWS(
            s3.add_rule(fault_rule{"*", "([unclosed", fault_action::reset, fault_when::before, 1, 0ms}));
    }
    SECTION("HEAD faults carry no body") {
        s3.put_object(bucket, "k", "v");
        fault_rule rule;
        rule.method = "HEAD";
        s3.add_rule(rule);
        CHECK(c.request("HEAD", obj("k")).status == 503);
        CHECK(c.request("GET", obj("k")).body == "v"); // connection still in sync
    }
}

TEST_CASE("fake_s3 fault: reset", "[fake_s3][faults]") {
    fake_s3 s3;
    for (fault_when when : {fault_when::before, fault_when::after}) {
        const bool after = when == fault_when::after;
        INFO((after ? "after" : "before"));
        fault_rule rule;
        rule.action = fault_action::reset;
        rule.when = when;
        rule.method = "PUT";
        s3.add_rule(rule);
        raw_client c(s3.port());
        const std::string key = after ? "after" : "before";
        REQUIRE(c.send_raw(make_request("PUT", obj(key), "v")));
        CHECK_FALSE(c.read_response());
        CHECK(c.last_errno == ECONNRESET);
        CHECK(s3.has_object(bucket, key) == after);

        raw_client fresh(s3.port());
        CHECK(fresh.request("PUT", obj(key), "v").status == 200);
    }
    CHECK(s3.stats().connections_accepted == 4);
    const auto log = s3.request_log();
    REQUIRE(log.size() == 4);
    CHECK(log[0].status == 0);
    CHECK(log[0].faulted);
}

TEST_CASE("fake_s3 fault: hang until the client gives up", "[fake_s3][faults]") {
    fake_s3 s3;
    fault_rule rule;
    rule.action = fault_action::hang;
    s3.add_rule(rule);
    {
        raw_client c(s3.port(), 300ms);
        REQUIRE(c.send_raw(make_request("GET", obj("k"))));
        const auto start = std::chrono::steady_clock::now();
        CHECK_FALSE(c.read_response());
        CHECK((c.last_errno == EAGAIN || c.last_errno == EWOULDBLOCK));
        CHECK(std::chrono::steady_clock::now() - start >= 250ms);
        CHECK(s3.open_connections() == 1);
    }
    // The client closed: the server lets go of the connection.
    CHECK(eventually([&] { return s3.open_connections() == 0; }));
    raw_client c(s3.port());
    CHECK(c.request("GET", obj("k")).status == 404);
}

TEST_CASE("fake_s3 fault: hang after applying a PUT", "[fake_s3][faults]") {
    fake_s3 s3;
    fault_rule rule;
    rule.action = fault_action::hang;
    rule.when = fault_when::after;
    s3.add_rule(rule);
    raw_client c(s3.port(), 200ms);
    REQUIRE(c.send_raw(make_request("PUT", obj("k"), "v")));
    CHECK_FALSE(c.read_response());
    CHECK(s3.has_object(bucket, "k"));
}

TEST_CASE("fake_s3 fault: delay", "[fake_s3][faults]") {
    fake_s3 s3;
    s3.put_object(bucket, "k", "v");
    fault_rule rule;
    rule.action = fault_action::delay;
    rule.delay = 200ms;
    s3.add_rule(rule);
    raw_client c(s3.port());
    const auto start = std::chrono::steady_clock::now();
    const auto r = c.request("GET", obj("k"));
    const auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(r.status == 200);
    CHECK(r.body == "v");
    CHECK(elapsed >= 200ms);
    CHECK(elapsed < 3s);

    const auto quick_start = std::chrono::steady_clock::now();
    CHECK(c.request("GET", obj("k")).status == 200);
    CHECK(std::chrono::steady_clock::now() - quick_start < 150ms);
}

TEST_CASE("fake_s3 stops promptly with hung, delayed and blocked connections", "[fake_s3][faults]") {
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<raw_client> hung;
    std::unique_ptr<raw_client> delayed;
    std::unique_ptr<raw_client> blocked;
    std::unique_ptr<raw_client> idle;
    {
        fake_s3 s3;
        s3.put_object(bucket, "big", std::string(std::size_t{8} << 20, 'b'));
        s3.put_object(bucket, "k", "v");
        fault_rule hang_rule;
        hang_rule.action = fault_action::hang;
        hang_rule.pattern = "hang";
        s3.add_rule(hang_rule);
        fault_rule delay_rule;
        delay_rule.action = fault_action::delay;
        delay_rule.delay = 60s;
        delay_rule.pattern = "slow";
        s3.add_rule(delay_rule);

        hung = std::make_unique<raw_client>(s3.port());
        REQUIRE(hung->send_raw(make_request("GET", obj("hang"))));
        delayed = std::make_unique<raw_client>(s3.port());
        REQUIRE(delayed->send_raw(make_request("GET", obj("slow"))));
        // Asks for 8 MiB many times and never reads: the server blocks in send().
        blocked = std::make_unique<raw_client>(s3.port());
        std::string many;
        for (int i = 0; i < 8; ++i) many += make_request("GET", obj("big"));
        REQUIRE(blocked->send_raw(many));
        idle = std::make_unique<raw_client>(s3.port());
        REQUIRE(s3.wait_for_requests(3, 3s));
        CHECK(eventually([&] { return s3.open_connections() == 4; }));
    } // ~fake_s3
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    CHECK(hung->closed_by_peer());
    CHECK(idle->closed_by_peer());
    CHECK_FALSE(delayed->read_response());
}

TEST_CASE("fake_s3 stop is idempotent and refuses new work", "[fake_s3]") {
    fake_s3 s3;
    const auto port = s3.port();
    s3.stop();
    s3.stop();
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0);
    ::close(fd);
}

TEST_CASE("fake_s3 serves concurrent connections", "[fake_s3]") {
    fake_s3 s3;
    constexpr int threads = 8;
    constexpr int per_thread = 25;
    fault_rule flaky;
    flaky.count = 20;
    flaky.pattern = "^PUT";
    s3.add_rule(flaky);

    // Worker threads only record outcomes; the test thread asserts (Catch2 is not thread-safe).
    std::vector<std::vector<int>> statuses(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            raw_client c(s3.port());
            for (int i = 0; i < per_thread; ++i) {
                const std::string key = "t" + std::to_string(t) + "/" + std::to_string(i);
                int status = 0;
                do {
                    if (!c.send_raw(make_request("PUT", obj(key), key))) break;
                    auto r = c.read_response();
                    status = r ? r->status : -1;
                    statuses[static_cast<std::size_t>(t)].push_back(status);
                } while (status == 503);
            }
        });
    }
    for (auto& w : workers) w.join();

    int ok = 0;
    int slow = 0;
    for (const auto& v : statuses) {
        for (int s : v) {
            ok += s == 200;
            slow += s == 503;
        }
    }
    CHECK(ok == threads * per_thread);
    CHECK(slow == 20);
    CHECK(s3.list_keys(bucket).size() == static_cast<std::size_t>(threads * per_thread));
    const auto stats = s3.stats();
    CHECK(stats.requests == static_cast<std::uint64_t>(threads * per_thread + 20));
    CHECK(stats.connections_accepted == threads);
    CHECK(stats.faults_injected == 20);
    CHECK(s3.get_object(bucket, "t3/7") == std::optional<std::string>("t3/7"));
    CHECK(s3.wait_for_requests(stats.requests, 10ms));
    CHECK_FALSE(s3.wait_for_requests(stats.requests + 1, 50ms));
}
