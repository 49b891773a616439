// Redaction of signatures, tokens and secrets before logging.
#include <skiff/s3/redact.hpp>
#include <skiff/s3/sigv4.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

using namespace skiff::s3;

namespace {

const credentials creds{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                        "FwoGZXIvYXdzEJr//////////wEaDH+token=="};

} // namespace

TEST_CASE("redact_header hides the SigV4 signature and keeps the rest", "[s3][redact]") {
    CHECK(redact_header("Authorization",
                        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                        "SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31") ==
          "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
          "SignedHeaders=host;x-amz-date, Signature=<redacted>");
    // The S3 docs' spelling without spaces after the commas.
    CHECK(redact_header("authorization",
                        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41") ==
          "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
          "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=<redacted>");
}

TEST_CASE("redact_header on a freshly signed request", "[s3][redact]") {
    signing_request req{"GET", "/k", {}, {{"Host", "b.s3.amazonaws.com"}}, std::string(empty_payload_sha256)};
    signing_options opts;
    opts.region = "us-east-1";
    auto r = sign(req, creds, opts, std::chrono::system_clock::time_point{});
    REQUIRE(r);
    for (const auto& h : r->headers_to_add) {
        std::string shown = redact_header(h.name, h.value);
        INFO(h.name << ": " << shown);
        CHECK(shown.find(r->signature) == std::string::npos);
        CHECK(shown.find(creds.session_token) == std::string::npos);
        if (h.name == "authorization") CHECK(shown.find("Credential=AKIAIOSFODNN7EXAMPLE/") != std::string::npos);
    }
}

TEST_CASE("redact_header on other secret-bearing and ordinary headers", "[s3][redact]") {
    CHECK(redact_header("X-Amz-Security-Token", creds.session_token) == "<redacted>");
    CHECK(redact_header("x-amz-security-token", "anything") == "<redacted>");
    CHECK(redact_header("x-amz-s3session-token", "anything") == "<redacted>");
    CHECK(redact_header("Proxy-Authorization", "Basic dXNlcjpwYXNz") == "<redacted>");
    CHECK(redact_header("Authorization", "Basic dXNlcjpwYXNz") == "Basic <redacted>");
    CHECK(redact_header("Authorization", "opaque") == "<redacted>");
    CHECK(redact_header("Host", "b.s3.amazonaws.com") == "b.s3.amazonaws.com");
    CHECK(redact_header("x-amz-date", "20130524T000000Z") == "20130524T000000Z");
    CHECK(redact_header("x-amz-content-sha256", "UNSIGNED-PAYLOAD") == "UNSIGNED-PAYLOAD");
}

TEST_CASE("redact_url hides the signature and token of a presigned URL", "[s3][redact]") {
    const std::string url =
        "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
        "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&"
        "X-Amz-Expires=86400&X-Amz-Security-Token=FwoG%2Ftok%3D%3D&X-Amz-SignedHeaders=host&X-Amz-Signature="
        "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
    CHECK(redact_url(url) ==
          "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
          "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&"
          "X-Amz-Expires=86400&X-Amz-Security-Token=<redacted>&X-Amz-SignedHeaders=host&X-Amz-Signature=<redacted>");
    CHECK(redact_url("X-Amz-Signature=abc#frag") == "X-Amz-Signature=<redacted>#frag");
    CHECK(redact_url("https://h/k?partNumber=1") == "https://h/k?partNumber=1");
    // Only whole parameter names match.
    CHECK(redact_url("https://h/k?My-X-Amz-Signature=1") == "https://h/k?My-X-Amz-Signature=1");
}

TEST_CASE("redact_text removes the secret and token, raw or percent-encoded", "[s3][redact]") {
    std::string text = "curl: secret=" + creds.secret_access_key + " token " + creds.session_token +
                       " url-token " + uri_encode(creds.session_token, true) + " url-secret " +
                       uri_encode(creds.secret_access_key, true) + " id " + creds.access_key_id;
    std::string shown = redact_text(text, creds);
    CHECK(shown == "curl: secret=<redacted> token <redacted> url-token <redacted> url-secret <redacted> id " +
                       creds.access_key_id);
    CHECK(redact_text("nothing to hide", creds) == "nothing to hide");
    // Empty secrets must not turn every position into a match.
    CHECK(redact_text("abc", credentials{}) == "abc");
    CHECK(redact_text(creds.secret_access_key + creds.secret_access_key, creds) == "<redacted><redacted>");
}
