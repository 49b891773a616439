#include <catch2/catch.hpp>

#include <skiff/s3/classify.hpp>

#include <string>
#include <vector>

using skiff::s3::classify_http;
using skiff::s3::classify_transport;
using skiff::s3::errc;

namespace {

std::string s3_error(const std::string& code, const std::string& message = "m",
                     const std::string& extra = "") {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code + "</Code><Message>" + message +
           "</Message>" + extra + "<RequestId>REQ123</RequestId><HostId>H</HostId></Error>";
}

// CURLcode values, spelled out so the test does not need curl.h; they are ABI-stable.
constexpr int curle_unsupported_protocol = 1;
constexpr int curle_url_malformat = 3;
constexpr int curle_couldnt_resolve_host = 6;
constexpr int curle_couldnt_connect = 7;
constexpr int curle_weird_server_reply = 8;
constexpr int curle_partial_file = 18;
constexpr int curle_write_error = 23;
constexpr int curle_read_error = 26;
constexpr int curle_operation_timedout = 28;
constexpr int curle_ssl_connect_error = 35;
constexpr int curle_aborted_by_callback = 42;
constexpr int curle_got_nothing = 52;
constexpr int curle_send_error = 55;
constexpr int curle_recv_error = 56;
constexpr int curle_peer_failed_verification = 60;
constexpr int curle_ssl_cacert_badfile = 77;

} // namespace

TEST_CASE("error category and names", "[s3][classify]") {
    const std::error_code ec = skiff::s3::errc::not_found;
    CHECK(ec.category().name() == std::string("skiff.s3"));
    CHECK(ec.message() == "S3 object or bucket not found");
    CHECK(ec == make_error_code(errc::not_found));
    CHECK(ec != make_error_code(errc::retryable));
    CHECK(&ec.category() == &skiff::s3::error_category());

    const std::vector<std::pair<errc, std::string>> names = {
        {errc::retryable, "retryable"},
        {errc::not_found, "not_found"},
        {errc::precondition_failed, "precondition_failed"},
        {errc::access_denied, "access_denied"},
        {errc::signature_mismatch, "signature_mismatch"},
        {errc::invalid_request, "invalid_request"},
        {errc::cancelled, "cancelled"},
        {errc::deadline_exceeded, "deadline_exceeded"},
        {errc::bad_response, "bad_response"},
        {errc::config, "config"},
    };
    for (const auto& [code, name] : names) {
        CHECK(skiff::s3::to_string(code) == name);
        CHECK_FALSE(make_error_code(code).message().empty());
    }
    CHECK(skiff::s3::to_string(static_cast<errc>(99)) == std::string("unknown"));
    CHECK_THAT(skiff::s3::error_category().message(99), Catch::Contains("99"));
}

TEST_CASE("S3 error codes map to classes", "[s3][classify]") {
    struct row {
        int status;
        const char* method;
        std::string code;
        errc expected;
        const char* message_contains;
    };
    const std::vector<row> rows = {
        {503, "PUT", "SlowDown", errc::retryable, "S3 asked to slow down (SlowDown, HTTP 503)"},
        {500, "GET", "InternalError", errc::retryable, "S3 internal error (InternalError"},
        {503, "GET", "ServiceUnavailable", errc::retryable, "ServiceUnavailable"},
        {400, "PUT", "RequestTimeout", errc::retryable, "RequestTimeout"},
        {409, "PUT", "OperationAborted", errc::retryable, "OperationAborted"},
        {200, "POST", "InternalError", errc::retryable, "InternalError"},
        {307, "PUT", "TemporaryRedirect", errc::retryable, "TemporaryRedirect"},
        {404, "GET", "NoSuchKey", errc::not_found, "no such key"},
        {404, "GET", "NoSuchBucket", errc::not_found, "no such bucket"},
        {404, "PUT", "NoSuchUpload", errc::not_found, "NoSuchUpload"},
        {412, "PUT", "PreconditionFailed", errc::precondition_failed,
         "precondition failed (PreconditionFailed)"},
        {409, "PUT", "ConditionalRequestConflict", errc::precondition_failed, "ConditionalRequestConflict"},
        {403, "PUT", "SignatureDoesNotMatch", errc::signature_mismatch,
         "signature rejected by S3 (SignatureDoesNotMatch): check the secret access key"},
        {400, "PUT", "XAmzContentSHA256Mismatch", errc::signature_mismatch, "XAmzContentSHA256Mismatch"},
        {400, "PUT", "BadDigest", errc::signature_mismatch, "BadDigest"},
        {403, "GET", "AccessDenied", errc::access_denied, "access denied (AccessDenied)"},
        {403, "GET", "InvalidAccessKeyId", errc::access_denied,
         "access denied (InvalidAccessKeyId): the access key id is not known to the server"},
        {403, "GET", "RequestTimeTooSkewed", errc::access_denied,
         "clock skew too large (RequestTimeTooSkewed)"},
        {400, "GET", "ExpiredToken", errc::access_denied, "ExpiredToken"},
        {400, "GET", "InvalidToken", errc::access_denied, "InvalidToken"},
        {403, "GET", "AllAccessDisabled", errc::access_denied, "AllAccessDisabled"},
        {301, "GET", "PermanentRedirect", errc::config, "PermanentRedirect"},
        {400, "GET", "AuthorizationHeaderMalformed", errc::config, "AuthorizationHeaderMalformed"},
        {501, "PUT", "NotImplemented", errc::invalid_request, "NotImplemented"},
        {416, "GET", "InvalidRange", errc::invalid_request, "InvalidRange"},
        {400, "PUT", "InvalidArgument", errc::invalid_request,
         "request rejected by S3 (InvalidArgument, HTTP 400)"},
        {400, "PUT", "EntityTooLarge", errc::invalid_request, "EntityTooLarge"},
        {405, "POST", "MethodNotAllowed", errc::invalid_request, "MethodNotAllowed"},
        {409, "DELETE", "BucketNotEmpty", errc::invalid_request, "BucketNotEmpty"},
        {403, "GET", "SomeNewDenial", errc::access_denied, "access denied (SomeNewDenial, HTTP 403)"},
        {404, "GET", "SomeNewNotFound", errc::not_found, "SomeNewNotFound"},
        {429, "GET", "SomeThrottle", errc::retryable, "throttled"},
        {502, "GET", "BadGateway", errc::retryable, "S3 server error (BadGateway, HTTP 502)"},
        {412, "PUT", "SomethingElse", errc::precondition_failed, "precondition failed"},
    };
    for (const auto& r : rows) {
        INFO(r.status << " " << r.code);
        const auto e = classify_http(r.status, r.method, s3_error(r.code));
        CHECK(e.code == r.expected);
        CHECK(e.http_status == r.status);
        CHECK(e.s3_code == r.code);
        CHECK(e.attempts == 1);
        CHECK_THAT(e.message, Catch::Contains(r.message_contains));
        CHECK_THAT(e.message, Catch::EndsWith("(request id REQ123)"));
        CHECK(e.retryable() == (r.expected == errc::retryable));
    }
}

TEST_CASE("bodies without an S3 error document are classified by status", "[s3][classify]") {
    SECTION("empty 5xx bodies count as SlowDown") {
        for (int status : {500, 502, 503, 504, 599}) {
            INFO(status);
            const auto e = classify_http(status, "PUT", "");
            CHECK(e.code == errc::retryable);
            CHECK(e.s3_code.empty());
            CHECK(e.http_status == status);
            CHECK_THAT(e.message, Catch::Contains("treated as SlowDown"));
            CHECK_THAT(e.message, Catch::Contains("no error body"));
        }
    }
    SECTION("a proxy's HTML 502 is retryable") {
        const auto e = classify_http(502, "GET", "<html><body>Bad Gateway</body></html>");
        CHECK(e.code == errc::retryable);
        CHECK_THAT(e.message, Catch::Contains("not an S3 error document"));
    }
    SECTION("HEAD 404 without body is not_found and names the target") {
        const auto e = classify_http(404, "HEAD", "", "bucket/topics/a.log");
        CHECK(e.code == errc::not_found);
        CHECK(e.s3_code.empty());
        CHECK_THAT(e.message, Catch::Contains("'bucket/topics/a.log'"));
        CHECK_THAT(e.message, Catch::Contains("HEAD"));
        CHECK(classify_http(404, "HEAD", "").code == errc::not_found);
    }
    SECTION("HEAD 403 without body is access_denied") {
        const auto e = classify_http(403, "HEAD", "");
        CHECK(e.code == errc::access_denied);
        CHECK_THAT(e.message, Catch::StartsWith("access denied"));
    }
    SECTION("other statuses") {
        CHECK(classify_http(429, "GET", "").code == errc::retryable);
        CHECK(classify_http(408, "PUT", "").code == errc::retryable);
        CHECK(classify_http(412, "PUT", "").code == errc::precondition_failed);
        CHECK(classify_http(409, "PUT", "").code == errc::precondition_failed);
        CHECK(classify_http(400, "PUT", "").code == errc::invalid_request);
        CHECK(classify_http(401, "GET", "").code == errc::access_denied);
        CHECK(classify_http(416, "GET", "").code == errc::invalid_request);
        CHECK(classify_http(501, "GET", "").code == errc::invalid_request);
        CHECK(classify_http(301, "GET", "").code == errc::config);
        CHECK(classify_http(307, "GET", "").code == errc::retryable);
        CHECK(classify_http(200, "GET", "").code == errc::bad_response);
        CHECK(classify_http(100, "GET", "").code == errc::bad_response);
        CHECK(classify_http(0, "GET", "").code == errc::bad_response);
        CHECK(classify_http(-1, "GET", "").code == errc::bad_response);
        CHECK(classify_http(999, "GET", "").code == errc::bad_response);
        CHECK(classify_http(200, "POST", s3_error("Weird")).code == errc::bad_response);
    }
}

TEST_CASE("messages name the missing bucket or key", "[s3][classify]") {
    const auto bucket =
        classify_http(404, "GET",
                      "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message>"
                      "<BucketName>x</BucketName><RequestId>R</RequestId></Error>");
    CHECK(bucket.code == errc::not_found);
    CHECK_THAT(bucket.message, Catch::StartsWith("no such bucket 'x'"));

    // moto/MinIO style: only Resource.
    const auto from_resource =
        classify_http(404, "GET", "<Error><Code>NoSuchBucket</Code><Resource>/logs</Resource></Error>");
    CHECK(from_resource.message == "no such bucket 'logs'");

    const auto from_target = classify_http(404, "GET", "<Error><Code>NoSuchBucket</Code></Error>", "data/k");
    CHECK(from_target.message == "no such bucket 'data'");

    const auto key =
        classify_http(404, "GET", "<Error><Code>NoSuchKey</Code><Key>topics/a b.log</Key></Error>");
    CHECK(key.message == "no such key 'topics/a b.log'");

    const auto key_from_target =
        classify_http(404, "GET", "<Error><Code>NoSuchKey</Code></Error>", "b/dir/k?x=1");
    CHECK(key_from_target.message == "no such key 'dir/k'");

    // Names are names: a key that contains "secret" is still shown.
    const auto secret_key =
        classify_http(404, "GET", "<Error><Code>NoSuchKey</Code><Key>secret/plan</Key></Error>");
    CHECK(secret_key.message == "no such key 'secret/plan'");
}

TEST_CASE("clock skew and region messages carry the useful details", "[s3][classify]") {
    const auto skew = classify_http(
        403, "PUT",
        "<Error><Code>RequestTimeTooSkewed</Code><Message>The difference between the request time and the "
        "current time is too large.</Message><RequestTime>20240101T000000Z</RequestTime>"
        "<ServerTime>2024-01-01T01:00:00Z</ServerTime></Error>");
    CHECK(skew.code == errc::access_denied);
    CHECK_THAT(skew.message, Catch::StartsWith("clock skew too large (RequestTimeTooSkewed)"));
    CHECK_THAT(skew.message, Catch::Contains("server time 2024-01-01T01:00:00Z"));

    const auto region = classify_http(
        400, "GET",
        "<Error><Code>AuthorizationHeaderMalformed</Code><Message>The authorization header is malformed; "
        "the region 'us-east-1' is wrong; expecting 'eu-west-1'</Message><Region>eu-west-1</Region></Error>");
    CHECK(region.code == errc::config);
    CHECK_THAT(region.message, Catch::Contains("'eu-west-1'"));

    const auto redirect = classify_http(
        301, "GET",
        "<Error><Code>PermanentRedirect</Code><Endpoint>b.s3.eu-west-1.amazonaws.com</Endpoint></Error>");
    CHECK(redirect.code == errc::config);
    CHECK_THAT(redirect.message, Catch::Contains("b.s3.eu-west-1.amazonaws.com"));
}

TEST_CASE("HTTP messages never echo credentials", "[s3][classify]") {
    const std::string access_key = "AKIAIOSFODNN7EXAMPLE";
    const std::string signature = "fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024";
    const auto sig = classify_http(
        403, "PUT",
        "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not "
        "match the signature you provided. Check your key and signing method.</Message><AWSAccessKeyId>" +
            access_key +
            "</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256\n20240101T000000Z</StringToSign>"
            "<SignatureProvided>" +
            signature +
            "</SignatureProvided><CanonicalRequest>PUT /b/k</CanonicalRequest>"
            "<RequestId>R</RequestId></Error>");
    CHECK(sig.code == errc::signature_mismatch);
    CHECK_THAT(sig.message, !Catch::Contains(access_key));
    CHECK_THAT(sig.message, !Catch::Contains(signature));
    CHECK_THAT(sig.message, !Catch::Contains("AWS4-HMAC-SHA256"));

    // An unknown code whose message quotes the Authorization header is withheld entirely.
    const auto odd = classify_http(
        400, "PUT",
        s3_error("InvalidArgument", "Bad header: AWS4-HMAC-SHA256 Credential=" + access_key +
                                        "/20240101/us-east-1/s3/aws4_request, Signature=" + signature));
    CHECK(odd.code == errc::invalid_request);
    CHECK_THAT(odd.message, !Catch::Contains(access_key));
    CHECK_THAT(odd.message, !Catch::Contains(signature));
    CHECK_THAT(odd.message, Catch::Contains("withheld"));

    // Ordinary S3 messages are kept, bounded and printable.
    const auto plain = classify_http(400, "PUT", s3_error("InvalidArgument", "Invalid\nargument"));
    CHECK_THAT(plain.message, Catch::Contains("Invalid argument"));
    const auto long_message = classify_http(400, "PUT", s3_error("InvalidArgument", std::string(5000, 'z')));
    CHECK(long_message.message.size() < 400);
}

TEST_CASE("transport failures", "[s3][classify]") {
    SECTION("connection refused") {
        const auto e = classify_transport(
            curle_couldnt_connect,
            "Failed to connect to 127.0.0.1 port 9999 after 0 ms: Couldn't connect to server",
            "http://127.0.0.1:9999");
        CHECK(e.code == errc::retryable);
        CHECK(e.http_status == 0);
        CHECK(e.s3_code.empty());
        CHECK(e.message == "cannot connect to 127.0.0.1:9999: connection refused");
        CHECK(classify_transport(curle_couldnt_connect, "Connection refused", "127.0.0.1:9999").message ==
              "cannot connect to 127.0.0.1:9999: connection refused");
        CHECK(classify_transport(curle_couldnt_connect, "", "http://10.1.2.3:9000/").message ==
              "cannot connect to 10.1.2.3:9000: connection refused");
        CHECK(
            classify_transport(curle_couldnt_connect, "Failed to connect: No route to host", "h:1").message ==
            "cannot connect to h:1: no route to host");
    }
    SECTION("cannot resolve host") {
        const auto e = classify_transport(curle_couldnt_resolve_host,
                                          "Could not resolve host: nosuch.invalid", "https://nosuch.invalid");
        CHECK(e.code == errc::retryable);
        CHECK(e.message == "cannot resolve host nosuch.invalid");
        CHECK(classify_transport(curle_couldnt_resolve_host, "Could not resolve host: other.invalid", "")
                  .message == "cannot resolve host other.invalid");
        CHECK(classify_transport(curle_couldnt_resolve_host, "", "http://minio:9000/bucket").message ==
              "cannot resolve host minio");
    }
    SECTION("resets, short reads and timeouts are retryable") {
        const auto reset = classify_transport(curle_recv_error, "Recv failure: Connection reset by peer",
                                              "http://127.0.0.1:9000");
        CHECK(reset.code == errc::retryable);
        CHECK_THAT(reset.message, Catch::Contains("Connection reset by peer"));
        CHECK_THAT(reset.message, Catch::Contains("127.0.0.1:9000"));
        CHECK(classify_transport(curle_send_error, "Send failure: Broken pipe", "h:1").code ==
              errc::retryable);
        CHECK(classify_transport(curle_got_nothing, "Empty reply from server", "h:1").code ==
              errc::retryable);
        CHECK(classify_transport(curle_partial_file, "transfer closed with 10 bytes remaining to read", "h:1")
                  .code == errc::retryable);
        const auto timeout = classify_transport(
            curle_operation_timedout, "Operation timed out after 5001 milliseconds with 0 bytes received",
            "https://s3.amazonaws.com");
        CHECK(timeout.code == errc::retryable);
        CHECK_THAT(timeout.message, Catch::StartsWith("timed out talking to s3.amazonaws.com:443"));
        CHECK(classify_transport(1234, "something new", "h:1").code == errc::retryable);
    }
    SECTION("TLS") {
        CHECK(classify_transport(curle_peer_failed_verification,
                                 "SSL certificate problem: self-signed certificate", "https://h:9000")
                  .code == errc::config);
        CHECK(classify_transport(curle_ssl_cacert_badfile, "error setting certificate file", "https://h")
                  .code == errc::config);
        const auto plain_port =
            classify_transport(curle_ssl_connect_error, "error:0A00010B:SSL routines::wrong version number",
                               "https://127.0.0.1:9000");
        CHECK(plain_port.code == errc::config);
        CHECK_THAT(plain_port.message, Catch::Contains("does not speak TLS"));
        CHECK(classify_transport(curle_ssl_connect_error, "OpenSSL SSL_connect: Connection reset by peer",
                                 "https://h")
                  .code == errc::retryable);
    }
    SECTION("configuration, cancellation and odd replies") {
        CHECK(classify_transport(curle_url_malformat, "URL using bad/illegal format", "http://").code ==
              errc::config);
        CHECK(
            classify_transport(curle_unsupported_protocol, "Protocol \"s3\" not supported", "s3://b").code ==
            errc::config);
        CHECK(classify_transport(curle_aborted_by_callback, "Callback aborted", "h:1").code ==
              errc::cancelled);
        CHECK(classify_transport(curle_weird_server_reply, "Unsupported HTTP version", "h:1").code ==
              errc::bad_response);
        CHECK(classify_transport(curle_write_error, "Failure writing output", "h:1").code ==
              errc::bad_response);
        CHECK(classify_transport(curle_read_error, "read callback failed", "h:1").code ==
              errc::invalid_request);
        CHECK(classify_transport(0, "", "h:1").code == errc::bad_response);
    }
}

TEST_CASE("transport messages never echo credentials", "[s3][classify]") {
    const auto e = classify_transport(curle_couldnt_connect, "Failed to connect",
                                      "http://AKIDEXAMPLE:wJalrXUtnFEMI%2FK7MDENG@127.0.0.1:9000/bucket");
    CHECK(e.message == "cannot connect to 127.0.0.1:9000: connection refused");

    const auto resolve =
        classify_transport(curle_couldnt_resolve_host, "", "https://user:pass@s3.example.com/bucket");
    CHECK(resolve.message == "cannot resolve host s3.example.com");

    const auto curl_text = classify_transport(
        curle_recv_error, "Recv failure for http://user:hunter2@h:1/b?X-Amz-Credential=AKID", "h:1");
    CHECK_THAT(curl_text.message, !Catch::Contains("hunter2"));
    CHECK_THAT(curl_text.message, !Catch::Contains("AKID"));

    const auto userinfo_only =
        classify_transport(curle_recv_error, "proxy http://user:hunter2@proxy:3128 failed", "h:1");
    CHECK_THAT(userinfo_only.message, !Catch::Contains("hunter2"));
    CHECK_THAT(userinfo_only.message, Catch::Contains("proxy:3128"));
}

TEST_CASE("userinfo with a raw slash does not leak", "[s3][classify]") {
    const auto e = classify_transport(curle_couldnt_connect, "", "http://AKID:se/cr/et@10.0.0.1:9000/bucket");
    CHECK(e.message == "cannot connect to 10.0.0.1:9000: connection refused");
    const auto m =
        classify_transport(curle_recv_error, "failed http://AKID:se/cr/et@10.0.0.1:9000/b x", "h:1");
    CHECK_THAT(m.message, !Catch::Contains("se/cr"));
}
