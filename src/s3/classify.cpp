#include <skiff/s3/classify.hpp>

#include <array>
#include <optional>
#include <string>

#include <curl/curl.h>
#include <fmt/format.h>

#include <skiff/core/ascii.hpp>
#include <skiff/core/printable.hpp>
#include <skiff/s3/xml.hpp>

namespace skiff::s3 {

namespace {

// --- helpers shared by both classifiers ----------------------------------------------------

// Text from the server or from libcurl goes into operator-facing messages; it is untrusted.
// Anything that smells of signing material is withheld as a whole (cutting it out precisely
// is not worth the risk), URL userinfo is removed, and the rest is bounded and printable.
std::string sanitize(std::string_view s, std::size_t limit = 200) {
    static constexpr std::array<std::string_view, 7> secrets = {
        "signature=",     "credential=", "x-amz-security-token", "x-amz-credential",
        "awsaccesskeyid", "secret",      "authorization:",
    };
    for (auto marker : secrets) {
        if (icontains(s, marker)) return "(details withheld: they may contain credentials)";
    }
    std::string kept;
    for (std::size_t i = 0; i < s.size() && kept.size() < limit; ++i) {
        if (s.compare(i, 3, "://") == 0) {
            // Drop "user:pass@" after a scheme; a password may hold a raw '/', so only
            // whitespace ends the search.
            const auto end = s.find_first_of(" \t", i + 3);
            const auto at = s.find('@', i + 3);
            kept += "://";
            i += 2;
            if (at != std::string_view::npos && (end == std::string_view::npos || at < end)) i = at;
            continue;
        }
        kept += s[i];
    }
    // Unlimited here: the loop above bounded it, and "..." goes after the trimming below.
    std::string out = printable(kept, std::string::npos, ' ');
    while (!out.empty() && (out.back() == ' ' || out.back() == '.')) out.pop_back();
    if (s.size() > limit) out += "...";
    return out;
}

error make(errc code, int status, std::string s3_code, std::string message) {
    error e;
    e.code = code;
    e.http_status = status;
    e.s3_code = std::move(s3_code);
    e.message = std::move(message);
    return e;
}

// --- HTTP ----------------------------------------------------------------------------------

std::string_view strip_query(std::string_view target) { return target.substr(0, target.find('?')); }

std::string bucket_name_for(const s3_error_body& body, std::string_view target) {
    if (!body.bucket_name.empty()) return printable(body.bucket_name);
    std::string_view r = !body.resource.empty() ? std::string_view(body.resource) : strip_query(target);
    while (!r.empty() && r.front() == '/') r.remove_prefix(1);
    return printable(r.substr(0, r.find('/')));
}

std::string key_name_for(const s3_error_body& body, std::string_view target) {
    if (!body.key.empty()) return printable(body.key, 1024);
    std::string_view r = !body.resource.empty() ? std::string_view(body.resource) : strip_query(target);
    while (!r.empty() && r.front() == '/') r.remove_prefix(1);
    // Resource and target are "bucket/key".
    const auto slash = r.find('/');
    return printable(slash == std::string_view::npos ? r : r.substr(slash + 1), 1024);
}

struct verdict {
    errc code;
    std::string message;
};

// The S3 error codes whose meaning does not depend on the status they arrive with.
std::optional<verdict> by_s3_code(const s3_error_body& b, int status, std::string_view method,
                                  std::string_view target) {
    const std::string_view c = b.code;
    if (c == "SlowDown")
        return verdict{errc::retryable, fmt::format("S3 asked to slow down (SlowDown, HTTP {})", status)};
    if (c == "InternalError")
        return verdict{errc::retryable, fmt::format("S3 internal error (InternalError, HTTP {})", status)};
    if (c == "ServiceUnavailable")
        return verdict{errc::retryable,
                       fmt::format("S3 is unavailable (ServiceUnavailable, HTTP {})", status)};
    if (c == "RequestTimeout") {
        return verdict{errc::retryable,
                       "S3 gave up waiting for the request body (RequestTimeout): the upload stalled"};
    }
    if (c == "OperationAborted") {
        return verdict{errc::retryable,
                       "a conflicting operation is in progress on this resource (OperationAborted)"};
    }
    if (c == "Throttling" || c == "ThrottlingException" || c == "TooManyRequestsException" ||
        c == "RequestThrottled") {
        return verdict{errc::retryable, fmt::format("S3 throttled the request ({})", c)};
    }
    if (c == "TemporaryRedirect") {
        return verdict{errc::retryable, "S3 redirected the request temporarily (TemporaryRedirect)"};
    }
    if (c == "NoSuchKey") {
        return verdict{errc::not_found, fmt::format("no such key '{}'", key_name_for(b, target))};
    }
    if (c == "NoSuchBucket") {
        return verdict{errc::not_found, fmt::format("no such bucket '{}'", bucket_name_for(b, target))};
    }
    if (c == "NoSuchUpload") {
        return verdict{errc::not_found,
                       "no such multipart upload (NoSuchUpload): it was completed or aborted"};
    }
    if (c == "PreconditionFailed") {
        return verdict{errc::precondition_failed,
                       "precondition failed (PreconditionFailed): the object already exists or no "
                       "longer matches the expected ETag"};
    }
    if (c == "ConditionalRequestConflict") {
        return verdict{errc::precondition_failed,
                       "conflicting conditional write (ConditionalRequestConflict): another write "
                       "to the same key raced with this one"};
    }
    if (c == "SignatureDoesNotMatch") {
        return verdict{errc::signature_mismatch,
                       "signature rejected by S3 (SignatureDoesNotMatch): check the secret access key"};
    }
    if (c == "XAmzContentSHA256Mismatch") {
        return verdict{errc::signature_mismatch,
                       "payload hash rejected by S3 (XAmzContentSHA256Mismatch): the body received "
                       "does not match x-amz-content-sha256"};
    }
    if (c == "BadDigest") {
        return verdict{errc::signature_mismatch,
                       "body checksum rejected by S3 (BadDigest): the body received does not match "
                       "the checksum sent with it"};
    }
    if (c == "AccessDenied") {
        return verdict{errc::access_denied,
                       fmt::format("access denied (AccessDenied): the credentials may not make this {} "
                                   "request; check the bucket policy and IAM permissions",
                                   printable(method, 16))};
    }
    if (c == "InvalidAccessKeyId") {
        return verdict{errc::access_denied,
                       "access denied (InvalidAccessKeyId): the access key id is not known to the server"};
    }
    if (c == "RequestTimeTooSkewed") {
        std::string m = "clock skew too large (RequestTimeTooSkewed): the local clock differs "
                        "from the server's by more than 15 minutes";
        if (!b.request_time.empty() && !b.server_time.empty()) {
            m += fmt::format(" (request time {}, server time {})", printable(b.request_time, 40),
                             printable(b.server_time, 40));
        }
        return verdict{errc::access_denied, std::move(m)};
    }
    if (c == "ExpiredToken") {
        return verdict{
            errc::access_denied,
            "access denied (ExpiredToken): the session token has expired; refresh the credentials"};
    }
    if (c == "InvalidToken") {
        return verdict{errc::access_denied,
                       "access denied (InvalidToken): the session token is malformed or not valid"};
    }
    if (c == "TokenRefreshRequired") {
        return verdict{errc::access_denied,
                       "access denied (TokenRefreshRequired): the session token must be refreshed"};
    }
    if (c == "AllAccessDisabled" || c == "AccountProblem") {
        return verdict{errc::access_denied, fmt::format("access denied ({}): {}", c, sanitize(b.message))};
    }
    if (c == "PermanentRedirect") {
        std::string m = "the bucket must be addressed through another endpoint (PermanentRedirect)";
        if (!b.endpoint.empty()) m += fmt::format(": use '{}'", sanitize(b.endpoint, 120));
        return verdict{errc::config, std::move(m)};
    }
    if (c == "AuthorizationHeaderMalformed") {
        if (!b.region.empty()) {
            return verdict{errc::config,
                           fmt::format("wrong signing region (AuthorizationHeaderMalformed): the "
                                       "bucket expects region '{}'",
                                       printable(b.region, 40))};
        }
        return verdict{errc::config, fmt::format("authorization header rejected "
                                                 "(AuthorizationHeaderMalformed): {}",
                                                 sanitize(b.message))};
    }
    if (c == "NotImplemented") {
        return verdict{errc::invalid_request,
                       "S3 does not implement a feature this request uses (NotImplemented)"};
    }
    if (c == "InvalidRange") {
        return verdict{errc::invalid_request, "requested range is not satisfiable (InvalidRange)"};
    }
    return std::nullopt;
}

std::string with_s3_detail(std::string head, const std::optional<s3_error_body>& b) {
    if (b && !b->message.empty()) head += fmt::format(": {}", sanitize(b->message));
    return head;
}

verdict by_status(int status, std::string_view method, std::string_view target,
                  const std::optional<s3_error_body>& b, bool body_empty) {
    const bool head = method == "HEAD";
    // "(HTTP 503, no body)" / "(HTTP 400, InvalidArgument)".
    std::string what;
    if (b && !b->code.empty()) {
        what = fmt::format("{}, HTTP {}", printable(b->code, 64), status);
    } else if (body_empty) {
        what = head ? fmt::format("HTTP {} on HEAD, no body", status)
                    : fmt::format("HTTP {}, no error body", status);
    } else if (!b) {
        what = fmt::format("HTTP {}, body is not an S3 error document", status);
    } else {
        what = fmt::format("HTTP {}", status);
    }

    if (status >= 500) {
        if (status == 501) {
            return {errc::invalid_request,
                    with_s3_detail(
                        fmt::format("S3 does not implement a feature this request uses ({})", what), b)};
        }
        if (!b || b->code.empty()) {
            // A 5xx without an S3 code usually comes from a load balancer or proxy in front
            // of S3 under load: treat it as SlowDown so the backoff applies.
            return {errc::retryable, fmt::format("S3 server error ({}), treated as SlowDown", what)};
        }
        return {errc::retryable, with_s3_detail(fmt::format("S3 server error ({})", what), b)};
    }
    if (status == 429) return {errc::retryable, fmt::format("S3 throttled the request ({})", what)};
    if (status == 408) return {errc::retryable, fmt::format("request timed out at the server ({})", what)};
    if (status == 404) {
        const std::string_view t = strip_query(target);
        if (t.empty()) return {errc::not_found, fmt::format("not found ({})", what)};
        return {errc::not_found, fmt::format("no such key or bucket '{}' ({})", printable(t, 1024), what)};
    }
    if (status == 412) {
        return {errc::precondition_failed,
                fmt::format("precondition failed ({}): the object already exists or no longer "
                            "matches the expected ETag",
                            what)};
    }
    if (status == 409) {
        if (!b || b->code.empty()) {
            return {errc::precondition_failed,
                    fmt::format("conflicting write ({}): another write to the same key raced with this one",
                                what)};
        }
        return {errc::invalid_request,
                with_s3_detail(fmt::format("request conflicts with the resource's state ({})", what), b)};
    }
    if (status == 403 || status == 401) {
        if (!b || b->code.empty()) {
            return {errc::access_denied,
                    fmt::format("access denied ({}): check the access key, the secret, the clock "
                                "and the bucket policy",
                                what)};
        }
        return {errc::access_denied, with_s3_detail(fmt::format("access denied ({})", what), b)};
    }
    if (status >= 400) {
        return {errc::invalid_request, with_s3_detail(fmt::format("request rejected by S3 ({})", what), b)};
    }
    if (status == 301 || status == 308) {
        return {errc::config,
                fmt::format("S3 redirected the request permanently ({}): the bucket is in another "
                            "region or needs another endpoint",
                            what)};
    }
    if (status == 307 || status == 302 || status == 303) {
        return {errc::retryable, fmt::format("S3 redirected the request temporarily ({})", what)};
    }
    if (status >= 300 && status < 400) {
        return {errc::config, fmt::format("unexpected redirect from S3 ({})", what)};
    }
    if (b && !b->code.empty()) {
        // 200 with an error document happens (CompleteMultipartUpload, CopyObject).
        return {errc::bad_response,
                with_s3_detail(fmt::format("S3 reported an error in a success response ({})", what), b)};
    }
    return {errc::bad_response, fmt::format("unexpected HTTP status {} where an error was expected", status)};
}

} // namespace

error classify_http(int status, std::string_view method, std::string_view body, std::string_view target) {
    const std::optional<s3_error_body> parsed = parse_error_body(body);
    std::string s3_code = parsed ? printable(parsed->code, 64) : std::string();

    verdict v = [&] {
        if (status < 100 || status > 599) {
            return verdict{errc::bad_response, fmt::format("invalid HTTP status {} from S3", status)};
        }
        if (parsed && !parsed->code.empty()) {
            if (auto known = by_s3_code(*parsed, status, method, target)) return std::move(*known);
        }
        return by_status(status, method, target, parsed, body.empty());
    }();

    if (parsed && !parsed->request_id.empty()) {
        v.message += fmt::format(" (request id {})", printable(parsed->request_id, 64));
    }
    return make(v.code, status, std::move(s3_code), std::move(v.message));
}

// --- transport -----------------------------------------------------------------------------

namespace {

struct endpoint_parts {
    std::string host;      // as written; IPv6 literals keep their brackets
    std::string authority; // host[:port], port defaulted from the scheme when known
};

endpoint_parts split_endpoint(std::string_view endpoint) {
    std::string_view scheme;
    if (const auto p = endpoint.find("://"); p != std::string_view::npos) {
        scheme = endpoint.substr(0, p);
        endpoint.remove_prefix(p + 3);
    }
    // Never let "user:secret@" reach a message. The userinfo goes first: a password may hold
    // a raw '/', which would otherwise pass for the start of the path.
    endpoint = endpoint.substr(0, endpoint.find_first_of("?#"));
    if (const auto at = endpoint.rfind('@'); at != std::string_view::npos) endpoint.remove_prefix(at + 1);
    endpoint = endpoint.substr(0, endpoint.find('/'));

    std::string_view host = endpoint;
    bool has_port = false;
    if (!endpoint.empty() && endpoint.front() == '[') {
        const auto close = endpoint.find(']');
        if (close != std::string_view::npos) {
            host = endpoint.substr(0, close + 1);
            has_port = endpoint.size() > close + 1 && endpoint[close + 1] == ':';
        }
    } else if (const auto colon = endpoint.rfind(':'); colon != std::string_view::npos) {
        host = endpoint.substr(0, colon);
        has_port = true;
    }
    endpoint_parts out;
    out.host = printable(host, 255);
    out.authority = printable(endpoint, 255);
    if (!has_port && !out.authority.empty()) {
        if (icontains(scheme, "https") && scheme.size() == 5)
            out.authority += ":443";
        else if (icontains(scheme, "http") && scheme.size() == 4)
            out.authority += ":80";
    }
    if (out.authority.empty()) out.authority = "the S3 endpoint";
    return out;
}

std::string detail(std::string_view curl_message) {
    std::string d = sanitize(curl_message);
    return d.empty() ? std::string() : ": " + d;
}

std::string connect_reason(std::string_view m) {
    if (icontains(m, "no route to host")) return "no route to host";
    if (icontains(m, "network is unreachable")) return "network is unreachable";
    if (icontains(m, "timed out") || icontains(m, "timeout")) return "connection timed out";
    if (icontains(m, "permission denied")) return "permission denied";
    // libcurl 7.88 reports a refused connection as "Couldn't connect to server", losing the
    // errno; refused is by far the common cause.
    return "connection refused";
}

bool is_tls_config_problem(int code) {
    switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED: return true;
    default: return false;
    }
}

} // namespace

error classify_transport(int curl_code, std::string_view curl_message, std::string_view endpoint) {
    const endpoint_parts ep = split_endpoint(endpoint);
    const std::string& at = ep.authority;
    auto out = [](errc c, std::string m) { return make(c, 0, {}, std::move(m)); };

    if (is_tls_config_problem(curl_code)) {
        return out(errc::config,
                   fmt::format("TLS certificate or setup problem with {}{}", at, detail(curl_message)));
    }
    switch (curl_code) {
    case CURLE_OK:
        return out(errc::bad_response,
                   fmt::format("no response from {} although the transfer reported success", at));
    case CURLE_COULDNT_RESOLVE_HOST: {
        std::string host = ep.host;
        if (host.empty()) {
            const auto p = curl_message.find("host: ");
            if (p != std::string_view::npos) host = printable(curl_message.substr(p + 6), 255);
        }
        return out(errc::retryable,
                   fmt::format("cannot resolve host {}", host.empty() ? "of the S3 endpoint" : host));
    }
    case CURLE_COULDNT_RESOLVE_PROXY:
        return out(errc::retryable, fmt::format("cannot resolve the proxy host{}", detail(curl_message)));
    case CURLE_COULDNT_CONNECT:
        return out(errc::retryable,
                   fmt::format("cannot connect to {}: {}", at, connect_reason(curl_message)));
    case CURLE_OPERATION_TIMEDOUT:
        return out(errc::retryable, fmt::format("timed out talking to {}{}", at, detail(curl_message)));
    case CURLE_SEND_ERROR:
        return out(errc::retryable, fmt::format("connection to {} failed while sending the request{}", at,
                                                detail(curl_message)));
    case CURLE_RECV_ERROR:
        return out(errc::retryable, fmt::format("connection to {} failed while receiving the response{}", at,
                                                detail(curl_message)));
    case CURLE_GOT_NOTHING:
        return out(errc::retryable, fmt::format("{} closed the connection without answering", at));
    case CURLE_PARTIAL_FILE:
        return out(errc::retryable, fmt::format("response from {} ended before its announced length{}", at,
                                                detail(curl_message)));
    case CURLE_SSL_CONNECT_ERROR:
        if (icontains(curl_message, "wrong version number") ||
            icontains(curl_message, "unknown protocol") ||
            icontains(curl_message, "packet length too long")) {
            return out(errc::config, fmt::format("TLS handshake with {} failed: the endpoint does not "
                                                 "speak TLS (check http:// versus https://)",
                                                 at));
        }
        return out(errc::retryable, fmt::format("TLS handshake with {} failed{}", at, detail(curl_message)));
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_HTTP3:
    case CURLE_QUIC_CONNECT_ERROR:
    case CURLE_AGAIN:
    case CURLE_SEND_FAIL_REWIND:
    case CURLE_NO_CONNECTION_AVAILABLE:
    case CURLE_SSL_SHUTDOWN_FAILED:
        return out(errc::retryable, fmt::format("transfer with {} failed{}", at, detail(curl_message)));
    case CURLE_URL_MALFORMAT:
        return out(errc::config, fmt::format("malformed URL for endpoint {}{}", at, detail(curl_message)));
    case CURLE_UNSUPPORTED_PROTOCOL:
        return out(errc::config,
                   fmt::format("unsupported URL scheme for endpoint {}{}", at, detail(curl_message)));
    case CURLE_NOT_BUILT_IN:
    case CURLE_FAILED_INIT:
    case CURLE_UNKNOWN_OPTION:
    case CURLE_SETOPT_OPTION_SYNTAX:
    case CURLE_INTERFACE_FAILED:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_PROXY:
    case CURLE_LOGIN_DENIED:
    case CURLE_AUTH_ERROR:
        return out(errc::config, fmt::format("cannot set up the transfer to {}{}", at, detail(curl_message)));
    case CURLE_ABORTED_BY_CALLBACK: return out(errc::cancelled, fmt::format("request to {} cancelled", at));
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_FILESIZE_EXCEEDED:
    case CURLE_CHUNK_FAILED:
    case CURLE_HTTP_RETURNED_ERROR:
        return out(errc::bad_response, fmt::format("unusable response from {}{}", at, detail(curl_message)));
    case CURLE_WRITE_ERROR:
        return out(errc::bad_response, fmt::format("response from {} was refused by the client "
                                                   "(too large or aborted){}",
                                                   at, detail(curl_message)));
    case CURLE_READ_ERROR:
    case CURLE_UPLOAD_FAILED:
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_RANGE_ERROR:
    case CURLE_RECURSIVE_API_CALL:
        return out(errc::invalid_request, fmt::format("local failure while talking to {} (curl error {}){}",
                                                      at, curl_code, detail(curl_message)));
    default:
        // Unknown codes are network trouble far more often than anything else; the retry
        // loop bounds the cost of being wrong.
        return out(errc::retryable, fmt::format("transfer with {} failed (curl error {}){}", at, curl_code,
                                                detail(curl_message)));
    }
}

bool is_throttle(const error& e) noexcept {
    return e.http_status == 503 || e.http_status == 429 || e.s3_code == "SlowDown";
}

} // namespace skiff::s3
