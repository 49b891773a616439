#include <skiff/core/base64.hpp>
#include <skiff/core/endian.hpp>
#include <skiff/core/log.hpp>
#include <skiff/core/parse_int.hpp>
#include <skiff/metrics/registry.hpp>
#include <skiff/runtime/reactor.hpp>
#include <skiff/runtime/timer.hpp>
#include <skiff/s3/classify.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/s3/sigv4.hpp>
#include <skiff/s3/xml.hpp>

#include <skiff/core/crc32c.hpp>
#include <skiff/core/printable.hpp>

#include <array>
#include <ctime>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <pugixml.hpp>


namespace skiff::s3 {

namespace {

bool is_success(int status) { return status >= 200 && status < 300; }

error make_error(errc code, std::string message) {
    error e;
    e.code = code;
    e.message = std::move(message);
    return e;
}

backoff_time_point to_backoff(runtime::time_point t) { return backoff_time_point(t.time_since_epoch()); }

// The `op` label: GETs of a range and of a whole object are separate series (a range GET of
// a segment is a read from an index position; a whole GET fills the cache).
enum class metric_op : std::uint8_t { put, get, get_range, head, del, list, del_many, count_ };
constexpr std::size_t n_ops = static_cast<std::size_t>(metric_op::count_);
constexpr std::size_t n_classes = 16; // indexed by errc value, as client_stats::errors_by_class

const char* op_label(metric_op o) noexcept {
    switch (o) {
    case metric_op::put: return "put";
    case metric_op::get: return "get";
    case metric_op::get_range: return "get_range";
    case metric_op::head: return "head";
    case metric_op::del: return "delete";
    case metric_op::list: return "list";
    case metric_op::del_many: return "delete_many";
    case metric_op::count_: break;
    }
    return "other";
}

// --- DeleteObjects ---------------------------------------------------------------------------

// Key text inside <Key>. Beyond the five markup characters, AWS asks for CR and LF as character
// references: XML end-of-line handling would turn a literal CR (or CRLF) into LF and delete
// another key (S3 user guide, "XML related object key constraints"). The other C0 controls
// are written as references too; XML 1.0 does not allow them even so, and a strict server
// refuses the request (such keys can still be deleted one by one with DELETE). Bytes >= 0x80
// pass through: the document is UTF-8, and S3 keys are UTF-8.
void append_xml_text(std::string& out, std::string_view s) {
    for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (ch) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '\'': out += "&apos;"; break;
        default:
            if (c < 0x20) {
                out += fmt::format("&#{};", c);
            } else {
                out += ch;
            }
        }
    }
}

std::string delete_request_body(const std::vector<std::string>& keys) {
    std::string body = "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>";
    for (const auto& k : keys) {
        body += "<Object><Key>";
        append_xml_text(body, k);
        body += "</Key></Object>";
    }
    body += "</Delete>";
    return body;
}

// Content-MD5: base64 of the body's binary MD5 (RFC 1864). nullopt when this OpenSSL refuses
// MD5 (FIPS mode).
std::optional<std::string> content_md5(std::string_view body) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    if (EVP_Digest(body.data(), body.size(), digest.data(), &len, EVP_md5(), nullptr) != 1 || len != 16) {
        return std::nullopt;
    }
    return base64_encode(std::string_view(reinterpret_cast<const char*>(digest.data()), len));
}

// The class of one <Error> entry of a DeleteResult. The entry carries a code but no status,
// so classify_http (which also reads the status) does not fit; only the codes S3 documents
// for this operation are told apart, anything else will not pass by retrying unchanged.
errc classify_delete_error(std::string_view code) {
    if (code == "InternalError" || code == "SlowDown" || code == "ServiceUnavailable" ||
        code == "OperationAborted" || code == "RequestTimeout") {
        return errc::retryable;
    }
    if (code == "AccessDenied" || code == "AllAccessDisabled" || code == "AccountProblem") {
        return errc::access_denied;
    }
    return errc::invalid_request;
}

// Parses a DeleteObjects answer that came with a 2xx status. Keys are not URL-encoded: the
// request asks for no EncodingType.
result<delete_objects_result, error> parse_delete_result(int status, std::string_view body,
                                                        std::string_view bucket) {
    if (body.size() > max_xml_document_size) {
        return failure{make_error(errc::bad_response, fmt::format("DeleteObjects on '{}': answer of {} bytes is too large",
                                                                  bucket, body.size()))};
    }
    pugi::xml_document doc;
    // As the other parsers (xml.cpp): a whitespace-only key is a key.
    const auto loaded = doc.load_buffer(body.data(), body.size(), pugi::parse_default | pugi::parse_ws_pcdata_single,
                                        pugi::encoding_utf8);
    const pugi::xml_node root = doc.document_element();
    if (!loaded || !root) {
        return failure{make_error(errc::bad_response, fmt::format("DeleteObjects on '{}': the answer is not XML", bucket))};
    }
    const std::string_view root_name = root.name();
    if (root_name == "Error") {
        // S3 may answer 200 and still fail the whole request (as CompleteMultipartUpload does).
        auto e = classify_http(status, "POST", body, bucket);
        e.message = fmt::format("DeleteObjects on '{}': {}", bucket, e.message);
        return failure{std::move(e)};
    }
    if (root_name != "DeleteResult") {
        return failure{make_error(errc::bad_response,
                                  fmt::format("DeleteObjects on '{}': the answer's root is <{}>, expected <DeleteResult>",
                                              bucket, printable(root_name, 64)))};
    }
    delete_objects_result out;
    for (const pugi::xml_node entry : root.children("Error")) {
        const pugi::xml_node key = entry.child("Key");
        if (!key) {
            return failure{make_error(errc::bad_response,
                                      fmt::format("DeleteObjects on '{}': an <Error> entry names no key", bucket))};
        }
        delete_failure f;
        f.key = key.child_value();
        f.s3_code = printable(entry.child("Code").child_value(), 64);
        // A missing key is deleted as far as S3's semantics go; a server that says otherwise
        // per key agrees with delete_object's 404 handling.
        if (f.s3_code == "NoSuchKey") continue;
        f.code = classify_delete_error(f.s3_code);
        f.message = fmt::format("S3 did not delete '{}' ({}): {}", printable(f.key, 1024),
                                f.s3_code.empty() ? std::string("no code") : f.s3_code,
                                printable(entry.child("Message").child_value()));
        out.failed.push_back(std::move(f));
    }
    return out;
}

} // namespace

// Handles into this core's registry, registered when the client is created and when a new
// `kind` label first shows up (at most max_metric_kinds of them). Updating them is a pointer
// test and an add: no allocation, no lock.
struct client::instruments {
    struct slot {
        metrics::counter requests, retries, sent, received;
        metrics::histogram request_lat, operation_lat;
    };
    struct kind_slots {
        std::string name;
        std::array<slot, n_ops> by_op;
    };
    // Reserved up front: slot pointers handed to running operations stay valid. [0] is "other".
    std::vector<kind_slots> kinds;
    std::array<metrics::counter, n_ops * n_classes> errors;
    std::array<metrics::counter, n_ops> throttled;
    metrics::gauge in_flight;

    instruments() {
        auto& reg = metrics::registry::local();
        kinds.reserve(max_metric_kinds);
        add_kind("other");
        for (std::size_t o = 0; o < n_ops; ++o) {
            const auto op = static_cast<metric_op>(o);
            for (std::size_t c = 1; c <= static_cast<std::size_t>(errc::config); ++c) {
                errors[o * n_classes + c] =
                    reg.counter("skiff_s3_errors_total", "S3 operations that failed, by error class (after retries).",
                                {{"op", op_label(op)}, {"class", to_string(static_cast<errc>(c))}});
            }
            throttled[o] = reg.counter("skiff_s3_throttled_total",
                                       "S3 answers that asked to slow down (503, 429, SlowDown).", {{"op", op_label(op)}});
        }
        in_flight = reg.gauge("skiff_s3_requests_in_flight", "S3 HTTP requests sent and not yet answered.");
    }

    void add_kind(std::string_view name) {
        auto& reg = metrics::registry::local();
        auto& k = kinds.emplace_back();
        k.name = std::string(name);
        for (std::size_t o = 0; o < n_ops; ++o) {
            const auto op = static_cast<metric_op>(o);
            // Every kind shares list's series: a listing names a prefix, not an object.
            const std::string kind = op == metric_op::list ? "none" : k.name;
            const metrics::labels l{{"op", op_label(op)}, {"kind", kind}};
            auto& s = k.by_op[o];
            s.requests = reg.counter("skiff_s3_requests_total", "HTTP requests sent to S3 (every attempt).", l);
            s.retries = reg.counter("skiff_s3_retries_total", "S3 requests that failed and were sent again.", l);
            s.sent = reg.counter("skiff_s3_sent_bytes_total", "Request body bytes sent to S3 (every attempt).", l,
                                 metrics::unit::bytes);
            s.received = reg.counter("skiff_s3_received_bytes_total",
                                     "Response body bytes received from S3 (every attempt).", l, metrics::unit::bytes);
            s.request_lat = reg.histogram("skiff_s3_request_duration_seconds",
                                          "Latency of one S3 HTTP request (one attempt).", metrics::unit::seconds, l);
            s.operation_lat = reg.histogram("skiff_s3_operation_duration_seconds",
                                            "Latency of one S3 operation: all its attempts and backoff.",
                                            metrics::unit::seconds, l);
        }
    }

    kind_slots& kind(std::string_view name) {
        if (name.empty()) return kinds[0];
        for (auto& k : kinds) {
            if (k.name == name) return k;
        }
        // A bounded label set: a caller passing ever new labels must not grow the registry.
        if (kinds.size() >= max_metric_kinds) return kinds[0];
        add_kind(name);
        return kinds.back();
    }
};

std::string byte_range::header_value() const {
    switch (k) {
    case kind::bounded: return fmt::format("bytes={}-{}", first, last);
    case kind::from: return fmt::format("bytes={}-", first);
    case kind::suffix: return fmt::format("bytes=-{}", suffix_length);
    }
    return {};
}

// What one operation sends on every attempt. The payload hash is computed once: retries
// re-sign (fresh x-amz-date) but never re-hash the body.
struct client::attempt_spec {
    std::string method;
    std::string_view bucket;
    std::string_view key;
    query_params query;
    std::vector<header> headers;
    std::span<const char> body;
    std::string payload_hash{empty_payload_sha256}; // what every request without a body signs
    bool ranged = false; // GET with a Range header (metrics label only)
    bool create_session = false; // S3 Express CreateSession: signed with the long-term keys
};

std::string describe_credentials(const client_config& cfg) {
    if (cfg.provider) return cfg.provider->describe() + " (temporary, refreshed before expiry)";
    std::string out = describe(cfg.creds);
    if (!cfg.creds_source.empty()) out = cfg.creds_source + ": " + out;
    return out;
}

bool is_directory_bucket(std::string_view bucket) noexcept { return !directory_bucket_zone(bucket).empty(); }

std::string_view directory_bucket_zone(std::string_view bucket) noexcept {
    constexpr std::string_view suffix = "--x-s3";
    if (bucket.size() <= suffix.size() || bucket.substr(bucket.size() - suffix.size()) != suffix) return {};
    const std::string_view head = bucket.substr(0, bucket.size() - suffix.size());
    const auto sep = head.rfind("--");
    if (sep == std::string_view::npos || sep == 0 || sep + 2 >= head.size()) return {};
    return head.substr(sep + 2);
}

const endpoint& client::endpoint_for(std::string_view bucket) {
    // An explicit endpoint (a VPC endpoint, a local server) serves every bucket; without one a
    // directory bucket lives at its zone's endpoint, https://s3express-<zone>.<region>.amazonaws.com.
    if (!_cfg.endpoint.empty() || !is_directory_bucket(bucket)) return _ep;
    const std::string zone(directory_bucket_zone(bucket));
    auto it = _zonal.find(zone);
    if (it == _zonal.end()) {
        auto ep = parse_endpoint(fmt::format("https://s3express-{}.{}.amazonaws.com", zone, _cfg.region));
        if (!ep) return _ep; // a zone id that is not a host label: the request fails at the default endpoint
        it = _zonal.emplace(zone, std::move(*ep)).first;
    }
    return it->second;
}

namespace {
std::optional<std::chrono::system_clock::time_point> parse_iso8601(const std::string& s) {
    std::tm tm{};
    const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end) return std::nullopt;
    return std::chrono::system_clock::from_time_t(timegm(&tm));
}
} // namespace

runtime::task<result<client::express_session, error>> client::create_session(std::string_view bucket,
                                                                            std::stop_token st) {
    attempt_spec spec{.method = "GET", .bucket = bucket, .key = ""};
    spec.query.emplace_back("session", "");
    spec.create_session = true;
    request_options opts;
    auto resp = co_await execute(op_kind::get, spec, opts, st);
    if (!resp) co_return failure{std::move(resp).error()};
    ++_sessions_created;
    auto parsed = parse_create_session(resp->body);
    if (!parsed) co_return failure{std::move(parsed).error()};
    auto expires = parse_iso8601(parsed->expiration);
    if (!expires) {
        co_return failure{make_error(errc::bad_response, "CreateSession: the answer's Expiration is not a date")};
    }
    express_session s;
    s.creds.access_key_id = std::move(parsed->access_key_id);
    s.creds.secret_access_key = std::move(parsed->secret_access_key);
    s.creds.session_token = std::move(parsed->session_token);
    s.expires = *expires;
    s.obtained = _cfg.wall_clock();
    co_return s;
}

runtime::task<result<credentials, error>> client::session_for(std::string_view bucket, std::stop_token st) {
    auto it = _sessions.find(bucket);
    if (it == _sessions.end()) it = _sessions.emplace(std::string(bucket), session_slot{}).first;
    session_slot& slot = it->second; // map nodes are stable, and slots are never erased
    if (!slot.lock) slot.lock = std::make_unique<runtime::semaphore>(1, "s3express-session");
    auto fresh = [this, &slot] {
        if (!slot.session) return false;
        // Renew ahead of expiry: express_refresh_before early, or half-way through a session
        // shorter than twice that, so requests in flight never carry a token that dies under them.
        const auto lifetime = slot.session->expires - slot.session->obtained;
        const auto margin = std::min<std::chrono::system_clock::duration>(_cfg.express_refresh_before, lifetime / 2);
        return _cfg.wall_clock() + margin < slot.session->expires;
    };
    if (fresh()) co_return slot.session->creds;
    // One CreateSession per bucket at a time; whoever waited finds the new session.
    auto held = co_await slot.lock->acquire(1, st);
    if (!held) co_return failure{make_error(errc::cancelled, "S3 Express session: cancelled")};
    if (fresh()) co_return slot.session->creds;
    auto created = co_await create_session(bucket, st);
    if (!created) {
        auto e = std::move(created).error();
        e.message = "S3 Express CreateSession for " + std::string(bucket) + ": " + e.message;
        co_return failure{std::move(e)};
    }
    slot.session = std::move(*created);
    co_return slot.session->creds;
}

result<std::unique_ptr<client>, std::string> client::create(client_config cfg) {
    if (cfg.region.empty()) return failure{std::string("no S3 region configured (set --s3-region or AWS_REGION)")};
    std::string ep_text = cfg.endpoint.empty() ? fmt::format("https://s3.{}.amazonaws.com", cfg.region) : cfg.endpoint;
    auto ep = parse_endpoint(ep_text);
    if (!ep) return failure{ep.error()};
    if (!cfg.provider && !cfg.creds.complete()) {
        return failure{std::string(
            "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or a ~/.aws/credentials profile")};
    }
    if (cfg.retry.max_attempts < 1) cfg.retry.max_attempts = 1;
    if (!cfg.wall_clock) cfg.wall_clock = [] { return std::chrono::system_clock::now(); };
    return std::unique_ptr<client>(new client(std::move(cfg), std::move(*ep)));
}

client::client(client_config cfg, endpoint ep)
    : _cfg(std::move(cfg)),
      _ep(std::move(ep)),
      _http(std::make_unique<http::client>(_cfg.http)),
      _backoff(_cfg.retry, _cfg.backoff_seed ? _cfg.backoff_seed : std::random_device{}()) {
    if (metrics::metrics_enabled()) _m = std::make_unique<instruments>();
}

client::~client() = default;

void client::declare_metric_kind(std::string_view kind) {
    if (_m) (void)_m->kind(kind);
}

runtime::task<result<http::response, error>> client::execute(op_kind kind, const attempt_spec& spec,
                                                             const request_options& opts, std::stop_token st) {
    auto& r = runtime::reactor::local();
    auto& stats = _stats.by_op[static_cast<std::size_t>(kind)];
    ++stats.operations;
    const runtime::time_point deadline = r.now() + _cfg.operation_deadline;
    runtime::deadline_scope scope(deadline, st);
    const endpoint& ep = endpoint_for(spec.bucket);
    // A zonal S3 Express endpoint is always addressed virtual-host style.
    const bool path_style = &ep == &_ep && (_cfg.path_style || !virtual_host_compatible(_ep, spec.bucket));
    const bool express = is_directory_bucket(spec.bucket);
    bool renewed = false; // an expired session is renewed once per operation
    const std::string target = spec.key.empty() ? std::string(spec.bucket) : fmt::format("{}/{}", spec.bucket, spec.key);

    signing_options sopts;
    sopts.region = _cfg.region;
    // S3 Express signs for its own service name, CreateSession included.
    if (express) sopts.service = "s3express";

    // Metrics: the slot for (op, kind) and the whole operation's timer (recorded on every
    // way out, success or failure). Nothing here sees the URL, headers or credentials.
    metric_op mop = metric_op::put;
    switch (kind) {
    case op_kind::put: mop = metric_op::put; break;
    case op_kind::get: mop = spec.ranged ? metric_op::get_range : metric_op::get; break;
    case op_kind::head: mop = metric_op::head; break;
    case op_kind::del: mop = metric_op::del; break;
    case op_kind::del_many: mop = metric_op::del_many; break;
    case op_kind::list:
    case op_kind::count_: mop = metric_op::list; break;
    }
    const std::size_t mo = static_cast<std::size_t>(mop);
    instruments* m = _m.get();
    instruments::slot* ms = m ? &m->kind(opts.kind).by_op[mo] : nullptr;
    // The caller may ask for fewer requests than the configured policy, never for more.
    retry_policy policy = _cfg.retry;
    if (opts.max_attempts > 0 && opts.max_attempts < policy.max_attempts) policy.max_attempts = opts.max_attempts;
    auto tell = [&](int attempt, const error* failure, bool throttled) {
        if (!opts.on_attempt) return;
        attempt_outcome o;
        o.op = kind;
        o.attempt = attempt;
        o.failure = failure;
        o.throttled = throttled;
        opts.on_attempt(o);
    };
    const auto op_start = m ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};

    auto fail = [&](error e) -> error {
        ++stats.failures;
        auto idx = static_cast<std::size_t>(e.code);
        if (idx < _stats.errors_by_class.size()) ++_stats.errors_by_class[idx];
        if (m) {
            if (idx < n_classes) m->errors[mo * n_classes + idx].inc();
            ms->operation_lat.record(std::chrono::steady_clock::now() - op_start);
        }
        return e;
    };
    auto stopped_error = [&](int attempts) -> error {
        error e = (scope.expired() && !st.stop_requested())
                      ? make_error(errc::deadline_exceeded,
                                   fmt::format("{} {}: deadline of {} ms exceeded", spec.method, target,
                                               _cfg.operation_deadline.count()))
                      : make_error(errc::cancelled, fmt::format("{} {}: cancelled", spec.method, target));
        e.attempts = attempts;
        return e;
    };

    for (int attempt = 1;; ++attempt) {
        if (scope.token().stop_requested()) co_return fail(stopped_error(attempt - 1));
        auto url = make_object_url(ep, spec.bucket, spec.key, path_style, spec.query);

        signing_request sreq;
        sreq.method = spec.method;
        sreq.encoded_path = url.encoded_path;
        sreq.query = spec.query;
        sreq.headers = spec.headers;
        sreq.headers.push_back({"host", url.host_header});
        sreq.payload_hash = spec.payload_hash;
        // S3 Express data requests: the bucket's session keys sign, and its token travels
        // (signed) as x-amz-s3session-token instead of x-amz-security-token.
        credentials session;
        const credentials* creds = &_cfg.creds;
        // Temporary credentials: the provider's current snapshot (waits only when none is
        // usable; within the refresh window the refresher fetches while this request signs).
        std::shared_ptr<const credential_snapshot> snap;
        if (_cfg.provider && !(express && !spec.create_session)) {
            auto got = co_await _cfg.provider->get(scope.token());
            if (!got) {
                if (scope.token().stop_requested()) co_return fail(stopped_error(attempt - 1));
                co_return fail(make_error(errc::config, fmt::format("{} {}: {}", spec.method, target, got.error())));
            }
            snap = std::move(got).value();
            creds = &snap->creds;
        }
        if (express && !spec.create_session) {
            auto s = co_await session_for(spec.bucket, scope.token());
            if (!s) {
                if (scope.token().stop_requested()) co_return fail(stopped_error(attempt - 1));
                co_return fail(std::move(s).error());
            }
            sreq.headers.push_back({"x-amz-s3session-token", s->session_token});
            session.access_key_id = std::move(s->access_key_id);
            session.secret_access_key = std::move(s->secret_access_key);
            creds = &session;
        }
        auto signed_req = sign(sreq, *creds, sopts, _cfg.wall_clock());
        if (!signed_req) co_return fail(make_error(errc::config, fmt::format("cannot sign request: {}", signed_req.error())));

        http::request hreq;
        hreq.method = spec.method;
        hreq.url = url.url;
        for (auto& h : sreq.headers) hreq.headers.emplace_back(h.name, h.value);
        for (auto& h : signed_req->headers_to_add) hreq.headers.emplace_back(h.name, h.value);
        hreq.body = spec.body;
        auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - r.now());
        hreq.timeout = std::max(std::chrono::milliseconds(1), std::min(_cfg.attempt_timeout, remaining));

        ++stats.requests;
        stats.bytes_sent += spec.body.size();
        std::chrono::steady_clock::time_point sent_at{};
        if (m) {
            ms->requests.inc();
            ms->sent.inc(spec.body.size());
            m->in_flight.add(1);
            sent_at = std::chrono::steady_clock::now();
        }
        auto resp = co_await _http->send(std::move(hreq), scope.token());
        if (m) {
            const auto answered = std::chrono::steady_clock::now();
            ms->request_lat.record(answered - sent_at);
            m->in_flight.sub(1);
            if (resp) ms->received.inc(resp->body.size());
        }

        error err;
        if (!resp) {
            if (resp.error().cancelled) co_return fail(stopped_error(attempt));
            err = classify_transport(resp.error().curl_code, resp.error().message,
                                     fmt::format("{}://{}", ep.scheme, host_header(ep)));
        } else {
            stats.bytes_received += resp->body.size();
            if (is_success(resp->status)) {
                if (m) ms->operation_lat.record(std::chrono::steady_clock::now() - op_start);
                tell(attempt, nullptr, false);
                co_return std::move(*resp);
            }
            err = classify_http(resp->status, spec.method, resp->body, target);
        }
        const bool throttled = is_throttle(err);
        if (m && throttled) m->throttled[mo].inc();
        err.attempts = attempt;
        tell(attempt, &err, throttled);

        // The bucket's session expired under us (clock skew, a long backoff): the request was
        // refused, not applied, so it is sent again at once with a renewed session, also when
        // the caller asked for one request only.
        if (express && !spec.create_session && !renewed && err.s3_code == "ExpiredToken") {
            renewed = true;
            if (auto it = _sessions.find(spec.bucket); it != _sessions.end()) it->second.session.reset();
            ++stats.retries;
            continue;
        }

        // Temporary credentials that S3 calls expired or invalid (clock skew, a revoked
        // session): new ones are fetched and the request, refused and not applied, is sent
        // once more, as for an expired S3 Express session.
        if (snap && !renewed && (err.s3_code == "ExpiredToken" || err.s3_code == "InvalidToken" ||
                                 err.s3_code == "TokenRefreshRequired")) {
            renewed = true;
            _cfg.provider->refused(snap->generation);
            ++stats.retries;
            continue;
        }

        auto delay = _backoff.delay(attempt - 1);
        if (!should_retry(err, attempt, to_backoff(r.now()), to_backoff(deadline), delay, policy)) {
            if (err.retryable() && attempt > 1) {
                err.message += fmt::format(" (gave up after {} attempts)", attempt);
            }
            co_return fail(std::move(err));
        }
        ++stats.retries;
        if (m) ms->retries.inc();
        log::debug("S3 {} {} attempt {} failed ({}); retrying in {} ms", spec.method, target, attempt, err.message,
                   std::chrono::duration_cast<std::chrono::milliseconds>(delay).count());
        auto slept = co_await runtime::sleep(delay, scope.token());
        if (!slept) co_return fail(stopped_error(attempt));
    }
}

runtime::task<result<put_result, error>> client::put_object(std::string_view bucket, std::string_view key,
                                                            std::span<const char> body, put_options opts,
                                                            std::stop_token st) {
    attempt_spec spec{.method = "PUT", .bucket = bucket, .key = key, .body = body};
    spec.payload_hash = _cfg.unsigned_payload ? std::string(unsigned_payload)
                                              : sha256_hex(std::string_view(body.data(), body.size()));
    spec.headers.push_back({"content-length", std::to_string(body.size())});
    if (!opts.content_type.empty()) spec.headers.push_back({"content-type", opts.content_type});
    if (opts.if_none_match) spec.headers.push_back({"if-none-match", "*"});
    if (opts.crc32c) {
        char crc[4];
        be::write_u32(crc, *opts.crc32c); // the header carries the checksum's big-endian bytes
        spec.headers.push_back({"x-amz-checksum-crc32c", base64_encode(std::string_view(crc, 4))});
    }
    auto resp = co_await execute(op_kind::put, spec, opts, st);
    if (!resp) co_return failure{std::move(resp).error()};
    put_result out;
    if (auto* etag = resp->header("etag")) out.etag = *etag;
    co_return out;
}

runtime::task<result<get_result, error>> client::get_object(std::string_view bucket, std::string_view key,
                                                            std::optional<byte_range> range, request_options opts,
                                                            std::stop_token st) {
    attempt_spec spec{.method = "GET", .bucket = bucket, .key = key};
    if (range) spec.headers.push_back({"range", range->header_value()});
    spec.ranged = range.has_value();
    auto resp = co_await execute(op_kind::get, spec, opts, st);
    if (!resp) co_return failure{std::move(resp).error()};
    get_result out;
    out.object_size = resp->body.size();
    if (auto* etag = resp->header("etag")) out.etag = *etag;
    if (resp->status == 206) {
        // Content-Range: bytes first-last/total
        const std::string* cr = resp->header("content-range");
        auto slash = cr ? cr->rfind('/') : std::string::npos;
        auto total = slash != std::string::npos ? parse_u64(std::string_view(*cr).substr(slash + 1)) : std::nullopt;
        if (!total) {
            co_return failure{make_error(errc::bad_response,
                                         fmt::format("GET {}/{}: 206 response without a usable Content-Range", bucket, key))};
        }
        out.object_size = *total;
    } else if (range && range->k == byte_range::kind::bounded && range->first > 0) {
        // A server that ignores Range sends the whole object; callers asked for a slice.
        co_return failure{make_error(errc::bad_response,
                                     fmt::format("GET {}/{}: server ignored the Range header", bucket, key))};
    }
    out.body = std::move(resp->body);
    co_return out;
}

runtime::task<result<object_meta, error>> client::head_object(std::string_view bucket, std::string_view key,
                                                               request_options opts, std::stop_token st) {
    attempt_spec spec{.method = "HEAD", .bucket = bucket, .key = key};
    auto resp = co_await execute(op_kind::head, spec, opts, st);
    if (!resp) co_return failure{std::move(resp).error()};
    object_meta m;
    const std::string* len = resp->header("content-length");
    auto size = len ? parse_u64(*len) : std::nullopt;
    if (!size) co_return failure{make_error(errc::bad_response, fmt::format("HEAD {}/{}: no Content-Length", bucket, key))};
    m.size = *size;
    if (auto* etag = resp->header("etag")) m.etag = *etag;
    if (auto* lm = resp->header("last-modified")) m.last_modified = *lm;
    co_return m;
}

runtime::task<result<void, error>> client::delete_object(std::string_view bucket, std::string_view key,
                                                         request_options opts, std::stop_token st) {
    attempt_spec spec{.method = "DELETE", .bucket = bucket, .key = key};
    auto resp = co_await execute(op_kind::del, spec, opts, st);
    if (!resp) {
        if (resp.error().code == errc::not_found && resp.error().s3_code != "NoSuchBucket") co_return ok();
        co_return failure{std::move(resp).error()};
    }
    co_return ok();
}

runtime::task<result<delete_objects_result, error>> client::delete_objects(std::string_view bucket,
                                                                           std::vector<std::string> keys,
                                                                           request_options opts, std::stop_token st) {
    if (keys.empty()) co_return delete_objects_result{};
    if (keys.size() > max_delete_keys) {
        co_return failure{make_error(errc::invalid_request,
                                     fmt::format("DeleteObjects on '{}': {} keys, at most {} per request", bucket,
                                                 keys.size(), max_delete_keys))};
    }
    for (const auto& k : keys) {
        if (k.empty()) {
            co_return failure{make_error(errc::invalid_request,
                                         fmt::format("DeleteObjects on '{}': an empty key", bucket))};
        }
    }
    const std::string body = delete_request_body(keys);
    attempt_spec spec{.method = "POST", .bucket = bucket, .key = "", .body = std::span<const char>(body)};
    // A sub-resource without a value: on the wire and in the canonical query it is "delete=".
    spec.query.emplace_back("delete", "");
    spec.payload_hash = _cfg.unsigned_payload ? std::string(unsigned_payload) : sha256_hex(body);
    spec.headers.push_back({"content-length", std::to_string(body.size())});
    spec.headers.push_back({"content-type", "application/xml"});
    // S3 refuses DeleteObjects without Content-MD5 or an x-amz-checksum-* header (a corrupted
    // body must not delete other keys). Directory buckets do not take MD5: CRC32C there.
    if (is_directory_bucket(bucket)) {
        char crc[4];
        be::write_u32(crc, skiff::crc32c(body));
        spec.headers.push_back({"x-amz-checksum-crc32c", base64_encode(std::string_view(crc, 4))});
    } else {
        auto md5 = content_md5(body);
        if (!md5) {
            co_return failure{make_error(errc::config, "DeleteObjects: this OpenSSL cannot compute MD5 (FIPS mode?)")};
        }
        spec.headers.push_back({"content-md5", std::move(*md5)});
    }
    auto resp = co_await execute(op_kind::del_many, spec, opts, st);
    if (!resp) co_return failure{std::move(resp).error()};
    co_return parse_delete_result(resp->status, resp->body, bucket);
}

runtime::task<result<list_page, error>> client::list_objects_v2(std::string_view bucket, list_request req,
                                                                request_options opts, std::stop_token st) {
    attempt_spec spec{.method = "GET", .bucket = bucket};
    spec.query.emplace_back("list-type", "2");
    // URL-encoded keys survive XML even when they hold characters XML 1.0 cannot carry.
    spec.query.emplace_back("encoding-type", "url");
    if (!req.prefix.empty()) spec.query.emplace_back("prefix", req.prefix);
    if (!req.start_after.empty()) spec.query.emplace_back("start-after", req.start_after);
    if (!req.continuation_token.empty()) spec.query.emplace_back("continuation-token", req.continuation_token);
    if (req.max_keys > 0) spec.query.emplace_back("max-keys", std::to_string(req.max_keys));
    auto resp = co_await execute(op_kind::list, spec, opts, st);
    if (!resp) co_return failure{std::move(resp).error()};
    co_return parse_list_objects_v2(resp->body);
}

} // namespace skiff::s3
