#include <catch2/catch.hpp>

#include <skiff/s3/xml.hpp>

#include <random>
#include <string>

using skiff::s3::errc;
using skiff::s3::parse_error_body;
using skiff::s3::parse_list_objects_v2;

namespace {

// Shaped like AWS's documented ListObjectsV2 examples.
const std::string truncated_page = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>example-bucket</Name>
  <Prefix>topics/</Prefix>
  <KeyCount>2</KeyCount>
  <MaxKeys>2</MaxKeys>
  <IsTruncated>true</IsTruncated>
  <ContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</ContinuationToken>
  <NextContinuationToken>1w41l63U0xa8q7smH50vCxyTQqdxo69O3EmK28Bi5PcROI4wI/EyIJg==</NextContinuationToken>
  <StartAfter>topics/a</StartAfter>
  <Contents>
    <Key>topics/orders/0/00000000000000000000.log</Key>
    <LastModified>2024-05-01T12:00:00.000Z</LastModified>
    <ETag>&quot;599bab3ed2c697f1d26842727561fd94&quot;</ETag>
    <Size>1048576</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents>
    <Key>topics/orders/0/00000000000000001000.log</Key>
    <LastModified>2024-05-01T12:01:00.000Z</LastModified>
    <ETag>&quot;3e4d1b7cdfd1bfb8cbf06c7d3f1e0ab2-3&quot;</ETag>
    <Size>0</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
</ListBucketResult>)";

std::string page_with_size(const std::string& size) {
    return "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>k</Key><Size>" + size +
           "</Size></Contents></ListBucketResult>";
}

} // namespace

TEST_CASE("ListObjectsV2: truncated page with continuation token", "[s3][xml]") {
    auto r = parse_list_objects_v2(truncated_page);
    REQUIRE(r);
    const auto& page = *r;
    CHECK(page.is_truncated);
    CHECK(page.next_continuation_token == "1w41l63U0xa8q7smH50vCxyTQqdxo69O3EmK28Bi5PcROI4wI/EyIJg==");
    CHECK(page.start_after == "topics/a");
    CHECK(page.key_count == 2);
    CHECK(page.common_prefixes.empty());
    REQUIRE(page.objects.size() == 2);
    CHECK(page.objects[0].key == "topics/orders/0/00000000000000000000.log");
    CHECK(page.objects[0].size == 1048576);
    CHECK(page.objects[0].etag == "\"599bab3ed2c697f1d26842727561fd94\"");
    CHECK(page.objects[0].last_modified == "2024-05-01T12:00:00.000Z");
    CHECK(page.objects[1].key == "topics/orders/0/00000000000000001000.log");
    CHECK(page.objects[1].size == 0);
    CHECK(page.objects[1].etag == "\"3e4d1b7cdfd1bfb8cbf06c7d3f1e0ab2-3\"");
}

TEST_CASE("ListObjectsV2: last page and empty bucket", "[s3][xml]") {
    auto last = parse_list_objects_v2(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix></Prefix>
<KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>
<Contents><Key>only</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><ETag>"e"</ETag><Size>5</Size></Contents>
</ListBucketResult>)");
    REQUIRE(last);
    CHECK_FALSE(last->is_truncated);
    CHECK(last->next_continuation_token.empty());
    REQUIRE(last->objects.size() == 1);
    CHECK(last->objects[0].etag == "\"e\"");

    auto empty = parse_list_objects_v2(
        R"(<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><KeyCount>0</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>)");
    REQUIRE(empty);
    CHECK(empty->objects.empty());
    CHECK(empty->key_count == 0);
    CHECK_FALSE(empty->is_truncated);
}

TEST_CASE("ListObjectsV2: common prefixes with a delimiter", "[s3][xml]") {
    auto r = parse_list_objects_v2(R"(<ListBucketResult><Name>b</Name><Prefix>topics/</Prefix>
<Delimiter>/</Delimiter><KeyCount>3</KeyCount><IsTruncated>false</IsTruncated>
<Contents><Key>topics/README</Key><Size>10</Size></Contents>
<CommonPrefixes><Prefix>topics/orders/</Prefix></CommonPrefixes>
<CommonPrefixes><Prefix>topics/payments/</Prefix></CommonPrefixes>
</ListBucketResult>)");
    REQUIRE(r);
    CHECK(r->key_count == 3);
    REQUIRE(r->objects.size() == 1);
    CHECK(r->objects[0].etag.empty()); // optional fields may be absent
    CHECK(r->objects[0].last_modified.empty());
    REQUIRE(r->common_prefixes.size() == 2);
    CHECK(r->common_prefixes[0] == "topics/orders/");
    CHECK(r->common_prefixes[1] == "topics/payments/");
}

TEST_CASE("ListObjectsV2: url-encoded keys are decoded", "[s3][xml]") {
    // S3 encodes like a form: space as '+', a literal '+' as %2B; %20 is accepted too.
    auto r = parse_list_objects_v2(R"(<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
<Name>b</Name><Prefix>dir%2F</Prefix><KeyCount>5</KeyCount><Delimiter>%2F</Delimiter>
<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>
<NextContinuationToken>tok+en%2F==</NextContinuationToken>
<StartAfter>dir%2Fa+b</StartAfter>
<Contents><Key>dir/a+b%2Bc.txt</Key><Size>1</Size></Contents>
<Contents><Key>dir%2Fr%C3%A9sum%C3%A9%2F%C3%BC.log</Key><Size>2</Size></Contents>
<Contents><Key>dir/with%20space%25percent</Key><Size>3</Size></Contents>
<Contents><Key>%E6%97%A5%E6%9C%AC/%F0%9F%98%80%26%3C%3E</Key><Size>4</Size></Contents>
<CommonPrefixes><Prefix>dir%2Fsub+dir%2F</Prefix></CommonPrefixes>
</ListBucketResult>)");
    REQUIRE(r);
    REQUIRE(r->objects.size() == 4);
    CHECK(r->objects[0].key == "dir/a b+c.txt");
    CHECK(r->objects[1].key == "dir/r\xC3\xA9sum\xC3\xA9/\xC3\xBC.log");
    CHECK(r->objects[2].key == "dir/with space%percent");
    CHECK(r->objects[3].key == "\xE6\x97\xA5\xE6\x9C\xAC/\xF0\x9F\x98\x80&<>");
    REQUIRE(r->common_prefixes.size() == 1);
    CHECK(r->common_prefixes[0] == "dir/sub dir/");
    CHECK(r->start_after == "dir/a b");
    // The continuation token is opaque: never decoded.
    CHECK(r->next_continuation_token == "tok+en%2F==");
}

TEST_CASE("ListObjectsV2: without EncodingType keys are taken literally", "[s3][xml]") {
    auto r = parse_list_objects_v2(R"(<ListBucketResult><IsTruncated>false</IsTruncated>
<Contents><Key>a+b%20c</Key><Size>1</Size></Contents>
<Contents><Key>x &amp; y &lt;z&gt; &#233;</Key><Size>1</Size></Contents>
<Contents><Key> </Key><Size>1</Size></Contents>
<Contents><Key><![CDATA[raw <cdata> & more]]></Key><Size>1</Size></Contents>
</ListBucketResult>)");
    REQUIRE(r);
    REQUIRE(r->objects.size() == 4);
    CHECK(r->objects[0].key == "a+b%20c");
    CHECK(r->objects[1].key == "x & y <z> \xC3\xA9");
    CHECK(r->objects[2].key == " ");
    CHECK(r->objects[3].key == "raw <cdata> & more");
    CHECK(r->key_count == 4); // computed when KeyCount is absent
}

TEST_CASE("ListObjectsV2: sizes at the edges of uint64", "[s3][xml]") {
    auto max = parse_list_objects_v2(page_with_size("18446744073709551615"));
    REQUIRE(max);
    CHECK(max->objects[0].size == 18446744073709551615ull);

    auto padded = parse_list_objects_v2(page_with_size("\n  42  \n"));
    REQUIRE(padded);
    CHECK(padded->objects[0].size == 42);

    for (const char* bad : {"18446744073709551616", "99999999999999999999999", "-1", "-0", "+5", "12abc",
                            "0x10", "1e3", "", " ", "1 2", "NaN"}) {
        INFO("size '" << bad << "'");
        auto r = parse_list_objects_v2(page_with_size(bad));
        REQUIRE_FALSE(r);
        CHECK(r.error().code == errc::bad_response);
        CHECK_THAT(r.error().message, Catch::Contains("invalid size"));
    }
}

TEST_CASE("ListObjectsV2: malformed documents are bad_response", "[s3][xml]") {
    struct bad_case {
        const char* name;
        std::string body;
        const char* mentions;
    };
    const std::vector<bad_case> cases = {
        {"empty", "", "empty"},
        {"garbage", "this is not xml at all", "not valid XML"},
        {"html", "<html><body>502 Bad Gateway</body></html>", "<html>"},
        {"truncated", truncated_page.substr(0, truncated_page.size() / 2), "not valid XML"},
        {"error document", "<Error><Code>AccessDenied</Code></Error>", "<Error>"},
        {"no key", "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
         "without <Key>"},
        {"empty key", "<ListBucketResult><Contents><Key></Key><Size>1</Size></Contents></ListBucketResult>",
         "empty key"},
        {"no size", "<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>", "no <Size>"},
        {"truncated without token", "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
         "NextContinuationToken"},
        {"bad IsTruncated", "<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>",
         "IsTruncated"},
        {"negative KeyCount", "<ListBucketResult><KeyCount>-3</KeyCount></ListBucketResult>", "KeyCount"},
        {"huge KeyCount", "<ListBucketResult><KeyCount>4294967296</KeyCount></ListBucketResult>", "KeyCount"},
        {"prefix without Prefix", "<ListBucketResult><CommonPrefixes/></ListBucketResult>", "CommonPrefixes"},
        {"bad escape",
         "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%zz</Key><Size>1</Size></Contents></ListBucketResult>",
         "URL-encoded"},
        {"short escape",
         "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%4</Key><Size>1</Size></Contents></ListBucketResult>",
         "URL-encoded"},
        {"two roots", "<ListBucketResult/><ListBucketResult/>", "not valid XML"},
        {"nul bytes", std::string("<ListBucketResult>\0\0\0</ListBucketResult>", 40), ""},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        auto r = parse_list_objects_v2(c.body);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == errc::bad_response);
        CHECK(r.error().http_status == 0);
        CHECK_THAT(r.error().message, Catch::Contains(c.mentions));
    }
}

TEST_CASE("ListObjectsV2: oversized and deeply nested documents", "[s3][xml]") {
    std::string huge = "<ListBucketResult>";
    huge.append(skiff::s3::max_xml_document_size, ' ');
    huge += "</ListBucketResult>";
    auto too_big = parse_list_objects_v2(huge);
    REQUIRE_FALSE(too_big);
    CHECK_THAT(too_big.error().message, Catch::Contains("exceeds"));

    // pugixml parses and frees iteratively: deep nesting must not exhaust the stack.
    std::string deep = "<ListBucketResult>";
    for (int i = 0; i < 200000; ++i) deep += "<a>";
    for (int i = 0; i < 200000; ++i) deep += "</a>";
    deep += "</ListBucketResult>";
    auto nested = parse_list_objects_v2(deep);
    REQUIRE(nested);
    CHECK(nested->objects.empty());

    // Many objects are fine.
    std::string many = "<ListBucketResult><IsTruncated>false</IsTruncated>";
    for (int i = 0; i < 1000; ++i)
        many += "<Contents><Key>k" + std::to_string(i) + "</Key><Size>" + std::to_string(i) +
                "</Size></Contents>";
    many += "</ListBucketResult>";
    auto big_page = parse_list_objects_v2(many);
    REQUIRE(big_page);
    CHECK(big_page->objects.size() == 1000);
    CHECK(big_page->objects[999].size == 999);
}

TEST_CASE("ListObjectsV2: mutated input never crashes", "[s3][xml]") {
    // Every prefix, plus random byte flips: the parser either succeeds or says bad_response.
    for (std::size_t n = 0; n < truncated_page.size(); ++n) {
        auto r = parse_list_objects_v2(std::string_view(truncated_page).substr(0, n));
        if (!r) REQUIRE(r.error().code == errc::bad_response);
    }
    std::mt19937 rng(99);
    std::uniform_int_distribution<std::size_t> pos(0, truncated_page.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    int failures = 0;
    for (int i = 0; i < 3000; ++i) {
        std::string mutated = truncated_page;
        for (int k = 0; k < 4; ++k) mutated[pos(rng)] = static_cast<char>(byte(rng));
        auto r = parse_list_objects_v2(mutated);
        if (!r) {
            REQUIRE(r.error().code == errc::bad_response);
            ++failures;
        }
    }
    CHECK(failures > 0);
}

TEST_CASE("S3 error bodies are parsed", "[s3][xml]") {
    auto slow = parse_error_body(R"(<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>
<RequestId>4442587FB7D0A2F9</RequestId><HostId>nfd1Hk==</HostId></Error>)");
    REQUIRE(slow);
    CHECK(slow->code == "SlowDown");
    CHECK(slow->message == "Please reduce your request rate.");
    CHECK(slow->request_id == "4442587FB7D0A2F9");

    auto nsk = parse_error_body(
        "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>"
        "<Key>topics/a b.log</Key><Resource>/bucket/topics/a b.log</Resource><RequestId>R1</RequestId></Error>");
    REQUIRE(nsk);
    CHECK(nsk->code == "NoSuchKey");
    CHECK(nsk->key == "topics/a b.log");
    CHECK(nsk->resource == "/bucket/topics/a b.log");

    auto nsb = parse_error_body(
        "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message>"
        "<BucketName>x</BucketName></Error>");
    REQUIRE(nsb);
    CHECK(nsb->bucket_name == "x");

    auto skew = parse_error_body(
        "<Error><Code>RequestTimeTooSkewed</Code><RequestTime>20240101T000000Z</RequestTime>"
        "<ServerTime>2024-01-01T01:00:00Z</ServerTime><MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds></Error>");
    REQUIRE(skew);
    CHECK(skew->request_time == "20240101T000000Z");
    CHECK(skew->server_time == "2024-01-01T01:00:00Z");

    auto sig = parse_error_body(
        "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not match"
        "</Message><AWSAccessKeyId>AKIAIOSFODNN7EXAMPLE</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256</StringToSign>"
        "<SignatureProvided>deadbeef</SignatureProvided></Error>");
    REQUIRE(sig);
    CHECK(sig->code == "SignatureDoesNotMatch");

    auto no_code = parse_error_body("<Error><Message>odd</Message></Error>");
    REQUIRE(no_code);
    CHECK(no_code->code.empty());
    CHECK(no_code->message == "odd");

    auto redirect = parse_error_body(
        "<Error><Code>PermanentRedirect</Code><Endpoint>b.s3.eu-west-1.amazonaws.com</Endpoint></Error>");
    REQUIRE(redirect);
    CHECK(redirect->endpoint == "b.s3.eu-west-1.amazonaws.com");
}

TEST_CASE("non-error bodies give no error document", "[s3][xml]") {
    CHECK_FALSE(parse_error_body(""));
    CHECK_FALSE(parse_error_body("Service Unavailable"));
    CHECK_FALSE(parse_error_body("<html><body><h1>502 Bad Gateway</h1></body></html>"));
    CHECK_FALSE(parse_error_body("<Error><Code>SlowDown</Code>")); // truncated
    CHECK_FALSE(parse_error_body("<ListBucketResult/>"));
    std::string huge = "<Error><Code>SlowDown</Code><Message>";
    huge.append(2 * 1024 * 1024, 'x');
    huge += "</Message></Error>";
    CHECK_FALSE(parse_error_body(huge));
}
