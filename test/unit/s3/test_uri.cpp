// S3 UriEncode, query canonicalization, endpoint parsing and object URL construction.
#include <skiff/s3/uri.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace skiff::s3;

TEST_CASE("uri_encode keeps only unreserved bytes", "[s3][uri]") {
    CHECK(uri_encode("AZaz09-._~", true) == "AZaz09-._~");
    // Characters that common URL encoders disagree on; S3 wants all of them escaped.
    CHECK(uri_encode("+", true) == "%2B");
    CHECK(uri_encode("=", true) == "%3D");
    CHECK(uri_encode("!", true) == "%21");
    CHECK(uri_encode("'", true) == "%27");
    CHECK(uri_encode("(", true) == "%28");
    CHECK(uri_encode(")", true) == "%29");
    CHECK(uri_encode("*", true) == "%2A");
    CHECK(uri_encode(",", true) == "%2C");
    CHECK(uri_encode(";", true) == "%3B");
    CHECK(uri_encode(":", true) == "%3A");
    CHECK(uri_encode("@", true) == "%40");
    CHECK(uri_encode("$", true) == "%24");
    CHECK(uri_encode("&", true) == "%26");
    CHECK(uri_encode("?", true) == "%3F");
    CHECK(uri_encode("#", true) == "%23");
    CHECK(uri_encode("%", true) == "%25");
    CHECK(uri_encode(" ", true) == "%20"); // never '+'
    CHECK(uri_encode("~", true) == "~");
    CHECK(uri_encode("\x01\x7f\xff", true) == "%01%7F%FF"); // uppercase hex, per byte
    CHECK(uri_encode(std::string("a\0b", 3), true) == "a%00b");
}

TEST_CASE("uri_encode encodes each UTF-8 byte", "[s3][uri]") {
    CHECK(uri_encode("é", true) == "%C3%A9");
    CHECK(uri_encode("ሴ", true) == "%E1%88%B4");
    CHECK(uri_encode("日本", false) == "%E6%97%A5%E6%9C%AC");
}

TEST_CASE("'/' is kept in key paths and escaped elsewhere", "[s3][uri]") {
    CHECK(uri_encode("a/b", true) == "a%2Fb");
    CHECK(uri_encode("a/b", false) == "a/b");
    CHECK(encode_key_path("a//b/./../c") == "a//b/./../c"); // no normalization, ever
    CHECK(encode_key_path("/lead") == "/lead");
    CHECK(encode_key_path("test$file.text") == "test%24file.text");
    CHECK(encode_key_path("my topic/é+x=y") == "my%20topic/%C3%A9%2Bx%3Dy");
    // A key that already looks encoded is a different key: its '%' is escaped.
    CHECK(encode_key_path("a%20b") == "a%2520b");
    // Kafka-style segment keys need no escaping at all.
    CHECK(encode_key_path("ns/orders-v2/12/segment-00000000000000000042.kfs") ==
          "ns/orders-v2/12/segment-00000000000000000042.kfs");
}

TEST_CASE("percent_decode", "[s3][uri]") {
    CHECK(percent_decode("a%20b%2Fc%e1%88%B4").value() == "a b/c\xe1\x88\xb4");
    CHECK(percent_decode("a+b").value() == "a+b");
    CHECK(percent_decode("").value().empty());
    CHECK(!percent_decode("%"));
    CHECK(!percent_decode("%2"));
    CHECK(!percent_decode("%zz"));
    CHECK(!percent_decode("abc%4"));
    for (std::string s : {"a b", "é/ሴ", "+=&?#%"}) CHECK(percent_decode(uri_encode(s, true)).value() == s);
}

TEST_CASE("canonical_query encodes, then sorts by name and value", "[s3][uri]") {
    CHECK(canonical_query({}).empty());
    CHECK(canonical_query({{"uploads", ""}}) == "uploads=");
    CHECK(canonical_query({{"prefix", "J"}, {"max-keys", "2"}}) == "max-keys=2&prefix=J");
    CHECK(canonical_query({{"Param1", "value2"}, {"Param1", "Value1"}}) == "Param1=Value1&Param1=value2");
    CHECK(canonical_query({{"Param", "x"}, {"\xe1\x88\xb4", "y"}}) == "%E1%88%B4=y&Param=x");
    CHECK(canonical_query({{"prefix", "a b/c+d"}, {"delimiter", "/"}}) == "delimiter=%2F&prefix=a%20b%2Fc%2Bd");
    // Sorted on encoded bytes: raw "a-" < "a/", but encoded "a%2F" < "a-" ('%' < '-').
    CHECK(canonical_query({{"a-", "2"}, {"a/", "1"}}) == "a%2F=1&a-=2");
}

TEST_CASE("parse_endpoint accepts http(s) URLs with DNS names, IPv4 and IPv6", "[s3][uri]") {
    auto e = parse_endpoint("https://s3.us-east-1.amazonaws.com");
    REQUIRE(e);
    CHECK(e->scheme == "https");
    CHECK(e->host == "s3.us-east-1.amazonaws.com");
    CHECK(e->port == 443);
    CHECK(e->default_port);
    CHECK(host_header(e.value()) == "s3.us-east-1.amazonaws.com");

    e = parse_endpoint("http://localhost:9000/");
    REQUIRE(e);
    CHECK(e->scheme == "http");
    CHECK(e->host == "localhost");
    CHECK(e->port == 9000);
    CHECK(!e->default_port);
    CHECK(host_header(e.value()) == "localhost:9000");

    e = parse_endpoint("HTTP://MinIO.Local");
    REQUIRE(e);
    CHECK(e->scheme == "http");
    CHECK(e->host == "minio.local");
    CHECK(e->port == 80);

    // Underscores are not RFC 1123, but container runtimes name hosts like this.
    e = parse_endpoint("http://minio_1:9000");
    REQUIRE(e);
    CHECK(e->host == "minio_1");

    e = parse_endpoint("http://127.0.0.1:9000");
    REQUIRE(e);
    CHECK(e->host == "127.0.0.1");
    CHECK(e->port == 9000);

    e = parse_endpoint("http://[::1]:9000");
    REQUIRE(e);
    CHECK(e->host == "[::1]");
    CHECK(e->port == 9000);
    CHECK(host_header(e.value()) == "[::1]:9000");

    e = parse_endpoint("https://[2001:DB8::1]");
    REQUIRE(e);
    CHECK(e->host == "[2001:db8::1]");
    CHECK(e->default_port);

    // An explicit default port is left out of Host, as curl does.
    e = parse_endpoint("https://s3.amazonaws.com:443");
    REQUIRE(e);
    CHECK(e->default_port);
    CHECK(host_header(e.value()) == "s3.amazonaws.com");
}

TEST_CASE("parse_endpoint rejects garbage with a sentence naming the problem", "[s3][uri]") {
    auto expect = [](std::string_view url, std::string_view fragment) {
        auto e = parse_endpoint(url);
        INFO(url);
        REQUIRE(!e);
        INFO(e.error());
        CHECK(e.error().find(fragment) != std::string::npos);
        CHECK(e.error().find(std::string(url)) != std::string::npos);
    };
    expect("", "expected http://");
    expect("s3.amazonaws.com", "expected http://");
    expect("ftp://host", "scheme must be http or https");
    expect("http://", "host is empty");
    expect("http://:9000", "host is empty");
    expect("http://host:", "port");
    expect("http://host:0", "port");
    expect("http://host:65536", "port");
    expect("http://host:12ab", "port");
    expect("http://host:-1", "port");
    expect("http://user:pw@host", "user info");
    expect("http://host/prefix", "path");
    expect("http://host?x=1", "path, query");
    expect("http://host#frag", "path, query");
    expect("http://ho st", "not a valid DNS name");
    expect("http://host!", "not a valid DNS name");
    expect("http://-host", "not a valid DNS name");
    expect("http://a..b", "not a valid DNS name");
    expect("http://[::1", "closing ']'");
    expect("http://[::1]x", "after the IPv6");
    expect("http://[not:an:ip:zz]", "IPv6");
}

TEST_CASE("make_object_url: path style", "[s3][uri]") {
    auto ep = parse_endpoint("http://127.0.0.1:9000").value();
    auto u = make_object_url(ep, "bucket", "ns/topic/0/seg 1.kfs", true, {});
    CHECK(u.host_header == "127.0.0.1:9000");
    CHECK(u.encoded_path == "/bucket/ns/topic/0/seg%201.kfs");
    CHECK(u.query.empty());
    CHECK(u.url == "http://127.0.0.1:9000/bucket/ns/topic/0/seg%201.kfs");

    auto list = make_object_url(ep, "bucket", "", true, {{"list-type", "2"}, {"prefix", "ns/t"}});
    CHECK(list.encoded_path == "/bucket");
    CHECK(list.query == "list-type=2&prefix=ns%2Ft");
    CHECK(list.url == "http://127.0.0.1:9000/bucket?list-type=2&prefix=ns%2Ft");

    auto v6 = make_object_url(parse_endpoint("http://[::1]:9000").value(), "b", "k", true, {});
    CHECK(v6.url == "http://[::1]:9000/b/k");
    CHECK(v6.host_header == "[::1]:9000");
}

TEST_CASE("make_object_url: virtual-hosted style", "[s3][uri]") {
    auto ep = parse_endpoint("https://s3.eu-west-1.amazonaws.com").value();
    auto u = make_object_url(ep, "my-bucket", "a//b/../c", false, {{"uploads", ""}});
    CHECK(u.host_header == "my-bucket.s3.eu-west-1.amazonaws.com");
    CHECK(u.encoded_path == "/a//b/../c");
    CHECK(u.query == "uploads=");
    CHECK(u.url == "https://my-bucket.s3.eu-west-1.amazonaws.com/a//b/../c?uploads=");

    auto with_port = make_object_url(parse_endpoint("http://minio.local:9000").value(), "b1b", "k", false, {});
    CHECK(with_port.host_header == "b1b.minio.local:9000");
    CHECK(with_port.url == "http://b1b.minio.local:9000/k");
}

TEST_CASE("virtual_host_compatible", "[s3][uri]") {
    auto https = parse_endpoint("https://s3.amazonaws.com").value();
    auto http = parse_endpoint("http://minio.local:9000").value();
    CHECK(virtual_host_compatible(https, "examplebucket"));
    CHECK(virtual_host_compatible(https, "my-bucket-1"));
    CHECK(!virtual_host_compatible(https, "my.bucket")); // breaks the wildcard certificate
    CHECK(virtual_host_compatible(http, "my.bucket"));
    CHECK(!virtual_host_compatible(https, "ab"));
    CHECK(!virtual_host_compatible(https, "Upper"));
    CHECK(!virtual_host_compatible(https, "-dash"));
    CHECK(!virtual_host_compatible(https, "under_score"));
    CHECK(!virtual_host_compatible(parse_endpoint("http://127.0.0.1:9000").value(), "bucket"));
    CHECK(!virtual_host_compatible(parse_endpoint("http://[::1]:9000").value(), "bucket"));
}
