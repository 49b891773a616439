#include "transfer.hpp"
#include <skiff/core/ascii.hpp>
#include <skiff/core/parse_int.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>

namespace skiff::http {

const std::string* response::header(std::string_view lower_name) const noexcept {
    for (const auto& [name, value] : headers) {
        if (name == lower_name) return &value;
    }
    return nullptr;
}

namespace detail {

namespace {

constexpr std::string_view whitespace = " \t";

std::string_view trim(std::string_view s) noexcept {
    const auto b = s.find_first_not_of(whitespace);
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(whitespace);
    return s.substr(b, e - b + 1);
}

bool has_header(const header_list& h, std::string_view name) {
    return std::any_of(h.begin(), h.end(), [&](const auto& kv) { return iequals(kv.first, name); });
}

// Keeps a large Content-Length from making us allocate everything up front before a single
// byte arrived: beyond this the string grows as data comes.
constexpr std::size_t max_reserve = 64u << 20;

// S3 is served over HTTP/1.1; forcing it keeps one request per connection at a time, which
// is what the connection counting and the cancellation path (closing the connection) assume.
constexpr long http_version = CURL_HTTP_VERSION_1_1;

// Bigger than curl's 16 KiB defaults: S3 objects are megabytes, and fewer, larger callbacks
// cost less per byte. Allocated per easy handle, so only while a transfer runs.
constexpr long receive_buffer = 128 * 1024;
constexpr long upload_buffer = 128 * 1024;

} // namespace

header_parser::verdict header_parser::feed(std::string_view line) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    if (line.empty()) return verdict::end_of_block;

    if (line.size() >= 5 && line.substr(0, 5) == "HTTP/") {
        // "HTTP/1.1 200 OK" or "HTTP/2 200": the status is the second token.
        _headers.clear();
        _content_length.reset();
        _status = 0;
        const auto sp = line.find(' ');
        if (sp != std::string_view::npos) {
            auto code = trim(line.substr(sp + 1)).substr(0, 3);
            int v = 0;
            auto [p, ec] = std::from_chars(code.data(), code.data() + code.size(), v);
            if (ec == std::errc{} && p == code.data() + code.size()) _status = v;
        }
        return verdict::more;
    }

    if (line.front() == ' ' || line.front() == '\t') {
        if (!_headers.empty()) {
            auto more = trim(line);
            auto& value = _headers.back().second;
            if (!more.empty()) {
                if (!value.empty()) value.push_back(' ');
                value.append(more);
            }
        }
        return verdict::more;
    }

    const auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return verdict::more; // not a field line
    const std::string name = ascii_lowercase(trim(line.substr(0, colon)));
    auto value = trim(line.substr(colon + 1));
    if (name == "content-length") {
        if (auto v = parse_u64(value)) _content_length = *v;
    }
    _headers.emplace_back(std::move(name), std::string(value));
    return verdict::more;
}

transfer::transfer(request req, std::size_t max_response_bytes)
    : _req(std::move(req)), _max_body(max_response_bytes) {}

transfer::~transfer() {
    release_easy();
    if (_header_list) curl_slist_free_all(_header_list);
}

void transfer::release_easy() noexcept {
    if (_easy) curl_easy_cleanup(std::exchange(_easy, nullptr));
}

namespace {
// Collects the first setopt failure so setup reads as a flat list of options.
struct option_setter {
    CURL* easy;
    CURLcode rc = CURLE_OK;
    const char* failed = nullptr;

    template <typename V>
    void operator()(CURLoption opt, const char* name, V value) {
        if (rc != CURLE_OK) return;
        rc = curl_easy_setopt(easy, opt, value);
        if (rc != CURLE_OK) failed = name;
    }
};
#define SKIFF_OPT(set, opt, value) set(opt, #opt, value)
} // namespace

std::optional<transport_error> transfer::setup(const client_config& cfg) {
    _easy = curl_easy_init();
    if (!_easy) return transport_error{CURLE_FAILED_INIT, "curl_easy_init failed", false, false};

    option_setter set{_easy};
    const bool has_body = !_req.body.empty();
    const std::string& m = _req.method;
    _head = (m == "HEAD");

    SKIFF_OPT(set, CURLOPT_URL, _req.url.c_str());
    SKIFF_OPT(set, CURLOPT_PRIVATE, static_cast<void*>(this));
    SKIFF_OPT(set, CURLOPT_ERRORBUFFER, _errbuf);
    // No signals: the threaded resolver and a multi-threaded process both need this.
    SKIFF_OPT(set, CURLOPT_NOSIGNAL, 1L);
    // Removing a transfer that is still resolving (cancel, timeout) makes curl 7.88 join its
    // resolver thread, blocking this core for as long as getaddrinfo takes. With QUICK_EXIT
    // the thread is detached instead and frees its own state when the lookup returns.
    SKIFF_OPT(set, CURLOPT_QUICK_EXIT, 1L);
    SKIFF_OPT(set, CURLOPT_PROTOCOLS_STR, "http,https");
    SKIFF_OPT(set, CURLOPT_HTTP_VERSION, http_version);
    // The URL is already encoded and signed as is: curl must not squash "/../" or "/./"
    // (legal in S3 keys), or the path on the wire would differ from the signed one.
    SKIFF_OPT(set, CURLOPT_PATH_AS_IS, 1L);
    SKIFF_OPT(set, CURLOPT_TCP_NODELAY, 1L);
    // Pooled connections may idle for a while; keep-alive probes notice a vanished peer.
    SKIFF_OPT(set, CURLOPT_TCP_KEEPALIVE, 1L);
    SKIFF_OPT(set, CURLOPT_TCP_KEEPIDLE, 60L);
    SKIFF_OPT(set, CURLOPT_TCP_KEEPINTVL, 30L);
    SKIFF_OPT(set, CURLOPT_BUFFERSIZE, receive_buffer);
    SKIFF_OPT(set, CURLOPT_UPLOAD_BUFFERSIZE, upload_buffer);
    // Every request has a deadline; 0 would mean "none" to curl, so clamp to 1 ms. The one
    // exception is a stream asking for none: it waits for events that may take hours.
    const bool endless_stream = _req.body_sink && _req.timeout.count() == 0;
    SKIFF_OPT(set, CURLOPT_TIMEOUT_MS,
              endless_stream ? 0L : static_cast<long>(std::max<std::int64_t>(1, _req.timeout.count())));
    SKIFF_OPT(set, CURLOPT_CONNECTTIMEOUT_MS,
              static_cast<long>(std::max<std::int64_t>(1, _req.connect_timeout.count())));
    // CURLOPT_ACCEPT_ENCODING stays unset: S3 bodies are stored bytes, never decoded.
    if (!cfg.ca_file.empty()) SKIFF_OPT(set, CURLOPT_CAINFO, cfg.ca_file.c_str());
    // An empty CURLOPT_PROXY disables proxies, including those from the environment.
    SKIFF_OPT(set, CURLOPT_PROXY, cfg.proxy.c_str());
    SKIFF_OPT(set, CURLOPT_SSL_VERIFYPEER, cfg.verify_peer ? 1L : 0L);
    SKIFF_OPT(set, CURLOPT_SSL_VERIFYHOST, cfg.verify_peer ? 2L : 0L);

    SKIFF_OPT(set, CURLOPT_HEADERFUNCTION, &transfer::on_header);
    SKIFF_OPT(set, CURLOPT_HEADERDATA, static_cast<void*>(this));
    SKIFF_OPT(set, CURLOPT_WRITEFUNCTION, &transfer::on_write);
    SKIFF_OPT(set, CURLOPT_WRITEDATA, static_cast<void*>(this));

    auto upload_body = [&] {
        SKIFF_OPT(set, CURLOPT_UPLOAD, 1L);
        SKIFF_OPT(set, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(_req.body.size()));
        SKIFF_OPT(set, CURLOPT_READFUNCTION, &transfer::on_read);
        SKIFF_OPT(set, CURLOPT_READDATA, static_cast<void*>(this));
        SKIFF_OPT(set, CURLOPT_SEEKFUNCTION, &transfer::on_seek);
        SKIFF_OPT(set, CURLOPT_SEEKDATA, static_cast<void*>(this));
    };
    if (m == "GET" && !has_body) {
        SKIFF_OPT(set, CURLOPT_HTTPGET, 1L);
    } else if (_head) {
        SKIFF_OPT(set, CURLOPT_NOBODY, 1L);
    } else if (m == "PUT") {
        // UPLOAD sends PUT with Content-Length from INFILESIZE (also 0 for an empty body).
        upload_body();
    } else if (m == "POST") {
        // POSTFIELDS does not copy: the caller keeps the bytes alive until completion.
        static constexpr char empty[] = "";
        SKIFF_OPT(set, CURLOPT_POST, 1L);
        SKIFF_OPT(set, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(_req.body.size()));
        SKIFF_OPT(set, CURLOPT_POSTFIELDS, has_body ? _req.body.data() : empty);
    } else {
        // DELETE and anything else: the method string as given, with a body if there is one.
        if (has_body) upload_body();
        SKIFF_OPT(set, CURLOPT_CUSTOMREQUEST, m.c_str());
    }

    for (const auto& [name, value] : _req.headers) {
        // "Name;" is curl's spelling for a header with an empty value ("Name:" would delete it).
        std::string line = value.empty() ? fmt::format("{};", name) : fmt::format("{}: {}", name, value);
        curl_slist* next = curl_slist_append(_header_list, line.c_str());
        if (!next) return transport_error{CURLE_OUT_OF_MEMORY, "cannot build the request headers", false, false};
        _header_list = next;
    }
    // curl adds "Expect: 100-continue" to large uploads, which costs a round trip (or a 1 s
    // wait on servers that ignore it); an empty "Expect:" suppresses it unless asked for.
    // Likewise curl's default form Content-Type for POST: headers are sent as given.
    std::vector<const char*> suppress{"Expect:"};
    if (m == "POST") suppress.push_back("Content-Type:");
    for (const char* s : suppress) {
        std::string_view name(s, std::strlen(s) - 1);
        if (has_header(_req.headers, name)) continue;
        curl_slist* next = curl_slist_append(_header_list, s);
        if (!next) return transport_error{CURLE_OUT_OF_MEMORY, "cannot build the request headers", false, false};
        _header_list = next;
    }
    SKIFF_OPT(set, CURLOPT_HTTPHEADER, _header_list);

    if (set.rc != CURLE_OK) {
        return transport_error{static_cast<int>(set.rc),
                               fmt::format("cannot set {}: {}", set.failed, curl_easy_strerror(set.rc)), false,
                               false};
    }
    return std::nullopt;
}
#undef SKIFF_OPT

std::size_t transfer::on_header(char* buf, std::size_t size, std::size_t n, void* self_) noexcept {
    auto* self = static_cast<transfer*>(self_);
    const std::size_t len = size * n;
    try {
        if (self->_parser.feed(std::string_view(buf, len)) == header_parser::verdict::end_of_block) {
            const int st = self->_parser.status();
            const auto cl = self->_parser.content_length();
            // A final response announcing more than we accept fails now, before any byte of it
            // is buffered. HEAD, 204 and 304 answers may carry a length but never a body
            // (RFC 9110 6.4.1), so they are not limited.
            const bool bodiless = self->_head || st == 204 || st == 304;
            const bool streamed = self->_req.body_sink && st / 100 == 2;
            if (st >= 200 && cl && !bodiless && !streamed) {
                if (*cl > self->_max_body) {
                    self->_too_large = true;
                    return 0; // curl fails the transfer with CURLE_WRITE_ERROR
                }
                self->_body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*cl, max_reserve)));
            }
        }
    } catch (...) {
        return 0; // out of memory: fail this transfer, not the process
    }
    return len;
}

std::size_t transfer::on_write(char* buf, std::size_t size, std::size_t n, void* self_) noexcept {
    auto* self = static_cast<transfer*>(self_);
    const std::size_t len = size * n;
    if (self->_req.body_sink && self->_parser.status() / 100 == 2) {
        bool accepted = false;
        try {
            accepted = self->_req.body_sink(std::string_view(buf, len));
        } catch (...) {
            // The sink owns its error reporting; to curl this is a refusal like any other.
        }
        if (!accepted) {
            self->_sink_refused = true;
            return 0;
        }
        return len;
    }
    // Bodies without a Content-Length (chunked, or ended by close) are bounded here.
    if (len > self->_max_body - std::min(self->_max_body, self->_body.size())) {
        self->_too_large = true;
        return 0;
    }
    try {
        self->_body.append(buf, len);
    } catch (...) {
        return 0;
    }
    return len;
}

std::size_t transfer::on_read(char* buf, std::size_t size, std::size_t n, void* self_) noexcept {
    auto* self = static_cast<transfer*>(self_);
    const auto body = self->_req.body;
    const std::size_t left = body.size() - std::min(body.size(), self->_body_offset);
    const std::size_t k = std::min(left, size * n);
    if (k > 0) std::memcpy(buf, body.data() + self->_body_offset, k);
    self->_body_offset += k;
    return k;
}

int transfer::on_seek(void* self_, curl_off_t offset, int origin) noexcept {
    auto* self = static_cast<transfer*>(self_);
    if (origin != SEEK_SET || offset < 0 || static_cast<std::uint64_t>(offset) > self->_req.body.size()) {
        return CURL_SEEKFUNC_FAIL;
    }
    self->_body_offset = static_cast<std::size_t>(offset);
    return CURL_SEEKFUNC_OK;
}

result<response, transport_error> transfer::take_result() {
    if (_cancelled) {
        // CURLE_ABORTED_BY_CALLBACK is the code curl itself would give a transfer its
        // application stopped; the flag is what callers test.
        return failure{transport_error{CURLE_ABORTED_BY_CALLBACK, "request cancelled", true, false}};
    }
    if (_start_error) return failure{std::move(*_start_error)};
    if (_too_large) {
        return failure{transport_error{
            CURLE_FILESIZE_EXCEEDED,
            fmt::format("response body exceeds the client's limit of {} bytes (max_response_bytes)", _max_body),
            false, false}};
    }
    if (_sink_refused) {
        return failure{transport_error{CURLE_WRITE_ERROR, "the response body's sink refused the data", false, false}};
    }
    if (_code != CURLE_OK) {
        std::string msg = _errbuf[0] ? std::string(_errbuf) : std::string(curl_easy_strerror(_code));
        while (!msg.empty() && (msg.back() == '\n' || msg.back() == '\r')) msg.pop_back();
        return failure{transport_error{static_cast<int>(_code), std::move(msg), false,
                                       _code == CURLE_OPERATION_TIMEDOUT}};
    }
    response r;
    r.status = _curl_status > 0 ? static_cast<int>(_curl_status) : _parser.status();
    if (r.status <= 0) {
        return failure{transport_error{CURLE_WEIRD_SERVER_REPLY, "the transfer ended without an HTTP status",
                                       false, false}};
    }
    r.headers = std::move(_parser.headers());
    r.body = std::move(_body);
    return r;
}

} // namespace detail
} // namespace skiff::http
